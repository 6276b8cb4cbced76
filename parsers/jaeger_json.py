"""Jaeger JSON -> ``spans``.

The Jaeger UI's download and its query API (``/api/traces``, ``/api/traces/{id}``): ``{"data": [trace, …]}``,
each trace ``{"traceID", "spans": […], "processes": {"p1": {"serviceName", "tags"}}}``; a trace alone too (the
UI's own JSON converter, tests/data/traces/jaeger/jaeger-ui_01.json)::

    {"traceID": "0000000000000001", "spans": [{"traceID": "0000000000000001", "spanID": "3", "operationName": "some-operation", "references": [{"refType": "CHILD_OF", "traceID": "0000000000000001", "spanID": "2"}], "startTime": 1485467191639875, "duration": 5, "tags": [], "logs": [], "processID": "p2"}], "processes": {"p2": {"serviceName": "service-y", "tags": []}}}

Upstream: jaegertracing/jaeger ``model/json/model.go`` (``startTime`` and ``duration`` in µs, typed tags,
``span.kind`` and ``error`` as tags, the OTel status as ``otel.status_code``, ``logs`` as events). The parent is
the first CHILD_OF reference of the same trace.
"""

from __future__ import annotations

import polars as pl

from . import _tracefile
from ._spans import Span, attr, us_to_ns
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "jaeger_json"
KIND = "traces"
DESCRIPTION = "Jaeger JSON traces (UI download / query API: data[].spans + processes)"
MODE = "lines"
SAMPLES = [
    '{"data":[{"traceID":"665b3cc06e48f122","spans":[{"traceID":"665b3cc06e48f122","spanID":"616bc4df9f135fcd",'
    '"flags":1,"operationName":"HTTP GET: /customer","references":[],"startTime":1555385360015391,'
    '"duration":179848,"tags":[],"logs":[],"processID":"p2"}],"processes":{"p2":{"serviceName":"customer"}}}]}',
]
_TRACE = r'"traceID"\s*:\s*"[0-9a-fA-F]+"'
_SHAPE = r'"(?:spanID|operationName|processes|processID)"\s*:'


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    text = pl.col("text").str.slice(0, 65536)
    g = per_head(frame, n, text=pl.col("line").str.join("\n"))
    return g.select(
        pl.when(text.str.contains(_TRACE) & text.str.contains(_SHAPE)).then(0.95).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    return _tracefile.parse_chunk(lines, ctx, state, convert)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    return _tracefile.finish(ctx, state)


def _tags(tags: object) -> list[tuple[str, str, str | None]]:
    out = []
    for t in tags if isinstance(tags, list) else []:
        if isinstance(t, dict) and (a := attr(t.get("key"), t.get("value"))) is not None:
            out.append(a)
    return out


def convert(value: object, line_no: int) -> list[Span] | None:
    traces = value.get("data") if isinstance(value, dict) and "data" in value else [value]
    if not isinstance(traces, list) or not all(isinstance(t, dict) and "spans" in t for t in traces):
        return None
    out = []
    for tr in traces:
        procs = tr.get("processes") or {}
        for s in tr.get("spans") or []:
            tags = _tags(s.get("tags"))
            td = {a[0]: a[1] for a in tags}
            proc = s.get("process") or procs.get(s.get("processID")) or {}
            parent = next(
                (
                    r.get("spanID")
                    for r in s.get("references") or []
                    if r.get("refType") == "CHILD_OF" and r.get("traceID") == s.get("traceID")
                ),
                None,
            )
            st, dur = s.get("startTime"), s.get("duration")
            status = td.get("otel.status_code") or ("error" if td.get("error") == "true" else None)
            out.append(
                Span(
                    trace_id=s.get("traceID") or tr.get("traceID"),
                    span_id=s.get("spanID"),
                    parent_span_id=parent,
                    name=s.get("operationName"),
                    service=proc.get("serviceName"),
                    kind=td.get("span.kind") or "internal",
                    start_ns=us_to_ns(st),
                    end_ns=us_to_ns(st, dur or 0),
                    status=status,
                    status_message=td.get("otel.status_description"),
                    attrs=tags,
                    events=[
                        (
                            {a[0]: a[1] for a in _tags(lg.get("fields"))}.get("event"),
                            us_to_ns(lg.get("timestamp")) if isinstance(lg.get("timestamp"), int) else None,
                        )
                        for lg in s.get("logs") or []
                        if isinstance(lg, dict)
                    ],
                    scope=td.get("otel.scope.name") or td.get("otel.library.name"),
                    line_no=line_no,
                )
            )
    return out
