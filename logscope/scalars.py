"""Polars' scalars, typed: a column's ``max()``, ``min()``, ``sum()`` or ``item()`` is, to the type checker, any of
a dozen Python types (int, float, Decimal, date, time, timedelta, str, bytes, a list...). Which one it is follows
from the column's dtype, which the table's schema (``logscope.schemas``) fixes: these functions say which one a
caller reads, and check it. A value of another type is a column of another dtype than the code expects (a bug
upstream), raised at once as a TypeError naming what came, rather than carried on as a wrong figure.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TypeVar

T = TypeVar("T")


def _given(v: T | None, what: str) -> T:
    if v is None:
        raise TypeError(f"{what} was expected, not None")
    return v


def _number(v: object) -> int | float | Decimal | None:
    if v is None or isinstance(v, int | float | Decimal):
        return v
    raise TypeError(f"a number was expected, not {type(v).__name__} {v!r:.40}")


def time_or_none(v: object) -> datetime | None:
    """A Datetime column's scalar (None: empty, or all null)."""
    if v is None or isinstance(v, datetime):
        return v
    raise TypeError(f"a time was expected, not {type(v).__name__} {v!r:.40}")


def time_value(v: object) -> datetime:
    """As ``time_or_none``, where the column holds a time (a non-empty column without nulls)."""
    return _given(time_or_none(v), "a time")


def float_or_none(v: object) -> float | None:
    """A numeric column's scalar as a float (None: empty, or all null). A boolean is 0 or 1, as ``float`` makes it."""
    n = _number(v)
    return None if n is None else float(n)


def float_value(v: object) -> float:
    """As ``float_or_none``, where the scalar is a number (a sum, a count, a non-empty column without nulls)."""
    return _given(float_or_none(v), "a number")


def int_or_none(v: object) -> int | None:
    """A numeric column's scalar as an int, truncated as ``int`` truncates (None: empty, or all null)."""
    n = _number(v)
    return None if n is None else int(n)


def int_value(v: object) -> int:
    """As ``int_or_none``, where the scalar is a number."""
    return _given(int_or_none(v), "a number")
