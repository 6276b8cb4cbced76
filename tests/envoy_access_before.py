"""The oracle of tests/test_scan_envoy.py: parsers/envoy_access.py's parse as it was before its text lines' fields were
typed by the compiled scanner (issue #42): each line's kind by the regexes (``_TEXT``, with ASCII digits as the core
reads them, and ``_JSON``), every field as text, then Envoy's '-' and the numbers read with polars, kept as it was."""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.parsers import envoy_access
from logscope.parsers._common import json_fields
from logscope.schemas import TS

_TEXT = envoy_access._TEXT.replace(r"\d", "[0-9]")
_KEYS = envoy_access._KEYS
_ALL_KEYS = envoy_access._ALL_KEYS


def _num(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Float64, strict=False)


def _dash(col: str) -> pl.Expr:
    c = pl.col(col)
    return pl.when(c.is_in(["-", ""])).then(None).otherwise(c)


def gateway_attempts(lines: pl.DataFrame, source: str) -> pl.DataFrame | None:
    """The rows the parser gave of a chunk's ``lines`` (line_no, line), None when it gave none."""
    f = lines.with_columns(pl.col("line").str.strip_suffix("\r"))
    groups = f.select("line_no", pl.col("line").str.extract_groups(_TEXT).alias("g")).unnest("g")
    matched = groups.get_column("code").is_not_null()
    text = groups.filter(matched)
    is_json = f.get_column("line").str.contains(envoy_access._JSON) & ~matched
    js = json_fields(f.filter(is_json), _ALL_KEYS)
    js = js.select("line_no", *[pl.coalesce(keys).alias(name) for name, keys in _KEYS.items()])
    js = js.filter(pl.col("start").is_not_null())
    frames = []
    if text.height:
        frames.append(
            _rows(text.with_columns(pl.lit(None, pl.String).alias(c) for c in ("attempts", "rdur")), source)
        )
    if js.height:
        frames.append(_rows(js, source))
    return pl.concat(frames, how="vertical_relaxed").sort("line_no") if frames else None


def _rows(f: pl.DataFrame, source: str) -> pl.DataFrame:
    start = pl.col("start").str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
    dur = _num(_dash("dur"))
    code = pl.col("code").pipe(to_int)
    flags = _dash("flags")
    details = _dash("details")
    attempts = pl.col("attempts").pipe(to_int)
    from_upstream = (
        pl.when(details.is_not_null())
        .then(details == "via_upstream")
        .otherwise(flags.is_null() & _dash("uhost").is_not_null())
    )
    error = pl.concat_str(
        [pl.when(details != "via_upstream").then(details), _dash("ufail")], separator="; ", ignore_nulls=True
    )
    return f.select(
        start.cast(TS).alias("ts_start"),
        (start + pl.duration(milliseconds=dur.pipe(to_int))).cast(TS).alias("ts_end"),
        pl.lit(source).alias("source"),
        pl.lit("envoy").alias("gateway"),
        _dash("rid").alias("request_id"),
        pl.when(attempts > 0).then(attempts).alias("attempt"),
        attempts.alias("attempts_total"),
        _dash("uhost").alias("upstream"),
        pl.when(code > 0).then(code).alias("status"),
        pl.when(from_upstream & (code > 0)).then(code).alias("upstream_status"),
        (_num(_dash("ust")) / 1000.0).alias("duration_s"),
        (dur / 1000.0).alias("request_time_s"),
        (_num(_dash("rdur")) / 1000.0).alias("header_s"),
        flags.alias("flags"),
        pl.when(error != "").then(error).alias("error"),
        _dash("method").alias("method"),
        _dash("path").alias("path"),
        pl.col("tx").pipe(to_int).alias("bytes_sent"),
        _dash("ua").alias("user_agent"),
        pl.col("line_no"),
    )
