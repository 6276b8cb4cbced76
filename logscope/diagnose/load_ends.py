"""Where the load or the server an episode ran under ended: the last arrival of its replica's load, a client's load
phase that paused as it ended, the server's graceful stop while it was under way (episode_class.classify reads them), and
whether an episode was still on when the observation stopped (``open_end``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from ..scalars import time_or_none
from .context import Context
from .records import Episode


def last_arrival_at(ctx: Context, ep: Episode) -> datetime | None:
    """The last arrival of the load the episode's replica served, up to the recovery window after the episode: in a
    fleet, a calm replica's requests are not this replica's load (its vLLM's 'Received request' / 'Added request'
    lines name the replica); else the folder's arrivals. Arrivals after that window are another load: a backlog that
    drained with none coming is one whether or not the folder holds a calm hour after it (kv-short with the calm run
    laid after it read 'sustained': its last arrival was then the calm run's, 13 minutes later)."""
    sr, rep = ctx.inputs.server_requests, ep.get("replica")
    end = ep["end"] + timedelta(seconds=ctx.th.recovery_window_s)
    if rep and sr.height and sr["replica"].n_unique() > 1:
        t = pl.coalesce("received_ts", "added_ts")
        mine = sr.filter((pl.col("replica") == rep) & (t <= end)).select(t.max()).item()
        if mine is not None:
            return mine
    req = ctx.inputs.requests
    if ctx.load_end is None or not req.height:
        return ctx.load_end
    return time_or_none(req.filter(pl.col("ts_start") <= end)["ts_start"].max())


def phase_pause(ctx: Context, start: datetime, end: datetime) -> datetime | None:
    """The end of a client's load phase inside the episode (up to load_end_tolerance_s after it) after which that
    client started no phase for recovery_window_s: its load paused as the episode ended (vllm bench serve's
    pause between ladder steps). A phase followed at once by the next (a burst back to its base rate) is none."""
    ph = ctx.inputs.phases
    if not ph.height or "client" not in ph.columns:
        return None
    th = ctx.th
    hi = end + timedelta(seconds=th.load_end_tolerance_s)
    for r in ph.filter(pl.col("ts_end").is_between(start, hi)).sort("ts_end").iter_rows(named=True):
        nxt = ph.filter(
            (pl.col("client") == r["client"])
            & (pl.col("ts_start") >= r["ts_start"])
            & (pl.col("ts_end") > r["ts_end"])
            & (pl.col("ts_start") < r["ts_end"] + timedelta(seconds=th.recovery_window_s))
        )
        if not nxt.height:
            return r["ts_end"]
    return None


def stop_in(ctx: Context, ep: Episode | dict) -> datetime | None:
    """The graceful shutdown of the episode's server while it was under way (up to merge_gap_s after its last
    abnormal sample: the stats stop with the server), if there was one."""
    gap = timedelta(seconds=ctx.th.merge_gap_s)
    return next(
        (
            s["ts"]
            for s in ctx.life.shutdowns
            if (s["replica"] or None) == ep["replica"] and ep["start"] <= s["ts"] <= ep["end"] + gap
        ),
        None,
    )


def open_end(ep: Episode) -> bool:
    """Still on when the observation stops: a death with no restart before the logs end (its end is theirs), or
    an episode 'still abnormal when the logs end' (spike, cut by --until inside its 23 s: 'it lasted 13 s' was its
    length to the range's end). Not one that ended with the load or a graceful stop: those lengths were measured."""
    rule = (ep.get("decided_by") or {}).get("rule")
    return (rule == "death" and not ep["recovered"]) or rule == "ends_abnormal"
