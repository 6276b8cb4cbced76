"""The span in the report's header is what the files state (#37): a Prometheus scrape without timestamps takes
its file's modification time (the copy's time, not the incident's), which once stretched a vLLM excerpt's header
from January to the day it was copied; and files far apart in time (another year, another day: a folder mixing
years read as a span of 55,244.7 h) are named, not presented as one incident's duration. Real inputs: public
vLLM excerpts and lab logs beside public DCGM scrapes (tests/data/platform), each copied fresh (the copy's mtime
is today)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import everyfolder
import pytest

from conftest import DATA, LAB, PUBLIC, PUBLIC2, need

N19 = PUBLIC2 / "n19-v1-lmcache-kv-load-failure-215-rescheduled-kv100-waiting-47-to-233.log"
N20 = PUBLIC2 / "n20-v1-anthropic-messages-endpoint-model-not-found-404s.log"
P41 = PUBLIC / "41-v0-2023-earliest-scheduler-throughput-stats.log"
DCGM_432 = DATA / "platform" / "dcgm-scrape-fb-used-vllm-pod-mps-dcgm-exporter-432.prom"
DCGM_93 = DATA / "platform" / "dcgm-scrape-fb-free-used-fake-gpu-operator-93.prom"


def _run(tmp: Path, files: list[Path]) -> everyfolder.Run:
    src = tmp / "in"
    src.mkdir()
    for f in files:
        shutil.copy(need(f), src / f.name)  # copy, not copy2: the scrape's mtime is now, as a collector's is
    os.utime(src / files[-1].name)
    r = everyfolder.analysed(src, tmp)
    assert r.error is None, r.error
    return r


@pytest.mark.parametrize(
    ("log", "scrape", "start", "end"),
    [
        (N19, DCGM_432, "2026-01-27T01:40:17.000Z", "2026-01-27T01:41:28.000Z"),
        (LAB / "kv-short" / "vllm-server.log", DCGM_93, None, None),
    ],
    ids=["n19", "kv-short"],
)
def test_a_scrape_without_timestamps_does_not_bound_the_span(tmp_path, log, scrape, start, end) -> None:
    r = _run(tmp_path, [log, scrape])
    files = {f["path"]: f for f in r.summary["inputs"]["files"]}
    sp = r.summary["span"]
    # the log's own times bound the span; the scrape's modification time (today) does not
    assert sp["start"] == files[log.name]["first_ts"] and sp["end"] == files[log.name]["last_ts"]
    if start:
        assert (sp["start"], sp["end"]) == (start, end)
    assert sp["end"] < files[scrape.name]["first_ts"]
    said = (
        f"{scrape.name} states no time: its samples sit at the file's modification time (when it was copied)"
    )
    assert sp["anchored"].startswith(said)
    assert said in r.md and said in r.html and said in r.terminal


def test_a_scrape_alone_gives_times_unknown(tmp_path) -> None:
    r = _run(tmp_path, [DCGM_432])
    sp = r.summary["span"]
    assert sp["start"] is None and sp["end"] is None and sp["duration_s"] is None
    assert "no line of the inputs carries a time" in sp["unknown"]
    assert f"{DCGM_432.name} states no time" in sp["unknown"]
    assert "times unknown (" in r.md


@pytest.mark.parametrize(
    ("a", "b", "dates"),
    [
        (N20, P41, ("(2026-02-23)", "(2026-05-10)")),
        (N19, LAB / "kv-short" / "vllm-server.log", ("(2026-01-27)", None)),
    ],
    ids=["n20+41", "n19+kv-short"],
)
def test_files_far_apart_are_named(tmp_path, a, b, dates) -> None:
    r = _run(tmp_path, [a, b])
    apart = r.summary["span"]["far_apart"]
    assert apart.startswith("the files are far apart in time (2 groups more than 24 h apart: ")
    assert apart.endswith("): the span is not one incident's duration")
    assert a.name in apart and b.name in apart
    assert all(d in apart for d in dates if d)
    assert apart in r.md and apart in r.html and apart in r.terminal


def test_one_incident_is_not_far_apart(tmp_path) -> None:
    r = everyfolder.analysed(need(LAB / "traced-2r-kill"), tmp_path)
    assert "far_apart" not in r.summary["span"] and "anchored" not in r.summary["span"]
