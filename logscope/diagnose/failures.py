"""The errors signal, from the failed requests themselves: each failure once, at the time its caller saw it, with
its kind, and their stretches judged over the run.

Why not per window: a window counted a request that ended in a client timeout twice (the correlated windows'
``errors`` hold every failed logical request, timeouts included, and ``timeouts`` its timed-out attempts), and a
robust outlier against a floor of 3 per window moved with the window's width (abort-ignored: a calm hour before it
widened the windows from 2 s to 10 s and its errors episode vanished). Here the failures are points in time:

* one per failed logical request (outcome error, timeout or truncated, at its end) where the callers' requests are
  known (correlated or a client's records); else one per gateway request answered 5xx (one access line is one
  request: ``schemas.gateway_request_row``); else one per vLLM access line answered 5xx;
* failures within ``merge_gap_s`` of the previous one are one stretch, as the orphaned executions are
  (``stretches._orphan_stretches``), and a stretch is abnormal from ``errors_floor`` failures when they are more
  than the SLO allows of the requests that ended in it (a failure share above 1 - ``slo_success``): a steady
  trickle of failures below the SLO's share is not an incident, and no baseline is learnt from the run, so calm
  time around it, a narrower range or another window width change nothing.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from .. import schemas
from .context import Context

# the kinds a failure is told by, as the evidence names them
TIMEOUT, NO_ANSWER, TRUNCATED = "client timeout", "no HTTP answer", "answer cut short"


def failures(ctx: Context) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    """(failures, ended, layer): every failure once (``ts``, ``kind``), the ends of every request of the same layer
    (``ts``: the share's denominator) and the layer they were read from (read once per context)."""
    return ctx.memo("failures", lambda: _failures(ctx))


def _failures(ctx: Context) -> tuple[pl.DataFrame, pl.DataFrame, str]:
    req = ctx.inputs.requests
    if ctx.inputs.requests_origin in ("correlated", "client") and req.height and "outcome" in req.columns:
        t = pl.coalesce("ts_end", "ts_start").alias("ts")
        status = pl.col("status") if "status" in req.columns else pl.lit(None, pl.Int64)
        kind = (
            pl.when(pl.col("outcome") == "timeout")
            .then(pl.lit(TIMEOUT))
            .when(pl.col("outcome") == "truncated")
            .then(pl.lit(TRUNCATED))
            .when(status.is_null())
            .then(pl.lit(NO_ANSWER))
            .otherwise(pl.format("HTTP {}", status))
        )
        known = req.filter(pl.col("outcome").is_in(["ok", "error", "timeout", "truncated"]))
        bad = known.filter(pl.col("outcome") != "ok")
        layer = "requests" if ctx.inputs.requests_origin == "correlated" else "client_requests"
        return _frame(bad.select(t, kind.alias("kind"))), _frame(known.select(t)), layer
    gw = ctx.inputs.gateway
    if gw.height and "status" in gw.columns:
        first = gw.filter(pl.col("ts_end").is_not_null() & schemas.gateway_request_row())
        if first.height:
            bad = first.filter(pl.col("status") >= 500)
            return (
                _frame(
                    bad.select(pl.col("ts_end").alias("ts"), pl.format("HTTP {}", "status").alias("kind"))
                ),
                _frame(first.select(pl.col("ts_end").alias("ts"))),
                "gateway_attempts",
            )
    acc = ctx.inputs.access
    if acc.height and "http_status" in acc.columns and acc["http_status"].null_count() < acc.height:
        acc = acc.filter(pl.col("ts").is_not_null() & pl.col("http_status").is_not_null())
        bad = acc.filter(pl.col("http_status") >= 500)
        return (
            _frame(bad.select("ts", pl.format("HTTP {}", "http_status").alias("kind"))),
            _frame(acc.select("ts")),
            "server_events",
        )
    return _frame(pl.DataFrame()), _frame(pl.DataFrame()), ""


def _frame(df: pl.DataFrame) -> pl.DataFrame:
    """``df``'s timed rows in time order, on one time type (``ts``, and ``kind`` when it has one)."""
    ts = pl.Datetime("us", "UTC")
    if not df.height:
        return pl.DataFrame(schema={"ts": ts, "kind": pl.String})
    df = df.with_columns(pl.col("ts").cast(ts)).filter(pl.col("ts").is_not_null())
    if "kind" not in df.columns:
        df = df.with_columns(pl.lit(None, pl.String).alias("kind"))
    return df.select("ts", pl.col("kind").cast(pl.String)).sort("ts")


def runs_of(points: pl.DataFrame, gap_s: float) -> pl.DataFrame:
    """Runs of ``points`` (sorted by ``ts``) no more than ``gap_s`` apart: ``start``, ``end`` and ``n`` of each, in
    time order (the failed requests here, the slow ones in ``slow``)."""
    new = ((pl.col("ts").diff().dt.total_microseconds() / 1e6) > gap_s).fill_null(True)
    return (
        points.with_columns(new.cum_sum().alias("_r"))
        .group_by("_r", maintain_order=True)
        .agg(pl.col("ts").min().alias("start"), pl.col("ts").max().alias("end"), pl.len().alias("n"))
        .drop("_r")
    )


def as_stretches(runs: pl.DataFrame, peak: pl.Expr, mean: pl.Expr, last, signal: str) -> pl.DataFrame:
    """Runs of requests (``runs_of``, kept) as the stretches of a fleet-wide signal (the columns of
    ``stretches._series_stretches``): ``samples`` and ``total`` the run's requests, ``last_sample`` the last request
    of the signal's kind seen (the run recovered when one came after it)."""
    return runs.select(
        pl.lit("").alias("replica"),
        "start",
        "end",
        pl.col("n").cast(pl.Int64).alias("samples"),
        peak.cast(pl.Float64).alias("peak"),
        pl.col("n").cast(pl.Float64).alias("total"),
        mean.cast(pl.Float64).alias("mean"),
        pl.lit(0.0).alias("med"),
        pl.lit(last, pl.Datetime("us", "UTC")).alias("last_sample"),
        pl.lit(signal).alias("signal"),
    )


def error_stretches(ctx: Context) -> pl.DataFrame | None:
    """The errors signal's stretches (the columns of ``stretches._series_stretches``; ``samples`` and ``total``
    count failures), None when no layer tells failed requests from answered ones (then the windows' 5xx)."""
    bad, ended, layer = failures(ctx)
    if not layer:
        return None
    if not bad.height:
        return pl.DataFrame()
    runs = runs_of(bad, ctx.th.merge_gap_s)
    ends = ended["ts"]
    runs = runs.with_columns(
        (
            pl.Series(ends.search_sorted(runs["end"], side="right"))
            - pl.Series(ends.search_sorted(runs["start"], side="left"))
        ).alias("ended")
    )
    allowed = 1.0 - ctx.slo.success
    st = runs.filter((pl.col("n") >= ctx.th.errors_floor) & (pl.col("n") > allowed * pl.col("ended")))
    last = ended["ts"].max()
    # recovered when requests of that layer ended after it (the next answers came back): none after it is
    # 'still failing when the requests end'
    return as_stretches(st, pl.col("n"), pl.col("n") / pl.col("ended"), last, "errors")


def kinds(ctx: Context, start, end) -> tuple[int, int, str, str]:
    """(failed, ended, '40 × client timeout, 3 × HTTP 502', layer) over [start, end]: what an errors episode's
    sentences count, read from the same failures its stretch was made of."""
    bad, ended, layer = failures(ctx)
    if not layer:
        return 0, 0, "", ""
    one = timedelta(0)
    b = bad.filter(pl.col("ts").is_between(start - one, end))
    n_end = ended.filter(pl.col("ts").is_between(start, end)).height
    by = b.group_by("kind").len().sort(["len", "kind"], descending=[True, False])
    return b.height, n_end, ", ".join(f"{n:,} × {k}" for k, n in by.iter_rows()), layer
