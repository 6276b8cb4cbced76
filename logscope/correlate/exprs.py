"""The polars expressions correlation's frames are built with: a UTC datetime column as float epoch seconds and
back (``secs``, ``to_ts``), and scans of a frame sorted by its group keys (``group_first``, ``index_in_group``,
``size_of_group``, ``cumsum_before``, ``cumsum_after``, ``prev_in_group``).
"""

from __future__ import annotations

import polars as pl


def secs(col: str) -> pl.Expr:
    """UTC datetime column -> float epoch seconds."""
    return pl.col(col).dt.epoch("us").cast(pl.Float64) / 1e6


def to_ts(col: str | pl.Expr) -> pl.Expr:
    e = pl.col(col) if isinstance(col, str) else col
    return pl.from_epoch((e * 1e6).round(0).cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC")


# Sorted-group helpers: on a frame sorted by its group keys these are plain column scans, several
# times faster than ``.over()`` when there are a million small groups (one per request).
def group_first(*keys: str) -> pl.Expr:
    """True on the first row of each run of equal keys (frame sorted by the keys)."""
    e = pl.lit(False)
    for k in keys:
        e = e | pl.col(k).ne_missing(pl.col(k).shift(1))
    return e | (pl.int_range(pl.len()) == 0)


def index_in_group(first: str = "_first") -> pl.Expr:
    """1-based position of the row within its group."""
    idx = pl.int_range(pl.len(), dtype=pl.Int64)
    return idx - pl.when(pl.col(first)).then(idx).otherwise(None).forward_fill() + 1


def size_of_group(first: str = "_first") -> pl.Expr:
    idx = pl.int_range(pl.len(), dtype=pl.Int64)
    last = pl.col(first).shift(-1, fill_value=True)
    return (
        pl.when(last).then(idx).otherwise(None).backward_fill()
        - pl.when(pl.col(first)).then(idx).otherwise(None).forward_fill()
        + 1
    )


def cumsum_before(x: pl.Expr, first: str = "_first") -> pl.Expr:
    """Sum of ``x`` over the earlier rows of the group."""
    before = x.cum_sum() - x
    return before - pl.when(pl.col(first)).then(before).otherwise(None).forward_fill()


def cumsum_after(x: pl.Expr, first: str = "_first") -> pl.Expr:
    """Sum of ``x`` over the later rows of the group."""
    incl = x.cum_sum()
    last = pl.col(first).shift(-1, fill_value=True)
    return pl.when(last).then(incl).otherwise(None).backward_fill() - incl


def prev_in_group(x: pl.Expr, first: str = "_first") -> pl.Expr:
    return pl.when(pl.col(first)).then(None).otherwise(x.shift(1))
