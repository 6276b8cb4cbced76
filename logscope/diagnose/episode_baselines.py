"""An episode's baseline: the median of its primary signal over the lookback before it (on its replica for a
server signal; a latency's from the requests, ``slow.baselines``), every episode's at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from . import figures, slow
from .context import Context

# the column each signal's baseline is the median of (a death has none)
BASELINE_OF = {
    "preemptions": "preemptions",
    "kv_pressure": "kv",
    "queue": "waiting",
    "stall": "gen_tps",
    "errors": "errors",
    "retries": "client_retries",
    "orphans": "orphaned",
    "ttft": "ttft_p95",
    "e2e": "e2e_p95",
}
SERVER_SIGNALS = ("preemptions", "kv_pressure", "queue", "stall")  # their baseline is their replica's


def baseline(ctx: Context, signal: str, replica: str | None, start: datetime) -> float | None:
    """The median of the signal over [start - baseline_lookback_s, start), on the replica for a server
    signal (``baselines`` gives every episode's at once; this is its rule, and its way for unsorted times)."""
    if signal not in BASELINE_OF:
        return None
    of_requests = slow.baselines(ctx, signal, [start])  # a latency's, from the requests
    if of_requests is not None:
        return of_requests[0]["value"]
    col, look = BASELINE_OF[signal], timedelta(seconds=ctx.th.baseline_lookback_s)
    s = figures.between(ctx.by_time(_baseline_frame(ctx, signal)), "ts", start - look, start, closed="left")
    if signal in SERVER_SIGNALS:
        s = s.filter(pl.col("replica") == (replica or ""))
    if not s.height:  # (an empty frame may lack the column)
        return _baseline_value(ctx, signal, 0, None, 0)
    return _baseline_value(ctx, signal, s.height, s[col].median(), s[col].drop_nulls().len())


def _baseline_frame(ctx: Context, signal: str) -> pl.DataFrame:
    """The samples a signal's baseline is read from."""
    if signal == "preemptions":
        return ctx.pre if ctx.pre.height else ctx.warnings
    return ctx.server if signal in SERVER_SIGNALS else ctx.inputs.windows


def _baseline_value(ctx: Context, signal: str, rows: int, median, count: int) -> float | None:
    """The baseline from the lookback's ``rows`` samples, their ``median`` and ``count`` of values: no sample
    of a counted preemption is a baseline of 0."""
    if signal == "preemptions":
        return float(median) if rows else (0.0 if ctx.pre.height else None)
    return float(median) if rows and count else None


def baselines(ctx: Context, heads: list[dict]) -> list[float | None]:
    """``baseline`` of every episode: the episodes of one signal in a few calls."""
    look, one = timedelta(seconds=ctx.th.baseline_lookback_s), timedelta(microseconds=1)
    out: list[float | None] = [None] * len(heads)
    by_signal: dict[str, list[int]] = {}
    for k, h in enumerate(heads):
        if h["primary"] in BASELINE_OF:
            by_signal.setdefault(h["primary"], []).append(k)
    for signal, ks in by_signal.items():
        of_requests = slow.baselines(ctx, signal, [heads[k]["start"] for k in ks])
        if of_requests is not None:  # a latency's baseline from the requests, not from windows of a width
            for k, b in zip(ks, of_requests, strict=True):
                out[k], heads[k]["baseline_of"] = b["value"], b
            continue
        col, frame = BASELINE_OF[signal], _baseline_frame(ctx, signal)
        # [start - look, start): times are whole microseconds; a bounded batch of episodes at a time
        parts = (
            figures.gathered(
                ctx.by_time(frame),
                "ts",
                [(heads[k]["start"] - look, heads[k]["start"] - one) for k in ks],
                columns=["replica", col],
            )
            if frame.height
            else iter([frame])
        )
        if parts is None:  # times not sortable: one episode at a time
            for k in ks:
                out[k] = baseline(ctx, signal, heads[k]["replica"], heads[k]["start"])
            continue
        want = pl.DataFrame(
            {"_k": range(len(ks)), "_want": [heads[k]["replica"] or "" for k in ks]},
            schema={"_k": pl.Int64, "_want": pl.String},
        )
        got = {}
        for rows in parts:
            if rows.height and signal in SERVER_SIGNALS:
                rows = rows.join(want, on="_k").filter(pl.col("replica") == pl.col("_want"))
            if rows.height:
                got.update(
                    {
                        r["_k"]: r
                        for r in rows.group_by("_k")
                        .agg(
                            pl.len().alias("n"),
                            pl.col(col).median().alias("m"),
                            pl.col(col).count().alias("c"),
                        )
                        .iter_rows(named=True)
                    }
                )
        for i, k in enumerate(ks):
            r = got.get(i, {"n": 0, "m": None, "c": 0})
            out[k] = _baseline_value(ctx, signal, r["n"], r["m"], r["c"])
    return out
