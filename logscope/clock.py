"""Times of day in sentences and tables: 'HH:MM:SS' (UTC), or 'MM-DD HH:MM:SS' when the logs cover more
than one UTC day ('YYYY-MM-DD HH:MM:SS' across years). On a two-day incident '08:41' of the second day would read as earlier than '20:27' of
the first; the date is then part of every time. Diagnosis and report decide once, from the files' first
and last times (``covering``), so the sentences of diagnosis.json and the page's tables agree."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

_FORMAT: ContextVar[str] = ContextVar("logscope_clock_format", default="%H:%M:%S")


def format_for(lo: datetime | None, hi: datetime | None) -> str:
    """The strftime format of a time of day in logs that run from lo to hi."""
    if lo is None or hi is None:
        return "%H:%M:%S"
    a, b = lo.astimezone(UTC).date(), hi.astimezone(UTC).date()
    return "%H:%M:%S" if a == b else "%m-%d %H:%M:%S" if a.year == b.year else "%Y-%m-%d %H:%M:%S"


@contextmanager
def covering(lo: datetime | None, hi: datetime | None) -> Iterator[None]:
    """Times formatted inside this block carry their date when [lo, hi] spans several UTC days."""
    token = _FORMAT.set(format_for(lo, hi))
    try:
        yield
    finally:
        _FORMAT.reset(token)


def files_span(out: Path) -> tuple[datetime | None, datetime | None]:
    """First and last time of any input file (files.parquet of an output folder)."""
    p = Path(out) / "files.parquet"
    if not p.exists():
        return None, None
    row = (
        pl.read_parquet(p, columns=["first_ts", "last_ts"])
        .select(pl.col("first_ts").min(), pl.col("last_ts").max())
        .row(0)
    )
    return row[0], row[1]


def time_format() -> str:
    """The strftime format of a time of day here (polars columns use it too)."""
    return _FORMAT.get()


def hms(ts: datetime, ms: bool = False) -> str:
    """'08:41:54' (or '11-30 08:41:54'); ``ms`` adds milliseconds."""
    s = ts.strftime(time_format())
    return f"{s}.{ts.microsecond // 1000:03d}" if ms else s


def hms_after(a: datetime, b: datetime) -> str:
    """``b`` as the end of something that began at ``a``: its date only when it is another day's."""
    return b.strftime("%H:%M:%S") if a.astimezone(UTC).date() == b.astimezone(UTC).date() else hms(b)


def hms_span(a: datetime, b: datetime) -> str:
    """'08:30:03–08:31:13', or 'at 08:30:03' when both ends read the same second (a range 'a–a' reads as a typo:
    traced-1r's verdict said 'E1 (5 preemptions, 03:39:23–03:39:23)')."""
    end = hms_after(a, b)
    return f"at {hms(a)}" if end == hms(a) else f"{hms(a)}–{end}"


def hms_range(a: datetime | None, b: datetime | None) -> str:
    """'08:30:03–08:31:13'; where times carry dates, the end's only when it is another day's; 'at 08:30:03' when
    both ends read the same second (public-2 g02's three tries: '3 attempts 16:02:45–16:02:45')."""
    if a is None or b is None:
        return f"{hms(a) if a is not None else '?'}–{hms(b) if b is not None else '?'}"
    return hms_span(a, b)
