"""logscope compare on real runs: a run with itself, runs that differ in several things (the V0 and V1
ladders), and the real pairs in tests/data/pairs recorded with one setting changed (their commands.log and
notes.txt say how)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from compare_helpers import SCHEMA, metric_row

from clirun import SAMPLE, cli, env
from conftest import DATA, LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze, compare, sweep
from logscope.compare import settings
from logscope.parsers import nginx_conf
from logscope.report.fmt import fnum

PAIRS = DATA / "pairs"


@pytest.fixture(scope="module")
def outs(tmp_path_factory) -> dict[str, Path]:
    """Analyses made once for the module, by name."""
    base = tmp_path_factory.mktemp("cmp")
    done: dict[str, Path] = {}

    def get(name: str, src: Path) -> Path:
        if name not in done:
            analyze(need(src), base / name, AnalyzeOptions())
            done[name] = base / name
        return done[name]

    return get  # type: ignore[return-value]


def test_parses_real_startup_lines():
    log = need(LAB / "ladder" / "vllm-server.log").read_text(encoding="utf-8", errors="replace").splitlines()
    args = settings.parse_args(next(ln for ln in log if "non-default args" in ln))
    assert (
        args["max_num_seqs"] == 64
        and args["gpu_memory_utilization"] == 0.3
        and args["served_model_name"] == ["tiny"]
    )
    eng = settings.parse_engine(next(ln for ln in log if "with config:" in ln))
    assert eng["engine"] == "V1" and eng["engine_version"] == "0.32.0"
    assert eng["enable_prefix_caching"] is True and eng["enable_chunked_prefill"] is True
    assert eng["tensor_parallel_size"] == 1 and eng["max_seq_len"] == 1024
    v0 = (
        need(LAB / "v0-ladder" / "vllm-server.log").read_text(encoding="utf-8", errors="replace").splitlines()
    )
    eng0 = settings.parse_engine(next(ln for ln in v0 if "with config:" in ln))
    assert eng0["engine"] == "V0" and eng0["engine_version"] == "0.9.2"


def test_nginx_listeners_from_the_real_conf():
    conf = nginx_conf.listeners(need(LAB / "orphan" / "nginx.conf").read_text())
    assert conf[8080]["proxy_read_timeout"] == "8s" and "non_idempotent" in conf[8080]["proxy_next_upstream"]
    assert conf[8082]["proxy_ignore_client_abort"] == "on" and "proxy_ignore_client_abort" not in conf[8081]
    assert conf[8083]["proxy_next_upstream"] == "off"


def test_a_run_with_itself(outs, tmp_path):
    spike = outs("spike", LAB / "spike")
    one = compare(spike, spike, tmp_path / "one")
    two = compare(spike, spike, tmp_path / "two")
    doc = one["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] == [
        "No change, no movement: no setting differs between the runs and no figure moved "
        "beyond the sampling noise."
    ]
    assert doc["result"] == "no movement" and doc["comparable"]["settings_changed"] == 0
    assert doc["traffic"]["alike"] is True and [s["label"] for s in doc["steps"]] == [
        "c=2",
        "c=48",
        "c=2 (#2)",
    ]
    assert (
        metric_row(doc, "preemptions")["a"] == 136 and metric_row(doc, "requests")["a"] == 284
    )  # lab README / truth.json
    assert one["paths"]["compare_json"].read_bytes() == two["paths"]["compare_json"].read_bytes()
    html = one["paths"]["compare_html"].read_text()
    assert "Content-Security-Policy" in html and 'id="spec-steps"' in html and 'id="spec-timelines"' in html
    assert "No change, no movement" in one["paths"]["compare_md"].read_text()


def test_several_changes_are_flagged(outs, tmp_path):
    doc = compare(outs("ladder", LAB / "ladder"), outs("v0-ladder", LAB / "v0-ladder"), tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    changed = {r["name"]: (r["a"], r["b"]) for r in doc["settings"] if r["counted"]}
    assert changed["version"] == ("0.32.0", "0.9.2") and changed["engine"] == ("V1", "V0")
    assert doc["comparable"]["settings_changed"] >= 2 and not doc["comparable"]["single_change"]
    assert doc["verdict"][0].startswith("The effect cannot be put on one change")
    assert doc["traffic"]["alike"] is False  # c=1..64 against c=2..32
    assert [s["label"] for s in doc["steps"]] == ["c=2", "c=8", "c=16", "c=32"]
    assert doc["unmatched_steps"]["a"] == ["c=1", "c=4", "c=64"]
    # preemptions per the lab README: 456 over the V1 ladder; V0's counter says 232
    assert metric_row(doc, "preemptions")["a"] == 456 and metric_row(doc, "preemptions")["b"] == 232


def _pair(name: str) -> tuple[Path, Path]:
    d = PAIRS / name
    runs = sorted(p for p in d.iterdir() if p.is_dir()) if d.exists() else []
    if len(runs) != 2:
        pytest.skip(f"the real pair {name} is not in tests/data/pairs")
    return runs[0], runs[1]


def test_spike_max_num_seqs_64_vs_8(outs, tmp_path):
    a_dir, b_dir = _pair("spike-seqs")
    a_dir, b_dir = (a_dir, b_dir) if a_dir.name.endswith("64") else (b_dir, a_dir)
    truth_a = json.loads((a_dir / "truth.json").read_text())
    truth_b = json.loads((b_dir / "truth.json").read_text())
    doc = compare(outs("seqs64", a_dir), outs("seqs8", b_dir), tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["comparable"]["changed"] == ["max_num_seqs"] and doc["comparable"]["single_change"]
    row = next(r for r in doc["settings"] if r["name"] == "max_num_seqs")
    assert (row["a"], row["b"]) == (64, 8)
    assert doc["verdict"][0] == "One setting differs: max_num_seqs 64 → 8, with the same traffic."
    pre = metric_row(doc, "preemptions")
    assert (pre["a"], pre["b"]) == (truth_a["preemptions"]["total"], truth_b["preemptions"]["total"])
    assert pre["b"] == 0 and pre["direction"] == "better" and pre["beyond_noise"]
    assert metric_row(doc, "requests")["a"] == truth_a["client"]["logical_requests"]
    assert metric_row(doc, "requests")["b"] == truth_b["client"]["logical_requests"]
    ttft = metric_row(doc, "ttft_p95")
    assert ttft["change"] > 0 and ttft["beyond_noise"] and ttft["direction"] == "worse"
    assert ttft["clock"] == "client" and ttft["source"] == {"a": "client_records", "b": "client_records"}
    trap = next(t for t in doc["traps"] if t["kind"] == "latency_into_queue")
    assert trap["text"].startswith(f"Preemptions fell from {pre['a']} to 0, but the wait moved")
    # the burst step is where the callers' TTFT rose (truth.json: the burst phase is c=48)
    step = metric_row(doc, "ttft_p95", "c=48")
    assert (
        f"the callers' TTFT p95 (client records) rose at c=48 from {fnum(step['a'])} s to {fnum(step['b'])} s"
        in (trap["text"])
    )
    assert trap["text"].endswith("The trade: when preemptions vanish, look at the new queue.")
    assert trap["text"] in doc["verdict"] and trap["text"] == doc["trade"]["text"]
    # the first c=2 phase is a control (max_num_seqs 8 and 64 both above it); the c=2 after the burst is not (the
    # burst's backlog can still fill the cap): what moved there is said as something else than the setting
    ctl = next(v for v in doc["verdict"] if v.startswith("Where max_num_seqs does not bind"))
    assert "(c=2: the load stays below both its values)" in ctl
    assert "something other than the setting differed between the recordings" in ctl
    # these runs were recorded without vLLM's queue-time metrics: said, never read as 'no rise'
    assert "vLLM's queue time is not in either folder: the engine's queue cannot be compared" in trap["text"]


def test_storm_client_retries_3_vs_0(outs, tmp_path):
    a_dir, b_dir = _pair("storm-retries")
    a_dir, b_dir = (a_dir, b_dir) if a_dir.name.endswith("3") else (b_dir, a_dir)
    doc = compare(outs("retries3", a_dir), outs("retries0", b_dir), tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    row = next(r for r in doc["settings"] if r["name"] == "client_max_retries")
    assert (row["a"], row["b"]) == (3, 0) and row["counted"]
    assert "client_max_retries" in doc["comparable"]["changed"]
    truth_a = json.loads((a_dir / "truth.json").read_text())
    assert metric_row(doc, "client_retries")["a"] == truth_a["client"]["retries"]
    assert metric_row(doc, "client_retries")["b"] == 0


@pytest.mark.slow  # a child process
def test_cli_prints_the_verdict(outs, tmp_path):
    spike = outs("spike", LAB / "spike")
    res = subprocess.run(
        [sys.executable, "-m", "logscope", "compare", str(spike), str(spike), "-o", str(tmp_path / "c")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "No change, no movement" in res.stdout and (tmp_path / "c" / "compare.html").exists()
    bad = subprocess.run(
        [sys.executable, "-m", "logscope", "compare", str(spike), str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert bad.returncode == 3 and "does not exist" in bad.stderr


def _truth(src: Path) -> dict:
    return json.loads((src / "truth.json").read_text())


# pairs nobody tuned to, each of another kind: two incidents (closed-loop bursts against a crash), two open loops
# of different rates, two ladders of different steps, an open-loop incident against a closed-loop one, an open loop
# against a ladder. No step of one matches a step of the other: the whole runs are compared and the verdict says why
UNMATCHED = [
    ("spike", "crash", "c=2, c=48, c=2 (#2)", "c=8"),
    ("calm", "retry-storm", "1/s", "1.5/s, 7/s, 1.5/s (#2)"),
    ("ladder", "ladder-b", "c=1 … c=64 (7 steps)", "c=3 … c=48 (5 steps)"),
    ("orphan", "crash", "1.5/s, 4/s, 1.5/s (#2)", "c=8"),
    ("retry-storm", "ladder", "1.5/s, 7/s, 1.5/s (#2)", "c=1 … c=64 (7 steps)"),
]


@pytest.mark.parametrize(("a", "b", "steps_a", "steps_b"), UNMATCHED, ids=lambda x: str(x))
def test_pairs_whose_steps_do_not_match_are_an_answer(outs, tmp_path, a, b, steps_a, steps_b):
    """compare exited 70 on 5 of 7 such pairs: unmatched steps are said ('whole-run figures only') and every
    whole-run figure is still read, on its clock, from the recordings (truth.json)."""
    doc = compare(outs(a, LAB / a), outs(b, LAB / b), tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["steps"] == [] and not doc["comparable"]["single_change"]
    assert doc["verdict"][0].startswith("The effect cannot be put on one change")
    assert (
        f"The traffic differs: no load step of one run matches a step of the other (A: {steps_a}; B: {steps_b}); "
        "whole-run figures only." in doc["verdict"]
    )
    ta, tb = _truth(LAB / a), _truth(LAB / b)
    pre = metric_row(doc, "preemptions")
    assert (pre["a"], pre["b"]) == (ta["preemptions"]["total"], tb["preemptions"]["total"])
    req = metric_row(doc, "requests")
    assert (req["a"], req["b"]) == (ta["client"]["logical_requests"], tb["client"]["logical_requests"])
    # a trade is never read between two incidents: the preemptions' change is theirs, not a setting's
    assert doc["trade"]["text"] is None and doc["traps"] == []
    for r in doc["whole"]["metrics"]:
        if r["change"] is not None and r["clock"] is not None:
            assert r["source"]["a"] is not None and r["source"]["b"] is not None, r["name"]


def test_a_closed_loop_against_an_open_one_reads_each_clock(outs, tmp_path):
    """calm (its client records no TTFT) against spike (its client does): the callers' TTFT is unknown on one side
    and said so, the e2e compares on the callers' clock, the gateway's on its own."""
    doc = compare(outs("calm", LAB / "calm"), outs("spike", LAB / "spike"), tmp_path / "c")["doc"]
    ttft = metric_row(doc, "ttft_p95")
    assert ttft["a"] is None and ttft["b"] is not None and ttft["noise"] == "unknown in A"
    for name, clock, src in (
        ("e2e_p95", "client", "client_records"),
        ("gateway_e2e_p95", "gateway", "gateway_log"),
    ):
        r = metric_row(doc, name)
        assert r["clock"] == clock and r["source"] == {"a": src, "b": src} and r["beyond_noise"] is not None
    # the SLO is undecided, and the verdict names what it lacked, not "a figure is unknown"
    assert doc["whole"]["meets_slo"]["a"] is None
    assert doc["whole"]["slo_undecided"]["a"] == ["TTFT p95: no clock gives it for both runs"]
    line = next(v for v in doc["verdict"] if v.startswith("SLO ("))
    assert "cannot be judged (TTFT p95: no clock gives it for both runs)." in line
    assert line in (tmp_path / "c" / "compare.md").read_text()
    # what can be judged is still said, from the figures: both e2e p95 within 20 s, both successes >= 99 %
    e2e, ok = metric_row(doc, "e2e_p95"), metric_row(doc, "success_share")
    assert e2e["a"] <= doc["slo"]["e2e_s"] and e2e["b"] <= doc["slo"]["e2e_s"]
    assert ok["a"] >= doc["slo"]["success"] and ok["b"] >= doc["slo"]["success"]
    assert doc["whole"]["slo_met"] == {"a": ["e2e p95", "success share"], "b": ["e2e p95", "success share"]}
    assert line.endswith("Of what can be judged, both meet e2e p95 and success share.")
    assert ", judged on e2e p95 (callers) and success share: cannot be judged" in line
    for page in ("compare.md", "compare.html"):  # the pages' own SLO line reads as a sentence
        text = (tmp_path / "c" / page).read_text()
        assert "A cannot be judged, B cannot be judged." in text and "unknown it" not in text


def test_a_bootstrap_interval_is_said_to_its_figures_precision(outs, tmp_path):
    """calm against spike: each 95 % interval in the noise column gives its bounds in the unit of its figure, to
    the millisecond or the tenth of a point (spike's e2e p95 interval read +11.35 … +12.69 beside a p50's
    -0.01461 … +0.1721: digits a bootstrap does not hold), and they are the interval compare.json keeps."""
    doc = compare(outs("calm", LAB / "calm"), outs("spike", LAB / "spike"), tmp_path / "c")["doc"]
    said = [r for r in doc["whole"]["metrics"] if (r["noise"] or "").startswith("95 % interval")]
    assert {r["unit"] for r in said} >= {"s", "share"}
    for r in said:
        lo, hi = r["interval"]
        if r["unit"] == "s":
            want = f"{lo:+.3f} s … {hi:+.3f} s"
        elif r["unit"] == "share":
            want = f"{lo * 100:+.1f} pt … {hi * 100:+.1f} pt"
        else:
            want = f"{lo:+.3g} … {hi:+.3g}"
        interval = f"95 % interval of B − A: {want} (1000 resamples)"
        # calm's one 1/s step against spike's c=2, c=48, c=2: a whole-run latency, success share or executions
        # per request is shown with its interval, not judged, whether it moved or not ('within noise' judges too:
        # logscope.compare.profile)
        held = "; not judged: the load differs (steps 1/s in A, c=2, c=48, c=2 (#2) in B)"
        assert r["noise"] == interval + held + ", no better or worse over the whole runs", r["name"]
        assert r["direction"] is None
    e2e = metric_row(doc, "e2e_p95")
    assert (
        e2e["beyond_noise"]
        and e2e["interval"][0] > 11
        and "s … +" in e2e["noise"]
        and e2e["direction"] is None
    )
    # a throughput reads in whole tokens per second; between two runs given other traffic (calm at 1/s, spike's
    # bursts) it is not judged, so the verdict does not list it (test_compare_unjudged.py)
    tps = metric_row(doc, "throughput_tps")
    said = f"output tokens/s {round(tps['a']):,} → {round(tps['b']):,}"
    assert tps["direction"] is None and "not judged: the traffic differs" in tps["noise"]
    assert said not in " ".join(doc["verdict"])
    assert f"| {round(tps['a']):,} | {round(tps['b']):,} |" in (tmp_path / "c" / "compare.md").read_text()


def test_the_slo_line_names_the_clock_each_latency_was_judged_on(outs, tmp_path):
    """calm (no callers' TTFT: a closed loop that does not stream) against calm-b (streams): TTFT is judged on the
    engine's histogram, the one clock both runs have, e2e on the callers'; the line says so beside "meet it"."""
    doc = compare(outs("calm", LAB / "calm"), outs("calm-b", LAB / "calm-b"), tmp_path / "c")["doc"]
    assert doc["whole"]["slo_judged_on"] == {"ttft": "engine_ttft_p95", "e2e": "e2e_p95"}
    eng = metric_row(doc, "engine_ttft_p95")
    assert metric_row(doc, "ttft_p95")["a"] is None and eng["a"] is not None and eng["b"] is not None
    line = next(v for v in doc["verdict"] if v.startswith("SLO ("))
    assert ", judged on TTFT p95 (engine), e2e p95 (callers) and success share: " in line
    # each run meets it; calm's 1/s against calm-b's 0.6/s are two loads, so it is not judged between them
    assert doc["whole"]["meets_slo"] == {"a": True, "b": True} and line.endswith(
        "B meets it (TTFT p95 (engine) in 0.04–0.06 s, e2e p95 (callers) 3.334 s, success share 100.0 %): not judged "
        "between the runs, the load differs (steps, arrival rate, max tokens mean)."
    )
    said = "A meets it, B meets it: not judged between the runs, the load differs (steps, arrival rate, max tokens mean)."
    for page in ("compare.md", "compare.html"):
        assert said in (tmp_path / "c" / page).read_text()


def test_a_setting_of_yes_or_no_reads_alike_in_the_verdict_and_the_changed_line(outs, tmp_path):
    """spike (streamed) against spike-b (not): the one setting that differs is said as yes -> no in the verdict's
    first line as in the "changed" line, and the SLO names what each run meets though TTFT cannot be judged."""
    doc = compare(outs("spike", LAB / "spike"), outs("spike-b", LAB / "spike-b"), tmp_path / "c")["doc"]
    first = doc["verdict"][0]
    assert "client_stream yes → no" in first and "True" not in first
    line = next(v for v in doc["verdict"] if v.startswith("SLO ("))
    met = doc["whole"]["slo_met"]
    assert doc["whole"]["meets_slo"] == {"a": None, "b": None} and met["a"] and met["b"]
    assert all(w in line for w in met["a"] + met["b"])


def test_a_failed_compare_leaves_nothing_and_a_rerun_works(tmp_path):
    """A compare that fails (here a bug put into its rendering) leaves no compare.json, no run-a it analysed and
    no folder; with --debug it writes OUT/logscope-debug.txt; the next compare into the same folder succeeds
    (it was refused with exit 5)."""
    out = tmp_path / "out"
    boom = (
        "import sys; import logscope.compare.render as r\n"
        "def boom(*a, **k): raise RuntimeError('a bug in compare')\n"
        "r.write = boom\n"
        "from logscope.cli import run; sys.argv[0] = 'logscope'; run()\n"
    )
    args = ["compare", str(SAMPLE), str(SAMPLE), "-o", str(out)]
    r = subprocess.run(
        [sys.executable, "-c", boom, *args], env=env(), capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 70 and "re-run with --debug" in r.stderr
    assert not out.exists()  # nothing of its own: not compare.json, not the analysis of SAMPLE it made
    r = subprocess.run(
        [sys.executable, "-c", boom, *args, "--debug"], env=env(), capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 70 and "RuntimeError: a bug in compare" in (out / "logscope-debug.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["logscope-debug.txt"]
    r = cli("compare", SAMPLE, SAMPLE, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "No change, no movement" in r.stdout
    assert {p.name for p in out.iterdir()} >= {"compare.json", "compare.md", "compare.html", "run-a"}
    assert not list(out.glob(".logscope-*-*")) and not (out / ".logscope-lock").exists()


def test_compare_never_writes_into_an_analysis(outs, tmp_path):
    """compare's outputs would replace an analysis' list of its files (and so its files at the next run): another
    analysis as -o is refused (exit 5), as a run's own folder is (inside the input)."""
    spike, calm = outs("spike", LAB / "spike"), outs("calm", LAB / "calm")
    before = sorted(p.name for p in calm.iterdir())
    r = cli("compare", spike, spike, "-o", calm)
    assert r.returncode == 5 and f"output folder {calm} holds an analysis" in r.stderr
    r = cli("compare", spike, spike, "-o", spike)
    assert r.returncode == 5 and "inside the input folder" in r.stderr
    assert sorted(p.name for p in calm.iterdir()) == before and not (spike / "compare.json").exists()


SGLANG = ("11970-prefill-queue-draining.log", "10053-prefill-decode-access.log")


@pytest.mark.parametrize("log", SGLANG)
def test_vllm_against_sglang_says_what_cannot_be_compared(outs, tmp_path, log):
    """Two engines count different things under one name: the engine's clock is shown, never compared."""
    src = tmp_path / "sglang"
    src.mkdir()
    (src / log).write_bytes(need(DATA / "sglang" / log).read_bytes())
    doc = compare(outs("ladder", LAB / "ladder"), src, tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["comparable"]["engines"] == ["vLLM", "SGLang"]
    assert any(
        ln.startswith("A runs vLLM, B runs SGLang: their own figures count different things")
        for ln in doc["verdict"]
    )
    for r in doc["whole"]["metrics"]:
        if r["clock"] == "engine" or r["name"] in ("preemptions", "waiting_max", "kv_max"):
            assert r["change"] is None and r["direction"] is None, r["name"]
    assert doc["trade"]["text"] is None


def test_the_storm_pair_says_the_failures_reach_the_callers(outs, tmp_path):
    """Client retries 3 → 0 (real pair): the retries are gone and the success share fell in the overload phase,
    beyond the noise; the verdict says where the failures went."""
    a_dir, b_dir = _pair("storm-retries")
    a_dir, b_dir = (a_dir, b_dir) if a_dir.name.endswith("3") else (b_dir, a_dir)
    doc = compare(outs("retries3", a_dir), outs("retries0", b_dir), tmp_path / "c")["doc"]
    trap = next(t for t in doc["traps"] if t["kind"] == "failures_reach_callers")
    r = metric_row(doc, "client_retries")
    assert trap["text"].startswith(
        f"Client retries fell from {fnum(r['a'])} to 0, but the success share fell"
    )
    assert trap["text"].endswith("the failures the retries absorbed now reach the callers.")
    assert trap["text"] in doc["verdict"]
    step = metric_row(doc, "success_share", trap["scope"].removeprefix("step "))
    assert step["beyond_noise"] and step["change"] < 0


def test_three_runs_that_differ_in_more_than_one_setting_are_no_sweep(outs, tmp_path):
    """A sweep needs one setting varying: three real runs differing in the model's path and max_num_seqs are
    compared side by side but the verdict says the sweep cannot be put on one setting, and a burst (c=2 → 48 → 2)
    has no working boundary."""
    a_dir, b_dir = _pair("spike-seqs")
    runs = [
        outs("seqs64" if "64" in a_dir.name else "seqs8", a_dir),
        outs("seqs8" if "64" in a_dir.name else "seqs64", b_dir),
    ]
    res = sweep([*runs, outs("spike", LAB / "spike")], tmp_path / "s")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["kind"] == "sweep" and doc["sweep"]["setting"] is None
    assert (
        doc["verdict"][0]
        == "A sweep of 3 runs that cannot be put on one setting: 2 settings vary (model, max_num_seqs)."
    )
    assert (
        doc["verdict"][1]
        == "The runs' common steps do not climb (no ladder): no working boundary to set side by side."
    )
    pre = [t["preemptions"] for t in doc["sweep"]["table"]]
    assert pre[2] == _truth(LAB / "spike")["preemptions"]["total"]
    assert (
        res["paths"]["compare_html"].exists()
        and "A sweep of 3 runs" in res["paths"]["compare_md"].read_text()
    )


def test_every_output_says_the_same_verdict(outs, tmp_path):
    """One object, four renderings: the terminal, compare.json, compare.md and compare.html give the same verdict
    lines (the real 64 → 8 pair, whose verdict holds the trade)."""
    import html as html_lib
    import re

    a_dir, b_dir = _pair("spike-seqs")
    a_dir, b_dir = (a_dir, b_dir) if a_dir.name.endswith("64") else (b_dir, a_dir)
    out = tmp_path / "c"
    r = cli("compare", outs("seqs64", a_dir), outs("seqs8", b_dir), "-o", out)
    assert r.returncode == 0, r.stderr
    verdict = json.loads((out / "compare.json").read_text())["verdict"]
    assert any("look at the new queue" in ln for ln in verdict)
    printed = r.stdout.splitlines()
    md = (out / "compare.md").read_text().replace("\\_", "_")
    page = (out / "compare.html").read_text()
    items = [
        html_lib.unescape(re.sub(r"<[^>]+>", "", li))
        for li in re.findall(r"<li>(.*?)</li>", page.split('id="verdict"')[1])
    ]
    for i, line in enumerate(verdict):
        assert line in printed
        assert f"{i + 1}. {line}" in md
        assert items[i] == line


# folders of one layer each (public excerpts, real programs' outputs): nothing is measured on one clock in both
NOTHING_SHARED = [
    (("vllm-public", "01-v1-stats-kv-climbing-8-running.log"), ("nginx", "access.log")),
    (("clients", "aiperf-profile_export.jsonl"), ("vllm-public", "05-v0-0.3-stuck-pending-115-kv-99.log")),
]


@pytest.mark.parametrize(("a", "b"), NOTHING_SHARED, ids=lambda x: x[1])
def test_runs_that_share_no_clock_are_not_called_unchanged(tmp_path, a, b):
    """A vLLM log against a gateway's, a load test against a vLLM log: no figure on one clock in both; said so,
    never 'No change, no movement'."""
    from conftest import PUBLIC

    dirs = []
    for i, (where, name) in enumerate((a, b)):
        d = tmp_path / f"in{i}"
        d.mkdir()
        src = PUBLIC / name if where == "vllm-public" else DATA / where / name
        (d / name).write_bytes(need(src).read_bytes())
        dirs.append(d)
    doc = compare(dirs[0], dirs[1], tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["result"] == "nothing to compare"
    assert doc["verdict"][-1].startswith(
        "No figure is known in both runs on one clock, so nothing can be compared"
    )
    assert not any(ln.startswith("No change") for ln in doc["verdict"])


def test_the_correlations_clock_columns_are_read_when_present(outs, tmp_path):
    """The correlation is to write each request's latency_clock / latency_source: read when present (here the
    spike run's requests given the columns, its callers' source named 'spans'), derived from the origin when not."""
    import shutil

    import polars as pl

    src = outs("spike", LAB / "spike")
    given = tmp_path / "given"
    shutil.copytree(src, given)
    req = pl.read_parquet(src / "requests.parquet")
    req.with_columns(
        pl.lit("client").alias("latency_clock"), pl.lit("spans").alias("latency_source")
    ).write_parquet(given / "requests.parquet")
    derived = compare(src, src, tmp_path / "a")["doc"]
    read = compare(src, given, tmp_path / "b")["doc"]
    for name in ("ttft_p95", "e2e_p95", "success_share"):
        d, r = metric_row(derived, name), metric_row(read, name)
        assert d["source"] == {"a": "client_records", "b": "client_records"} and d["clock"] == "client"
        assert r["source"] == {"a": "client_records", "b": "spans"} and r["clock"] == "client"
        assert (r["a"], r["b"]) == (d["a"], d["b"])
