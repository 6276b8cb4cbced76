"""The TTFT and e2e signals, from the requests themselves: each answered request once, at its start, with its own
latency on the run's one clock, and the stretches of those above the SLO judged by the p95 the SLO names.

Why not per window: a window's p95 moved with the window's width, which is the span / 120 (correlate/windows.py).
frontend-bound's callers' TTFT hovers at the 2 s SLO under 48 streams: in 2 s windows its slow first tokens were 4
spikes (recurring), and a calm hour before it widened the windows to 10 s, whose p95s stayed above 2 s for 70 s: one
spike. Here the slow requests are points in time, as the failed ones are (failures.py):

* the requests are those the windows' percentiles are of: answered (outcome ok, or vLLM's spans alone, which it
  finished), with the latency on the run's clock (``windows.run_clock``: the callers' first; figures on another
  clock are another measure), timed by their start, those of a cold start (after a server start) left out;
* requests above the SLO within ``merge_gap_s`` of the previous one are one stretch, kept from ``slow_floor`` of
  them when the p95 of every request of that clock that started in it is above the SLO (more than the 5 % the p95
  allows were slow): a lone slow request among many fast ones is not an episode. Nothing is learnt from the run, so
  calm time around it, a narrower range or another window width change nothing.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from ..correlate.span_sources import ORIGIN_ENGINE
from ..correlate.windows import run_clock
from . import failures, figures
from .context import Context
from .tables import OUTCOME_OK

COLUMN = {"ttft": "ttft_s", "e2e": "e2e_s"}  # the requests' latency each signal is of
Q = 0.95  # the percentile the SLO names (TTFT p95, e2e p95)
TS = pl.Datetime("us", "UTC")


def answered(ctx: Context) -> tuple[pl.DataFrame, str | None]:
    """(requests, clock): the answered requests with a latency on the run's clock (``ts``, ``ttft_s``, ``e2e_s``,
    in start order, cold starts left out) and that clock; None when no request has a latency on any clock (read once
    per context)."""
    return ctx.memo("answered", lambda: _answered(ctx))


def _answered(ctx: Context) -> tuple[pl.DataFrame, str | None]:
    req = ctx.inputs.requests
    empty = pl.DataFrame(schema={"ts": TS, "ttft_s": pl.Float64, "e2e_s": pl.Float64})
    if not req.height or not {"ts_start", "outcome", "latency_clock", *COLUMN.values()} <= set(req.columns):
        return empty, None
    done = pl.col("outcome") == OUTCOME_OK
    if "origin" in req.columns:
        done = done | (pl.col("origin") == ORIGIN_ENGINE)
    ok = req.filter(done.fill_null(False))
    clock = run_clock(ok)
    if clock is None:
        return empty, None
    on = ok.filter((pl.col("latency_clock") == clock) & pl.col("ts_start").is_not_null())
    if ctx.cold:
        on = on.filter(figures.outside("ts_start", ctx.cold))
    out = on.select(
        pl.col("ts_start").cast(TS).alias("ts"), *[pl.col(c).cast(pl.Float64) for c in COLUMN.values()]
    )
    return out.sort("ts"), clock


def latency_stretches(ctx: Context, sig: str) -> pl.DataFrame | None:
    """The ``sig`` signal's stretches (the columns of ``stretches._series_stretches``: ``samples`` the slow requests,
    ``peak`` the p95 of the requests started in it, ``mean`` the slow share of them), None when no request has a
    latency on any clock (then the windows' percentiles)."""
    req, clock = answered(ctx)
    if clock is None:
        return None
    slo = ctx.slo.ttft_s if sig == "ttft" else ctx.slo.e2e_s
    col = COLUMN[sig]
    pts = req.filter(pl.col(col).is_not_null()).select("ts", pl.col(col).alias("v"))
    slow = pts.filter(pl.col("v") > slo)
    if not slow.height:
        return pl.DataFrame()
    runs = failures.runs_of(slow, ctx.th.merge_gap_s).with_row_index("_k")
    # every request started in a run (the runs are disjoint and in time order: the last run starting at or before it)
    k = pl.Series(runs["start"].search_sorted(pts["ts"], side="right")).cast(pl.Int64) - 1
    inside = (
        pts.with_columns(k.alias("_k"))
        .filter(pl.col("_k") >= 0)
        .join(runs.select(pl.col("_k").cast(pl.Int64), "end"), on="_k")
        .filter(pl.col("ts") <= pl.col("end"))
        .group_by("_k")
        .agg(pl.len().alias("started"), pl.col("v").quantile(Q, "linear").alias("p95"))
    )
    runs = runs.with_columns(pl.col("_k").cast(pl.Int64)).join(inside, on="_k", how="left")
    st = runs.filter((pl.col("n") >= ctx.th.slow_floor) & (pl.col("p95") > slo)).sort("start")
    # recovered when requests of that clock started after it and met the SLO (the next one after it was fast)
    return failures.as_stretches(st, pl.col("p95"), pl.col("n") / pl.col("started"), pts["ts"].max(), sig)


def kept_load(ctx: Context, sig: str, end, before: float | None) -> float | None:
    """The arrival rate over the ``load_end_tolerance_s`` after a latency stretch built from the requests, when
    it held ``recovery_load_ratio`` of the load before it (None otherwise, or for the windows' stretches). Its next
    samples are those requests, each under the SLO (a slow one would be in it): at that load it recovered, though
    arrivals fell later in ``recovery_window_s`` (frontend-bound's last spike at 04:20:36: the 48 streams ran 4.8 s
    more, ~100 requests under 2 s, then 2 streams; and after a stall a closed loop's arrivals dip on their own)."""
    if sig not in COLUMN or answered(ctx)[1] is None or not before:
        return None
    tol = timedelta(seconds=ctx.th.load_end_tolerance_s)
    hi = end + tol
    if ctx.span_hi is not None and hi > ctx.span_hi:
        return None  # not observed whole
    n = figures.between(
        ctx.by_time(ctx.inputs.requests, "ts_start"), "ts_start", end, hi, closed="right"
    ).height
    rate = n / tol.total_seconds()
    return rate if rate >= ctx.th.recovery_load_ratio * before else None


def baselines(ctx: Context, sig: str, starts: list) -> list[dict] | None:
    """Each latency episode's baseline from the requests themselves: the p95 of the answered requests of the run's
    clock started in the ``baseline_lookback_s`` before it, outside every slow stretch of the signal (``value``
    None when none started there), with that clock and their count; None when no request has a latency on any
    clock (then the windows' p95s). A median of window p95s moved with the window's width."""
    req, clock = answered(ctx)
    if clock is None or sig not in COLUMN:
        return None
    pts = req.filter(pl.col(COLUMN[sig]).is_not_null()).select("ts", pl.col(COLUMN[sig]).alias("v"))
    st = latency_stretches(ctx, sig)
    if st is not None and st.height:  # the slow stretches' requests are no baseline
        k = pl.Series(st["start"].search_sorted(pts["ts"], side="right")).cast(pl.Int64) - 1
        end = st["end"].gather(k.clip(0))
        pts = pts.filter(~((k >= 0) & (pts["ts"] <= end)))
    look, ts = timedelta(seconds=ctx.th.baseline_lookback_s), pts["ts"]
    out = []
    for start in starts:
        lo, hi = ts.search_sorted(start - look, side="left"), ts.search_sorted(start, side="left")
        v = pts["v"].slice(lo, hi - lo)
        out.append(
            {
                "value": v.quantile(Q, "linear") if v.len() else None,
                "clock": clock,
                "requests": v.len(),
                "rule": f"p95 of the answered requests started in the {ctx.th.baseline_lookback_s:g} s before it, "
                "outside every slow stretch",
            }
        )
    return out
