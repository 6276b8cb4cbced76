"""Numbers no log field can hold, made null and counted, in one place (issue #44).

A log is attacker-controlled and damaged logs are common: a gauge written as ``1e19``, a duration of ``inf``,
a token count of 20 digits. No count, duration, rate or share a server, gateway or client reaches is past 2**53
(9.007e15: a count of requests, tokens, bytes or microseconds; the largest integer a float holds exactly), and
past 2**63 a value does not fit an Int64 row at all: a strict cast then stopped the whole file, or the run
(exit 70). So every number a parser hands over is checked here (``clear``, called once per chunk by
``logscope.ingest.streams.take``): NaN, an infinity, a value past +-2**53 or text that is no number in a
numeric column of the table's schema is set null, and counted for the file's message. Inside a parser or a
later stage, a number cast to an integer goes through ``to_int``, which gives null where a strict cast would
raise. Prometheus' own NaN (a staleness marker) and infinities are values of its sample type and stay in
``server_metrics.value`` (``logscope.ingest.metric_stats`` leaves them out); its finite values past 2**53 do not.
"""

from __future__ import annotations

import polars as pl

MAX_ABS = float(2**53)
# (table, column) whose non-finite values are data, not damage: Prometheus' sample values
_NON_FINITE_OK = {("server_metrics", "value")}


def to_int(x: pl.Expr, dtype: pl.DataType | type[pl.DataType] = pl.Int64) -> pl.Expr:
    """``x`` (a number, or its text) as an integer: truncated as a cast truncates, null where it is NaN, an
    infinity, past +-2**53 or text that is no number (where ``x.cast(dtype)`` would raise or wrap)."""
    f = x.cast(pl.Float64, strict=False)
    return pl.when(f.abs() <= MAX_ABS).then(x.cast(dtype, strict=False))


def finite(x: pl.Expr) -> pl.Expr:
    """``x`` as a float, null where it is NaN, an infinity or past +-2**53."""
    f = x.cast(pl.Float64, strict=False)
    return pl.when(f.abs() <= MAX_ABS).then(f)


def number(x: object) -> float | None:
    """A Python value read from a document (a JSON number, its text) as a float; None where it is no number,
    NaN, an infinity or past +-2**53 (what ``to_int`` makes null)."""
    try:
        f = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return f if abs(f) <= MAX_ABS else None  # NaN compares False


def _bad(c: str, dtype: pl.DataType, want: pl.DataType, keep_non_finite: bool) -> pl.Expr | None:
    """Where column ``c`` (of ``dtype``, declared ``want``) holds a value no field can: None when it cannot."""
    col = pl.col(c)
    if dtype == pl.String and want.is_numeric():  # text the schema's cast would turn into null, unsaid
        return col.is_not_null() & col.cast(want, strict=False).is_null()
    if not dtype.is_numeric() or dtype in (pl.Boolean,):
        return None
    if dtype.is_float():
        if keep_non_finite:
            return col.is_finite() & (col.abs() > MAX_ABS)
        return col.is_nan() | (col.abs() > MAX_ABS)  # inf > MAX_ABS
    if dtype in (pl.Int64, pl.UInt64):
        return col.cast(pl.Float64).abs() > MAX_ABS
    return None  # narrower integers cannot be past 2**53


def clear(
    df: pl.DataFrame, table: str, schema: dict[str, pl.DataType]
) -> tuple[pl.DataFrame, int, str | None]:
    """``df`` (a parser's rows of ``table``, declared ``schema``) with every number no field can hold set null;
    how many values were, and the first as an example ('line 12: running=1e+19')."""
    checks = {}
    for c, dtype in df.schema.items():
        want = schema.get(c)
        if want is None or not (want.is_numeric() or dtype.is_numeric()):
            continue
        bad = _bad(c, dtype, want, (table, c) in _NON_FINITE_OK)
        if bad is not None:
            checks[c] = bad
    if not checks:
        return df, 0, None
    # one call on a clean chunk (almost all): a small file's parse costs a few calls in all
    counts = df.select(**{c: e.fill_null(False).sum() for c, e in checks.items()}).row(0, named=True)
    n = sum(int(v) for v in counts.values())
    if n == 0:
        return df, 0, None
    flags = df.select(**{c: e.fill_null(False) for c, e in checks.items() if counts[c]})
    c = next(k for k, v in counts.items() if v)
    row = df.filter(flags[c]).row(0, named=True)
    example = f"{c}={row[c]!r}" if isinstance(row[c], str) else f"{c}={row[c]:g}"
    if row.get("line_no") is not None:
        example = f"line {row['line_no']}: {example}"
    fixed = df.with_columns(pl.when(flags[c]).then(None).otherwise(pl.col(c)).alias(c) for c in flags.columns)
    return fixed, n, example
