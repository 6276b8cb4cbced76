"""The traces section's waterfall: for the requests that matter, one row each (its own time axis: a 60 s
timeout and a 1 s answer are both readable), lanes for the caller's request span, its attempts, the gateway (its
spans, else its access-log line for that attempt: the traceparent joins them) and the engine's phases from the
engine span's own attributes; a replica's stop drawn where it falls in a row (the death beside the spans that
stop). Chosen: around a death (cut, spans lost, never reached), aborted, retried, then the slowest."""

from __future__ import annotations

import polars as pl

from . import vl

WIDTH = 780  # at a 1024 px window; the page widens it (usermeta.fit)
LANES = ["caller", "attempts", "gateway", "engine"]
PHASES = [
    "caller's request",
    "attempt",
    "attempt (error)",
    "gateway",
    "engine: queue",
    "engine: prefill",
    "engine: decode",
    "engine: rest",
]
COLORS = ["#c9ced6", "#7b8794", "#c2410c", "#7a6fb0", "#d98c2b", "#3b7dd8", "#2e9e6a", "#6b8fa8"]
GROUPS = [  # (label, filter, how many)
    ("around a death", pl.col("no_engine_class").is_in(["cut by death", "spans lost", "never reached"]), 4),
    ("aborted", pl.col("no_engine_class") == "aborted", 2),
    ("retried", (pl.col("attempt_spans") > 1) & pl.col("engine_spans").is_not_null(), 2),
    ("slowest", pl.col("engine_spans").is_not_null(), 4),
]
MARK_AFTER_S = (
    6.0  # a stop this soon after a row's end is drawn in it (a span batch lost: BATCH_S + a log tick)
)
_TP = r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$"


def chosen(rs: pl.DataFrame) -> pl.DataFrame:
    """The rows to draw, each with ``_group``: a few of each class around a death first (one of each kind before
    a second), then aborted, retried, slowest (by the caller's time)."""
    dur = pl.coalesce(
        (pl.col("request_end") - pl.col("request_start")).dt.total_microseconds() / 1e6,
        (pl.col("client_end") - pl.col("client_start")).dt.total_microseconds() / 1e6,
        pl.col("span_e2e_s"),
    )
    rs = rs.with_columns(dur.alias("_dur"))
    picked: list[pl.DataFrame] = []
    seen: set[str] = set()
    for label, cond, n in GROUPS:
        g = rs.filter(cond & ~pl.col("trace_id").is_in(list(seen)))
        # the longest first, the trace id breaking ties: the same rows on every run of the same input
        g = g.sort(["_dur", "trace_id"], descending=[True, False], nulls_last=True)
        if label == "around a death":  # one of each class before a second of any
            g = g.with_columns(pl.int_range(pl.len()).over("no_engine_class").alias("_r")).sort(
                "_r", "no_engine_class", maintain_order=True
            )
        g = g.head(n).with_columns(pl.lit(label).alias("_group"))
        seen |= set(g["trace_id"].to_list())
        picked.append(g.select(rs.columns + ["_group"]))
    return pl.concat(picked) if picked else rs.clear()


def _rows(r: dict, spans: pl.DataFrame, gw: pl.DataFrame) -> tuple[list[dict], object]:
    tr = spans.filter(pl.col("trace_id") == r["trace_id"])
    # the engine's clock offset the spans' nesting showed (correlate/span_skew.py): its spans put on the callers'
    off = r.get("clock_offset_s")
    if off is not None:
        mine = (pl.col("layer") == "engine") & (pl.col("service") == r["engine_service"])
        shift = pl.duration(microseconds=round(off * 1e6))
        tr = tr.with_columns(
            pl.when(mine).then(pl.col(c) - shift).otherwise(pl.col(c)).alias(c) for c in ("start", "end")
        )
    t0 = tr["start"].min()
    rel = lambda t: None if t is None or t0 is None else (t - t0).total_seconds()  # noqa: E731
    out: list[dict] = []

    def bar(lane: str, phase: str, a, b, what: str) -> None:
        if a is not None and b is not None:
            out.append({"lane": lane, "phase": phase, "x": a, "x2": max(b, a + 1e-4), "what": what})

    for s in tr.filter((pl.col("layer") == "client") & (pl.col("role") == "request")).iter_rows(named=True):
        why = f" ({s['status_message']})" if s["status_message"] else ""
        bar("caller", "caller's request", rel(s["start"]), rel(s["end"]), f"{s['name']}: {s['status']}{why}")
    atts = tr.filter(pl.col("role") == "attempt").sort("start")
    for i, s in enumerate(atts.iter_rows(named=True), 1):
        err = s["status"] == "error"
        what = f"attempt {i}: HTTP {s['http_status'] or '-'}" + (f" ({s['status_message']})" if err else "")
        bar("attempts", "attempt (error)" if err else "attempt", rel(s["start"]), rel(s["end"]), what)
        for g in gw.filter(pl.col("span_id") == s["span_id"]).iter_rows(named=True):
            what = f"gateway log: {g['status']} from {g['upstream'] or '-'} (upstream {g['upstream_status'] or '-'})"
            bar("gateway", "gateway", rel(g["ts_start"]), rel(g["ts_end"]), what)
    for s in tr.filter(pl.col("layer") == "gateway").iter_rows(named=True):
        bar("gateway", "gateway", rel(s["start"]), rel(s["end"]), s["name"] or "")
    for s in tr.filter((pl.col("layer") == "engine") & (pl.col("role") == "request")).iter_rows(named=True):
        a = rel(s["start"])
        moved = f", moved {-off:+.3f} s" if off is not None and s["service"] == r["engine_service"] else ""
        for phase, d in (
            ("engine: queue", s["queue_s"]),
            ("engine: prefill", s["prefill_s"]),
            ("engine: decode", s["decode_s"]),
        ):
            if d is None or a is None:
                continue
            bar("engine", phase, a, a + d, f"{phase} {d:.3f} s ({s['service']}, clock engine{moved})")
            a += d
        end = rel(s["end"])
        if a is not None and end is not None and end > a + 1e-3:
            bar("engine", "engine: rest", a, end, f"rest of the engine span ({s['service']})")
    return out, t0


