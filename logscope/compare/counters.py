"""A Prometheus counter's rise over a time range, from server_metrics (shared by the traffic and the figures)."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from ..scalars import float_or_none


def increase(m: pl.DataFrame, name: str, lo: datetime | None, hi: datetime | None) -> float | None:
    """A counter's rise over (lo, hi], resets tolerated; the source that saw most (an export and a dump of
    one server hold the same samples)."""
    c = m.filter((pl.col("name") == name) & pl.col("value").is_not_nan()).sort(["source", "labels", "ts"])
    if c.height == 0:
        return None
    c = c.with_columns(pl.col("value").diff().over(["source", "labels"]).clip(0).alias("d"))
    if lo is not None and hi is not None:
        c = c.filter((pl.col("ts") > lo) & (pl.col("ts") <= hi))
    if c.height == 0:
        return None
    return float_or_none(c.group_by("source").agg(pl.col("d").sum())["d"].max()) or 0.0
