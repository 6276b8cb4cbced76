"""The oracle of tests/test_scan_openai_events.py: openai_client's event rows as parsers/_openai_lines.py built them on
polars after the compiled scanner's line scan (`_events`, `_rows`: the kinds, the continuations, the recognised lines and
the event rows' fields), before one pass of the core took them (issue #42: scan/src/events.rs), kept as they were."""

from __future__ import annotations

import polars as pl

from logscope.numbers import MAX_ABS
from logscope.parsers import _kinds, _openai_lines
from logscope.parsers._common import local_to_utc
from logscope.parsers._openai_lines import (
    _CONSOLE,
    _EV_SCHEMA,
    _EXC,
    _FINAL_CONN,
    _FINAL_STATUS,
    _FINAL_TIMEOUT,
    _FINAL_WORDS,
    _LEVEL_PREFIX,
)
from logscope.parsers.base import ParseContext

# the kinds whose message opens with 'Encountered ' (now the core's: scan/src/events.rs; `code` in _openai_lines.toml);
# "encountered" is that lead with no kind of its own)
_ENCOUNTERED = ["status_error", "timeout", "conn_error", "encountered"]


def _timestamp(
    stamp: pl.Expr, frac: pl.Expr, z: pl.Expr, tz: str, spaced: bool = True, zoned: bool = True
) -> pl.Expr:
    """A record's time -> UTC, from its fields: date and time ('T' or, when ``spaced``, a blank between them), fraction,
    zone (none in any row: not ``zoned``)."""
    naive = stamp.str.to_datetime("%Y-%m-%dT%H:%M:%S", strict=False, time_unit="us")
    if spaced:
        naive = pl.coalesce(naive, stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"))
    naive = naive + pl.duration(
        microseconds=frac.str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    )
    local = local_to_utc(naive, tz).cast(pl.Datetime("us", "UTC"))
    if not zoned:
        return local
    zz = z.str.replace(":", "")
    offset_min = zz.str.slice(1, 2).cast(pl.Int64, strict=False) * 60 + zz.str.slice(3, 2).cast(
        pl.Int64, strict=False
    )
    offset_min = pl.when(zz.str.starts_with("-")).then(-offset_min).otherwise(offset_min)
    at_zone = (naive - pl.duration(minutes=offset_min)).dt.replace_time_zone("UTC")
    return (
        pl.when(z.is_null())
        .then(local)
        .when(z == "Z")
        .then(naive.dt.replace_time_zone("UTC"))
        .otherwise(at_zone)
        .cast(pl.Datetime("us", "UTC"))
    )


def _kind(df: pl.DataFrame) -> pl.DataFrame:
    """``kind`` of each line's message (null: none, or a lead of no kind), ``msg`` (the line holds a message) and ``enc``
    (the message opens with 'Encountered ')."""
    lead = pl.col("lead")
    return df.with_columns(
        pl.when(lead != "encountered").then(lead).alias("kind"),
        (pl.col("scan") == 0).alias("msg"),
        lead.is_in(_ENCOUNTERED).fill_null(False).alias("enc"),
    )


def _where(df: pl.DataFrame, mask: pl.Expr, expr: pl.Expr, dtype: pl.DataType) -> pl.Series:
    """``expr`` on the rows where ``mask`` holds, null elsewhere: a regex runs on those rows alone."""
    idx = df.select(mask.fill_null(False).arg_true()).to_series()
    out = pl.repeat(None, df.height, dtype=dtype, eager=True)
    if idx.len():
        # those rows of the columns it reads alone (a gather of the scanner's ~30 fields cost more than the regexes)
        rows = df.select(pl.col(expr.meta.root_names() or df.columns).gather(idx))
        out = out.scatter(idx, rows.select(expr.cast(dtype)).to_series())
    return out


def _bounded(c: str) -> pl.Expr:
    """An integer field as to_int reads it: none past +-2**53."""
    return pl.when(pl.col(c).abs() <= MAX_ABS).then(pl.col(c))


def _events(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.Series]:
    """One row per meaningful line, plus the recognised-line mask."""
    seq0 = state.get("seq", 0)
    line = pl.col("line")
    cr = bool(lines.select(line.str.ends_with("\r").any()).item())
    df = lines.select(
        "line_no",
        (line.str.strip_suffix("\r") if cr else line).alias("line"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"),
    )
    got = _kinds.scan(_openai_lines.__file__, df)
    df = _kind(pl.concat([df, got.rename({"kind": "scan"})], how="horizontal"))
    kind, msg, ln = pl.col("kind"), pl.col("msg"), pl.col("line")
    # a line with a time, or logging's default 'LEVEL:' before its text, is a record; else it may continue one
    level = _where(
        df, kind.is_null() & pl.col("stamp").is_null(), ln.str.contains(_LEVEL_PREFIX), pl.Boolean()
    )
    prefixed = kind.is_not_null() | pl.col("stamp").is_not_null() | level.fill_null(False)
    df = df.with_columns(prefixed.alias("prefixed"))
    # traceback lines after an 'Encountered ...' record (exc_info=True in older SDKs)
    enc = pl.when(pl.col("prefixed")).then(pl.col("enc"))
    df = df.with_columns(
        (~pl.col("prefixed") & enc.forward_fill().fill_null(state.get("in_exc", False))).alias("cont")
    )
    last_prefixed = df.filter(pl.col("prefixed")).tail(1)
    if last_prefixed.height:
        state["in_exc"] = bool(last_prefixed["enc"].item())
    state["seq"] = seq0 + df.height
    cont = pl.col("cont")
    # a record of another logger of the application (its prefix read, its text no client event), its console lines
    bare = ~msg & ~cont
    console = _where(df, bare & ~pl.col("prefixed"), ln.str.contains(_CONSOLE), pl.Boolean())
    other = bare & (pl.col("prefixed") | console.fill_null(False))
    # the error that ended a request, in whatever line the application wrote it
    final = (
        pl.when(ln.str.contains(_FINAL_TIMEOUT))
        .then(pl.lit("final_timeout"))
        .when(ln.str.contains(_FINAL_CONN))
        .then(pl.lit("final_conn"))
        # an APIStatusError's message ('Error code: 502 - {...}'): the SDK gave up on that status
        .when(ln.str.contains(_FINAL_STATUS))
        .then(pl.lit("reraise"))
    )
    maybe = kind.is_null() & ~cont & ln.str.contains(_FINAL_WORDS)  # the whole column: cheaper than a gather
    df = df.with_columns(pl.coalesce(kind, _where(df, maybe, final, pl.String())).alias("kind"))
    ok = df.select((msg | cont | other | kind.is_not_null()).alias("ok")).to_series()
    n_other = int(df.select((other & kind.is_null()).sum()).item())
    if n_other:
        state["other_records"] = state.get("other_records", 0) + n_other
    df = df.with_columns(_where(df, cont, ln.str.extract(_EXC, 1), pl.String()).alias("exc"))
    return _rows(df.filter(kind.is_not_null() | pl.col("exc").is_not_null()), ctx), ok


def _rows(ev: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The event rows' columns (_EV_SCHEMA) from the scanner's fields."""
    kind, thread, lab_err, mode = pl.col("kind"), pl.col("thread"), pl.col("lab_err"), pl.col("ph_mode")
    spaced = bool(ev.select(pl.col("stamp").str.contains(" ", literal=True).any()).item())
    zoned = ev["tz"].null_count() < ev.height

    def on(*kinds: str) -> pl.Expr:
        return kind.is_in(kinds) if len(kinds) > 1 else kind == kinds[0]

    ev = ev.select(
        "seq",
        "line_no",
        _timestamp(pl.col("stamp"), pl.col("frac"), pl.col("tz"), ctx.tz, spaced, zoned).alias("ts"),
        pl.when(thread.str.contains(r"^\d{4}-| - ")).then(None).otherwise(thread).alias("thread"),
        kind.fill_null("exc"),
        pl.when(on("build")).then(_bounded("rt")).alias("rt"),
        pl.when(on("options")).then(pl.col("options_url")).otherwise(pl.col("url")).alias("url"),
        _bounded("status").alias("status"),
        pl.when(kind.is_null())
        .then(pl.col("exc"))
        .when(on("final_conn"))
        .then(pl.lit("APIConnectionError"))
        .when(on("final_timeout"))
        .then(pl.lit("APITimeoutError"))
        .when(on("timeout"))
        .then(pl.coalesce(pl.col("err"), pl.lit("TimeoutException")))
        .when(on("conn_error"))
        .then(pl.col("err"))
        .alias("err"),
        _bounded("max_retries").alias("max_retries"),
        "delay",
        pl.when(on("options")).then(_bounded("max_tokens")).alias("max_tokens"),
        "rid",
        _bounded("lab_status").alias("lab_status"),
        pl.when(lab_err != "None").then(lab_err.str.extract(r"^([A-Za-z_]\w*)", 1)).alias("lab_err"),
        "latency",
        "ph",
        pl.when(mode == "c")
        .then(pl.lit("concurrency"))
        .when(mode == "r")
        .then(pl.lit("rate"))
        .otherwise(mode)
        .alias("ph_mode"),
        "ph_value",
        "ph_dur",
    )
    return ev.select(list(_EV_SCHEMA)).cast(_EV_SCHEMA)  # fixed column order: carried rows are concatenated
