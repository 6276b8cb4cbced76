"""A gateway that stopped while it was still answering is a finding. vllm-public 31 (vllm-project/production-stack
#448: the router at >1k concurrent requests logs uvicorn's 'Shutting down', then six 200s while it waits for its
connections to close, then its shutdown) read "Nothing alarming cannot be said: 6 request(s) served". Every lab
recording's nginx ends on its master's SIGQUIT after the traffic: no finding there, and none when another folder's
gateway answers on after this one stopped."""

from __future__ import annotations

import shutil

import polars as pl

from conftest import LAB, PUBLIC, need
from logscope.api import AnalyzeOptions, analyze

ROUTER = PUBLIC / "31-production-stack-router-shutdown-under-load.log"
TITLE = (
    "The gateway stopped while it was still answering by 11:44:46: 6 answer(s) after its stop "
    "(31-production-stack-router-shutdown-under-load.log)"
)


def test_a_router_stopped_under_load_is_a_finding_in_every_output(analyzed, rendered):
    out, s, _ = analyzed(need(ROUTER))
    f = s["findings"][0]
    assert (f["title"], f["severity"]) == (TITLE, "high")
    claim = next(c for c in s["claims"] if c["id"] == f["claim"])
    facts = {x["name"]: x["value"] for x in claim["facts"]}
    assert (facts["answers_after"], facts["answers_before"], facts["stop_line"]) == (6, 0, 1)
    assert facts["ordered"] == "in the file's order (its lines carry no time)"
    assert claim["missing"] == [
        "the stop record's own time (placed by the first time its file gives after it)"
    ]
    # the stop's record has no time; the first the file gives after it, 11:44:46.898, places it
    assert facts["stopped"].startswith("2025-05-21T11:44:46.898")
    outputs = rendered(out, s)
    for name, text in outputs.items():
        assert TITLE in text, name
        assert "Nothing alarming" not in text, name


def test_a_gateway_stopped_after_its_traffic_is_no_finding(analyzed):
    """The lab's nginx stops on SIGQUIT after the last request: the stop is read (kind shutdown), no finding."""
    for run in ("calm", "retry-storm"):
        out, s, _ = analyzed(need(LAB / run))
        stops = pl.read_parquet(out / "gateway_errors.parquet").filter(pl.col("kind") == "shutdown")
        assert stops.height == 1 and "(SIGQUIT) received from" in stops["message"].item(), run
        assert not any("stopped while it was still answering" in f["title"] for f in s["findings"]), run


def test_another_folders_gateway_answering_after_a_stop_is_not_this_ones_load(tmp_path):
    """calm's nginx stopped at 08:51:30; calm-b's, in a folder of its own, answered from 09:12: by time alone calm's
    stop would have 'answers after it'."""
    for run in ("calm", "calm-b"):
        shutil.copytree(need(LAB / run), tmp_path / "in" / run)
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    errs = pl.read_parquet(tmp_path / "out" / "gateway_errors.parquet")
    assert errs.filter(pl.col("kind") == "shutdown").height == 2
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "stopped while it was still answering" not in summary
