"""The OpenTelemetry SDK's ``ConsoleSpanExporter`` output -> ``spans``.

``ReadableSpan.to_json()`` printed one after another, pretty (4 spaces; 2 in opentelemetry-bash), often between
the program's own lines on its stdout (tests/data/traces/console/griptape-docs.txt)::

    {
        "name": "llm_request",
        "context": {
            "trace_id": "0xee1ab1b661109b585e8469d0a072441c",
            "span_id": "0xe04e59a66a016807",
            "trace_state": "[]"
        },
        "kind": "SpanKind.SERVER",
        "parent_id": "0xa95801352c8404c6",
        "start_time": "2026-12-06T01:57:14.408698Z",
        …
        "resource": {"attributes": {"service.name": "vllm-a"}, "schema_url": ""}
    }

Upstream: opentelemetry-python ``sdk/trace/__init__.py`` ``ReadableSpan.to_json`` (ids ``0x``-prefixed; SDK 1.2
wrote ``parent_id`` without it and the resource's attributes flat, issue #1832). Times are ISO 8601 UTC, to the
microsecond. Lines between the objects are the program's: counted unrecognized.
"""

from __future__ import annotations

import polars as pl

from . import _tracefile
from ._spans import Span, attr, attr_text
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "otel_console"
KIND = "traces"
DESCRIPTION = "OpenTelemetry SDK ConsoleSpanExporter output (pretty JSON spans, 0x ids)"
MODE = "lines"
SAMPLES = [
    "{",
    '    "name": "POST",',
    '    "context": {',
    '        "trace_id": "0xee1ab1b661109b585e8469d0a072441c",',
    '        "span_id": "0x715ff92d1d24a79d",',
    '        "trace_state": "[]"',
    "    },",
    '    "kind": "SpanKind.CLIENT",',
]
_DETECT = r'"trace_id"\s*:\s*"0x[0-9a-fA-F]{16,32}"'
_CONTEXT = r'^\s*"context"\s*:\s*\{\s*$'


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    line = pl.col("line")
    g = per_head(frame, n, tid=line.str.contains(_DETECT).any(), ctx=line.str.contains(_CONTEXT).any())
    return g.select(
        pl.when(pl.col("tid") & pl.col("ctx")).then(0.96).when(pl.col("tid")).then(0.6).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    return _tracefile.parse_chunk(lines, ctx, state, convert, whole_line=False)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    return _tracefile.finish(ctx, state)


def convert(value: object, line_no: int) -> list[Span] | None:
    if not isinstance(value, dict) or not isinstance(value.get("context"), dict):
        return None
    c = value["context"]
    res = value.get("resource") or {}
    rattrs = res.get("attributes", res) if isinstance(res, dict) else {}
    status = value.get("status") or {}
    scope = value.get("instrumentation_scope") or value.get("instrumentation_info") or {}
    attrs = value.get("attributes") or {}
    return [
        Span(
            trace_id=c.get("trace_id"),
            span_id=c.get("span_id"),
            parent_span_id=value.get("parent_id"),
            name=value.get("name"),
            service=attr_text(rattrs.get("service.name")) if isinstance(rattrs, dict) else None,
            kind=value.get("kind"),
            start_ns=_tracefile.ns_of_iso(value.get("start_time")),
            end_ns=_tracefile.ns_of_iso(value.get("end_time")),
            status=status.get("status_code"),
            status_message=status.get("description"),
            attrs=[a for k, v in attrs.items() if (a := attr(k, v)) is not None],
            events=[
                (attr_text(e.get("name")), _tracefile.ns_of_iso(e.get("timestamp")))
                for e in value.get("events") or []
                if isinstance(e, dict)
            ],
            scope=scope.get("name") if isinstance(scope, dict) else None,
            line_no=line_no,
        )
    ]
