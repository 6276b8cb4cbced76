"""The callers' clock beside the engine's over the load itself, not only inside an episode or a ladder step.

A queue in front of the engine (a gateway's rate limit, the API server process) can keep the callers waiting far
longer than vLLM's own histogram shows while no engine signal moves and the callers' latency stays under a lax SLO:
no episode forms, and the gap was never measured (gateway-queue with ``--slo-ttft 60``: "Nothing alarming" over
callers' TTFT p95 33.7 s against the engine's 0.45 s). So where a folder has no ladder, the gap is measured over
each of the client's load phases (one client's phases, as it logged them), or over the whole load when no phase is
logged, over the requests that were answered (the engine's histograms count finished requests; its window runs to
the last answer of a request the phase sent), with the same rule and thresholds as a step's (``clockgap``): large when the callers' p95 is at least
``clock_gap_min_s`` above the upper bound of the engine p95's histogram bucket and at least ``clock_gap_ratio``
times that bound. A ladder's steps are its phases already (``clockgap.claims`` measures them).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ..resources import time_range
from . import clockgap, gave_up
from .claims import Claim, Fact
from .context import Context
from .records import Episode

SCOPE = "load"  # the claims' ``scope`` fact: measured over the load, not over an episode or a step


def claims(
    ctx: Context,
    req: pl.DataFrame,
    gw: pl.DataFrame | clockgap.ByTime | None,
    gw_errors: pl.DataFrame | clockgap.ByTime | None,
    timeouts: pl.DataFrame | clockgap.ByTime | None = None,
    eps: list[Episode] | None = None,
    rng: time_range.Range = time_range.ALL,
) -> list[Claim]:
    """The gap claims of each load phase (or of the whole load), each with the ``scope`` fact ``load``
    (``eps``: the episodes, whose client's phases are measured first; ``rng``: the range analysed, which cuts
    the phases: their requests and the engine's samples outside it are not read, so neither are their times)."""
    hist = getattr(ctx, "hist", None)
    if hist is None or not req.height or "ts_start" not in req.columns:
        return []
    out = []
    # the callers that gave up, among all the phase's: the answered ones alone are its survivors (gave_up)
    every = req
    if "outcome" in req.columns:  # answered requests: the engine's histograms count finished requests only
        req = req.filter(pl.col("outcome").is_null() | (pl.col("outcome") == "ok"))
    ranges = _clipped(_ranges(ctx.inputs.phases, req, eps or []), rng)
    spans = [(lo, hi) for _, _, lo, hi in ranges]
    gave = gave_up.per_range(
        clockgap.ByTime.of(every, "ts_start", gave_up.READS),
        spans,
        clockgap.ByTime.of(timeouts, "ts_start", ("timeout_s",)),
        clockgap.RANGE,
    )
    by_start = clockgap.ByTime.of(req, "ts_start")
    single = clockgap.single_attempts(by_start, spans)
    at_gw = clockgap.at_gateway(
        clockgap.ByTime.of(gw, "ts_start"), clockgap.ByTime.of(gw_errors, "ts"), spans
    )
    # the engine's window runs to the last answer of a request the phase sent: the slowest answers (a queue's
    # tail) arrive after the phase ends, and the engine's histogram counts a request when it finishes
    last = (
        {
            i: t
            for rows in by_start.within(spans)
            for i, t in rows.group_by(clockgap.RANGE).agg(pl.col("ts_end").max()).iter_rows()
        }
        if "ts_end" in req.columns and by_start is not None
        else {}
    )
    for i, (where, key, lo, hi) in enumerate(ranges):
        ends = last.get(i)
        measured = hist.measure_all(lo, max(hi, ends) if ends is not None else hi)
        fig: dict = {"ts_start": lo, "ts_end": hi}
        for f in clockgap.FIGURES:
            h = measured.get(f)
            callers = single[i].get(f, (None, 0, None))[0]
            if h is None or h.get("p95") is None:
                continue
            fig.update(
                {
                    f"{f}_p95": callers,
                    f"{f}_p95_engine": h["p95"],
                    f"{f}_p95_engine_bucket": h["p95_bucket"],
                    f"{f}_p95_engine_lo": h["p95_bucket_lo"],
                    f"{f}_p95_engine_hi": h["p95_bucket_hi"],
                }
            )
        for c in clockgap._of(fig, where, key, ctx.th, single[i], at_gw[i], gave[i]):
            c.facts.append(Fact("scope", SCOPE))
            out.append(c)
    return out


def _ranges(phases: pl.DataFrame, req: pl.DataFrame, eps: list[Episode]) -> list[tuple[str, str, Any, Any]]:
    """(where, claim key, start, end) of each load phase of one client (its phases overlap no other's), else of
    the whole load: its first request's start to its last's. The client is the one whose phases hold an episode
    or lie nearest one, then the one that logged most phases: another client's calm load an hour before (its one
    phase against the incident's one) must not take the incident's phases' place (tests/test_metamorphic_clock_gap.py)."""
    ph = (
        phases.filter(pl.col("ts_start").is_not_null() & pl.col("ts_end").is_not_null())
        if phases.height
        else phases
    )
    if ph.height:
        # each phase's distance to the nearest episode (0: it holds one), in µs; null with no episode
        us = lambda x: x.dt.total_microseconds()  # noqa: E731
        near = [
            pl.max_horizontal(
                pl.lit(0),
                us(pl.lit(e["start"]) - pl.col("ts_end")),
                us(pl.col("ts_start") - pl.lit(e["end"])),
            )
            for e in eps
            if e.get("start") is not None and e.get("end") is not None
        ]
        dist = pl.min_horizontal(near) if near else pl.lit(None, pl.Int64)
        src = (
            ph.group_by("source")
            .agg(pl.len(), dist.min().alias("near"))
            .sort(["near", "len", "source"], descending=[False, True, False], nulls_last=True)["source"][0]
        )
        rows = ph.filter(pl.col("source") == src).sort("ts_start").iter_rows(named=True)
        return [
            (
                f"phase {r['phase']} ({_level(r['mode'], r['value'])})"
                if r.get("value") is not None
                else f"phase {r['phase']}",
                f"phase.{r['phase']}",
                r["ts_start"],
                r["ts_end"],
            )
            for r in rows
        ]
    lo, hi = req["ts_start"].min(), req["ts_start"].max()
    return [] if lo is None or hi is None else [("the load", "load", lo, hi)]


def _clipped(
    ranges: list[tuple[str, str, Any, Any]], rng: time_range.Range
) -> list[tuple[str, str, Any, Any]]:
    """Each phase cut to the range analysed, its ``where`` saying so: a phase of 636 callers narrowed to the 272
    inside --since/--until read "35 of 272 callers of phase 0" with the whole phase's start and end beside it."""
    out = []
    for where, key, lo, hi in ranges:
        a = lo if rng.since is None or lo is None else max(lo, rng.since)
        b = hi if rng.until is None or hi is None else min(hi, rng.until)
        if a is not None and b is not None and a > b:
            continue  # the phase lies outside the range
        out.append((where if (a, b) == (lo, hi) else f"{where} within the range analysed", key, a, b))
    return out


def _level(mode: str | None, value: float) -> str:
    """A phase's load as the client set it: '4 requests/s', 'concurrency 8'."""
    if mode == "rate":
        return f"{value:g} request{'' if value == 1 else 's'}/s"
    return f"{mode or 'level'} {value:g}"