def spec(rs: pl.DataFrame, spans: pl.DataFrame, gateway: pl.DataFrame, stops: list[dict]) -> dict | None:
    """A vconcat of one layered bar chart per chosen request; None when nothing to draw."""
    pick = chosen(rs)
    gw = gateway.with_columns(pl.col("traceparent").str.extract(_TP, 2).alias("span_id")).drop_nulls(
        "span_id"
    )
    charts: list[dict] = []
    for r in pick.iter_rows(named=True):
        bars, t0 = _rows(r, spans, gw)
        if not bars:
            continue
        what = r["no_engine_class"] or r["outcome"] or ("retried" if (r["attempt_spans"] or 0) > 1 else "")
        title = f"{r['logical_request_id'] or r['trace_id'][:16]} · {r['_group']}" + (
            f": {what}" if what and what != r["_group"] else ""
        )
        layers: list[dict] = [
            {
                "data": {"values": bars},
                "mark": {"type": "bar", "cornerRadius": 1, "height": 9},
                "encoding": {
                    "y": {
                        "field": "lane",
                        "type": "nominal",
                        "sort": LANES,
                        "scale": {"domain": LANES},
                        "title": None,
                    },
                    "x": {
                        "field": "x",
                        "type": "quantitative",
                        "title": None,
                        "axis": {"tickCount": 6, "format": "~s"},
                    },
                    "x2": {"field": "x2"},
                    "color": {
                        "field": "phase",
                        "type": "nominal",
                        "scale": {"domain": PHASES, "range": COLORS},
                        "legend": {"orient": "top", "title": None, "columns": 4} if not charts else None,
                    },
                    "tooltip": [
                        {"field": "what", "title": "span"},
                        {"field": "x", "title": "from (s)", "format": ".3f"},
                        {"field": "x2", "title": "to (s)", "format": ".3f"},
                    ],
                },
            }
        ]
        hi = max(b["x2"] for b in bars)
        marks = [
            {"x": (ts - t0).total_seconds(), "label": label, "what": what}
            for s in stops
            for ts, label, what in (
                (s.get("log_last_ts"), f"{s['replica']}'s log stops", "log"),
                (s.get("spans_last_ts"), f"{s.get('service')}'s last exported span ends", "spans"),
            )
            if ts is not None and t0 is not None and 0 <= (ts - t0).total_seconds() <= hi + MARK_AFTER_S
        ]
        for what, color in (
            ("log", "#b3261e"),
            ("spans", "#1f77b4"),
        ):  # a colour each: the phase scale is shared
            mine = [m for m in marks if m["what"] == what]
            if mine:
                layers.append(
                    {
                        "data": {"values": mine},
                        "mark": {"type": "rule", "strokeDash": [4, 3], "color": color, "strokeWidth": 1.5},
                        "encoding": {
                            "x": {"field": "x", "type": "quantitative"},
                            "tooltip": [{"field": "label"}],
                        },
                    }
                )
        charts.append(
            {
                "layer": layers,
                "width": WIDTH,
                "height": {"step": 12},
                "title": {"text": title, "anchor": "start", "fontSize": 11},
            }
        )
    if not charts:
        return None
    return vl.finish(
        {
            "vconcat": charts,
            "spacing": 10,
            "usermeta": {"fit": "width", "room": 90},
            "resolve": {"scale": {"x": "independent", "color": "shared"}},
        }
    )
