"""OTLP JSON trace exports -> ``spans``.

The OpenTelemetry Collector's ``file`` exporter writes one ``ExportTraceServiceRequest`` per line (the lab's
``otlp_receiver.py`` writes the same shape: tests/data/traces/sdk/otlp-*.jsonl)::

    {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm-a"}}]},"scopeSpans":[{"scope":{"name":"vllm.tracing"},"spans":[{"traceId":"ad97…","spanId":"65e4…","parentSpanId":"acf7…","name":"llm_request","kind":2,"startTimeUnixNano":"1796522235168772458","endTimeUnixNano":"1796522235199052170","attributes":[{"key":"gen_ai.request.id","value":{"stringValue":"cmpl-…"}}, …]}]}]}]}

Also read: one pretty-printed export (a saved request body, ``otlp_http`` JSON), Grafana Tempo's trace API answer
(``{"batches": […]}``, kinds as ``SPAN_KIND_*`` names, times as JSON numbers), Jaeger v2's ``/api/v3/traces``
answer (``{"result": {"resourceSpans": …}}``), a line per ``ResourceSpans`` (opentelemetry-java's
``OtlpJsonLoggingSpanExporter``), the older ``instrumentationLibrarySpans``, and protobuf JSON's base64 ids.
Upstream: https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding (ids hex, enums as integers,
64-bit integers as decimal strings).
"""

from __future__ import annotations

import base64
import binascii

import polars as pl

from . import _otlp_columns, _spans, _tracefile
from ._spans import Span, attr_text
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "otlp_json"
KIND = "traces"
DESCRIPTION = (
    "OTLP JSON trace export (Collector file exporter lines, one export, Tempo API, Jaeger v2 api/v3)"
)
MODE = "lines"
SAMPLES = [
    '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"vllm-a"}}]},'
    '"scopeSpans":[{"scope":{"name":"vllm.tracing"},"spans":[{"traceId":"ad97d90e3520bf2349024103fc2add70",'
    '"spanId":"65e407c2abe0002a","parentSpanId":"acf79631d5717ce5","name":"llm_request","kind":2,'
    '"startTimeUnixNano":"1796522235168772458","endTimeUnixNano":"1796522235199052170"}]}]}]}',
]
_DETECT = r'"(?:resourceSpans|resource_spans)"\s*:\s*\['
# Grafana Tempo's trace API answers with the older name of resourceSpans (tests/data/traces/otlp/tempo-api-batches.json)
_TEMPO = r'"batches"\s*:\s*\[\s*\{\s*"(?:resource|scopeSpans|instrumentationLibrarySpans)"'
_JAVA_LINE = r'^\s*\{"resource":\{.*"(?:scopeSpans|instrumentationLibrarySpans)":\['


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    text = pl.col("text").str.slice(0, 65536)
    g = per_head(frame, n, text=pl.col("line").str.join("\n"))
    return g.select(
        pl.when(text.str.contains(_DETECT) | text.str.contains(_JAVA_LINE) | text.str.contains(_TEMPO))
        .then(0.97)
        .otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    fast = _otlp_columns.usable(lines, state)
    if fast is not None:
        raw = _otlp_columns.raw_spans(lines.filter(fast))
        if raw is not None:  # every whole line decoded at once (the Collector file exporter's files)
            state["spans"] = state.get("spans", 0) + raw.height
            tables = (
                {"spans": _spans.finish(raw, ctx.source, ctx.replica, ctx.include_prompts)}
                if raw.height
                else {}
            )
            return ChunkResult(tables=tables, recognized=fast)
    return _tracefile.parse_chunk(lines, ctx, state, convert)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    return _tracefile.finish(ctx, state)


def _id(v: object) -> str | None:
    """Hex as OTLP/JSON writes it; protobuf's own JSON writes base64 (24/12 characters): decoded."""
    if not isinstance(v, str) or not v:
        return None
    if len(v) in (24, 12) and not all(c in "0123456789abcdefABCDEF" for c in v):
        try:
            return base64.b64decode(v).hex()
        except (binascii.Error, ValueError):
            return v
    return v


def value_of(v: object) -> object:
    """An AnyValue ({"stringValue": …}, {"intValue": "64"}, {"arrayValue": {"values": […]}}) as a plain value."""
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "intValue", "doubleValue", "boolValue", "bytesValue"):
        if k in v:
            return v[k]
    if "arrayValue" in v:
        return [value_of(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv.get("key"): value_of(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    return None


_TYPES = {
    "stringValue": "string",
    "intValue": "int",
    "doubleValue": "double",
    "boolValue": "bool",
    "bytesValue": "bytes",
    "arrayValue": "array",
    "kvlistValue": "kvlist",
}


def _attrs(kvs: object) -> list[tuple[str, str, str | None]]:
    out = []
    for kv in kvs if isinstance(kvs, list) else []:
        if isinstance(kv, dict) and kv.get("key") is not None:
            v = kv.get("value")
            txt = attr_text(value_of(v))
            if txt is not None:
                kind = next((t for k, t in _TYPES.items() if k in v), None) if isinstance(v, dict) else None
                out.append((str(kv["key"]), txt, kind))
    return out


def _int(v: object) -> int | None:
    """A time in nanoseconds, written as a string (OTLP JSON's int64) or a number; None where it is none (an
    infinity too, which Python's JSON reads from ``Infinity``)."""
    if not isinstance(v, str | int | float):
        return None
    try:
        return int(v)
    except (ValueError, OverflowError):
        return None


def convert(value: object, line_no: int) -> list[Span] | None:
    if isinstance(value, dict) and isinstance(value.get("result"), dict):  # Jaeger v2 api/v3
        value = value["result"]
    if isinstance(value, dict) and isinstance(value.get("batches"), list) and "resourceSpans" not in value:
        value = {"resourceSpans": value["batches"]}  # Grafana Tempo's /api/traces/<id>
    if isinstance(value, dict) and "resource" in value and "resourceSpans" not in value:
        value = {"resourceSpans": [value]}  # one ResourceSpans a line (OtlpJsonLoggingSpanExporter)
    if not isinstance(value, dict) or not isinstance(
        value.get("resourceSpans", value.get("resource_spans")), list
    ):
        return None
    out: list[Span] = []
    for rs in value.get("resourceSpans", value.get("resource_spans")) or []:
        res = _attrs(((rs or {}).get("resource") or {}).get("attributes"))
        service = next((a[1] for a in res if a[0] == "service.name"), None)
        for ss in (rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []:
            scope = ((ss or {}).get("scope") or (ss or {}).get("instrumentationLibrary") or {}).get("name")
            for sp in (ss or {}).get("spans") or []:
                st = sp.get("status") or {}
                out.append(
                    Span(
                        trace_id=_id(sp.get("traceId")),
                        span_id=_id(sp.get("spanId")),
                        parent_span_id=_id(sp.get("parentSpanId")),
                        name=sp.get("name"),
                        service=service,
                        kind=sp.get("kind"),
                        start_ns=_int(sp.get("startTimeUnixNano")),
                        end_ns=_int(sp.get("endTimeUnixNano")),
                        status=st.get("code", 0),
                        status_message=st.get("message"),
                        attrs=_attrs(sp.get("attributes")),
                        events=[
                            (attr_text(e.get("name")), _int(e.get("timeUnixNano")))
                            for e in sp.get("events") or []
                            if isinstance(e, dict)
                        ],
                        scope=scope,
                        line_no=line_no,
                    )
                )
    return out
