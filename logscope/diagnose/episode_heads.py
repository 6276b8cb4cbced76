"""Each episode's stretches (``stretches.grouped``) summed up, its head: the primary signal (the first of
``PRIORITY`` it holds) and its figures, its companions, and the time ranges its figures cover (the lead-in and the
baseline window before it). The episode is named after its most telling signal and timed by that signal; the
others are listed as its companions.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from ..scalars import int_value
from .context import Context
from .stretches import REQUEST_SIGNALS

PRIORITY = (
    "crash",
    "stall",
    "preemptions",
    "kv_pressure",
    "queue",
    "orphans",
    "retries",
    "errors",
    "ttft",
    "e2e",
)
COUNTED = ("preemptions", "errors", "retries", "orphans")


def heads(ctx: Context, rows: pl.DataFrame) -> list[dict]:
    """Each episode's stretches (``grouped``) summed up: its primary signal (the first of PRIORITY it holds),
    the primary's figures, its companions, and the time ranges its figures cover. All episodes in a few calls
    (a day holds thousands: a few filters each took a second)."""
    if rows.height == 0:
        return []
    n = int_value(rows["_e"].max()) + 1
    rank = {sig: i for i, sig in enumerate(PRIORITY)}
    rows = rows.with_columns(pl.col("signal").replace_strict(rank, return_dtype=pl.Int64).alias("_p"))
    rows = rows.with_columns(
        (pl.col("_p") == pl.col("_p").min().over("_e")).alias("_primary"),
        ~pl.col("signal").is_in(REQUEST_SIGNALS).alias("_core"),
    )
    prim = pl.col("_primary")
    core = pl.col("_core")
    figs = (
        rows.group_by("_e")
        .agg(
            pl.col("_p").min(),
            pl.col("replica").filter(prim).first(),
            pl.col("start").filter(prim).min(),
            pl.col("end").filter(prim).max(),
            pl.col("total").filter(prim).sum(),
            pl.col("samples").filter(prim).sum(),
            pl.col("peak").filter(prim).max(),
            pl.col("last_sample").filter(prim).max(),
            # the server signals' span (the queue often builds before the first preemption), else the group's
            pl.coalesce(pl.col("start").filter(core).min(), pl.col("start").min()).alias("core_start"),
            pl.coalesce(pl.col("end").filter(core).max(), pl.col("end").max()).alias("core_end"),
        )
        .sort("_e")
    )
    heads = []
    for r, companions in zip(figs.iter_rows(named=True), _companions(rows, n), strict=True):
        primary, start, end = PRIORITY[r["_p"]], r["start"], r["end"]
        ranges = _ranges(ctx, start)
        # a death: the state in the lead-in too (what the server was running when it died)
        lo = ranges["lead"][0] if primary == "crash" else start
        heads.append(
            {
                "primary": primary,
                "replica": r["replica"] or None,
                "start": start,
                "end": end,
                "ranges": ranges,
                "total": r["total"],
                "samples": r["samples"],
                "peak": r["peak"],
                "last_sample": r["last_sample"],
                "companions": companions,
                # server state over the incident as the server saw it (all its server signals), not over the request
                # signals around it (an error rate may last all day)
                "state_range": (min(lo, r["core_start"]), max(end, r["core_end"])),
                "state_replica": r["replica"]
                or None,  # narrowed to it when its samples are there (figures.server_state)
            }
        )
    return heads


def _ranges(ctx: Context, start: datetime) -> dict:
    """The lead-in (merge_gap_s before the start, where a trigger such as a burst shows) and the baseline
    window before it (baseline_lookback_s, not before the observed span)."""
    lead = timedelta(seconds=ctx.th.merge_gap_s)
    lo = start - lead - timedelta(seconds=ctx.th.baseline_lookback_s)
    if ctx.span_lo is not None:
        lo = max(lo, ctx.span_lo)
    hi = start - lead
    return {"lead": (start - lead, start), "before": (lo, hi) if hi > lo else (None, None)}


def _companions(rows: pl.DataFrame, n: int) -> list[list[dict]]:
    """Each episode's other signals (``rows``: the stretches of every episode ``_e``, ``_primary`` marking its
    primary signal's), one entry per signal: its earliest start, latest end, peak, count."""
    out: list[list[dict]] = [[] for _ in range(n)]
    rows = (
        rows.filter(~pl.col("_primary"))
        .group_by("_e", "signal", maintain_order=True)
        .agg(
            pl.col("start").min(),
            pl.col("end").max(),
            pl.col("peak").max(),
            pl.col("total").sum(),
            pl.col("samples").sum(),
            pl.col("last_sample").max(),
        )
        .sort(["_e", "start", "signal"])
    )
    for r in rows.iter_rows(named=True):
        c = {
            "signal": r["signal"],
            "start": r["start"],
            "end": r["end"],
            "peak": r["peak"],
            "count": int(round(r["total"])) if r["signal"] in COUNTED else int(r["samples"]),
        }
        if (
            r["signal"] not in REQUEST_SIGNALS
            and r["last_sample"] is not None
            and r["last_sample"] <= r["end"]
        ):
            # a server signal with no sample after its stretch: still abnormal when its samples end (public-2 n19:
            # the KV cache fell back under 90 % while the queue rose to 233 on the last line). The episode has
            # not recovered while it has not (request signals end with the arrivals: the load decides those)
            c["to_the_end"] = True
        out[r["_e"]].append(c)
    return out
