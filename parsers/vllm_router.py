"""vLLM production-stack router log (``vllm_router``, a proxy in front of vLLM replicas) -> ``gateway_attempts``,
``gateway_errors``.

Sample (router of May 2025 shutting down under load, vllm-project/production-stack issue #448)::

    INFO:     127.0.0.1:42496 - "POST /v1/chat/completions HTTP/1.0" 200 OK
    [2025-05-21 11:44:46,899] INFO: httpx AsyncClient closed (httpx_client.py:43:vllm_router.httpx_client)
    INFO:     Closing engine stats scraper

Formats: the router's own records, ``[%(asctime)s] %(levelname)s: %(message)s (%(filename)s:%(lineno)d:%(name)s)``
(``src/vllm_router/log.py``; on a terminal the level and the tail are wrapped in ANSI colours, stripped here), with
exception text on the lines after them; and uvicorn's lines, ``INFO:     <message>`` and the access lines
``INFO:     127.0.0.1:42496 - "POST /v1/chat/completions HTTP/1.0" 200 OK``. Until mid-2025 ``app.py`` logged
its lifespan messages (``Closing engine stats scraper``) through the ``uvicorn`` logger, so they have uvicorn's form.

Rows:

* ``gateway_attempts`` flags ``routed``: ``Routing request <id> [with session id <s>] to <url> at <epoch>, process
  time = <s>`` or ``... to <url> (attempt N/M)`` (``services/request_service/request.py``): request_id, upstream,
  attempt / attempts_total when a failover attempt says so.
* ``gateway_attempts`` flags null: a uvicorn access line, the downstream answer (status, method, path).
* ``gateway_errors``: every other router record (level, message, logger, the first URL in it as upstream) and uvicorn's
  other lines (lifecycle: ``Shutting down``, ``Waiting for application shutdown.``); kind ``shutdown`` for uvicorn's
  ``Shutting down``, ``start`` for its ``Started server process [N]``, ``notice`` for DEBUG/INFO, ``other`` above.

Time: router records carry a full local time (read in --tz); uvicorn lines carry none and take the previous router
record's time. Lines before any router record keep a null time (counted as ``untimed`` repairs).
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from ._common import UVICORN_ACCESS, local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "vllm_router"
KIND = "gateway"
DESCRIPTION = (
    "vLLM production-stack router (vllm_router): routed requests, uvicorn access answers, lifecycle messages"
)
MODE = "lines"
SAMPLES = [
    'INFO:     127.0.0.1:42496 - "POST /v1/chat/completions HTTP/1.0" 200 OK',
    "INFO:     Waiting for application shutdown.",
    "[2025-05-21 11:44:46,899] INFO: httpx AsyncClient closed (httpx_client.py:43:vllm_router.httpx_client)",
    "INFO:     Closing engine stats scraper",
    "INFO:     Closing service discovery module",
    "[2025-05-21 13:22:23,320] INFO: Routing request 597e3325-c6c9-4d1b-9644-f792ce76b82c to https://vllm-node05.code.example.rocks/qwen3-30b-a3b at 1747833743.3209236, process time = 0.0026 (request.py:238:vllm_router.services.request_service.request)",
]

_ANSI = r"\x1b\[[0-9;]*m"
_LEVELS = "DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE"
_HEAD = (
    r"^\[(?P<stamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(?P<ms>\d{3})\] (?P<level>"
    + _LEVELS
    + r"): (?P<rest>.*)$"
)
_TAIL = r"^(?P<msg>.*?)\s*\((?P<file>[\w.-]+\.py):(?P<lineno>\d+):(?P<logger>[\w.]+)\)\s*$"
_UVICORN = r"^(?P<level>" + _LEVELS + r"):\s{2,}(?P<msg>\S.*)$"
_ACCESS = "^" + UVICORN_ACCESS
_ROUTED = (
    r"^Routing request (?P<rid>\S+) (?:with session id .*? )?to (?P<url>\S+?),? "
    r"(?:at [\d.]+, process time|\(attempt (?P<att>\d+)/(?P<tot>\d+)\))"
)
_URL = r"(https?://[^\s,'\"()]+)"
# what only the router prints: its records' ``(file.py:N:vllm_router.module)`` tail, its lifespan messages
_DETECT_TAIL = r"\([\w.-]+\.py:\d+:vllm_router(?:\.\w+)*\)(?:\x1b\[0m)?\s*$"
_DETECT_LIFE = (
    r"^INFO:\s{2,}(?:Closing engine stats scraper|Closing service discovery module|Closing dynamic config watcher"
    r"|Closing routing logic instances|Initializing batch API)\s*$"
)
_DETECT_UV = r"^(?:" + _LEVELS + r"):\s{2,}\S"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    g = per_head(nonblank(frame), n, tail=share(_DETECT_TAIL), life=share(_DETECT_LIFE), uv=share(_DETECT_UV))
    mine = pl.col("tail") + pl.col("life")
    # a router log is its own records and uvicorn's lines; uvicorn lines alone are any FastAPI server's
    more = pl.min_horizontal(pl.lit(1.0), 0.5 + mine + 0.5 * (pl.col("uv") - pl.col("life")))
    return g.select(pl.when(mine > 0).then(more).otherwise(pl.lit(0.0))).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    clean = pl.col("line").str.strip_suffix("\r").str.replace_all(_ANSI, "")
    f = lines.with_columns(clean.alias("clean")).with_columns(
        pl.col("clean").str.extract_groups(_HEAD).alias("h"),
        pl.col("clean").str.extract_groups(_UVICORN).alias("u"),
    )
    is_head = pl.col("h").struct.field("level").is_not_null()
    is_uv = pl.col("u").struct.field("level").is_not_null() & ~is_head
    stamp = (
        pl.col("h").struct.field("stamp").str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us", strict=False)
    )
    stamp = stamp + pl.duration(milliseconds=pl.col("h").struct.field("ms").pipe(to_int))
    f = f.with_columns(
        is_head.alias("is_head"),
        is_uv.alias("is_uv"),
        local_to_utc(stamp, ctx.tz).cast(TS).alias("ts_rec"),
        pl.when(is_head).then(pl.lit("router")).when(is_uv).then(pl.lit("uvicorn")).alias("kind"),
    )
    last_ts, last_kind = state.get("last_ts"), state.get("last_kind")
    ts = pl.col("ts_rec").fill_null(strategy="forward")
    kind = pl.col("kind").fill_null(strategy="forward")
    f = f.with_columns(
        (ts if last_ts is None else ts.fill_null(pl.lit(last_ts, TS))).alias("ts"),
        (kind if last_kind is None else kind.fill_null(pl.lit(last_kind))).alias("kind_ff"),
    )
    # exception text and other continuation lines belong to the router record above them
    ok = (
        f.select(pl.col("is_head") | pl.col("is_uv") | (pl.col("kind_ff") == "router"))
        .to_series()
        .alias("ok")
    )
    if f.height:
        state["last_ts"] = f["ts"][-1]
        state["last_kind"] = f["kind_ff"][-1]
    rec = f.filter(pl.col("is_head") | pl.col("is_uv")).with_columns(
        pl.coalesce(pl.col("h").struct.field("level"), pl.col("u").struct.field("level")).alias("level"),
        pl.when(pl.col("is_head"))
        .then(pl.col("h").struct.field("rest"))
        .otherwise(pl.col("u").struct.field("msg"))
        .alias("rest"),
    )
    tail = pl.col("rest").str.extract_groups(_TAIL)
    rec = rec.with_columns(
        pl.when(pl.col("is_head"))
        .then(pl.coalesce(tail.struct.field("msg"), pl.col("rest")))
        .otherwise(pl.col("rest"))
        .alias("msg"),
        tail.struct.field("logger").alias("logger"),
    ).with_columns(
        pl.col("msg").str.extract_groups(_ROUTED).alias("r"),
        pl.when(pl.col("is_uv")).then(pl.col("msg").str.extract_groups(_ACCESS)).alias("a"),
    )
    routed = pl.col("is_head") & pl.col("r").struct.field("rid").is_not_null()
    access = pl.col("is_uv") & pl.col("a").struct.field("status").is_not_null()
    rec = rec.with_columns(routed.alias("routed"), access.fill_null(False).alias("access"))
    tables: dict[str, pl.DataFrame] = {}
    att = _attempts(rec.filter(pl.col("routed") | pl.col("access")), ctx)
    if att.height:
        tables["gateway_attempts"] = att
    err = _errors(rec.filter(~pl.col("routed") & ~pl.col("access")), ctx)
    if err.height:
        tables["gateway_errors"] = err
    assumptions = []
    if rec["is_head"].any():
        assumptions.append(f"vllm_router record times carry no zone: read as {ctx.tz} (--tz)")
    if rec["is_uv"].any():
        assumptions.append(
            "uvicorn lines in a vllm_router log carry no time: they take the previous router record's"
        )
    untimed = int(att["ts_end"].is_null().sum() if att.height else 0) + int(
        err["ts"].is_null().sum() if err.height else 0
    )
    return ChunkResult(
        tables=tables, recognized=ok, assumptions=assumptions, repairs={"untimed": untimed} if untimed else {}
    )


def _attempts(g: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    r, a = pl.col("r"), pl.col("a")
    return g.select(
        pl.col("ts").alias("ts_start"),
        pl.col("ts").alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(NAME).alias("gateway"),
        pl.when(pl.col("routed")).then(r.struct.field("rid")).alias("request_id"),
        pl.when(pl.col("routed")).then(r.struct.field("att").pipe(to_int)).alias("attempt"),
        pl.when(pl.col("routed")).then(r.struct.field("tot").pipe(to_int)).alias("attempts_total"),
        pl.when(pl.col("routed")).then(r.struct.field("url")).alias("upstream"),
        pl.when(pl.col("access")).then(a.struct.field("status").pipe(to_int)).alias("status"),
        pl.when(pl.col("routed")).then(pl.lit("routed")).alias("flags"),
        pl.when(pl.col("access")).then(a.struct.field("method")).alias("method"),
        pl.when(pl.col("access")).then(a.struct.field("path")).alias("path"),
        "line_no",
    )


def _errors(g: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    level = pl.col("level").str.to_lowercase()
    return g.select(
        "ts",
        pl.lit(ctx.source).alias("source"),
        pl.lit(NAME).alias("gateway"),
        level.alias("level"),
        # uvicorn's 'Shutting down': the server stops (a signal, its supervisor); answers after it are a finding
        pl.when(pl.col("is_uv") & (pl.col("msg") == "Shutting down"))
        .then(pl.lit("shutdown"))
        # and its start: what bounds the answers of the stopped process in a file that holds a restart
        .when(pl.col("is_uv") & pl.col("msg").str.starts_with("Started server process"))
        .then(pl.lit("start"))
        .when(level.is_in(["debug", "info", "trace"]))
        .then(pl.lit("notice"))
        .otherwise(pl.lit("other"))
        .alias("kind"),
        pl.col("msg").str.extract(_URL, 1).str.strip_chars_end(":.").alias("upstream"),
        pl.col("msg").str.slice(0, 500).alias("message"),
        pl.when(pl.col("is_uv")).then(pl.lit("uvicorn")).otherwise(pl.col("logger")).alias("logger"),
        "line_no",
    )
