"""logscope compare on real runs: a run with itself, runs that differ in several things (the V0 and V1
ladders), and the real pairs in tests/data/pairs recorded with one setting changed (their commands.log and
notes.txt say how)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import DATA, LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze, compare
from logscope.compare import settings
from logscope.parsers import nginx_conf

SCHEMA = json.loads((ROOT / "logscope" / "compare.schema.json").read_text())
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


def _row(doc: dict, name: str, scope: str = "whole") -> dict:
    rows = (
        doc["whole"]["metrics"]
        if scope == "whole"
        else next(s for s in doc["steps"] if s["label"] == scope)["metrics"]
    )
    return next(r for r in rows if r["name"] == name)


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
        "beyond the run-to-run noise."
    ]
    assert doc["result"] == "no movement" and doc["comparable"]["settings_changed"] == 0
    assert doc["traffic"]["alike"] is True and [s["label"] for s in doc["steps"]] == [
        "c=2",
        "c=48",
        "c=2 (#2)",
    ]
    assert (
        _row(doc, "preemptions")["a"] == 136 and _row(doc, "requests")["a"] == 284
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
    assert _row(doc, "preemptions")["a"] == 456 and _row(doc, "preemptions")["b"] == 232


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
    pre = _row(doc, "preemptions")
    assert (pre["a"], pre["b"]) == (truth_a["preemptions"]["total"], truth_b["preemptions"]["total"])
    assert pre["b"] == 0 and pre["direction"] == "better" and pre["beyond_noise"]
    assert _row(doc, "requests")["a"] == truth_a["client"]["logical_requests"]
    assert _row(doc, "requests")["b"] == truth_b["client"]["logical_requests"]
    ttft = _row(doc, "ttft_p95")
    assert ttft["change"] > 0 and ttft["beyond_noise"] and ttft["direction"] == "worse"
    trap = next(t for t in doc["traps"] if t["scope"] == "whole run")
    assert trap["kind"] == "latency_into_queue"
    assert f"Preemptions fell from {pre['a']} to 0, but TTFT p95 rose" in trap["text"]
    assert trap["text"] in doc["verdict"] and trap["text"].endswith("the latency moved into the queue.")


def test_storm_client_retries_3_vs_0(outs, tmp_path):
    a_dir, b_dir = _pair("storm-retries")
    a_dir, b_dir = (a_dir, b_dir) if a_dir.name.endswith("3") else (b_dir, a_dir)
    doc = compare(outs("retries3", a_dir), outs("retries0", b_dir), tmp_path / "c")["doc"]
    jsonschema.validate(doc, SCHEMA)
    row = next(r for r in doc["settings"] if r["name"] == "client_max_retries")
    assert (row["a"], row["b"]) == (3, 0) and row["counted"]
    assert "client_max_retries" in doc["comparable"]["changed"]
    truth_a = json.loads((a_dir / "truth.json").read_text())
    assert _row(doc, "client_retries")["a"] == truth_a["client"]["retries"]
    assert _row(doc, "client_retries")["b"] == 0


@pytest.mark.slow  # a child process
def test_cli_prints_the_verdict(outs, tmp_path):
    import subprocess
    import sys

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
