"""The traces section's waterfall: for the requests that matter, one row each (its own time axis: a 60 s
timeout and a 1 s answer are both readable), lanes for the caller's request span, its attempts, the gateway (its
spans, else its access-log line for that attempt: the traceparent joins them) and the engine's phases from the
engine span's own attributes; a replica's stop drawn where it falls in a row (the death beside the spans that
stop). Chosen: around a death (cut, spans lost, never reached), aborted, retried, then the slowest.

Every bar and marker is on the client's clock (its spans'), named under each row: an engine's spans and its
last-exported-span marker moved by that engine's offset, the gateway's log lines and the log-stop markers (the
logs' clock: the gateway's, correlate/clock.py) by the gateway's (correlate/span_skew.py); where an offset is
unknown or not measured, the row says which bars stay on their own clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

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


@dataclass(frozen=True)
class Clocks:
    """What moves each source's stamps onto the client's clock: seconds to subtract, per engine service and for
    the logs (the gateway's clock); a source absent from ``engine`` (or ``logs`` None) stays on its own clock,
    ``unknown`` says why (traces.clock_skew, traces.gateway_clock)."""

    engine: dict[str, float]
    logs: float | None
    unknown: dict[str, str]  # engine service or "logs" -> what the row says

    @classmethod
    def of(cls, traces: dict) -> Clocks:
        eng, unknown = {}, {}
        for k in traces.get("clock_skew") or []:
            if k["status"] == "unknown":
                unknown[k["service"]] = f"{k['service']}'s spans on its own clock (offset unknown)"
            else:
                eng[k["service"]] = (k.get("offset_ms") or 0.0) / 1000
        g = traces.get("gateway_clock")
        logs = None if g is None or g["status"] == "unknown" else (g.get("offset_ms") or 0.0) / 1000
        if logs is None:
            unknown["logs"] = "gateway log and log stops on the logs' own clock (offset " + (
                "not measured: no access line carries an attempt's traceparent)" if g is None else "unknown)"
            )
        return cls(eng, logs, unknown)

    def engine_s(self, service: str | None) -> float:
        return self.engine.get(service or "", 0.0)

    def logs_s(self) -> float:
        return self.logs or 0.0


def _name(c: Clocks, services: set[str], logs: bool, gw_spans: bool) -> str:
    """The row's clock and what was moved onto it (or was not)."""
    moved = [f"{s}'s spans {-c.engine[s]:+.3f} s" for s in sorted(services) if c.engine.get(s)]
    if logs and c.logs:
        moved.append(f"gateway log {-c.logs:+.3f} s")
    left = [c.unknown[s] for s in sorted(services) if s in c.unknown]
    if logs and "logs" in c.unknown:
        left.append(c.unknown["logs"])
    if gw_spans:  # no nesting measured for a gateway's own spans
        left.append("gateway spans on the gateway's own clock (offset not measured)")
    out = "clock client (seconds from the first span)" + (
        f"; moved onto it: {', '.join(moved)}" if moved else ""
    )
    return out + (f"; not moved: {'; '.join(left)}" if left else "")


def _rows(
    r: dict, spans: pl.DataFrame, gw: pl.DataFrame, c: Clocks
) -> tuple[list[dict], object, set[str], bool, bool]:
    """The row's bars on the client's clock, its first span's start, the engines in it, whether it holds a
    gateway log line, whether a gateway span."""
    tr = spans.filter(pl.col("trace_id") == r["trace_id"])
    # each engine's clock offset the spans' nesting showed (correlate/span_skew.py): its spans put on the callers'
    off = tr["service"].replace_strict(c.engine, default=0.0, return_dtype=pl.Float64)
    shift = pl.when(pl.col("layer") == "engine").then(pl.Series(off) * 1e6).otherwise(0.0).cast(pl.Int64)
    tr = tr.with_columns((pl.col(k) - pl.duration(microseconds=shift)).alias(k) for k in ("start", "end"))
    t0 = tr["start"].min()
    gshift = timedelta(seconds=c.logs_s())
    rel = lambda t: None if t is None or t0 is None else (t - t0).total_seconds()  # noqa: E731
    out: list[dict] = []

    def bar(lane: str, phase: str, a, b, what: str) -> None:
        if a is not None and b is not None:
            out.append({"lane": lane, "phase": phase, "x": a, "x2": max(b, a + 1e-4), "what": what})

    for s in tr.filter((pl.col("layer") == "client") & (pl.col("role") == "request")).iter_rows(named=True):
        why = f" ({s['status_message']})" if s["status_message"] else ""
        bar("caller", "caller's request", rel(s["start"]), rel(s["end"]), f"{s['name']}: {s['status']}{why}")
    atts = tr.filter(pl.col("role") == "attempt").sort("start")
    logs = False
    for i, s in enumerate(atts.iter_rows(named=True), 1):
        err = s["status"] == "error"
        what = f"attempt {i}: HTTP {s['http_status'] or '-'}" + (f" ({s['status_message']})" if err else "")
        bar("attempts", "attempt (error)" if err else "attempt", rel(s["start"]), rel(s["end"]), what)
        for g in gw.filter(pl.col("span_id") == s["span_id"]).iter_rows(named=True):
            what = f"gateway log: {g['status']} from {g['upstream'] or '-'} (upstream {g['upstream_status'] or '-'})"
            a, b = (None if t is None else t - gshift for t in (g["ts_start"], g["ts_end"]))
            bar("gateway", "gateway", rel(a), rel(b), what)
            logs = True
    for s in tr.filter(pl.col("layer") == "gateway").iter_rows(named=True):
        bar("gateway", "gateway", rel(s["start"]), rel(s["end"]), s["name"] or "")
    for s in tr.filter((pl.col("layer") == "engine") & (pl.col("role") == "request")).iter_rows(named=True):
        a = rel(s["start"])
        off_s = c.engine_s(s["service"])
        moved = f", moved {-off_s:+.3f} s onto the client's" if off_s else ""
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
    services = set(tr.filter(pl.col("layer") == "engine")["service"].drop_nulls().to_list())
    return out, t0, services, logs, bool((tr["layer"] == "gateway").any())


def spec(
    rs: pl.DataFrame,
    spans: pl.DataFrame,
    gateway: pl.DataFrame,
    stops: list[dict],
    traces: dict | None = None,
) -> dict | None:
    """A vconcat of one layered bar chart per chosen request, on the client's clock (``traces``: correlation.json's,
    its clock_skew and gateway_clock); None when nothing to draw."""
    c = Clocks.of(traces or {})
    pick = chosen(rs)
    gw = gateway.with_columns(pl.col("traceparent").str.extract(_TP, 2).alias("span_id")).drop_nulls(
        "span_id"
    )
    charts: list[dict] = []
    for r in pick.iter_rows(named=True):
        bars, t0, services, logs, gw_spans = _rows(r, spans, gw, c)
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
                        # seconds in plain decimals: an SI format writes 0.02 s as '20m', read as minutes
                        "axis": {"tickCount": 6, "format": "~g"},
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
        marks = []
        for st in stops:
            svc = st.get("service")
            for ts, label, what, off in (
                (st.get("log_last_ts"), f"{st['replica']}'s log stops", "log", c.logs_s()),
                (st.get("spans_last_ts"), f"{svc}'s last exported span ends", "spans", c.engine_s(svc)),
            ):
                x = None if ts is None or t0 is None else (ts - t0).total_seconds() - off
                if x is not None and 0 <= x <= hi + MARK_AFTER_S:
                    marks.append(
                        {"x": x, "label": label + (f" (moved {-off:+.3f} s)" if off else ""), "what": what}
                    )
                    logs |= what == "log"
                    services |= {svc} if what == "spans" and svc else set()
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
                "title": {
                    "text": title,
                    "subtitle": _name(c, services, logs, gw_spans),
                    "anchor": "start",
                    "fontSize": 11,
                    "subtitleFontSize": 9,
                },
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
