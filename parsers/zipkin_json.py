"""Zipkin v2 JSON -> ``spans``.

A list of spans (the body of ``POST /api/v2/spans``, the answer of ``GET /api/v2/trace/{id}``, a UI download;
``GET /api/v2/traces`` answers a list of such lists), times in microseconds, tags as strings
(tests/data/traces/sdk/zipkin-1.json, printed by opentelemetry-exporter-zipkin-json)::

    [{"traceId": "ee1ab1b661109b585e8469d0a072441c", "id": "715ff92d1d24a79d", "name": "POST", "timestamp": 1796522234328213, "duration": 20647, "localEndpoint": {"serviceName": "lab-client"}, "kind": "CLIENT", "tags": {"http.response.status_code": "502", "otel.status_code": "ERROR", …}, "parentId": "a95801352c8404c6"}]

One list per line too (brave's Kafka sender, read back by ``kafka-console-consumer``). Upstream:
https://zipkin.io/zipkin-api/ (Span: ``timestamp``/``duration`` in µs, ``kind`` CLIENT/SERVER/PRODUCER/CONSUMER,
absent for local spans; ``annotations`` as events; the OTel exporter writes the status as ``otel.status_code``
and ``error`` tags).
"""

from __future__ import annotations

import json

import polars as pl

from . import _tracefile
from ._spans import Span, attr_text, us_to_ns
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "zipkin_json"
KIND = "traces"
DESCRIPTION = "Zipkin v2 JSON spans (a list of spans, µs times; API bodies, downloads, Kafka messages)"
MODE = "lines"
SAMPLES = [
    '[{"traceId":"802bd09f480b5faa","parentId":"802bd09f480b5faa","id":"bb3c70909ea3ee3c","kind":"SERVER",'
    '"name":"get","timestamp":1510891296426607,"duration":10681,"localEndpoint":{"serviceName":"backend",'
    '"ipv4":"10.200.170.137"},"remoteEndpoint":{"ipv4":"127.0.0.1","port":64421},"tags":{"http.path":"/api"},'
    '"shared":true}]',
]
_DETECT = r'^\s*\[?\s*\[?\s*\{\s*"(?:traceId|id|name|parentId|kind|timestamp)"\s*:'
_ZIPKIN = r'"traceId"\s*:\s*"[0-9a-fA-F]{16,32}"'
_ENDPOINT = r'"localEndpoint"\s*:|"timestamp"\s*:\s*\d{16}'


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    text = pl.col("text").str.slice(0, 65536)
    g = per_head(frame, n, text=pl.col("line").str.join("\n"))
    return g.select(
        pl.when(
            text.str.contains(_DETECT)
            & text.str.contains(_ZIPKIN)
            & text.str.contains(_ENDPOINT)
            & ~text.str.contains('"resourceSpans"', literal=True)
        )
        .then(0.94)
        .otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    return _tracefile.parse_chunk(lines, ctx, state, convert)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    return _tracefile.finish(ctx, state)


def _event_name(v: object) -> str | None:
    """The OTel Zipkin exporter writes an event as the annotation ``{"<name>": {<attributes>}}``; an annotation's
    value is text, and one that is not (a number, a map) is kept as its text rather than failing the chunk."""
    if isinstance(v, str) and v.startswith("{"):
        try:
            d = json.loads(v)
        except ValueError:
            return v
        if isinstance(d, dict) and len(d) == 1:
            return next(iter(d))
    return attr_text(v)


def convert(value: object, line_no: int) -> list[Span] | None:
    items = value if isinstance(value, list) else [value]
    flat = [x for it in items for x in (it if isinstance(it, list) else [it])]  # a list of traces too
    spans = [s for s in flat if isinstance(s, dict) and "traceId" in s]
    if not flat or len(spans) < len(flat):
        return None
    out = []
    for s in spans:
        tags = {k: str(v) for k, v in (s.get("tags") or {}).items()}
        ts, dur = s.get("timestamp"), s.get("duration")
        status = tags.get("otel.status_code") or ("error" if "error" in tags else None)
        out.append(
            Span(
                trace_id=s.get("traceId"),
                span_id=s.get("id"),
                parent_span_id=s.get("parentId"),
                name=s.get("name"),
                service=(s.get("localEndpoint") or {}).get("serviceName"),
                kind=s.get("kind") or "internal",
                start_ns=us_to_ns(ts),
                end_ns=us_to_ns(ts, dur or 0),
                status=status,
                status_message=tags.get("otel.status_description") or tags.get("error") or None,
                attrs=[(k, v, "string") for k, v in tags.items()],  # Zipkin tags are strings
                events=[
                    (
                        _event_name(a.get("value")),
                        us_to_ns(a.get("timestamp")) if isinstance(a.get("timestamp"), int) else None,
                    )
                    for a in s.get("annotations") or []
                    if isinstance(a, dict)
                ],
                scope=tags.get("otel.scope.name") or tags.get("otel.library.name"),
                line_no=line_no,
            )
        )
    return out
