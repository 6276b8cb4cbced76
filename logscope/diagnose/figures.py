"""Figures over a time range: server state, request latencies, arrivals, token lengths.

Shared by episodes (during vs before), ladder steps and the cold-start window, so every part of
the diagnosis measures a range the same way.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from .tables import OUTCOME_OK, SERVER_STATE_AGGS


def _in(df: pl.DataFrame, col: str, lo: datetime | None, hi: datetime | None, closed: str = "both") -> pl.DataFrame:
    if lo is None or hi is None or df.height == 0:
        return df.clear()
    return df.filter(pl.col(col).is_between(lo, hi, closed=closed))


def server_state(series: pl.DataFrame, lo, hi, replica: str | None = None) -> dict:
    s = _in(series, "ts", lo, hi)
    if replica is not None and s.height and (s["replica"] == replica).any():
        s = s.filter(pl.col("replica") == replica)
    if s.height == 0:
        return {"running_max": None, "running_mean": None, "waiting_max": None, "waiting_mean": None,
                "kv_max": None, "kv_mean": None, "gen_tps_mean": None, "samples": 0}
    row = s.select(
        *SERVER_STATE_AGGS,
        pl.col("gen_tps").mean().alias("gen_tps_mean"),
        pl.len().alias("samples"),
    ).row(0, named=True)
    return row


def requests(req: pl.DataFrame, lo, hi, exclude: list[tuple] | None = None) -> dict:
    """Request figures for requests that *started* in [lo, hi]; ``exclude`` drops cold windows."""
    r = _in(req, "ts_start", lo, hi)
    for a, b in exclude or []:
        r = r.filter(~pl.col("ts_start").is_between(a, b, closed="both"))
    dur = (hi - lo).total_seconds() if lo is not None and hi is not None else 0.0
    if r.height == 0:
        return {"requests": 0, "arrival_rate": 0.0 if dur > 0 else None, "ttft_p50": None, "ttft_p95": None,
                "e2e_p50": None, "e2e_p95": None, "success_share": None, "prompt_tokens_mean": None,
                "max_tokens_mean": None, "output_tokens_mean": None, "output_tokens_sum": None, "errors": 0,
                "timeouts": 0, "known_outcomes": 0}
    known = r.filter(pl.col("outcome") != "unknown")
    row = r.select(
        pl.len().alias("requests"),
        pl.col("ttft_s").quantile(0.5, "linear").alias("ttft_p50"),
        pl.col("ttft_s").quantile(0.95, "linear").alias("ttft_p95"),
        pl.col("e2e_s").quantile(0.5, "linear").alias("e2e_p50"),
        pl.col("e2e_s").quantile(0.95, "linear").alias("e2e_p95"),
        pl.col("prompt_tokens").mean().alias("prompt_tokens_mean"),
        pl.col("max_tokens").mean().alias("max_tokens_mean"),
        pl.col("output_tokens").mean().alias("output_tokens_mean"),
        pl.col("output_tokens").sum().alias("output_tokens_sum"),
        (pl.col("outcome") == "error").sum().alias("errors"),
        (pl.col("outcome") == "timeout").sum().alias("timeouts"),
    ).row(0, named=True)
    row["arrival_rate"] = row["requests"] / dur if dur > 0 else None
    row["known_outcomes"] = known.height
    row["success_share"] = (known.filter(pl.col("outcome") == OUTCOME_OK).height / known.height) if known.height else None
    if not r["output_tokens"].is_not_null().any():
        row["output_tokens_sum"] = None
    return row


def preemptions(pre: pl.DataFrame, lo, hi, replica: str | None = None) -> int | None:
    """Preemptions counted by samples stamped in (lo, hi] (a sample reports the interval ending at it)."""
    if pre.height == 0 or lo is None or hi is None:
        return None
    p = pre.filter(pl.col("ts").is_between(lo, hi, closed="right"))
    if replica is not None:
        p = p.filter(pl.col("replica") == replica)
    return int(p["preemptions"].sum())


def windows_sum(win: pl.DataFrame, col: str, lo, hi) -> int | None:
    if win.height == 0 or col not in win.columns or win[col].null_count() == win.height:
        return None
    w = _in(win, "ts", lo, hi)
    return int(w[col].fill_null(0).sum())
