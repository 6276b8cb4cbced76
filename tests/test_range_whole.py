"""A time range keeps each request whole (README, "A time range"): `logscope report OUT --since T --until T`
correlates the logical requests whose span overlaps the range with every attempt and vLLM execution of theirs,
wherever those lie. A metamorphic property on real runs: for any range, the range's requests are the whole run's
requests that overlap it, each with the whole run's counts at every layer, and the run-level counts are their
sums. (A range cut out the vLLM execution received before --since of a request answered after it: the retry
storm's 08:30:55-08:31:28 said 26 of its 183 requests never reached vLLM, and a join missed.)"""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from conftest import DATA, LAB, need
from logscope.api import AnalyzeOptions, analyze, correlate, diagnose

RUNS = {
    "retry-storm": LAB / "retry-storm",  # client and gateway retries, 499s aborted by vLLM
    "orphan": LAB / "orphan",  # executions that run 30 s past their callers (proxy_ignore_client_abort)
    "crash": LAB / "crash",  # 502s while the server was down: requests that truly never reached vLLM
    "ladder": LAB / "ladder",  # a load-test tool's records (vllm bench), no client log
    "client-killed": DATA / "lab2" / "client-killed",  # unfinished requests
    "sigterm-overload": DATA / "lab2" / "sigterm-overload",
    "overload-long": LAB / "overload-long",  # a backlog of 950 requests: spans of minutes
}
# ranges as fractions of each run's span: short ones cutting through many requests, a long one
SHARES = ((0.2, 0.4), (0.45, 0.55), (0.6, 0.9), (0.5, 0.5))
LAYERS = (
    "client_attempts",
    "gateway_requests",
    "gateway_attempts",
    "server_requests",
    "server_aborted",
    "orphaned_executions",
    "outcome",
    "status",
)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    done: dict = {}

    def get(run: str):
        if run not in done:
            out = tmp_path_factory.mktemp(run)
            analyze(need(RUNS[run]), out, AnalyzeOptions())
            done[run] = out
        return done[run]

    return get


def _ranged(base, dst, since, until) -> tuple[pl.DataFrame, dict]:
    shutil.copytree(base, dst)
    s = correlate(dst, AnalyzeOptions(since=since, until=until))
    return pl.read_parquet(dst / "requests.parquet"), s


@pytest.mark.parametrize("run", list(RUNS))
def test_a_range_keeps_its_requests_whole(whole, tmp_path, run):
    base = whole(run)
    req = pl.read_parquet(base / "requests.parquet")
    lo, hi = req["ts_start"].min(), req["ts_end"].max()
    for k, (a, b) in enumerate(SHARES):
        since, until = lo + (hi - lo) * a, lo + (hi - lo) * b
        got, s = _ranged(base, tmp_path / f"r{k}", since, until)
        over = (pl.max_horizontal("ts_start", "ts_end") >= since) & (
            pl.min_horizontal("ts_start", "ts_end") <= until
        )
        want = req.filter(over)
        assert want.height > 0, (run, a, b)
        key = ["logical_request_id", "ts_start"]
        assert got.select(key).sort(key).equals(want.select(key).sort(key)), (run, a, b)
        j = got.select(*key, *LAYERS).join(want.select(*key, *LAYERS), on=key, suffix="_whole")
        for c in LAYERS:
            diff = j.filter(pl.col(c).ne_missing(pl.col(f"{c}_whole")))
            assert diff.height == 0, (run, a, b, c, diff.head(3))
        rm = s["retry_multiplication"]
        assert rm["logical_requests"] == want.height
        assert rm["client_attempts"] == want["client_attempts"].sum()
        if s["match"]["server_executions_without_caller"] == 0:
            assert rm["server_requests"] == want["server_requests"].sum()


def test_the_range_of_the_report_that_missed_a_join(whole, tmp_path):
    """The storm's 08:30:55-08:31:28 (183 requests): the diagnosis' requests that never reached vLLM are those of
    the whole run (the 502s and the timeouts before vLLM had them), never 'a join missed'."""
    base = whole("retry-storm")
    req = pl.read_parquet(base / "requests.parquet")
    lo, hi = req["ts_start"].min(), req["ts_end"].max()
    since, until = lo + (hi - lo) * 0.45, lo + (hi - lo) * 0.55
    got, _ = _ranged(base, tmp_path / "r", since, until)
    assert got.height == 183
    ids = got["logical_request_id"].implode()
    never = req.filter(pl.col("logical_request_id").is_in(ids) & (pl.col("server_requests") == 0))
    assert got.filter(pl.col("server_requests") == 0).height == never.height
    d = diagnose(tmp_path / "r", AnalyzeOptions(since=since, until=until))
    below = d["traffic"].get("amplification_below_1")
    if below:
        assert below["never_reached_server"] == never.height and "join missed" not in below["text"]
