"""The clock gap's figures of many ranges at once (``clockgap.ByTime``, ``at_gateway``, ``single_attempts``) are
the per-range filters they replaced, range by range, on real lab runs: the old code is kept here as the oracle.

Each folder is analysed as a user would, then its gateway attempts, gateway errors and logical requests are cut
by every client phase, every episode, ranges whose ends are rows' own times (``is_between`` keeps both ends), one
that holds the whole load, a reversed one, one with an unknown end and one before any row. gateway-queue (nginx
``limit_req`` in front of vLLM 0.32) holds the rate limit's lines; abort-ignored and traced-2r-kill have no such
line, and traced-2r-kill's requests come from two replicas."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from conftest import LAB
from logscope.diagnose import clockgap, figures
from logscope.diagnose.claims import ORIGIN_SOURCE, Fact, latency

RUNS = ("gateway-queue", "abort-ignored", "traced-2r-kill")


def _old_at_gateway(gw: pl.DataFrame, errors: pl.DataFrame, lo, hi) -> list[Fact]:
    """The per-range code before ``at_gateway`` (main f53e1f1), unchanged but for its name."""
    if gw is None or not gw.height or lo is None or hi is None or "request_time_s" not in gw.columns:
        return []
    per = (
        gw.filter(pl.col("ts_start").is_between(lo, hi) & pl.col("request_time_s").is_not_null())
        .group_by("source", "line_no")
        .agg(
            pl.col("request_time_s").max().alias("rt"),
            pl.when(pl.col("duration_s").is_not_null().any()).then(pl.col("duration_s").sum()).alias("up"),
        )
        .with_columns((pl.col("rt") - pl.col("up")).clip(lower_bound=0).alias("outside"))
    )
    timed = per.filter(pl.col("up").is_not_null())
    if not timed.height:
        return []
    p95 = lambda c: timed[c].quantile(0.95, "linear")  # noqa: E731
    by_kind: dict[str, int] = {}
    if errors is not None and errors.height and "kind" in errors.columns:
        lim = errors.filter(
            pl.col("ts").is_between(lo, hi) & pl.col("kind").cast(pl.String).str.starts_with("limit_req_")
        )
        by_kind = {str(k): int(n) for k, n in lim.group_by("kind").len().iter_rows()}
    return [
        Fact("gateway_requests", timed.height, "gateway_log", unit="requests answered by an upstream"),
        latency("gateway_request_time_p95", p95("rt"), "gateway_log"),
        latency("gateway_upstream_p95", p95("up"), "gateway_log"),
        latency("gateway_outside_upstream_p95", p95("outside"), "gateway_log"),
        Fact(
            "gateway_rate_limit_delayed", by_kind.get("limit_req_delayed", 0), "gateway_log", unit="requests"
        ),
        Fact(
            "gateway_rate_limit_rejected",
            by_kind.get("limit_req_rejected", 0),
            "gateway_log",
            unit="requests",
        ),
    ]


def _old_single(req: pl.DataFrame, lo, hi) -> dict:
    """The per-range code before ``single_attempts`` (main f53e1f1)."""
    out: dict = {}
    if not req.height or lo is None or hi is None or "origin" not in req.columns:
        return out
    one = pl.lit(True)
    for c in ("client_attempts", "gateway_attempts"):
        if c in req.columns:
            one = one & (pl.col(c).fill_null(1) <= 1)
    r = req.filter(pl.col("ts_start").is_between(lo, hi) & one)
    for f, col in (("ttft", "ttft_s"), ("e2e", "e2e_s")):
        if col not in r.columns:
            continue
        on, names = (
            ("latency_clock", clockgap.CLOCK_ORIGIN) if "latency_clock" in r.columns else ("origin", {})
        )
        mine = (pl.col(on) == "client") if f == "ttft" else pl.lit(True)
        got = r.filter(pl.col(col).is_not_null() & mine)
        layers = {names.get(o, o) for o in got[on].drop_nulls().unique().to_list()}
        src = " + ".join(sorted(ORIGIN_SOURCE.get(o, o) for o in layers))
        out[f] = (got[col].quantile(0.95, "linear") if got.height else None, got.height, src or None)
    return out


def _ranges(out, gw: pl.DataFrame) -> list[tuple]:
    phases = pl.read_parquet(out / "client_phases.parquet")
    eps = pl.read_parquet(out / "episodes.parquet")
    t = gw["ts_start"].drop_nulls().sort()
    first, last, mid = t[0], t[-1], t[len(t) // 2]
    return [
        *phases.select("ts_start", "ts_end").iter_rows(),
        *eps.select("start", "end").iter_rows(),
        (first, last),  # the whole load
        (mid, mid),  # one instant: the rows at exactly that time
        (t[len(t) // 3], t[2 * len(t) // 3]),  # both ends rows' own times
        (last, first),  # reversed: nothing
        (mid, None),  # an unknown end: nothing
        (first - timedelta(days=1), first - timedelta(hours=1)),  # before every row
    ]


@pytest.mark.parametrize("batch", [None, 40])
@pytest.mark.parametrize("run", RUNS)
def test_many_ranges_at_once_are_the_per_range_figures(analyzed, run, batch, monkeypatch):
    """Whole, and in batches of whole ranges of about 40 rows (``figures.batch_rows``, from ``GATHER_BYTES``: the
    memory a folder's overlapping ranges take stays bounded)."""
    if batch:
        monkeypatch.setattr(figures, "batch_rows", lambda df, max_bytes=None: batch)
    out, _, _ = analyzed(LAB / run)
    gw = pl.read_parquet(out / "gateway_attempts.parquet")
    errors = pl.read_parquet(out / "gateway_errors.parquet")
    req = pl.read_parquet(out / "requests.parquet")
    ranges = _ranges(out, gw)
    assert len(ranges) >= 8
    by_gw = clockgap.ByTime.of(gw, "ts_start")
    parts = list(by_gw.within(ranges))
    assert len(parts) > 1 if batch else len(parts) == 1  # whole ranges of about 40 rows a batch, else one
    rows = pl.concat(parts)
    for i, (lo, hi) in enumerate(ranges):  # each range's rows, in the table's order, as the filter gives them
        want = (
            gw.filter(pl.col("ts_start").is_between(lo, hi))
            if lo is not None and hi is not None
            else gw.clear()
        )
        got = rows.filter(pl.col(clockgap.RANGE) == i).drop(clockgap.RANGE)
        assert (
            set(got.columns) <= set(clockgap.READS) and "request_time_s" in got.columns
        )  # what it reads only
        assert got.equals(want.select(got.columns)), (run, i, lo, hi)
    at_gw = clockgap.at_gateway(by_gw, clockgap.ByTime.of(errors, "ts"), ranges)
    single = clockgap.single_attempts(clockgap.ByTime.of(req, "ts_start"), ranges)
    for i, (lo, hi) in enumerate(ranges):
        assert at_gw[i] == _old_at_gateway(gw, errors, lo, hi), (run, i)
        assert single[i] == _old_single(req, lo, hi), (run, i)
    whole = {f.name: f.value for f in at_gw[-6]}
    # every gateway request answered by an upstream, counted from the access log's own lines
    assert whole["gateway_requests"] == gw.filter(pl.col("duration_s").is_not_null()).n_unique(
        ["source", "line_no"]
    )
    assert at_gw[-3] == at_gw[-2] == at_gw[-1] == []  # reversed, an unknown end, before every row


def test_the_rate_limits_lines_are_counted_per_range(analyzed):
    """gateway-queue: nginx's error log holds 467 'delaying request' lines of its limit_req (grep -c on the file),
    and the whole load's range counts each of them once."""
    src = LAB / "gateway-queue"
    out, _, _ = analyzed(src)
    delaying = sum(
        line.count("delaying request") for line in (src / "nginx-error.log").read_text().splitlines()
    )
    assert delaying == 467
    gw = pl.read_parquet(out / "gateway_attempts.parquet")
    errors = pl.read_parquet(out / "gateway_errors.parquet")
    t = pl.concat([gw["ts_start"], errors["ts"]]).drop_nulls()
    facts = clockgap.at_gateway(
        clockgap.ByTime.of(gw, "ts_start"), clockgap.ByTime.of(errors, "ts"), [(t.min(), t.max())]
    )[0]
    got = {f.name: f.value for f in facts}
    assert got["gateway_rate_limit_delayed"] == delaying
    assert got["gateway_rate_limit_rejected"] == 0
