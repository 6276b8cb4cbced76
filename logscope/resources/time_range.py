"""The time range an analysis looks at (``--since`` / ``--until``).

Ingest always reads every line (the coverage of each file stays whole); correlation, diagnosis and the
report then read only the records whose time span overlaps the range, so a day of logs too large for
memory can be analysed an hour at a time, and an incident's hour is not averaged into a day. A record
overlaps when any of its times falls in the range or its times straddle it (a request received before
``since`` and answered after it is kept whole); records without any time are kept, since they cannot
be placed outside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

import polars as pl

from .. import schemas

# tables that describe the inputs as a whole, never cut
WHOLE = ("files", "unrecognized", "clock_offsets", "episodes", "findings", "ladder")


@dataclass(frozen=True)
class Range:
    since: datetime | None = None  # UTC, inclusive
    until: datetime | None = None  # UTC, inclusive
    chosen: dict | None = field(
        default=None, compare=False
    )  # why logscope chose it (logscope.resources.budget), if it did

    def __bool__(self) -> bool:
        return self.since is not None or self.until is not None

    def doc(self) -> dict | None:
        """As written in correlation.json / diagnosis.json (ISO 8601 UTC), None when unbounded."""
        if not self:
            return None
        d = {"since": iso(self.since), "until": iso(self.until)}
        return {**d, "chosen": self.chosen} if self.chosen else d

    @property
    def end_words(self) -> str:
        """How a sentence names the end of what was examined."""
        return "the range analysed ends (--until)" if self.until is not None else "the logs end"

    def contains(self, t: datetime | None) -> bool:
        return (
            t is not None
            and (self.since is None or t >= self.since)
            and (self.until is None or t <= self.until)
        )

    def misses(self, lo: datetime | None, hi: datetime | None) -> bool:
        """True when [lo, hi] (the inputs' span, both known) lies wholly outside the range."""
        if lo is None or hi is None:
            return False
        return (self.since is not None and self.since > hi) or (self.until is not None and self.until < lo)

    def clip(self, lo: datetime | None, hi: datetime | None) -> tuple[datetime | None, datetime | None]:
        """[lo, hi] (the inputs' span) narrowed to the range."""
        if self.since is not None and (lo is None or lo < self.since):
            lo = self.since
        if self.until is not None and (hi is None or hi > self.until):
            hi = self.until
        return lo, hi


ALL = Range()  # no bound: everything


class RangeOptions(Protocol):
    """What a stage reads of its options to know the range it looks at (``AnalyzeOptions`` has them)."""

    since: datetime | None
    until: datetime | None
    tz: str
    range_chosen: dict | None


def of(options: RangeOptions) -> Range:
    """The range of an options object (``AnalyzeOptions.since`` / ``until``, naive ones in its ``tz``;
    None: unbounded)."""
    rng = make(options.since, options.until, options.tz)
    chosen = options.range_chosen
    return replace(rng, chosen=chosen) if rng and chosen else rng


def from_doc(d: dict | None) -> Range:
    if not isinstance(d, dict):
        return Range()
    since, until = (datetime.fromisoformat(d[k]) if d.get(k) else None for k in ("since", "until"))
    chosen = d.get("chosen")
    return Range(since, until, chosen=chosen if isinstance(chosen, dict) else None)


def parse_time(text: str, tz: str = "UTC") -> datetime:
    """'2026-11-29T08:30:00Z', '2026-11-29 08:30' (in ``tz`` when it carries no offset) -> UTC datetime.
    Raises ValueError with the forms it takes."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not a date and time: give e.g. 2026-11-29T08:30:00Z or "
            "'2026-11-29 08:30' (in --tz when no offset is given)"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=ZoneInfo(tz))
    return t.astimezone(UTC)


def make(since: str | datetime | None, until: str | datetime | None, tz: str = "UTC") -> Range:
    """A Range from CLI text or datetimes; ValueError when a bound is unreadable or since > until."""

    def one(v: str | datetime | None) -> datetime | None:
        if v is None:
            return None
        if isinstance(v, datetime):  # a naive datetime is in ``tz``, like naive text
            return (v if v.tzinfo else v.replace(tzinfo=ZoneInfo(tz))).astimezone(UTC)
        return parse_time(v, tz)

    rng = Range(one(since), one(until))
    if rng.since is not None and rng.until is not None and rng.since > rng.until:
        raise ValueError(f"--since {iso(rng.since)} is after --until {iso(rng.until)}")
    return rng


def where(table: str, rng: Range, offset: pl.Expr | None = None) -> pl.Expr | None:
    """Rows of ``table`` whose times overlap the range (None: every row); with ``offset`` (a duration per row:
    a source's clock correction), their times moved by it."""
    if not rng or table in WHOLE or table not in schemas.TABLES:
        return None
    cols = schemas.time_columns(table)
    if not cols:
        return None
    lo, hi = first_time(table), pl.max_horizontal(pl.col(c) for c in cols)
    if offset is not None:
        lo, hi = lo + offset, hi + offset
    keep = pl.lit(True)
    if rng.since is not None:
        keep = keep & (hi >= rng.since)
    if rng.until is not None:
        keep = keep & (lo <= rng.until)
    return lo.is_null() | keep


def first_time(table: str) -> pl.Expr:
    """A record's earliest time (null when it has none)."""
    return pl.min_horizontal(pl.col(c) for c in schemas.time_columns(table))


def scan(out: Path, table: str, rng: Range = ALL) -> pl.LazyFrame:
    """A table of an output folder, lazily, in its declared schema and cut to the range (absent: empty).
    Correlation, diagnosis and the report all read their tables through here."""
    p = Path(out) / f"{table}.parquet"
    lf = schemas.conform(pl.scan_parquet(p), table) if p.exists() else schemas.empty(table).lazy()
    return cut(table, lf, rng)


def cut(table: str, frame, rng: Range):
    """``frame`` (DataFrame or LazyFrame in ``table``'s schema) narrowed to the range."""
    w = where(table, rng)
    return frame if w is None else frame.filter(w)


def iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(UTC).isoformat().replace("+00:00", "Z")
