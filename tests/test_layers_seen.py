"""The retries table says "not observed" for a layer the folder has no record of, and names what is missing,
in every output from summary.json's ``retries.not_observed`` (report/layers_seen.py; #37: a vLLM-only folder
read "client attempts 0, gateway requests 0", a spans-only folder "vLLM requests received 0"). Real inputs: a
public vLLM excerpt alone, and the OTLP files of the lab's traced-2r-kill without its logs."""

from __future__ import annotations

import shutil
from pathlib import Path

import everyfolder
import pytest

from conftest import LAB, PUBLIC2, need

N19 = "n19-v1-lmcache-kv-load-failure-215-rescheduled-kv100-waiting-47-to-233.log"
NO_CLIENT = "no client log or client spans in the folder"
NO_GATEWAY = "no gateway access log in the folder"
NO_CALLER = "no caller's record (no client or gateway log in the folder)"


def _run(tmp: Path, files: list[Path]) -> everyfolder.Run:
    src = tmp / "in"
    src.mkdir()
    for f in files:
        shutil.copy2(need(f), src / f.name)
    r = everyfolder.analysed(src, tmp)
    assert r.error is None, r.error
    return r


def _rows(r: everyfolder.Run) -> dict[str, str]:
    """summary.md's retries table: {layer: what it shows}."""
    md = r.md.split("## Retries and cancellation", 1)[1].split("\n## ", 1)[0]
    cells = [ln.strip().strip("|").split(" | ") for ln in md.splitlines() if ln.startswith("| ")]
    return {c[0].strip(): c[1].strip() for c in cells[1:] if len(c) == 2}


def _said_everywhere(r: everyfolder.Run, why: str) -> None:
    assert f"not observed: {why}" in r.md and f"not observed: {why}" in r.html
    assert why in r.terminal and "retries, not observed: " in r.terminal


def test_a_vllm_log_alone(tmp_path: Path) -> None:
    """A vLLM log of stats lines and no request-log lines (public-2 n19): no layer of the table is counted."""
    r = _run(tmp_path, [PUBLIC2 / N19])
    ret = r.summary["retries"]
    no_lines = f"vLLM's log ({N19}) holds no request-log lines (vLLM writes them with --enable-log-requests)"
    assert ret["not_observed"] == {
        "client_attempts": NO_CLIENT,
        "client_retries": NO_CLIENT,
        "gateway_requests": NO_GATEWAY,
        "gateway_attempts": NO_GATEWAY,
        "gateway_retries": NO_GATEWAY,
        "server_requests": no_lines,
        "server_aborts": no_lines,
        "amplification": NO_CALLER,
        "orphaned_requests": NO_CALLER,
        "orphan_s": NO_CALLER,
        "logical_requests": NO_CALLER,
    }
    # never a count of 0 for what the folder does not hold
    assert all(ret[k] is None for k in ret["not_observed"])
    rows = _rows(r)
    assert rows["client attempts"] == f"not observed: {NO_CLIENT}"
    assert rows["gateway requests"] == f"not observed: {NO_GATEWAY}"
    assert "0" not in rows.values()
    for why in (NO_CLIENT, NO_GATEWAY, no_lines, NO_CALLER):
        _said_everywhere(r, why)
    assert r.summary["not_available"]["retries"] == NO_CALLER


def test_vllm_spans_alone(tmp_path: Path) -> None:
    """vLLM's spans of traced-2r-kill: 581 executions, no caller: no client, gateway or amplification."""
    run = LAB / "traced-2r-kill"
    r = _run(tmp_path, [run / "otlp-vllm-a.jsonl", run / "otlp-vllm-b.jsonl"])
    ret = r.summary["retries"]
    assert ret["server_requests"] == 581 and ret["logical_requests"] == 581
    assert set(ret["not_observed"]) == {
        "client_attempts", "client_retries", "gateway_requests", "gateway_attempts", "gateway_retries",
        "amplification", "orphaned_requests", "orphan_s",
    }  # fmt: skip
    # each execution is its own logical request here, so an amplification of 1.00 would be true by construction
    assert ret["amplification"] is None and ret["not_observed"]["amplification"] == NO_CALLER
    for why in (NO_CLIENT, NO_GATEWAY, NO_CALLER):
        _said_everywhere(r, why)


def test_callers_and_engine_spans_without_logs(tmp_path: Path) -> None:
    """The client's and vLLM's spans of traced-2r-kill: 640 client attempts, no gateway, no vLLM log; the
    engine spans are named (581 attempts reached an engine) instead of "vLLM requests received 0"."""
    run = LAB / "traced-2r-kill"
    r = _run(tmp_path, [run / f for f in ("otlp-lab-client.jsonl", "otlp-vllm-a.jsonl", "otlp-vllm-b.jsonl")])
    ret = r.summary["retries"]
    assert ret["client_attempts"] == 640 and ret["logical_requests"] == 637
    no_vllm = "no vLLM or SGLang log in the folder; 581 client attempts have an engine span (see Traces)"
    assert ret["not_observed"]["server_requests"] == no_vllm
    assert ret["not_observed"]["amplification"] == no_vllm
    assert "client_attempts" not in ret["not_observed"]
    assert _rows(r)["client attempts"] == "640"
    for why in (NO_GATEWAY, no_vllm):
        _said_everywhere(r, why)


@pytest.mark.parametrize("run", ["traced-2r-kill", "retry-storm"])
def test_every_layer_seen(tmp_path: Path, run: str) -> None:
    """A folder with the client's, nginx's and vLLM's logs: every row counted, nothing said missing."""
    r = everyfolder.analysed(need(LAB / run), tmp_path)
    assert r.summary["retries"]["not_observed"] == {}
    assert "retries, not observed" not in r.terminal and "| not observed: " not in r.md
