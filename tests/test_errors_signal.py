"""The errors signal counts each failed request once (issue #37): every count an episode or a finding gives of failed
requests equals the failed requests of requests.parquet in its range, on real lab runs with failures.

Before, correlated windows counted a request that ended in a client timeout twice (as an error and as a timed-out
attempt): abort-ignored's title 'Errors 02:06:12–02:06:14: 4 failed' covered the 2 requests that timed out at
02:06:13, and its companions said 98 errors where 49 requests had failed."""

from __future__ import annotations

import json
import re
from datetime import datetime

import polars as pl
import pytest

from conftest import LAB, need

FAILED = ("error", "timeout", "truncated")
RUNS = ("abort-ignored", "retry-storm", "storm-b", "oom-cgroup", "crash")


@pytest.fixture(scope="module")
def outs(analyzed) -> dict[str, tuple[dict, pl.DataFrame]]:
    got = {}
    for run in RUNS:
        out, _, diag = analyzed(need(LAB / run))
        got[run] = (diag, pl.read_parquet(out / "requests.parquet"))
    return got


def _t(x: str) -> datetime:
    return datetime.fromisoformat(x.replace("Z", "+00:00"))


def _failed(req: pl.DataFrame, start: str, end: str) -> int:
    """Failed logical requests whose caller saw the failure in [start, end] (diagnosis.json's times are to the ms)."""
    t = pl.coalesce("ts_end", "ts_start").dt.truncate("1ms")
    return req.filter(pl.col("outcome").is_in(FAILED) & t.is_between(_t(start), _t(end))).height


def _errors(diag: dict) -> list[dict]:
    """Every errors stretch the episodes hold: as their signal, or as a companion."""
    out = []
    for e in diag["episodes"]:
        if e["signal"] == "errors":
            out.append({"start": e["start"], "end": e["end"], "count": e["count"], "text": e["reason"]})
        for c in e["details"]["companions"]:
            if c["signal"] == "errors":
                out.append({**c, "text": e["reason"]})
    return out


@pytest.mark.parametrize("run", RUNS)
def test_each_errors_count_is_its_failed_requests(run, outs):
    diag, req = outs[run]
    stretches = _errors(diag)
    assert stretches, f"{run}: no errors stretch"
    for s in stretches:
        assert s["count"] == _failed(req, s["start"], s["end"]), (run, s["start"], s["end"], s["count"])
        if s["text"]:  # the sentence that names it says the same count
            hms = f"{s['start'][11:19]}–{s['end'][11:19]}"
            said = re.search(rf"errors {hms} \((\d+) failed\)", s["text"])
            assert said is None or int(said.group(1)) == s["count"], (run, s["text"])
    for f in diag["findings"]:  # and every title counting failed requests
        m = re.match(r"Errors (\d\d:\d\d:\d\d)–(\d\d:\d\d:\d\d): (\d+) failed", f["title"])
        if m:
            ep = next(e for e in diag["episodes"] if e["episode_id"] == f["episode_id"])
            assert int(m.group(3)) == _failed(req, ep["start"], ep["end"]), f["title"]


def test_abort_ignored_timeouts_counted_once(outs):
    """abort-ignored (truth.json: 169 requests, 76 APITimeoutError, no retries): its 76 timeouts are 76 failed
    requests; 73 of them lie in the two errors stretches (02:07:00–02:07:03: 7, after a 22 s gap 02:07:25–02:08:59:
    66, up to the last arrival's timeout), the other 3 (2 at 02:06:13, 1 at 02:06:49) are below the floor of 3."""
    truth = json.loads((LAB / "abort-ignored" / "truth.json").read_text())
    diag, req = outs["abort-ignored"]
    assert req.filter(pl.col("outcome") == "timeout").height == truth["client"]["timeouts_logical"] == 76
    got = sorted((s["start"][11:19], s["end"][11:19], s["count"]) for s in _errors(diag))
    assert sorted(set(got)) == [("02:07:00", "02:07:03", 7), ("02:07:25", "02:08:59", 66)]
    # no errors episode of 2 s at the floor any more: the failures over the run, one regime to the load's end, an
    # episode of its own beside the two preemption bursts it outlasts (truth.json's notes: per 20 s of arrivals
    # 7/15, 7/22, 10/17, 16/22, 17/17, 16/24 timed out from 02:06:55 to the last arrival)
    assert not [f for f in diag["findings"] if f["title"].startswith("Errors 02:06:12")]
    ep = next(e for e in diag["episodes"] if e["signal"] == "errors")
    assert ep["class"] == "sustained" and ep["count"] == 66
    f = next(f for f in diag["findings"] if f["episode_id"] == ep["episode_id"] and f["kind"] == "errors")
    assert f["title"] == "Errors 02:07:25–02:08:59: 66 failed"
    assert (
        "66 of the 95 requests that ended in it failed (66 × client timeout; requests.parquet)"
        in f["evidence"]
    )
    ended = req.filter(
        pl.coalesce("ts_end", "ts_start").dt.truncate("1ms").is_between(_t(ep["start"]), _t(ep["end"]))
    ).height
    assert ended == 95


def test_retry_storm_failures_by_layer(outs):
    """retry-storm (truth.json client.outcomes: 457 × 200, 80 × APITimeoutError, 116 × 502 after the client's
    retries): every failed request once, 196 in all, in one stretch beside the preemption spike; the windows'
    sum counted each timeout twice."""
    truth = json.loads((LAB / "retry-storm" / "truth.json").read_text())["client"]["outcomes"]
    diag, req = outs["retry-storm"]
    n = req.filter(pl.col("outcome").is_in(FAILED)).height
    assert n == truth["APITimeoutError"] + truth["502"] == 196
    assert [s["count"] for s in _errors(diag)] == [196]


@pytest.mark.parametrize("run", RUNS)
def test_the_errors_cause_names_what_the_server_showed(outs, run):
    """An errors finding's cause is built from its episode's own server figures: abort-ignored's timeouts, beside KV
    up to 98.2 %, 4 waiting and preemptions, once read 'no pressure sign on the server'. Every run with an errors
    finding: the cause names each sign its episode holds and denies none of them."""
    diag, _ = outs[run]
    eps = {e["episode_id"]: e for e in diag["episodes"]}
    found = [f for f in diag["findings"] if f["title"].startswith("Errors ") and f.get("episode_id") in eps]
    for f in found:
        e = eps[f["episode_id"]]
        if e["kv_max"] is not None and e["kv_max"] >= 0.9:
            assert f"KV up to {e['kv_max'] * 100:.1f} %" in f["cause"], f["cause"]
            assert "no near-full cache" not in f["cause"]
        if e["waiting_max"]:
            assert f"up to {e['waiting_max']:.0f} waiting" in f["cause"], f["cause"]
        if e["details"].get("preemptions"):
            assert f"{e['details']['preemptions']:,} preemptions" in f["cause"], f["cause"]
        assert "no pressure sign" not in f["cause"]
    if (
        run == "abort-ignored"
    ):  # 66 client timeouts beside the server's KV 98.2 % and 4 waiting (truth: 76 timeouts)
        [f] = found
        assert f["cause"].startswith(
            "callers gave up before an answer (66 of 66 failures are client timeouts)"
        )
        assert "KV up to 98.2 %, up to 4 waiting" in f["cause"]
