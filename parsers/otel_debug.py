"""The OpenTelemetry Collector's ``debug`` exporter (``verbosity: detailed``; before it, the ``logging`` exporter at
``loglevel: debug``) -> ``spans``: where the Collector's log is the only copy of the spans.

Its blocks, in the Collector's log (tests/data/traces/debug/)::

    2023-09-07T09:57:12.820-0700    info    TracesExporter  {"kind": "exporter", "data_type": "traces", "name": "debug", "resource spans": 1, "spans": 2}
    2023-09-07T09:57:12.821-0700    info    ResourceSpans #0
    Resource attributes:
         -> service.name: Str(telemetrygen)
    ScopeSpans #0
    InstrumentationScope telemetrygen
    Span #0
        Trace ID       : 0c636f29e29816ea76e6a5b8cd6601cf
        Parent ID      : 1a08eba9395c5243
        ID             : 10cebe4b63d47cae
        Name           : okey-dokey
        Kind           : Internal
        Start time     : 2023-09-07 16:57:12.045933 +0000 UTC
        End time       : 2023-09-07 16:57:12.046058 +0000 UTC
        Status code    : Unset
        Status message :
    Attributes:
         -> span.kind: Str(server)

Older Collectors wrote ``Resource labels``, ``InstrumentationLibrarySpans``, ``STRING(...)``, ``SPAN_KIND_SERVER``,
``STATUS_CODE_OK``. Upstream: opentelemetry-collector ``exporter/debugexporter/internal/otlptext``. Events follow
as ``SpanEvent #N`` with ``-> Name:`` and ``-> Timestamp:``. Read line by line (a block runs over chunks); a line
not of the grammar ends the span being read and counts unrecognized.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from . import _spans
from ._spans import Span
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "otel_debug"
KIND = "traces"
DESCRIPTION = "OpenTelemetry Collector debug (logging) exporter text, detailed verbosity"
MODE = "lines"
SAMPLES = [
    "Span #0",
    "    Trace ID       : 0c636f29e29816ea76e6a5b8cd6601cf",
    "    Parent ID      : 1a08eba9395c5243",
    "    ID             : 10cebe4b63d47cae",
    "    Name           : okey-dokey",
    "    Kind           : Internal",
]
_RESOURCE = re.compile(r"(?:^|\s)ResourceSpans #\d+\s*$")
_SCOPE = re.compile(r"^(?:ScopeSpans|InstrumentationLibrarySpans) #\d+\s*$")
_SCOPE_NAME = re.compile(r"^Instrumentation(?:Scope|Library) ?(\S*)")
_META = re.compile(
    r"^(?:Resource SchemaURL:|ScopeSpans SchemaURL:|Resource (?:attributes|labels):\s*$|Attributes:\s*$|"
    r"Events:\s*$|Links:\s*$|SpanLink #\d+\s*$)"
)
_SPAN = re.compile(r"^Span #\d+\s*$")
_EVENT = re.compile(r"^SpanEvent #\d+\s*$")
_FIELD = re.compile(r"^\s{4}([A-Za-z][A-Za-z ]*?)\s*:\s?(.*)$")
_ATTR = re.compile(r"^\s+-> ([^:]+?): ?(.*)$")
_VALUE = re.compile(r"^([A-Za-z]+)\((.*)\)$")
# the Collector's own line about the batch, and the fields line zap writes after the block
_ZAP = re.compile(r'\bTraces(?:Exporter)?\s+\{"|^\{"resource": \{.*"otelcol\.signal": "traces"')
_TIME = re.compile(r"^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d+))? ([+-]\d{4})")
_DETECT_SPAN = r"^Span #\d+\s*$"
_DETECT_FIELD = r"^\s{4}Trace ID\s+: [0-9a-f]{32}\s*$"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    line = pl.col("line")
    g = per_head(
        frame,
        n,
        span=line.str.contains(_DETECT_SPAN).any(),
        tid=line.str.contains(_DETECT_FIELD).any(),
        res=line.str.contains(r"ResourceSpans #\d+\s*$").any(),
    )
    return g.select(
        pl.when(pl.col("span") & pl.col("tid")).then(0.96).when(pl.col("res")).then(0.5).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _value(text: str) -> str:
    m = _VALUE.match(text.strip())
    return m.group(2) if m else text.strip()


# pdata's AnyValue type names as the exporter prints them (Str, Int, Double, Bool, Bytes, Slice, Map; STRING ...
# in the older logging exporter)
_TYPES = {
    "str": "string",
    "string": "string",
    "int": "int",
    "double": "double",
    "bool": "bool",
    "bytes": "bytes",
}
_TYPES |= {"slice": "array", "array": "array", "map": "kvlist"}


def _typed(key: str, text: str) -> tuple[str, str, str | None]:
    m = _VALUE.match(text.strip())
    return key, _value(text), _TYPES.get(m.group(1).lower()) if m else None


def ns_of(text: str) -> int | None:
    """'2023-09-07 16:57:12.045933 +0000 UTC' (Go's time.String) -> Unix ns."""
    m = _TIME.match(text.strip())
    if not m:
        return None
    try:
        dt = datetime.strptime(f"{m[1]} {m[2]} {m[4]}", "%Y-%m-%d %H:%M:%S %z")
    except ValueError:
        return None
    return int(dt.timestamp()) * 1_000_000_000 + int(((m[3] or "") + "000000000")[:9])


_FIELDS = {
    "Trace ID": "trace_id",
    "Parent ID": "parent_span_id",
    "ID": "span_id",
    "Name": "name",
    "Kind": "kind",
    "Status code": "status",
    "Status message": "status_message",
}


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    out: list[Span] = []
    ok = []
    st = state.setdefault(
        "debug", {"service": None, "scope": None, "span": None, "section": None, "event": None}
    )
    for n, t in zip(lines["line_no"].to_list(), lines["line"].to_list(), strict=True):
        hit = True
        if _SPAN.match(t):
            _close(st, out)
            st["span"] = Span(
                None, None, None, None, st["service"], None, None, None, None, line_no=n, scope=st["scope"]
            )
            st["section"] = "span"
        elif _RESOURCE.search(t):
            _close(st, out)
            st.update(service=None, scope=None, section="resource")
        elif _SCOPE.match(t):
            _close(st, out)
            st.update(scope=None, section="scope")
        elif (m := _SCOPE_NAME.match(t)) and st["span"] is None:
            st["scope"] = m[1] or None
        elif _EVENT.match(t):
            st["section"], st["event"] = "event", None
        elif _META.match(t):
            st["section"] = {"Attributes:": "attrs", "Events:": "events", "Links:": "links"}.get(
                t.strip(), st["section"] if not t.startswith("Resource ") else "resource"
            )
            if t.startswith("SpanLink"):
                st["section"] = "links"
        elif (m := _FIELD.match(t)) and st["span"] is not None and st["section"] == "span":
            _field(st["span"], m[1], m[2])
        elif m := _ATTR.match(t):
            _attr(st, m[1], m[2])
        elif _ZAP.search(t):
            _close(st, out)
        else:
            hit = False
            _close(st, out)
            st["section"] = None
        ok.append(hit)
    tables = {"spans": _spans.table(out, ctx.source, ctx.replica, ctx.include_prompts)} if out else {}
    return ChunkResult(tables=tables, recognized=pl.Series(ok, dtype=pl.Boolean))


def _field(sp: Span, key: str, val: str) -> None:
    val = val.strip()
    if key in _FIELDS:
        setattr(sp, _FIELDS[key], val or None)
    elif key == "Start time":
        sp.start_ns = ns_of(val)
    elif key == "End time":
        sp.end_ns = ns_of(val)


def _attr(st: dict, key: str, val: str) -> None:
    key = key.strip()
    sec, sp = st["section"], st["span"]
    if sec == "resource":
        if key == "service.name":
            st["service"] = _value(val)
    elif sec == "attrs" and sp is not None:
        sp.attrs.append(_typed(key, val))
    elif sec == "event" and sp is not None:
        if key == "Name":
            st["event"] = [val.strip(), None]
            sp.events.append(tuple(st["event"]))
        elif key == "Timestamp" and st["event"] is not None and sp.events:
            sp.events[-1] = (sp.events[-1][0], ns_of(val))


def _close(st: dict, out: list[Span]) -> None:
    if st["span"] is not None:
        out.append(st["span"])
        st["span"] = None


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    st = state.get("debug")
    if not st or st["span"] is None:
        return None
    out: list[Span] = []
    _close(st, out)
    return ChunkResult(tables={"spans": _spans.table(out, ctx.source, ctx.replica, ctx.include_prompts)})
