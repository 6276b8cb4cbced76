"""OTLP JSON lines decoded into span columns at once: the fast path of ``otlp_json``.

The Collector's file exporter (and the lab's receiver) writes one ``ExportTraceServiceRequest`` a line. Decoding
them one ``json.loads`` at a time and building the rows from Python objects read 0.8 MB/s of vLLM's spans
(docs/performance.md, "Trace files"); here polars decodes every line of a chunk against the OTLP shape in one
call (``str.json_decode`` with the schema below) and the spans come out of explodes and struct fields, with the
same rows as the per-value path (tests/test_traces_fast.py compares them on the real lab files).

Taken only when it gives the same answer as ``_jsonstream``: no value left open by the chunk before, every line
that could open a JSON value is a whole ``{"resourceSpans":[…]}`` line, and the lines decode against the schema
(an attribute value nested deeper than a list of scalars, a cut or malformed line: ``None``, and the chunk is
read by the per-value path, which says what it could not read).
"""

from __future__ import annotations

import polars as pl

from . import _jsonstream

S = pl.String
_SCALAR = {"stringValue": S, "intValue": S, "doubleValue": S, "boolValue": S, "bytesValue": S}
ANY = pl.Struct({**_SCALAR, "arrayValue": pl.Struct({"values": pl.List(pl.Struct(_SCALAR))})})
KV = pl.List(pl.Struct({"key": S, "value": ANY}))
SPAN = pl.Struct(
    {
        "traceId": S,
        "spanId": S,
        "parentSpanId": S,
        "name": S,
        "kind": S,
        "startTimeUnixNano": S,
        "endTimeUnixNano": S,
        "attributes": KV,
        "status": pl.Struct({"code": S, "message": S}),
        "events": pl.List(pl.Struct({"name": S, "timeUnixNano": S})),
    }
)
_SCOPE = pl.Struct({"name": S})
DOC = pl.Struct(
    {
        "resourceSpans": pl.List(
            pl.Struct(
                {
                    "resource": pl.Struct({"attributes": KV}),
                    "scopeSpans": pl.List(pl.Struct({"scope": _SCOPE, "spans": pl.List(SPAN)})),
                    "instrumentationLibrarySpans": pl.List(
                        pl.Struct({"instrumentationLibrary": _SCOPE, "spans": pl.List(SPAN)})
                    ),
                }
            )
        )
    }
)
FAST_LINE = r'^\s*\{\s*"resourceSpans"\s*:\s*\[.*\}\s*$'
_OPENS = _jsonstream._OPEN.pattern
_HEX = r"^[0-9a-fA-F]*$"


