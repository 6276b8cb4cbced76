"""Envoy configuration found beside the logs (``envoy.yaml``, an Istio ``accessLogFormat``, or the bare access-log
format a user quoted): not a log. access_generic reads its ``key=%OPERATOR%`` pairs to name the fields of the
key=value access records beside it; recognising the file keeps it out of the "unknown format" list.

Samples: tests/data/envoy/envoy.yaml (the lab's Envoy 1.40), and the access-log format of envoyproxy/envoy#9242::

    "[%START_TIME(%d/%m/%YT%H:%M:%S%z %s)%] method=%REQ(:METHOD)% ... total_time_ms=%DURATION% upstream=%UPSTREAM_HOST%\\n"
"""

from __future__ import annotations

import polars as pl

from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "envoy_config"
KIND = "config"
MODE = "lines"
INDEPENDENT_CHUNKS = True
DESCRIPTION = (
    "Envoy configuration or access-log format string (its operators name access_generic's key=value fields)"
)
SAMPLES = [
    "static_resources:",
    "          access_log:",
    "          - name: envoy.access_loggers.file",
    '              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog',
    '"[%START_TIME(%d/%m/%YT%H:%M:%S%z %s)%] method=%REQ(:METHOD)% authority=%REQ(:AUTHORITY)% txId=%RESP(TID)% request=%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% alpn=%PROTOCOL% response_flag=%RESPONSE_FLAGS% ssl_protocol=%DOWNSTREAM_TLS_VERSION% ssl_cipher=%DOWNSTREAM_TLS_CIPHER% status=%RESPONSE_CODE% status_details=%RESPONSE_CODE_DETAILS% request_size=%BYTES_RECEIVED% response_size=%BYTES_SENT% envoy_request_id=%REQ(X-REQUEST-ID)% user-agent=%REQ(USER-AGENT)% xFor=%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% x-envoy-upstream-service-time=%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% total_time_ms=%DURATION% upstream=%UPSTREAM_HOST%\\n"',
]

# Envoy's own configuration words, or an access-log format's command operators
_STRONG = (
    r"^\s*(?:static_resources:|dynamic_resources:|[-\s]*name: envoy\.|\"?@type\"?: type\.googleapis\.com/envoy\.)"
    r"|%(?:START_TIME|RESPONSE_CODE|RESPONSE_FLAGS|DURATION|UPSTREAM_HOST|REQ\([^)]*\)|BYTES_SENT)(?:\([^)%]*\))?%"
)


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    g = per_head(nonblank(frame, 200), n, strong=pl.col("line").str.contains(_STRONG).sum())
    return g.select(pl.when(pl.col("strong") >= 1).then(0.9).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    # a configuration's every line is configuration (YAML, comments, the format string): read, no rows
    return ChunkResult(recognized=pl.Series("ok", [True] * lines.height, dtype=pl.Boolean))
