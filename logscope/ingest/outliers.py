"""Times no incident holds: the rules that keep an absurd stamp out of spans, windows and charts.

A time before 2000, after a year from now, or more than a decade from the folder's reference time (the
year its full timestamps give) is an outlier: a client record with ``"send": 1e20`` (year 5138) or
``"send": 0`` (1970) would otherwise stretch the run's span over millennia and make the window grid,
the charts and every stage after them cost what the values say, not what the input holds. The record is
kept, its time set null (unknown), and its file's message counts them with an example. Every stage after
ingest sees only plausible times, so the cost of each is bounded by the input's size.

Within those bounds, a time far outside the span of the rest of its own file is an outlier too (``per_file``): a
clock set wrong for a moment (a line of 2024 in a log of an hour of 2026) would stretch that file's span, and the
run's, over years. Such records are kept the same way, and their file says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from .. import schemas

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
AHEAD = timedelta(days=366)  # clocks a little ahead are seen; a year ahead is a wrong stamp
DECADE = timedelta(days=3653)  # from the folder's reference time
# per file: a time more than FAR (or SPREAD times the span of the file's middle half, when longer) beyond that middle
# half; files with fewer times than MIN_TIMES have no rest to stand outside of
FAR = timedelta(days=30)
SPREAD = 10
MIN_TIMES = 8


@dataclass(frozen=True)
class Bounds:
    lo: datetime
    hi: datetime

    @property
    def lo_us(self) -> int:
        return _epoch_us(self.lo)

    @property
    def hi_us(self) -> int:
        return _epoch_us(self.hi)

    def words(self) -> str:
        return f"outside {self.lo:%Y-%m-%d} .. {self.hi:%Y-%m-%d}"


def _epoch_us(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


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
    # compared as epoch microseconds: a time zone aware datetime literal costs ~100 us to build, and this runs for
    # every time column of every chunk (a folder of 10,000 small files: 11 % of its ingest)
    us = pl.col(c).cast(schemas.TS, strict=False).dt.epoch("us")
    return ((us < b.lo_us) | (us > b.hi_us)).fill_null(False)


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
    first = (
        df.filter(bad)
        .head(1)
        .select(
            pl.coalesce(
                [pl.when(_out(c, b)).then(pl.col(c).dt.to_string("%Y-%m-%d %H:%M:%S")) for c in cols]
            ).alias("t"),
            (pl.col("line_no") if "line_no" in df.columns else pl.lit(None, dtype=pl.Int64)).alias("n"),
        )
    )
    t, line_no = first.row(0)
    example = f"line {line_no}: {t}" if line_no is not None else t
    fixed = df.with_columns([pl.when(_out(c, b)).then(None).otherwise(pl.col(c)).alias(c) for c in cols])
    return fixed, n, example


def message(n: int, example: str | None, b: Bounds) -> str:
    return (
        f"{n:,} record(s) with a time {b.words()} (e.g. {example}): kept, their time set unknown and left "
        "out of spans, windows and charts"
    )


def bad_message(n: int, example: str | None) -> str:
    return (
        f"{n:,} record(s) whose written time is no time (an impossible date, or a local time in a DST gap; "
        f"e.g. {example}): kept, their time unknown (a server log's line takes the previous line's, ts_inferred)"
    )


def per_file(out: Path, tables: list[str]) -> dict[str, tuple[int, str]]:
    """Set unknown, in the tables under ``out``, the times lying far outside the span of the rest of their own file
    (``FAR``); per file (``source``) with any, how many records and an example. The tables are rewritten only when
    a file has one (a scan of their times otherwise)."""
    frames = []
    for name in tables:
        if "source" in schemas.schema(name):
            lf = pl.scan_parquet(out / f"{name}.parquet")
            frames += [
                lf.select("source", pl.col(c).dt.epoch("us").alias("t")) for c in schemas.time_columns(name)
            ]
    if not frames:
        return {}
    t = pl.col("t")
    q = (
        pl.concat(frames)
        .drop_nulls("t")
        .group_by("source")
        .agg(
            n=pl.len(),
            q1=t.quantile(0.25, "lower"),
            q3=t.quantile(0.75, "higher"),
            lo_t=t.min(),
            hi_t=t.max(),
        )
        .filter(pl.col("n") >= MIN_TIMES)
        .collect()
    )
    far = int(FAR.total_seconds() * 1e6)
    margin = pl.max_horizontal(pl.lit(far), (pl.col("q3") - pl.col("q1")) * SPREAD)
    q = q.with_columns(lo=pl.col("q1") - margin, hi=pl.col("q3") + margin)
    q = q.filter((pl.col("lo_t") < pl.col("lo")) | (pl.col("hi_t") > pl.col("hi")))
    if q.height == 0:
        return {}
    sources = q.get_column("source").to_list()
    lo = pl.col("source").replace_strict(
        sources, q.get_column("lo").to_list(), default=None, return_dtype=pl.Int64
    )
    hi = pl.col("source").replace_strict(
        sources, q.get_column("hi").to_list(), default=None, return_dtype=pl.Int64
    )
    found: dict[str, tuple[int, str]] = {}
    for name in tables:
        cols = schemas.time_columns(name)
        if not cols or "source" not in schemas.schema(name):
            continue
        path = out / f"{name}.parquet"

        def bad(c: str) -> pl.Expr:
            e = pl.col(c).dt.epoch("us")
            return ((e < lo) | (e > hi)).fill_null(False)

        rows = pl.scan_parquet(path).filter(pl.any_horizontal([bad(c) for c in cols]))
        hit = rows.select(
            "source",
            pl.coalesce(
                [pl.when(bad(c)).then(pl.col(c).dt.to_string("%Y-%m-%d %H:%M:%S")) for c in cols]
            ).alias("t"),
            (pl.col("line_no") if "line_no" in schemas.schema(name) else pl.lit(None, pl.Int64)).alias("n"),
        ).collect()
        if hit.height == 0:
            continue
        for src, n, ex in (
            hit.group_by("source", maintain_order=True)
            .agg(pl.len(), pl.first("n").alias("line"), pl.first("t"))
            .select(
                "source",
                "len",
                pl.when(pl.col("line").is_not_null())
                .then(pl.format("line {}: {}", "line", "t"))
                .otherwise("t"),
            )
            .iter_rows()
        ):
            had = found.get(src, (0, ex))
            found[src] = (had[0] + n, had[1])
        tmp = path.with_name(path.name + ".tmp")
        pl.scan_parquet(path).with_columns(
            pl.when(bad(c)).then(None).otherwise(pl.col(c)).alias(c) for c in cols
        ).sink_parquet(tmp, row_group_size=64_000)
        tmp.replace(path)
    return found


def far_message(n: int, example: str) -> str:
    return (
        f"{n:,} record(s) with a time far outside the span of the rest of this file (more than "
        f"{FAR.days} days, or {SPREAD} times the span of its middle half, beyond that middle half; e.g. {example}): "
        "kept, their time set unknown and left out of spans, windows and charts"
    )
