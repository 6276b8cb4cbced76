"""Times no incident holds: the one rule that keeps an absurd stamp out of spans, windows and charts.

A time before 2000, after a year from now, or more than a decade from the folder's reference time (the
year its full timestamps give) is an outlier: a client record with ``"send": 1e20`` (year 5138) or
``"send": 0`` (1970) would otherwise stretch the run's span over millennia and make the window grid,
the charts and every stage after them cost what the values say, not what the input holds. The record is
kept, its time set null (unknown), and its file's message counts them with an example. Every stage after
ingest sees only plausible times, so the cost of each is bounded by the input's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import polars as pl

from .. import schemas

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
AHEAD = timedelta(days=366)  # clocks a little ahead are seen; a year ahead is a wrong stamp
DECADE = timedelta(days=3653)  # from the folder's reference time


@dataclass(frozen=True)
class Bounds:
    lo: datetime
    hi: datetime

    def words(self) -> str:
        return f"outside {self.lo:%Y-%m-%d} .. {self.hi:%Y-%m-%d}"


def bounds(reference: datetime | None, now: datetime | None = None) -> Bounds:
    """The plausible times of a folder whose full timestamps point at ``reference`` (None: unknown)."""
    now = now or datetime.now(UTC)
    lo, hi = EARLIEST, now + AHEAD
    if reference is not None:
        lo, hi = max(lo, reference - DECADE), min(hi, reference + DECADE)
    if hi <= lo:  # a reference that is itself absurd: keep the absolute bounds
        lo, hi = EARLIEST, now + AHEAD
    return Bounds(lo, hi)


def _out(c: str, b: Bounds) -> pl.Expr:
    col = pl.col(c).cast(schemas.TS, strict=False)
    return ((col < pl.lit(b.lo).cast(schemas.TS)) | (col > pl.lit(b.hi).cast(schemas.TS))).fill_null(False)


def outside(df: pl.DataFrame, table: str, b: Bounds) -> pl.Series:
    """Which rows of ``df`` have a time outside ``b``."""
    cols = [c for c in schemas.time_columns(table) if c in df.columns]
    if not cols or df.height == 0:
        return pl.repeat(False, df.height, dtype=pl.Boolean, eager=True)
    return df.select(pl.any_horizontal([_out(c, b) for c in cols]).alias("bad"))["bad"]


def clear(df: pl.DataFrame, table: str, b: Bounds) -> tuple[pl.DataFrame, int, str | None]:
    """``df`` with its times outside ``b`` set null, how many rows had one, and an example ('line 12: 5138-...')."""
    cols = [c for c in schemas.time_columns(table) if c in df.columns]
    bad = outside(df, table, b)
    n = int(bad.sum())
    if n == 0:
        return df, 0, None
    # formatted by polars: a year past 9999 has no Python datetime
    first = df.filter(bad).head(1).select(
        pl.coalesce([pl.when(_out(c, b)).then(pl.col(c).dt.to_string("%Y-%m-%d %H:%M:%S")) for c in cols]).alias("t"),
        (pl.col("line_no") if "line_no" in df.columns else pl.lit(None, dtype=pl.Int64)).alias("n"))
    t, line_no = first.row(0)
    example = f"line {line_no}: {t}" if line_no is not None else t
    fixed = df.with_columns([pl.when(_out(c, b)).then(None).otherwise(pl.col(c)).alias(c) for c in cols])
    return fixed, n, example


def message(n: int, example: str | None, b: Bounds) -> str:
    return (f"{n:,} record(s) with a time {b.words()} (e.g. {example}): kept, their time set unknown and left "
            "out of spans, windows and charts")


def bad_message(n: int, example: str | None) -> str:
    return (f"{n:,} record(s) whose written time is no time (an impossible date, or a local time in a DST gap; "
            f"e.g. {example}): kept, their time unknown (a server log's line takes the previous line's, ts_inferred)")
