"""An episode's details (``Episode.details``): its companions, the requests before and during it, the
window sums over it (``WINDOW_SUMS``), V0's preemption warnings, the preemptions, the client's load phases
overlapping it (``phases_many``, every episode's in one join), and a death's own figures.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import polars as pl

from ..scalars import int_or_none
from . import figures, preemption_count
from .context import Context
from .records import Episode


def phases_many(phases: pl.DataFrame, ranges: list[tuple]) -> list[list[dict]]:
    """The client's load phases overlapping each range, by start (one join for every episode)."""
    out: list[list[dict]] = [[] for _ in ranges]
    if not phases.height or not ranges:
        return out
    q = pl.DataFrame(
        {
            "_k": range(len(ranges)),
            "_lo": [figures.epoch_us(a) for a, _ in ranges],
            "_hi": [figures.epoch_us(b) for _, b in ranges],
        },
        schema={"_k": pl.Int64, "_lo": pl.Int64, "_hi": pl.Int64},
    )
    ph = phases.with_row_index("_r").with_columns(
        pl.col("ts_start").to_physical().alias("_s"), pl.col("ts_end").to_physical().alias("_t")
    )
    hits = q.join_where(ph, pl.col("_s") <= pl.col("_hi"), pl.col("_t") >= pl.col("_lo")).sort(
        "_k", "ts_start", "_r"
    )
    for r in hits.iter_rows(named=True):
        out[r["_k"]].append(
            {
                "phase": r["phase"],
                "mode": r["mode"],
                "value": r["value"],
                "start": r["ts_start"],
                "end": r["ts_end"],
            }
        )
    return out


# window columns summed over each episode (details)
WINDOW_SUMS = [
    "server_requests",
    "client_attempts",
    "client_retries",
    "gateway_retries",
    "gateway_5xx",
    "gateway_499",
    "server_aborts",
    "orphaned",
    "timeouts",
    "errors",
    "arrivals",
]


def details(
    ctx: Context,
    ep: Episode,
    companions: list[dict],
    before: dict,
    during: dict,
    lead: dict,
    death,
    sums: dict[str, int],
    pre: int | None,
    phases: list[dict],
) -> dict:
    start, end = ep["start"], ep["end"]
    d: dict = {
        "companions": companions,
        "requests_during": during,
        "requests_before": before,
        "arrival_rate_lead_in": lead["arrival_rate"],
    }
    w = figures.between(
        ctx.by_time(ctx.warnings), "ts", start - timedelta(seconds=ctx.th.v0_warning_merge_s), end
    )
    if w.height:
        cum = w["cumulative_preemptions"].max()
        d["v0_preemption_warnings"] = {
            "lines": w.height,
            "last_cumulative": int_or_none(cum),
            "modes": sorted(set(w["preemption_mode"].drop_nulls().to_list())),
            "note": "V0 prints one warning per 50 preemptions",
        }
    if ep["signal"] == "preemptions" and not ctx.pre.height:  # counted from those warnings: exact or a floor
        mine = figures.between(ctx.by_time(ctx.warnings), "ts", start, end)
        # SGLang's retractions count the requests they name: no counter, no floor
        v0 = pl.col("preemption_mode").fill_null("") != "RETRACT"
        mine = mine.filter((pl.col("replica") == (ep["replica"] or "")) & v0)
        by = preemption_count.counted_by(mine.height, mine["cumulative_preemptions"].null_count())
        if by is not None:
            d["preemptions_counted_by"] = by
    if pre is not None and ep["signal"] != "preemptions":
        d["preemptions"] = pre
    arr = sums.get("arrivals")
    d.update((k, v) for k, v in sums.items() if k != "arrivals")
    if arr and d.get("server_requests") is not None:
        d["amplification"] = d["server_requests"] / arr
    if phases:
        d["phases"] = phases
    if death is not None:
        d["crash"] = {
            "kinds": death.kinds,
            "pid": death.pid,
            "message": death.message,
            "last_line": death.last_line_ts,
            "restart": death.restart_ts,
            "ready": death.ready_ts,
            "new_pid": death.new_pid,
            "downtime_s": death.downtime_s,
            "at_startup": death.at_startup,
            "notes": death.notes,
            "engine": death.engine,
            "same_server": death.same_server.words() if death.same_server is not None else None,
            "same_server_state": death.same_server.state if death.same_server is not None else None,
        }
        gw = figures.between(ctx.gateway_trouble, "ts", death.ts, end)
        if gw.height:
            d["crash"]["gateway_first_error"] = gw["ts"].min()
            d["crash"]["gateway_errors_by_kind"] = dict(sorted(Counter(gw["kind"].to_list()).items()))
    d["output_lengths"] = {k: during[k] for k in ("max_tokens_mean", "output_tokens_mean")}
    return d
