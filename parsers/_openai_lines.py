"""openai_client's lines -> one event row each: kind, thread, time and fields.

Each line's time, thread, message lead and the fields of its kind are read by the compiled scanner in one pass over the
chunk (``_openai_lines.toml``); then one pass of the core over the chunk (scan/src/events.rs, with the patterns below)
tells the lines of no client message that name the error that ended a request, a traceback's lines and exception, the
recognised lines, and gives the event rows' kinds and errors; what is left here is the gather of the scan's other fields
at those rows, their times and bounds."""

from __future__ import annotations

import functools

import polars as pl
from polars.datatypes import DataType, DataTypeClass

from logscope import _scan
from logscope.numbers import MAX_ABS

from . import _kinds
from ._common import local_to_utc
from .base import ParseContext

_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
# a record of logging's default format ('INFO:httpx:...'): a prefix without a time
_LEVEL_PREFIX = rf"^{_LEVEL}:"
# an application's console lines with an ISO time of their own ('  ✗ [2026-06-09T18:53:31.458Z] Coach failed')
_CONSOLE = r"^\s*(?:\S{1,3}\s+)?\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?\] "
# the SDK's last words when it gives up on a request, as the application logs them (its exception's message):
# APIConnectionError 'Connection error.', APITimeoutError 'Request timed out.'
_FINAL_CONN = r"APIConnectionError|\bConnection error\."
_FINAL_TIMEOUT = r"APITimeoutError|\bRequest timed out\."
_FINAL_STATUS = r"(?:^|: )Error code: \d{3}\b"
# a literal each of those three needs: the three run only on lines holding one (one search of literals over the ~60,000
# lines of a message of no kind, 'request_id: None', 'N retries left', at a third of the three's time)
_FINAL_WORDS = r"APIConnectionError|Connection error\.|APITimeoutError|Request timed out\.|Error code: "
# other lines of the httpx / httpcore loggers (connect_tcp.started, load_ssl_context...): known noise (detection)
_NOISE = rf"^(?:\[?\d{{4}}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|{_LEVEL}:).*?(?:^|[\s\[:])(?:httpcore2?|httpx2?)(?:\.\w+)*(?:[\s:\]]|$)"
_EXC = r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Timeout|Exit|Interrupt))(?::|$)"
# a "thread" in brackets that is a time or a logger's field ('[2026-...]', '[openai - INFO]'): none
_NOT_THREAD = r"^\d{4}-| - "
# the lab client's 'err=ReadTimeout(...)': the error's class
_ERR_CLASS = r"^([A-Za-z_]\w*)"

_EV_SCHEMA: dict[str, DataType | DataTypeClass] = {
    "seq": pl.Int64,
    "line_no": pl.Int64,
    "ts": pl.Datetime("us", "UTC"),
    "thread": pl.String,
    "kind": pl.String,
    "rt": pl.Int64,
    "url": pl.String,
    "status": pl.Int64,
    "err": pl.String,
    "max_retries": pl.Int64,
    "max_tokens": pl.Int64,
    "rid": pl.String,
    "lab_status": pl.Int64,
    "lab_err": pl.String,
    "latency": pl.Float64,
    "ph": pl.String,
    "ph_mode": pl.String,
    "ph_value": pl.Float64,
    "ph_dur": pl.Float64,
    "delay": pl.Float64,
}


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


def _bounded(c: str) -> pl.Expr:
    """An integer field as to_int reads it: none past +-2**53."""
    return pl.when(pl.col(c).abs() <= MAX_ABS).then(pl.col(c))


@functools.cache
def _pass() -> _scan.OpenaiEvents:
    """The event rows' pass of the compiled scanner (scan/src/events.rs), its patterns compiled once."""
    return _scan.OpenaiEvents(
        {
            "level": _LEVEL_PREFIX,
            "console": _CONSOLE,
            "final_words": _FINAL_WORDS,
            "final_timeout": _FINAL_TIMEOUT,
            "final_conn": _FINAL_CONN,
            "final_status": _FINAL_STATUS,
            "exc": _EXC,
            "not_thread": _NOT_THREAD,
            "err_class": _ERR_CLASS,
        }
    )


def _events(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.Series]:
    """One row per meaningful line, plus the recognised-line mask."""
    seq0 = state.get("seq", 0)
    line = pl.col("line")
    cr = bool(lines.select(line.str.ends_with("\r").any()).item())
    df = lines.select("line_no", (line.str.strip_suffix("\r") if cr else line).alias("line"))
    got = _kinds.scan(__file__, df)
    cols = {c: got.get_column(c) for c in ("lead", "stamp", "thread", "err", "lab_err", "kind")}
    # each line's kind, continuation and recognition, and the event rows' kind and errors: one pass of the core
    ev, ok, in_exc, n_other = _pass().events(
        cols | {"line": df.get_column("line")}, state.get("in_exc", False)
    )
    if in_exc is not None:  # the last record's: an 'Encountered ...' line opens a traceback
        state["in_exc"] = in_exc
    state["seq"] = seq0 + df.height
    if n_other:
        state["other_records"] = state.get("other_records", 0) + n_other
    ev = pl.DataFrame(ev)
    # the scan's other fields at those rows
    at = (
        got.drop("kind", "err", "lab_err", "lead").with_columns(lines.get_column("line_no")).gather(ev["row"])
    )
    return _rows(pl.concat([ev, at], how="horizontal"), ctx, seq0), pl.DataFrame(ok).get_column("ok")


def _rows(ev: pl.DataFrame, ctx: ParseContext, seq0: int) -> pl.DataFrame:
    """The event rows' columns (_EV_SCHEMA) from the pass's and the scanner's fields."""
    kind, mode = pl.col("kind"), pl.col("ph_mode")
    spaced = bool(ev.select(pl.col("stamp").str.contains(" ", literal=True).any()).item())
    zoned = ev["tz"].null_count() < ev.height
    ev = ev.select(
        (pl.col("row") + seq0).alias("seq"),
        "line_no",
        _timestamp(pl.col("stamp"), pl.col("frac"), pl.col("tz"), ctx.tz, spaced, zoned).alias("ts"),
        pl.when(pl.col("own_thread")).then(pl.col("thread")).alias("thread"),
        "kind",
        pl.when(kind == "build").then(_bounded("rt")).alias("rt"),
        pl.when(kind == "options").then(pl.col("options_url")).otherwise(pl.col("url")).alias("url"),
        _bounded("status").alias("status"),
        "err",
        _bounded("max_retries").alias("max_retries"),
        "delay",
        pl.when(kind == "options").then(_bounded("max_tokens")).alias("max_tokens"),
        "rid",
        _bounded("lab_status").alias("lab_status"),
        "lab_err",
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
    return ev.select(list(_EV_SCHEMA)).cast(
        pl.Schema(_EV_SCHEMA)
    )  # fixed column order: carried rows are concatenated
