"""Pods mapped to servers by the host vLLM's log names (issue #40): NCCL prefixes its lines with the hostname, a
pod's name under Kubernetes (vllm#5405: a StatefulSet pod). A pod the platform names (the DCGM exporter's pod
label) is that server when the host matches; when the server's log names another host it is not that server, and
with several pods and one server no pod is guessed onto it. Real excerpts only (tests/data/platform/INDEX.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA

PLATFORM = DATA / "platform"
V5405 = PLATFORM / "vllm-nccl-host-statefulset-pod-vllm-5405.log"
V12664 = PLATFORM / "vllm-nccl-host-bare-metal-vllm-12664.log"
D13673 = DATA / "vllm-deaths" / "13673-v0.7.3-enginecore-hit-an-exception.log"  # no NCCL line
DCGM432 = PLATFORM / "dcgm-scrape-fb-used-vllm-pod-mps-dcgm-exporter-432.prom"  # two pods on one GPU (MPS)
HOST = "mwh-deployment-cp2nvtm93l1ljsuft5kg-0"


def _analyze(tmp_path: Path, *files: Path) -> tuple[Path, dict]:
    from logscope.api import AnalyzeOptions, analyze

    src = tmp_path / "in"
    src.mkdir()
    for p in files:
        shutil.copy2(p, src / p.name)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    return tmp_path / "out", json.loads((tmp_path / "out" / "summary.json").read_text())


def _gpu(s: dict) -> dict:
    return next(f for f in s["findings"] if f["title"].startswith("GPU memory (DCGM exporter)"))


@pytest.mark.parametrize(
    "sample, host, pid, line, counts, unread",
    [
        # a StatefulSet pod; the Ray line, the transformers notice and the paste's wrapped half stay counted
        (V5405, HOST, 291, 7, (9, 6, 3), [3, 5, 6]),
        # a bare-metal host, two ranks (two NCCL pids): one host row, every line read
        (V12664, "bruce-AI-Server", 105927, 5, (14, 14, 0), []),
    ],
)
def test_nccl_lines_name_the_host_the_server_ran_on(tmp_path, sample, host, pid, line, counts, unread):
    """vllm#5405 and vllm#12664: the NCCL lines are read (no longer unrecognised) and the first is a 'host' event
    naming the host (a pod's name under Kubernetes), with NCCL's pid."""
    out, _ = _analyze(tmp_path, sample)
    ev = pl.read_parquet(out / "server_events.parquet").filter(pl.col("kind") == "host")
    assert ev.height == 1
    r = ev.row(0, named=True)
    assert r["message"].startswith(f"{host}:{pid}:") and " NCCL INFO " in r["message"]
    assert (r["pid"], r["process"], r["line_no"]) == (pid, "NCCL", line)
    f = pl.read_parquet(out / "files.parquet").row(0, named=True)
    got = (f["format"], f["lines_total"], f["lines_parsed"], f["lines_unrecognized"])
    assert got == ("vllm_server", *counts)
    un = pl.read_parquet(out / "unrecognized.parquet")
    assert sorted(un["first_line_no"].to_list()) == unread


def test_a_pod_the_log_s_host_contradicts_is_not_that_server(tmp_path):
    """vllm#5405's log beside dcgm-exporter#432's scrape (pods gpu-burn-… and vllm-medgemma-… on one GPU): the
    server's log names host mwh-deployment-…-0, so neither pod is it, and the GPU finding says why."""
    _, s = _analyze(tmp_path, V5405, DCGM432)
    ev = _gpu(s)["evidence"]
    rep = V5405.stem
    for pod in ("gpu-burn-deployment-1-85dc8ff699-clvh5", "vllm-medgemma-4b-it-d599b4c99-f95nk"):
        assert f"pod {pod} is not {rep}: its log's NCCL lines name host {HOST}, not that pod" in ev
    assert "a guess" not in ev and "not guessed" not in ev  # ruled out, not left undecided


def test_two_pods_and_one_server_without_a_host_are_not_guessed(tmp_path):
    """vllm#13673's log (no NCCL line: no host) beside the same scrape: one server, two pods on the GPU; neither pod
    is taken for the server, and the finding says the choice is not guessed."""
    _, s = _analyze(tmp_path, D13673, DCGM432)
    ev = _gpu(s)["evidence"]
    assert "2 pods and one server log: which pod it was is not guessed" in ev
    assert "a guess" not in ev
