"""The requests logscope rebuilt, as OTLP JSON a trace viewer opens (Jaeger's "upload JSON", Perfetto, an OTLP
file receiver): ``logscope export-traces OUT [-o FILE]``.

One ``ExportTraceServiceRequest`` per line (the Collector file exporter's shape, which ``otlp_json`` reads back):
the spans of the input as they were (their own services, ids and attributes), and beside them the logs' view of
each logical request: a ``logscope.request`` span (service ``logscope: logs``) over its client span, with a child
per gateway attempt and per vLLM execution the logs name, in the request's trace when its spans have one (the
trace the request_spans table joined), else in a trace whose id is derived from its logical id. Times are the
correlated ones (clock-corrected, UTC); ids lowercase hex, enums integers, 64-bit integers decimal strings
(https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from . import schemas

SERVICE = "logscope: logs"
FILE = "traces.otlp.jsonl"
_KIND = {"unspecified": 0, "internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_STATUS = {"unset": 0, "ok": 1, "error": 2}
BATCH = 1000  # spans per exported line


def _h(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _ns(col: str) -> pl.Expr:
    return (pl.col(col).dt.epoch("us") * 1000).cast(pl.String)


def _read(out: Path, name: str) -> pl.DataFrame:
    p = out / f"{name}.parquet"
    return pl.read_parquet(p) if p.exists() else schemas.empty(name)


def _typed_kv(k: str, text: str | None, kind: str | None) -> dict:
    """An attribute of the spans table (value text and its type as read) back as the AnyValue it was."""
    try:
        if kind == "int":
            return {"key": k, "value": {"intValue": str(int(float(text or "")))}}
        if kind == "double":
            return {"key": k, "value": {"doubleValue": float(text or "")}}
        if kind == "bool":
            return {"key": k, "value": {"boolValue": text == "true"}}
        if kind == "bytes":
            return {"key": k, "value": {"bytesValue": text}}
        if kind == "array":
            vals = json.loads(text or "[]")
            if isinstance(vals, list):
                return {"key": k, "value": {"arrayValue": {"values": [_kv("", v)["value"] for v in vals]}}}
    except ValueError:
        pass
    return {"key": k, "value": {"stringValue": text or ""}}


def _kv(k: str, v: object) -> dict:
    if isinstance(v, bool):
        return {"key": k, "value": {"boolValue": v}}
    if isinstance(v, int):
        return {"key": k, "value": {"intValue": str(v)}}
    if isinstance(v, float):
        return {"key": k, "value": {"doubleValue": v}}
    return {"key": k, "value": {"stringValue": str(v)}}


def _span(r: dict, attrs: list[dict]) -> dict:
    s = {
        "traceId": r["trace_id"],
        "spanId": r["span_id"],
        "name": r["name"] or "",
        "kind": _KIND.get(r.get("kind") or "internal", 1),
        "startTimeUnixNano": r["start_ns"],
        "endTimeUnixNano": r["end_ns"] or r["start_ns"],
        "attributes": attrs,
        "status": {"code": _STATUS.get(r.get("status") or "unset", 0)},
    }
    if r.get("parent_span_id"):
        s["parentSpanId"] = r["parent_span_id"]
    return s


def input_spans(spans: pl.DataFrame) -> list[tuple[tuple[str, str], dict]]:
    """The input's spans, as they were: ((service, scope), OTLP span)."""
    # the typed columns go back under the attribute name each was first read from (its current name)
    typed = [(c, keys[0]) for c, _, keys in _typed() if c != "openinference_kind"]
    rows = spans.filter(pl.col("start").is_not_null()).with_columns(
        _ns("start").alias("start_ns"), _ns("end").alias("end_ns")
    )
    out = []
    for r in rows.iter_rows(named=True):
        attrs = [_typed_kv(a["key"], a["value"], a.get("type")) for a in r["attributes"] or []]
        attrs += [_kv(k, r[c]) for c, k in typed if r.get(c) is not None]
        s = _span(r, attrs)
        if r.get("first_token_ts") is not None:  # the first-token event the span had
            ns = int(r["first_token_ts"].timestamp() * 1_000_000) * 1000
            s["events"] = [{"timeUnixNano": str(ns), "name": "first_token"}]
        out.append(((r["service"] or "unknown_service", r.get("scope") or "logscope"), s))
    return out


def _typed():
    from logscope.parsers._spans import TYPED

    return TYPED


def _has_logs(out: Path) -> bool:
    """Did any log (not a span file) give records? Requests rebuilt from the spans alone have nothing to add."""
    files = _read(out, "files")
    if "kind" not in files.columns:
        return True
    return bool(files.filter(pl.col("kind").is_in(["client", "gateway", "server"])).height)


