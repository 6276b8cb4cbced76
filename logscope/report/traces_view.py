"""The report's traces section: what was read and joined (spans per service, the share of requests traced at each
layer, the three layers joined by trace id), where a replica's process stopped and what shows it, the client
attempts with no engine span and why, the waterfall (waterfall.py), the split of the callers' latency per ladder
step and episode (diagnosis.json's ``spans``: diagnose/span_figures.py), and vLLM's start-up from its own spans
(the cold start). From correlation.json's ``traces``, request_spans.parquet and spans.parquet; nothing when the
folder had no spans."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from .. import clock
from ..scalars import float_value, time_value
from . import vl, waterfall

MAX_LISTED = 60  # attempts with no engine span listed under the table (the table counts them all)
SPLIT_COLORS = ["#9aa5b1", "#7a6fb0", "#d98c2b", "#3b7dd8", "#2e9e6a", "#6b8fa8", "#c9ced6"]
# vLLM's start-up spans (its @instrument decorators; device in brackets: CPU, GPU, NPU, ...): the phases shown
STARTUP = [
    ("total (Overall Loading)", r"^Overall Loading$"),
    ("engine core init", r"^EngineCoreProc init$"),
    ("model load", r"^Loading \("),
    ("weights", r"^Load weights"),
    ("warm-up / compile", r"^Warmup \("),
    ("KV cache allocation", r"^Allocate KV cache$"),
]


def _read(out: Path, name: str) -> pl.DataFrame | None:
    p = Path(out) / f"{name}.parquet"
    return pl.read_parquet(p) if p.exists() else None


def _when(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text)


def stops(traces: dict) -> list[dict]:
    out = []
    for s in traces.get("stops") or []:
        out.append(
            {**s, "log_last_ts": _when(s.get("log_last")), "spans_last_ts": _when(s.get("spans_last"))}
        )
    return out


def startup(spans: pl.DataFrame) -> list[dict]:
    """One row per start (a trace of start-up spans): its service, when, and the phases' seconds (summed where
    a phase has several spans, e.g. one per worker)."""
    st = spans.filter(pl.col("role") == "startup")
    rows = []
    for _, g in st.group_by("trace_id", maintain_order=True):
        root = g.filter(pl.col("parent_span_id").is_null()).sort("start")
        first = root.row(0, named=True) if root.height else g.sort("start").row(0, named=True)
        phases = {}
        for label, pat in STARTUP:
            m = g.filter(pl.col("name").str.contains(pat))
            phases[label] = float_value(m["duration_s"].max()) if m.height else None
        rows.append(
            {
                "service": first["service"],
                "start": clock.hms(first["start"]),
                "end": clock.hms(time_value(g["end"].max())),
                "spans": g.height,
                "phases": phases,
                "_t": first["start"],
            }
        )
    return [{k: v for k, v in r.items() if k != "_t"} for r in sorted(rows, key=lambda r: r["_t"])]


def split_spec(segments: list[dict]) -> dict | None:
    """Stacked bars: the mean seconds of each part of the callers' latency, one bar per segment."""
    rows = [
        {
            "segment": f"{s['segment']} ({s['requests']})",
            "part": p["part"],
            "s": p["mean_ms"] / 1000,
            "clock": p["clock"],
        }
        for s in segments
        for p in s["split"]
        if p["mean_ms"] is not None
    ]
    if not rows:
        return None
    parts = [p["part"] for p in segments[0]["split"]]
    return vl.finish(
        {
            "data": {"values": rows},
            "width": 560,
            "usermeta": {"fit": "width", "room": 320},
            "height": {"step": 18},
            "mark": {"type": "bar"},
            "encoding": {
                "y": {
                    "field": "segment",
                    "type": "nominal",
                    "sort": None,
                    "title": None,
                    "axis": {"labelLimit": 300},
                },
                "x": {
                    "field": "s",
                    "type": "quantitative",
                    "stack": "zero",
                    "title": "mean seconds (source spans)",
                },
                "color": {
                    "field": "part",
                    "type": "nominal",
                    "scale": {"domain": parts, "range": SPLIT_COLORS[: len(parts)]},
                    "legend": {"orient": "top", "title": None, "columns": 3, "labelLimit": 320},
                },
                "order": {"field": "_o", "type": "quantitative"},
                "tooltip": [
                    {"field": "segment"},
                    {"field": "part"},
                    {"field": "s", "title": "mean (s)", "format": ".3f"},
                    {"field": "clock"},
                ],
            },
            "transform": [{"calculate": f"indexof({parts!r}, datum.part)", "as": "_o"}],
        }
    )


def view(out: Path, traces: dict | None, diag: dict | None = None) -> tuple[dict | None, dict | None]:
    rs, spans = _read(out, "request_spans"), _read(out, "spans")
    if not traces or rs is None or spans is None or rs.height == 0:
        return None, None
    found = stops(traces)
    gw = _read(out, "gateway_attempts")
    gw = (
        gw
        if gw is not None and "traceparent" in gw.columns
        else pl.DataFrame(
            schema={c: pl.String for c in ("traceparent", "status", "upstream", "upstream_status")}
            | {"ts_start": pl.Datetime("us", "UTC"), "ts_end": pl.Datetime("us", "UTC")}
        )
    )
    wf = waterfall.spec(rs, spans, gw, found, traces)
    lost = rs.filter(pl.col("no_engine_reason").is_not_null()).sort("client_start")
    classes = (
        lost.group_by("no_engine_class")
        .agg(pl.len().alias("requests"), pl.col("no_engine_reason").first().alias("example"))
        .sort("requests", descending=True)
    )
    # the example of each class is the summary's (summary.json and summary.md say the same)
    ex = (traces.get("no_engine_span") or {}).get("examples") or {}
    classes = classes.with_columns(
        pl.col("no_engine_class")
        .replace_strict(ex, default=pl.col("example"), return_dtype=pl.String)
        .alias("example")
    )
    segs = ((diag or {}).get("spans") or {}).get("segments") or []
    return wf, {
        "summary": traces,
        "stops": found,
        "no_engine_classes": classes.to_dicts(),
        "no_engine": lost.select("logical_request_id", "trace_id", "attempt_statuses", "no_engine_reason")
        .head(MAX_LISTED)
        .to_dicts(),
        "no_engine_total": lost.height,
        "segments": segs,
        "histogram_check": ((diag or {}).get("spans") or {}).get("histogram_check"),
        "split_spec": split_spec(segs),
        "startup": startup(spans),
        "startup_labels": [label for label, _ in STARTUP],
        "total": rs.height,
    }
