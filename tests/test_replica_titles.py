"""A Prometheus target is no replica unless it is tied to a server log (#37): traced-2r-kill's two scrape files
without an instance label (metrics-a.prom.log, metrics-b.prom.log) could not be tied to vllm-server-a / -b (their
gauges follow both logs: the two replicas shared the load), and a title read '4 replicas (metrics-a.prom,
vllm-server-a, metrics-b.prom, vllm-server-b)'. Beside it, a folder where the targets are tied (spike-b with
calm-b's log and scrape beside as a second replica, shifted onto its minutes) names log replicas only."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from metamorphic import copy, copy_shifted, span

COUNTED = re.compile(r"(\d+) replicas \(([^)]*)\)")


def _titles(out: Path) -> list[str]:
    return [f["title"] for f in json.loads((out / "summary.json").read_text())["findings"]]


def _replicas_counted(titles: list[str]) -> list[list[str]]:
    return [m.group(2).split(", ") for t in titles for m in COUNTED.finditer(t)]


@pytest.fixture(scope="module")
def kill(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kill") / "out"
    analyze(need(LAB / "traced-2r-kill"), out, AnalyzeOptions())
    return out


def test_untied_metrics_targets_are_not_replicas(kill: Path) -> None:
    titles = _titles(kill)
    for names in _replicas_counted(titles):
        assert not any(n.startswith("metrics-") for n in names), names
    assert any(
        t.startswith(
            "2 replicas (vllm-server-a, vllm-server-b) and 2 metrics targets tied to no server log "
            "(metrics-a.prom, metrics-b.prom): Recurring KV pressure: "
        )
        for t in titles
    ), titles
    assert any(t.startswith("a metrics target tied to no server log (metrics-a.prom): ") for t in titles)


def test_tied_targets_name_log_replicas_only(tmp_path: Path) -> None:
    calm = need(LAB / "calm-b")
    lo, _ = span(LAB / "spike-b")
    calm_lo, _ = span(calm)
    delta = timedelta(seconds=int((lo - calm_lo).total_seconds()))
    copy(LAB / "spike-b", tmp_path / "in")
    keep = ("vllm-server.log", "metrics.prom.log")
    copy_shifted(calm, tmp_path / "in" / "replica-b", delta, rename=lambda rel: rel if rel in keep else None)
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    titles = _titles(tmp_path / "out")
    assert not any("metrics target" in t for t in titles), titles
    eps = json.loads((tmp_path / "out" / "summary.json").read_text())["episodes"]
    assert {e["replica"] for e in eps} == {"vllm-server"}


def test_retried_attempts_that_reached_vllm_agree_with_the_spans(kill: Path) -> None:
    """traced-2r-kill's retries finding once read '0 retried attempts reached it' while its counts and the
    client's spans showed the 3 client retries reached an engine (truth: 640 attempts, 3 retries). Its title now
    counts from the same reach object as its evidence, and the spans agree."""
    s = json.loads((kill / "summary.json").read_text())
    [f] = [f for f in s["findings"] if f["kind"] == "retries"]
    assert "0 retried attempts reached" not in f["title"]
    # client retries 3 + nginx's 23 failovers off the dead replica b: 26 retried requests, 52 attempts, the 26
    # first tries never reached vLLM and the 26 retries did
    assert f["title"] == "Retries: 1.00 attempts per request (26 of their 52 attempts reached vLLM)"
    assert "client retries 3, gateway retries 23" in f["evidence"]
    assert "26 of the 52 attempts of the 26 retried requests never reached vLLM (26 did)" in f["evidence"]
    ra = s["traces"]["retried_attempts"]
    assert ra["retries"] == 3 and ra["with_engine_span"] == 3
