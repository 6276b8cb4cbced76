"""The report's traces section: a waterfall of client -> gateway -> engine phases for the requests that matter
(failed, around a death, slowest), the share of requests traced at each layer, and the split of the callers'
latency into time before the engine, queue, prefill and decode. From request_spans.parquet and spans.parquet
(correlate/traces.py); nothing when the folder had no spans."""

from __future__ import annotations

from pathlib import Path

import polars as pl

MAX_ROWS = 12
PHASES = ["client attempt", "gateway", "engine: queue", "engine: prefill", "engine: decode", "engine: other"]
COLORS = ["#9aa5b1", "#7a6fb0", "#d98c2b", "#3b7dd8", "#2e9e6a", "#6b8fa8"]


def _read(out: Path, name: str) -> pl.DataFrame | None:
    p = Path(out) / f"{name}.parquet"
    return pl.read_parquet(p) if p.exists() else None


def chosen(rs: pl.DataFrame) -> pl.DataFrame:
    """Up to MAX_ROWS requests: those whose spans were lost or never reached an engine, the failed, the slowest."""
    dur = (pl.col("client_end") - pl.col("client_start")).dt.total_microseconds() / 1e6
    rs = rs.with_columns(
        dur.alias("_dur"),
        pl.when(pl.col("no_engine_reason").str.starts_with("spans lost"))
        .then(0)
        .when(pl.col("attempts_without_engine").fill_null(0) > 0)
        .then(1)
        .when(pl.col("outcome").is_in(["error", "timeout"]))
        .then(2)
        .otherwise(3)
        .alias("_why"),
    )
    return rs.sort(["_why", "_dur"], descending=[False, True], nulls_last=True).head(MAX_ROWS)


def bars(rs: pl.DataFrame, spans: pl.DataFrame) -> list[dict]:
    """Waterfall bars (seconds from the request's first span) of the chosen requests."""
    out: list[dict] = []
    for r in rs.iter_rows(named=True):
        tr = spans.filter(pl.col("trace_id") == r["trace_id"])
        if tr.height == 0:
            continue
        t0 = tr["start"].min()
        label = (r["logical_request_id"] or f"trace {r['trace_id'][:8]}")[:28]
        rel = lambda t, t0=t0: None if t is None else (t - t0).total_seconds()  # noqa: E731
        for s in tr.filter(pl.col("role") == "attempt").sort("start").iter_rows(named=True):
            out.append(
                {
                    "request": label,
                    "lane": "client",
                    "phase": "client attempt",
                    "x": rel(s["start"]),
                    "x2": rel(s["end"]),
                    "what": f"attempt: HTTP {s['http_status'] or '-'} ({s['status']})",
                }
            )
        for s in tr.filter(pl.col("layer") == "gateway").iter_rows(named=True):
            out.append(
                {
                    "request": label,
                    "lane": "gateway",
                    "phase": "gateway",
                    "x": rel(s["start"]),
                    "x2": rel(s["end"]),
                    "what": s["name"] or "",
                }
            )
        for s in tr.filter((pl.col("layer") == "engine") & (pl.col("role") == "request")).iter_rows(
            named=True
        ):
            a = rel(s["start"])
            cuts = [
                ("engine: queue", s["queue_s"]),
                ("engine: prefill", s["prefill_s"]),
                ("engine: decode", s["decode_s"]),
            ]
            for phase, d in cuts:
                if d is None or a is None:
                    continue
                out.append(
                    {
                        "request": label,
                        "lane": "engine",
                        "phase": phase,
                        "x": a,
                        "x2": a + d,
                        "what": f"{phase} {d:.3f} s ({s['service']})",
                    }
                )
                a += d
            end = rel(s["end"])
            if a is not None and end is not None and end > a + 1e-4:
                out.append(
                    {
                        "request": label,
                        "lane": "engine",
                        "phase": "engine: other",
                        "x": a,
                        "x2": end,
                        "what": f"rest of the engine span ({s['service']})",
                    }
                )
    return out


def waterfall_spec(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": rows},
        "width": 780,  # the page widens it to its card (usermeta.fit, as the timeline)
        "usermeta": {"fit": "width", "room": 190},
        "mark": {"type": "bar", "cornerRadius": 1},
        "encoding": {
            "y": {"field": "request", "type": "nominal", "sort": None, "title": None},
            "yOffset": {"field": "lane", "type": "nominal", "sort": ["client", "gateway", "engine"]},
            "x": {"field": "x", "type": "quantitative", "title": "seconds from the request's first span"},
            "x2": {"field": "x2"},
            "color": {
                "field": "phase",
                "type": "nominal",
                "scale": {"domain": PHASES, "range": COLORS},
                "legend": {"orient": "top", "title": None},
            },
            "tooltip": [
                {"field": "request"},
                {"field": "what"},
                {"field": "x", "format": ".3f"},
                {"field": "x2", "format": ".3f"},
            ],
        },
        "height": {"step": 36},
    }


def split(rs: pl.DataFrame) -> list[dict]:
    """Median and p95 of each part of the callers' latency, over the requests with an engine span."""
    e = rs.filter(pl.col("engine_spans").is_not_null())
    parts = [
        ("before the engine (gateway + API server + network)", "before_engine_s"),
        ("queue", "span_queue_s"),
        ("prefill", "span_prefill_s"),
        ("decode", "span_decode_s"),
        ("TTFT (engine)", "span_ttft_s"),
        ("e2e (engine)", "span_e2e_s"),
    ]
    out = []
    for name, c in parts:
        v = e[c].drop_nulls()
        out.append(
            {
                "part": name,
                "requests": v.len(),
                "p50_ms": v.median() * 1000 if v.len() else None,
                "p95_ms": v.quantile(0.95, "linear") * 1000 if v.len() else None,
            }
        )
    return out


def view(out: Path, traces: dict | None) -> tuple[dict | None, dict | None]:
    rs, spans = _read(out, "request_spans"), _read(out, "spans")
    if not traces or rs is None or spans is None or rs.height == 0:
        return None, None
    pick = chosen(rs)
    rows = bars(pick, spans)
    lost = (
        rs.filter(pl.col("no_engine_reason").is_not_null())
        .select("logical_request_id", "trace_id", "attempt_statuses", "no_engine_reason")
        .head(MAX_ROWS)
    )
    return waterfall_spec(rows), {
        "summary": traces,
        "split": split(rs),
        "no_engine": lost.to_dicts(),
        "shown": pick.height,
        "total": rs.height,
    }
