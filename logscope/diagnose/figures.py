"""Figures over a time range: server state, request latencies, arrivals, token lengths.

Shared by episodes (during vs before), ladder steps and the cold-start window, so every part of
the diagnosis measures a range the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from .tables import OUTCOME_OK, SERVER_STATE_AGGS, TS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def epoch_us(t: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (the physical value of a TS column)."""
    return (t - _EPOCH) // _US


def between(df: pl.DataFrame, col: str, lo: datetime | None, hi: datetime | None,
            closed: str = "both") -> pl.DataFrame:
    """Rows of ``df`` with ``col`` in [lo, hi] (``closed`` as in ``is_between``), in their order.

    Episodes, steps and windows ask this hundreds of times of the same frames: a datetime literal costs
    ~100 µs to build, so times are compared as epoch microseconds, and a column sorted without nulls is
    sliced at two binary searches (the rows and order a filter would give)."""
    if lo is None or hi is None or df.height == 0:
        return df.clear()
    s = df[col]
    if s.dtype != TS or lo.tzinfo is None or hi.tzinfo is None:
        return df.filter(pl.col(col).is_between(lo, hi, closed=closed))
    a, b = epoch_us(lo), epoch_us(hi)
    if s.null_count() == 0 and s.is_sorted():
        # integers: the first row > t is the first row >= t + 1, so both bounds are one left-side search
        lo_at = a if closed in ("both", "left") else a + 1
        hi_at = b + 1 if closed in ("both", "right") else b
        i, j = s.to_physical().search_sorted(pl.Series([lo_at, hi_at], dtype=pl.Int64), side="left").to_list()
        return df.slice(i, max(0, j - i))
    return df.filter(pl.col(col).to_physical().is_between(a, b, closed=closed))


def server_state(series: pl.DataFrame, lo, hi, replica: str | None = None) -> dict:
    s = between(series, "ts", lo, hi)
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
    r = between(req, "ts_start", lo, hi)
    if exclude:
        ts = pl.col("ts_start").to_physical()
        r = r.filter(~pl.any_horizontal(ts.is_between(epoch_us(a), epoch_us(b)) for a, b in exclude))
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
    p = between(pre, "ts", lo, hi, closed="right")
    if replica is not None:
        p = p.filter(pl.col("replica") == replica)
    return int(p["preemptions"].sum())


def windows_sums(win: pl.DataFrame, cols: list[str], lo, hi) -> dict[str, int]:
    """Sums of the window columns over [lo, hi]; a column absent or null everywhere is left out."""
    have = [c for c in cols if c in win.columns and win[c].null_count() < win.height]
    if not have:
        return {}
    w = between(win, "ts", lo, hi)
    row = w.select(pl.col(c).fill_null(0).sum() for c in have).row(0)
    return {c: int(v) for c, v in zip(have, row, strict=True)}
