"""The ladder's steps: where traffic climbs in steps, and at which levels.

Steps come from the client's phases (a load generator's concurrency or rate steps; one bench file
per step), else they are detected from in-flight counts: windows whose mean in-flight level
(log2-rounded, so 8 and 9 are one level but 8 and 16 are not) stays the same for at least
``ladder_min_step_s``. Either way a ladder needs ``ladder_min_steps`` steps whose level never goes
down, at ``ladder_min_steps`` distinct levels (a burst and its return, like 2 → 48 → 2, is not a ladder:
it is an episode).
"""

from __future__ import annotations

import math
from datetime import timedelta

import polars as pl

from .context import Context


def steps(ctx: Context) -> tuple[list[dict], str]:
    ph = ctx.inputs.phases.filter(pl.col("value").is_not_null()).sort(["ts_start", "source", "phase"])
    if ph.height:
        # a ladder is one client's climb in one mode: another client's phases (a calm run of an hour before, at a
        # rate) are no step of it. Of the clients' climbs, the one with most steps (the first of equals)
        best: list[dict] = []
        # (one client's steps may come one file each: vllm bench serve's result per concurrency)
        for (_, _), part in ph.group_by("client", "mode", maintain_order=True):
            rows = [
                {
                    "label": r["phase"],
                    "value": float(r["value"]),
                    "mode": r["mode"] or "concurrency",
                    "start": r["ts_start"],
                    "end": r["ts_end"],
                    "source": r["source"],
                    "client": r["client"],
                }
                for r in part.iter_rows(named=True)
            ]
            got = _climb(rows, ctx.th.ladder_min_steps, ctx.th.ladder_min_step_s)
            if len(got) > len(best):
                best = got
        return best, "client_phases"
    return _climb(_inflight_steps(ctx), ctx.th.ladder_min_steps, ctx.th.ladder_min_step_s), "inflight"


def _climb(rows: list[dict], min_steps: int, min_step_s: float = 0.0) -> list[dict]:
    """The leading run of steps whose level never goes down, when it holds enough distinct levels to be
    a ladder (consecutive phases at one level are one step). A climb the load then steps back down from
    for a whole step (a phase below its top lasting ``min_step_s`` or more) was a burst and its return, not
    a ladder: an earlier calm run at a lower level once made 1 -> 2 -> 48 -> 2 read as a ladder."""
    run: list[dict] = []
    for i, r in enumerate(rows):
        if run and r["value"] < run[-1]["value"]:
            top = run[-1]["value"]
            if any(
                x["value"] < top and (x["end"] - x["start"]).total_seconds() >= min_step_s
                for x in rows[i:]
                if x["start"] is not None and x["end"] is not None
            ):
                return []
            break
        if run and r["value"] == run[-1]["value"]:
            run[-1] = {**run[-1], "end": max(run[-1]["end"], r["end"])}
            continue
        run.append(dict(r))
    return run if len(run) >= min_steps else []


PLATEAU_BINS_PER_OCTAVE = 8  # in-flight levels within ~4.5 % of each other are one level
PLATEAU_MERGE_RATIO = 1.15  # neighbouring plateaus closer than this are one step
STEP_RATIO = 1.25  # each detected step must hold at least this much more in flight than the previous one
STATS_HOLD_S = 15.0  # a stats sample stands for the windows after it up to this long (vLLM logs every 5-10 s)


def _inflight_steps(ctx: Context) -> list[dict]:
    """Plateaus of the client's (else the gateway's, else the server's request lines', else its running +
    waiting) in-flight count.

    A closed-loop load generator holds exactly c requests in flight, so its steps are flat; an open-loop
    overload makes the count ramp up as latency grows, which gives no plateau long enough to be a step.
    """
    w = ctx.inputs.windows
    if w.height == 0:
        return []
    ws = ctx.inputs.window_s
    # the server's own count when no request log gives one: running + waiting (a closed loop of c clients keeps
    # c requests at the server, queued or not: V0 lab ladder at c=32, 15-19 running + 8-18 waiting), each stats
    # sample holding for the windows until the next (stats lines come every 5-10 s, windows are shorter)
    fill = max(1, math.ceil(STATS_HOLD_S / ws)) if ws else 1
    w = w.with_columns(
        (pl.col("running_mean") + pl.col("waiting_mean").fill_null(0))
        .forward_fill(limit=fill)
        .alias("server_load")
    )
    col = next(
        (
            c
            for c in ("inflight_client", "inflight_gateway", "inflight_server", "server_load")
            if w[c].null_count() < w.height and (w[c].fill_null(0) > 0).any()
        ),
        None,
    )
    if col is None:
        return []
    d = w.select("ts", pl.col(col).fill_null(0).alias("v")).with_columns(
        pl.col("v").rolling_median(3, min_samples=1, center=True).alias("v")
    )
    d = d.with_columns(
        pl.when(pl.col("v") >= 0.5)
        .then((pl.col("v").log(2) * PLATEAU_BINS_PER_OCTAVE).round(0))
        .otherwise(None)
        .alias("lvl")
    )
    d = d.with_columns(
        ((pl.col("lvl") != pl.col("lvl").shift(1)).fill_null(True) | pl.col("lvl").is_null())
        .cum_sum()
        .alias("_run")
    )
    segs = (
        d.filter(pl.col("lvl").is_not_null())
        .group_by("_run", maintain_order=True)
        .agg(
            pl.col("ts").min().alias("start"),
            (pl.col("ts").max() + timedelta(seconds=ws)).alias("end"),
            pl.col("v").median().alias("value"),
        )
    )
    segs = segs.filter((pl.col("end") - pl.col("start")).dt.total_seconds() >= ctx.th.ladder_min_step_s)
    rows: list[dict] = []
    for r in segs.iter_rows(named=True):
        v = float(r["value"])
        if rows and max(v, rows[-1]["value"]) <= PLATEAU_MERGE_RATIO * min(v, rows[-1]["value"]):
            rows[-1]["end"] = r["end"]
            continue
        rows.append(
            {
                "label": None,
                "value": v,
                "mode": "inflight",
                "start": r["start"],
                "end": r["end"],
                "source": col,
            }
        )
    out: list[dict] = []
    for r in rows:  # keep only clear steps up
        if out and r["value"] < STEP_RATIO * out[-1]["value"]:
            break
        out.append({**r, "value": round(r["value"], 1)})
    return out
