"""Every attempt whose caller left is counted once, with what vLLM did with it (correlation.json ``orphans``): the
facts of the cancellation claim. abort-ignored (/work/lab-runs, 2026-12-06): a 3 s client timeout through nginx's
:8082, whose nginx.conf has ``proxy_ignore_client_abort on``; 76 attempts abandoned, none aborted by vLLM, every one
finished 0.015-5.96 s after its caller left (truth.json ``purpose``, from the client JSONL, nginx and vLLM logs).
Counted before: 76 abandoned, of which 0 aborted + 45 'finished in the race' + 29 ran on = 74: two finished before
the caller's own stamp and went uncounted, and a 2 s window (vLLM's whole-second stamps added to the 1 s race
although the ends compared are nginx's millisecond ones) called 26 executions that ran 1-2 s on a race."""

from __future__ import annotations

import json
import shutil
from datetime import datetime

import pytest
from test_correlate import run_lab

from conftest import DATA, LAB, need
from logscope.api import AnalyzeOptions, correlate, ingest

OUTCOMES = ("aborted", "finished_in_race", "ran_on", "unmatched")


def _closes(o: dict) -> None:
    """The accounting closes: every abandoned attempt has one outcome, overall and per class."""
    assert sum(o[k] for k in OUTCOMES) == o["abandoned"]
    assert sum(c["abandoned"] for c in o["by_class"].values()) == o["abandoned"]
    for c in o["by_class"].values():
        assert sum(c[k] for k in OUTCOMES) == c["abandoned"]
    assert sum(o["unmatched_why"].values()) == o["unmatched"]
    assert o["count"] == o["ran_on"]


def _after(x: dict) -> float:
    t = datetime.fromisoformat
    return (t(x["vllm_finished_gateway_clock"]) - t(x["caller_left_observed_request_end"])).total_seconds()


@pytest.mark.parametrize("drop", [None, ".jsonl", ".log"], ids=["both", "debug log only", "jsonl only"])
def test_every_abandoned_attempt_is_counted(tmp_path, drop):
    """The same figures whichever client log the folder holds (the JSON lines, or only the openai DEBUG log)."""
    run = need(LAB / "abort-ignored")
    truth = json.loads((run / "truth.json").read_text())["purpose"]
    src = tmp_path / "in"
    shutil.copytree(run, src, ignore=shutil.ignore_patterns(f"client-*{drop}") if drop else None)
    ingest(src, tmp_path / "out", AnalyzeOptions())
    o = correlate(tmp_path / "out")["orphans"]
    _closes(o)
    assert o["abandoned"] == truth["abandoned_attempts"] == 76
    assert o["by_class"]["client_timeout"]["abandoned"] == 76 and o["callers_left"] == {
        "client": 76,
        "gateway": 0,
    }
    assert o["aborted"] == truth["abandoned_attempts_vllm_aborted"] == 0
    assert o["abort_lines"] == truth["vllm_aborted_total"] == 0  # no abort line anywhere in the folder
    assert o["unmatched"] == 0 and o["matched"] == 76
    after = [_after(x) for x in truth["abandoned"]]
    # the client's clock is corrected by the network hop (7 ms): an attempt within 50 ms of the window may fall
    # either side of it
    race = o["race_s"]
    assert sum(a > race + 0.05 for a in after) <= o["ran_on"] <= sum(a > race - 0.05 for a in after)
    assert o["ran_on_s"] == pytest.approx(sum(a for a in after if a > race), rel=0.03)
    assert o["finished_in_race"] == 76 - o["ran_on"] and o["cancellation_propagated"] is False


@pytest.mark.parametrize(
    "run, classes",
    [
        # client timeouts answered 499 by nginx, and nginx's own upstream read timeouts (grep -c 'upstream timed
        # out' nginx-error.log = 3): each aborted by vLLM (grep -c 'Aborted request' vllm-server.log = 457)
        ("retry-storm", {"client_timeout": (454, 454), "gateway_upstream_timeout": (3, 3)}),
        # proxy_ignore_client_abort on: 570 client timeouts (attempt_send without attempt_response), none aborted
        ("orphan", {"client_timeout": (570, 0)}),
    ],
)
def test_abandoned_attempts_by_class(tmp_path_factory, run, classes):
    _, s = run_lab(tmp_path_factory, run)
    o = s["orphans"]
    _closes(o)
    got = {k: (c["abandoned"], c["aborted"]) for k, c in o["by_class"].items() if c["abandoned"]}
    assert got == classes
    assert o["abort_lines"] == sum(a for _, a in classes.values())


def test_a_killed_clients_requests_in_flight(tmp_path):
    """client-killed (SIGKILL with 361 connections open): the 367 requests in flight when its log ended were
    abandoned by a client that stopped; vLLM aborted the 366 it had (truth.json vllm.requests_aborted); the one
    left never reached it: nginx had no live upstream for it (grep -c 'no live upstreams' nginx-error.log = 1)."""
    run = need(DATA / "lab2" / "client-killed")
    truth = json.loads((run / "truth.json").read_text())
    ingest(run, tmp_path, AnalyzeOptions())
    o = correlate(tmp_path)["orphans"]
    _closes(o)
    c = o["by_class"]["client_stopped"]
    assert c["abandoned"] == truth["client"]["unfinished_requests_client_stopped"] == 367
    assert c["aborted"] == truth["vllm"]["requests_aborted"] == 366 and c["ran_on"] == 0
    assert c["unmatched_why"] == {"never reached vLLM (the gateway made no connection)": 1}


def test_without_the_vllm_log_nothing_is_said_aborted(tmp_path_factory):
    """With no vLLM request line in the folder, no abort could have been seen: abort_lines is null (not 0) and every
    abandoned attempt is unmatched, saying why."""
    from logscope import schemas
    from logscope.correlate import correlate_tables, ingest_tables

    out, _ = run_lab(tmp_path_factory, "retry-storm")
    tabs = ingest_tables.read_tables(out)
    tabs["server_requests"] = schemas.empty("server_requests")
    o = correlate_tables(tabs).summary["orphans"]
    _closes(o)
    assert o["abandoned"] == 457 and o["abort_lines"] is None and o["matched"] == 0
    assert o["unmatched_why"] == {"no vLLM request line in the input": 457}
    assert o["cancellation_propagated"] is None
