"""Helpers shared by the three Prometheus formats (tsdb dump, query_range JSON, exposition text).

All of them end in the same ``server_metrics`` rows: ``labels`` is every label except
``__name__``, ``job`` and ``instance``, as ``k=v`` sorted and joined by ','; ``replica`` is the
``instance`` label, else the file's replica.
"""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS

from .base import ParseContext

# one label pair in Prometheus' text syntax (dump and exposition): name="escaped value"
LABEL_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\]|\\.)*"'
# a sample value: Go's %g / ParseFloat spellings, NaN and ±Inf included
VALUE = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+\.|Inf|inf)|NaN|nan"
_DROPPED = r"^(?:__name__|job|instance)="

NAN_MESSAGE = (
    "{n} samples are NaN (Prometheus stores a NaN staleness marker when a series or target "
    "disappears, e.g. at shutdown): kept as NaN in server_metrics, ignored by the derived stats"
)


def pairs_expr(raw: pl.Expr) -> pl.Expr:
    """``a="x", b="y\\"z"`` -> list ``["a=x", 'b=y"z']`` (\\" and \\\\ unescaped)."""
    return raw.str.extract_all(LABEL_PAIR).list.eval(
        pl.element()
        .str.replace(r'^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"', "${1}=")
        .str.replace(r'"$', "")
        .str.replace_all(r'\\(["\\])', "${1}")
    )


def labels_expr(pairs: pl.Expr) -> pl.Expr:
    """Sorted ``k=v`` pairs joined by ',', without __name__ / job / instance."""
    kept = pairs.list.eval(pl.element().filter(~pl.element().str.contains(_DROPPED)))
    return kept.list.sort().list.join(",")


def label_value_expr(pairs: pl.Expr, key: str) -> pl.Expr:
    """Value of one label from the ``k=v`` list, null when absent."""
    return (
        pairs.list.eval(pl.element().filter(pl.element().str.starts_with(f"{key}=")))
        .list.first()
        .str.strip_prefix(f"{key}=")
    )


def value_expr(raw: pl.Expr) -> pl.Expr:
    return raw.cast(pl.Float64, strict=False)


# past this many seconds from 1970 (year ~287,000) a time has no microsecond count in an i64: null, not wrapped
_MAX_S = 9e12


def epoch_ms_to_ts(ms: pl.Expr) -> pl.Expr:
    ms = ms.cast(pl.Int64, strict=False)
    us = pl.when(ms.abs() < _MAX_S * 1000).then(ms * 1000)
    return pl.from_epoch(us, time_unit="us").dt.replace_time_zone("UTC").cast(TS)


def epoch_s_to_ts(seconds: pl.Expr) -> pl.Expr:
    us = pl.when(seconds.abs() < _MAX_S).then((seconds * 1_000_000).round(0)).cast(pl.Int64, strict=False)
    return pl.from_epoch(us, time_unit="us").dt.replace_time_zone("UTC").cast(TS)


def metrics_frame(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Columns ts, name, instance, labels, value -> server_metrics rows."""
    return df.select(
        "ts",
        pl.lit(ctx.source).alias("source"),
        pl.coalesce(pl.col("instance"), pl.lit(ctx.replica)).alias("replica"),
        "name",
        "labels",
        "value",
    )


def nan_messages(df: pl.DataFrame) -> list[str]:
    n = int(df["value"].is_nan().sum())
    return [NAN_MESSAGE.format(n=n)] if n else []