def log_spans(out: Path) -> list[tuple[tuple[str, str], dict]]:
    """Each logical request of requests.parquet as the logs saw it: a request span, its gateway attempts and its
    vLLM executions as children, in the trace its spans have (request_spans.parquet) or one derived from its id.
    None when no log gave records (the requests were rebuilt from the spans, which are exported as they were)."""
    if not _has_logs(out):
        return []
    req = _read(out, "requests").filter(pl.col("ts_start").is_not_null())
    rs = _read(out, "request_spans").select("logical_request_id", "trace_id").drop_nulls()
    req = req.join(rs, on="logical_request_id", how="left").with_columns(
        pl.coalesce(
            "trace_id", pl.col("logical_request_id").map_elements(lambda x: _h(x, 32), return_dtype=pl.String)
        ).alias("trace_id"),
        pl.col("logical_request_id")
        .map_elements(lambda x: _h("req" + x, 16), return_dtype=pl.String)
        .alias("span_id"),
        _ns("ts_start").alias("start_ns"),
        _ns("ts_end").alias("end_ns"),
    )
    spans: list[tuple[tuple[str, str], dict]] = []  # (service, scope), span
    for r in req.iter_rows(named=True):
        attrs = [_kv("logscope.logical_request_id", r["logical_request_id"])]
        attrs += [_kv(f"logscope.{c}", r[c]) for c in ("origin", "outcome", "client", "match") if r.get(c)]
        if r.get("status") is not None:
            attrs.append(_kv("http.response.status_code", int(r["status"])))
        for c in ("ttft_s", "e2e_s"):
            if r.get(c) is not None:
                attrs.append(_kv(f"logscope.{c}", float(r[c])))
        st = "error" if r.get("outcome") in ("error", "timeout") else "unset"
        spans.append(
            (
                (SERVICE, "logscope"),
                _span({**r, "name": "logscope.request", "kind": "internal", "status": st}, attrs),
            )
        )
    ids = dict(zip(req["logical_request_id"], zip(req["trace_id"], req["span_id"], strict=True), strict=True))
    ga = _read(out, "gateway_attempts").filter(
        pl.col("ts_start").is_not_null() & pl.col("client_request_id").is_not_null()
    )
    for i, g in enumerate(
        ga.with_columns(_ns("ts_start").alias("start_ns"), _ns("ts_end").alias("end_ns")).iter_rows(
            named=True
        )
    ):
        parent = ids.get(g["client_request_id"])
        if parent is None:
            continue
        attrs = [
            _kv("logscope.source", g["source"]),
            _kv("logscope.gateway_request_id", g["request_id"] or ""),
        ]
        for k, c in (
            ("http.response.status_code", "status"),
            ("logscope.upstream_status", "upstream_status"),
        ):
            if g.get(c) is not None:
                attrs.append(_kv(k, int(g[c])))
        if g.get("upstream"):
            attrs.append(_kv("server.address", g["upstream"]))
        row = {
            "trace_id": parent[0],
            "span_id": _h(f"ga{i}{g['request_id']}", 16),
            "parent_span_id": parent[1],
            "name": f"gateway attempt {g.get('attempt') or ''}".strip(),
            "kind": "client",
            "status": "error" if (g.get("upstream_status") or g.get("status") or 0) >= 500 else "unset",
            "start_ns": g["start_ns"],
            "end_ns": g["end_ns"],
        }
        spans.append(((SERVICE, "logscope"), _span(row, attrs)))
    return spans


def write(out: Path, dest: Path) -> dict:
    """Write the export to ``dest``; what it holds."""
    out = Path(out)
    sp = _read(out, "spans")
    items = input_spans(sp) + log_spans(out)
    lines = []
    for i in range(0, len(items), BATCH):
        by_svc: dict[str, dict[str, list[dict]]] = {}
        for (svc, scope), s in items[i : i + BATCH]:
            by_svc.setdefault(svc, {}).setdefault(scope, []).append(s)
        lines.append(
            json.dumps(
                {
                    "resourceSpans": [
                        {
                            "resource": {"attributes": [_kv("service.name", svc)]},
                            "scopeSpans": [{"scope": {"name": sc}, "spans": ss} for sc, ss in scopes.items()],
                        }
                        for svc, scopes in by_svc.items()
                    ]
                },
                separators=(",", ":"),
            )
        )
    dest.write_text("".join(x + "\n" for x in lines))
    return {
        "spans": len(items),
        "input_spans": sp.height,
        "log_spans": len(items) - sp.height,
        "lines": len(lines),
    }
