"""A death's finding says no more than its records: whether it came at start-up, and who ended it (evid25).

At start-up: public-2 n11 (vLLM #48801) is six lines of an RPC timeout's traceback with nothing before them: no
start, readiness, request, stats or start-up step line. It was read as a death while serving ('at_startup' False,
the default); now 'at start-up: unknown', naming what is missing. vllm-public 37 (a CUDA OOM in EngineCore and the
API server's output_handler traceback, nothing else) read "Out of memory while serving" on no serving line at all.
ROCm #3956 holds no start line either, but its traceback runs through init_device and its API server says 'RPCServer
process died before responding to readiness probe': a start-up death, read from what the excerpt shows.

Who killed it: a traceback that ends in a raised exception is the process exiting on its own error. vllm-deaths
ascend-612 (a worker's KeyError while loading), public-2 n18 (EngineCore_1's AttributeError in run_busy_loop) and
vllm-deaths 17227 (EngineCore's KeyError in a multimodal cache) read "who killed it: unknown: the folder holds no
kernel log"; they now say no one from outside did, from the raised line's type, message, frame, process and time.
A raised error that only reports another process's death (n17's EngineDeadError) leaves the killer unknown."""

from __future__ import annotations

import pytest

from conftest import DATA, PUBLIC, PUBLIC2, need
from logscope import terminal

DEATHS = DATA / "vllm-deaths"
UNKNOWN = (
    "at start-up: unknown (the logs hold no start line, no readiness line, no request and no start-up step "
    "(loading, profiling, graph capture) before it)"
)


def _one(folder, prefix: str):
    [p] = sorted(need(folder).glob(f"{prefix}*.log"))
    return p


def _outputs(out, s, rendered, capsys) -> dict[str, str]:
    seen = rendered(out, s)
    capsys.readouterr()
    terminal.print_verdict(s, {"report_html": out / "report.html"}, verbose=True)
    seen["terminal"] = " ".join(capsys.readouterr().out.split())
    return seen


STARTUP = {  # file: (at_startup, the finding's title)
    (PUBLIC2, "n11-"): (None, "Engine died at 20:30:01, no restart in the logs (at start-up: unknown)"),
    (PUBLIC, "37-"): (
        None,
        "Out of memory: engine died at 14:39:06, no restart in the logs (at start-up: unknown)",
    ),
    (DEATHS, "rocm-3956"): (
        True,
        "Engine died at start-up, before serving any request, at 13:46:27, no restart in the logs",
    ),
}


@pytest.mark.parametrize("case", sorted(STARTUP, key=lambda c: c[1]), ids=lambda c: c[1])
def test_at_startup_is_read_from_what_the_excerpt_shows(analyzed, rendered, capsys, case):
    at, title = STARTUP[case]
    src = _one(*case)
    raw = src.read_text()
    # none of the excerpts holds a start line (vLLM's banner, uvicorn's 'Started server process')
    assert "Started server process" not in raw and "vLLM API server version" not in raw
    out, s, d = analyzed(src)
    [e] = [e for e in d["episodes"] if e["class"] == "crash"]
    assert e["details"]["crash"]["at_startup"] is at
    [death] = s["server_lifecycle"]["deaths"]
    assert death["at_startup"] is at
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    assert f["title"] == title
    if at is None:
        assert UNKNOWN in e["reason"] and UNKNOWN in f["evidence"]
        assert "while serving" not in f["title"]
    else:  # init_device in the traceback, before the readiness probe
        assert "init_device" in raw and "before responding to readiness probe" in raw
        assert "at startup 13:46:27: the server never served a request" in f["evidence"]
    seen = _outputs(out, s, rendered, capsys)
    for name, text in seen.items():
        assert title in text, name
        if at is None and name != "terminal":
            assert UNKNOWN in text, name


RAISED = {  # file: (the raised line as the log has it, what the finding says of it)
    (DEATHS, "ascend-612"): (
        "KeyError: 'model.layers.0.self_attn.q_proj.weight'",
        "who killed it: no one from outside: the process exited on its own error, KeyError: "
        "'model.layers.0.self_attn.q_proj.weight', raised in is_layer_skipped_ascend "
        "(quantization/quant_config.py, line 121) by VllmWorkerProcess pid=76118 at 07:10:28",
    ),
    (PUBLIC2, "n18-"): (
        "AttributeError: 'DPEngineCoreProc' object has no attribute 'dp_rank'",
        "who killed it: no one from outside: the process exited on its own error, AttributeError: "
        "'DPEngineCoreProc' object has no attribute 'dp_rank', raised in run_busy_loop (engine/core.py, line 876) "
        "by EngineCore_1 pid=2655 at 11:46:39",
    ),
    (DEATHS, "17227-"): (
        "KeyError: '313e0f04cb9fb35f040d367e5c91597388cdf8fe7ebf77f3f11f82c9566caf1c'",
        "who killed it: no one from outside: the process exited on its own error, KeyError: "
        "'313e0f04cb9fb35f040d367e5c91597388cdf8fe7ebf77f3f11f82c9566caf1c', raised in __getitem__ "
        "(cachetools/__init__.py, line 68) at 11:29:08",
    ),
}


@pytest.mark.parametrize("case", sorted(RAISED, key=lambda c: c[1]), ids=lambda c: c[1])
def test_a_raised_error_is_no_unknown_killer(analyzed, rendered, capsys, case):
    line, said = RAISED[case]
    src = _one(*case)
    assert line in src.read_text()  # the traceback's last line, as the log has it
    out, s, _ = analyzed(src)
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    assert said in f["evidence"] and "who killed it: unknown" not in f["evidence"]
    error = line.split(":")[0]
    assert f["title"].endswith(f"(it raised {error}: no killer)")
    seen = _outputs(out, s, rendered, capsys)
    for name in ("summary.md", "report.html"):
        assert said in seen[name], name
    assert f"(it raised {error}: no killer)" in seen["terminal"]


def test_a_start_up_death_keeps_the_raised_lines_facts(analyzed):
    """ascend-612's start-up finding states the raised line's facts in its claim."""
    _, s, _ = analyzed(_one(DEATHS, "ascend-612"))
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    claim = next(c for c in s["claims"] if c["id"] == f["claim"])
    facts = {x["name"]: x["value"] for x in claim["facts"]}
    assert facts["raised_error"] == "KeyError"
    assert facts["raised_message"] == "'model.layers.0.self_attn.q_proj.weight'"
    assert facts["raised_by"] == "VllmWorkerProcess pid=76118"


@pytest.mark.parametrize(("folder", "prefix"), [(PUBLIC2, "n17-"), (DEATHS, "glm-v-208")])
def test_a_death_notice_or_no_error_keeps_the_killer_unknown(analyzed, folder, prefix):
    """n17's API server raised EngineDeadError (its engine died: no cause of its own); GLM-V #208's EngineCore
    printed nothing: who ended them is not in the folder."""
    _, s, _ = analyzed(_one(folder, prefix))
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    assert "who killed it: unknown" in f["evidence"] and "no killer" not in f["title"]