def value_text(v: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """An AnyValue struct -> (its text, its type): scalars as written (doubles as polars prints a Float64), a
    list of scalars as JSON text."""
    f = v.struct.field
    dbl = f("doubleValue").cast(pl.Float64, strict=False).cast(S)
    arr = f("arrayValue").struct.field("values")
    elem = pl.element().struct.field
    quoted = pl.struct(elem("stringValue").alias("s")).struct.json_encode().str.slice(5).str.head(-1)
    item = pl.coalesce(
        pl.when(elem("stringValue").is_not_null()).then(quoted),
        elem("intValue"),
        elem("doubleValue").cast(pl.Float64, strict=False).cast(S),
        elem("boolValue"),
        pl.when(elem("bytesValue").is_not_null()).then(
            pl.struct(elem("bytesValue").alias("s")).struct.json_encode().str.slice(5).str.head(-1)
        ),
    )
    arr_text = pl.lit("[") + arr.list.eval(item).list.join(",") + pl.lit("]")
    text = pl.coalesce(
        f("stringValue"),
        f("intValue"),
        dbl,
        f("boolValue"),
        f("bytesValue"),
        pl.when(arr.is_not_null()).then(arr_text),
    )
    kind = (
        pl.when(f("stringValue").is_not_null())
        .then(pl.lit("string"))
        .when(f("intValue").is_not_null())
        .then(pl.lit("int"))
        .when(f("doubleValue").is_not_null())
        .then(pl.lit("double"))
        .when(f("boolValue").is_not_null())
        .then(pl.lit("bool"))
        .when(f("bytesValue").is_not_null())
        .then(pl.lit("bytes"))
        .when(arr.is_not_null())
        .then(pl.lit("array"))
    )
    return text, kind


def _kvs(col: str) -> pl.Expr:
    """A list of KeyValue -> a list of {key, value text, type}, the ones with no value dropped."""
    text, kind = value_text(pl.element().struct.field("value"))
    return (
        pl.col(col)
        .list.eval(
            pl.struct(pl.element().struct.field("key").alias("key"), text.alias("value"), kind.alias("type"))
        )
        .list.eval(pl.element().filter(pl.element().struct.field("value").is_not_null()))
    )


def _id(col: str) -> pl.Expr:
    """Hex as OTLP/JSON writes it; protobuf's own JSON writes base64 (24 / 12 characters): decoded."""
    c = pl.col(col)
    b64 = c.str.len_chars().is_in([24, 12]) & ~c.str.contains(_HEX)
    return (
        pl.when(b64)
        .then(c.str.decode("base64", strict=False).bin.encode("hex"))
        .otherwise(pl.when(c != "").then(c))
    )


def usable(lines: pl.DataFrame, state: dict) -> pl.Series | None:
    """The lines to decode here (a Boolean per line), or None when the chunk needs the per-value path."""
    if state.get("json") is not None:
        return None
    flags = lines.select(
        pl.col("line").str.contains(FAST_LINE).alias("fast"),
        pl.col("line").str.contains(_OPENS).alias("opens"),
    )
    if (flags["opens"] & ~flags["fast"]).any():
        return None
    return flags["fast"]


def raw_spans(lines: pl.DataFrame) -> pl.DataFrame | None:
    """The span records of whole OTLP lines (``line_no``, ``line``) as ``_spans.finish`` takes them; None when a
    line does not decode against the schema."""
    try:
        doc = lines.select("line_no", pl.col("line").str.json_decode(DOC).alias("d"))
    except pl.exceptions.PolarsError:
        return None
    rs = (
        doc.select("line_no", pl.col("d").struct.field("resourceSpans").alias("rs"))
        .explode("rs")
        .drop_nulls("rs")
        .unnest("rs")
    )
    service = (
        pl.col("resource")
        .struct.field("attributes")
        .list.eval(
            pl.element()
            .filter(pl.element().struct.field("key") == "service.name")
            .struct.field("value")
            .struct.field("stringValue")
        )
        .list.first()
    )
    rs = rs.with_columns(service.alias("service"))
    scoped = []
    for col, scope in (("scopeSpans", "scope"), ("instrumentationLibrarySpans", "instrumentationLibrary")):
        part = (
            rs.select("line_no", "service", pl.col(col).alias("ss"))
            .explode("ss")
            .drop_nulls("ss")
            .select(
                "line_no",
                "service",
                pl.col("ss").struct.field(scope).struct.field("name").alias("scope"),
                pl.col("ss").struct.field("spans").alias("sp"),
            )
        )
        scoped.append(part)
    sp = pl.concat(scoped).explode("sp").drop_nulls("sp").unnest("sp")
    st = pl.col("status").struct.field
    return sp.select(
        _id("traceId").alias("trace_id"),
        _id("spanId").alias("span_id"),
        _id("parentSpanId").alias("parent_span_id"),
        pl.col("name"),
        pl.col("service"),
        pl.col("kind"),
        pl.col("startTimeUnixNano").cast(pl.Int64, strict=False).alias("start_ns"),
        pl.col("endTimeUnixNano").cast(pl.Int64, strict=False).alias("end_ns"),
        st("code").fill_null("0").alias("status"),
        pl.when(st("message") != "").then(st("message")).alias("status_message"),
        _kvs("attributes").alias("attributes"),
        pl.col("events")
        .list.eval(
            pl.struct(
                pl.element().struct.field("name").alias("name"),
                pl.element().struct.field("timeUnixNano").cast(pl.Int64, strict=False).alias("ns"),
            )
        )
        .fill_null(pl.lit([], pl.List(pl.Struct({"name": S, "ns": pl.Int64}))))
        .alias("ev"),
        pl.col("scope"),
        pl.col("line_no"),
    )
