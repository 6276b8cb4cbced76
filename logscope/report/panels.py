"""The timeline's panels and their parts: series, colours, windows as long rows, episode bands, time axis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import polars as pl

from .. import clock

WIDTH = 860  # with the legends above the panels: the timeline fits a 1024 px window
PANEL_H = 78
CLASS_COLORS = {"spike": "#e4572e", "sustained": "#7b2cbf", "recurring": "#f3a712", "crash": "#1f2933"}
# tick steps tried in order; the first giving at most MAX_TICKS ticks over the span is used
TICK_STEPS = ((1, "second"), (5, "second"), (10, "second"), (15, "second"), (30, "second"), (1, "minute"),
              (2, "minute"), (5, "minute"), (10, "minute"), (15, "minute"), (30, "minute"), (1, "hour"),
              (2, "hour"), (3, "hour"), (6, "hour"), (12, "hour"), (1, "day"), (7, "day"))  # fmt: skip
UNIT_S = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
MAX_TICKS = 12
MARKER_SHAPES = {"OOM": "cross", "engine death": "cross", "server start": "triangle-up", "vLLM aborts": "square"}


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    y_title: str
    series: tuple[tuple[str, str, str], ...]  # (windows column, legend label, colour)
    kind: str = "line"  # line | step | markers
    percent: bool = False
    slo: str | None = None  # option name of an SLO drawn as a dashed rule


BLUE, ORANGE, GREEN, RED, PURPLE, BROWN, PINK, GREY = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
P50, P95, P99 = "#9ecae1", "#3182bd", "#08306b"
PANELS = (
    Panel("load", "Arrivals and completions", "requests", (
        ("arrivals", "arrivals", BLUE), ("completions", "completed ok", GREEN), ("errors", "ended in error", RED),
        ("server_requests", "vLLM requests received", GREY),
    ), "step"),
    Panel("queue", "Running and waiting at the server", "requests", (
        ("running_max", "running (max)", BLUE), ("waiting_max", "waiting (max)", ORANGE),
        ("inflight_server", "in flight (mean)", GREY),
    )),
    Panel("kv", "KV-cache usage", "usage", (("kv_max", "max", PURPLE), ("kv_mean", "mean", "#c5b0d5")),
          percent=True),
    Panel("preempt", "Preemptions", "per window", (("preemptions", "preemptions", RED),), "step"),
    Panel("events", "Errors, OOM and engine deaths", "", (
        ("errors", "request errors", RED), ("timeouts", "client timeouts", ORANGE),
        ("gateway_5xx", "gateway 5xx", BROWN), ("gateway_499", "gateway 499 (client left)", PINK),
        ("server_aborts", "vLLM aborts", GREY), ("oom_events", "OOM", "#000000"),
        ("engine_deaths", "engine death", "#000000"), ("server_restarts", "server start", GREEN),
    ), "markers"),
    Panel("retries", "Retries and orphaned work", "per window", (
        ("client_retries", "client retries", BLUE), ("gateway_retries", "gateway retries", ORANGE),
        ("orphaned", "orphaned executions", RED),
    ), "step"),
    Panel("amp", "Amplification", "× logical", (
        ("amplification", "vLLM executions per logical request", PURPLE),)),
    Panel("ttft", "Time to first token", "seconds", (
        ("ttft_p50", "p50", P50), ("ttft_p95", "p95", P95), ("ttft_p99", "p99", P99),
    ), slo="slo_ttft_s"),
    Panel("e2e", "End-to-end latency", "seconds", (
        ("e2e_p50", "p50", P50), ("e2e_p95", "p95", P95), ("e2e_p99", "p99", P99),
    ), slo="slo_e2e_s"),
)  # fmt: skip
_SUM = {"arrivals", "completions", "errors", "timeouts", "gateway_5xx", "gateway_499", "client_attempts",
        "client_retries", "gateway_retries", "server_requests", "server_aborts", "preemptions", "oom_events",
        "engine_deaths", "server_restarts", "orphaned"}  # fmt: skip


def _long(w: pl.DataFrame) -> pl.DataFrame:
    """Windows as (t, time, panel, series, value) rows: one dataset shared by every panel."""
    t = pl.col("ts").dt.epoch("ms").alias("t")
    time = pl.col("ts").dt.strftime(clock.time_format()).alias("time")
    frames = []
    for p in PANELS:
        for col, label, _ in p.series:
            if col not in w.columns or w[col].null_count() == w.height:
                continue
            v = pl.col(col).cast(pl.Float64)
            # a value between two gaps draws no line segment: flag it so a dot shows it
            lone = v.is_not_null() & v.shift(1).is_null() & v.shift(-1).is_null()
            f = w.select(t, time, pl.lit(p.key).alias("panel"), pl.lit(label).alias("series"), v.alias("value"),
                         lone.alias("lone"))  # fmt: skip
            if p.kind == "markers":
                f = f.filter(pl.col("value") > 0)
            elif p.kind == "step" or col in _SUM:
                f = f.filter(pl.col("value").is_not_null())
            frames.append(f)
    if not frames:
        return pl.DataFrame(schema={"t": pl.Int64, "time": pl.String, "panel": pl.String,
                                    "series": pl.String, "value": pl.Float64, "lone": pl.Boolean})  # fmt: skip
    return pl.concat(frames)


def _episode_frame(episodes: list[dict], min_ms: int) -> pl.DataFrame:
    rows = []
    for e in episodes:
        if not e.get("start"):
            continue
        rows.append({"id": str(e["id"]), "cls": str(e.get("class") or "?"), "signal": str(e.get("signal") or ""),
                     "start": e["start"], "end": e.get("end") or e["start"]})  # fmt: skip
    if not rows:
        return pl.DataFrame()
    df = pl.DataFrame(rows).with_columns(
        pl.col("start").str.to_datetime(time_zone="UTC").dt.epoch("ms"),
        pl.col("end").str.to_datetime(time_zone="UTC").dt.epoch("ms"),
    )
    # an instant episode (a crash) still gets a visible band
    return df.with_columns(
        pl.max_horizontal(pl.col("end"), pl.col("start") + min_ms).alias("end"),
        pl.when((pl.col("signal") == "") | (pl.col("signal") == pl.col("cls")))
        .then(pl.col("id") + " · " + pl.col("cls"))
        .otherwise(pl.col("id") + " · " + pl.col("cls") + " · " + pl.col("signal"))
        .alias("label"),
    )


def _bands(eps: pl.DataFrame) -> pl.DataFrame:
    """Shading of the panels: overlapping or touching episodes of one class are one band (the same
    picture with far fewer marks when a long incident has hundreds of episodes)."""
    e = eps.select("cls", "start", "end").sort("cls", "start")
    new = (pl.col("start") > pl.col("end").cum_max().shift(1).over("cls")).fill_null(True)
    return (e.with_columns(new.cast(pl.Int64).cum_sum().over("cls").alias("_b"))
            .group_by("cls", "_b", maintain_order=True).agg(pl.col("start").min(), pl.col("end").max())
            .drop("_b"))


def _class_scale(classes: list[str]) -> alt.Scale:
    """Fixed colour per class; only the classes present appear in the legend."""
    dom = [c for c in CLASS_COLORS if c in classes] + sorted(c for c in set(classes) if c not in CLASS_COLORS)
    return alt.Scale(domain=dom, range=[CLASS_COLORS.get(c, "#9aa5b1") for c in dom])


def time_axis(lo_ms: int, hi_ms: int) -> dict:
    """UTC axis with round ticks (every 30 s, 5 min, ...) and a label format that fits the step."""
    span = max((hi_ms - lo_ms) / 1000, 1.0)
    step, unit = next(((n, u) for n, u in TICK_STEPS if span / (n * UNIT_S[u]) <= MAX_TICKS), TICK_STEPS[-1])
    fmt = "%H:%M:%S" if unit == "second" else "%H:%M"
    if span > 86400:
        fmt = "%b %d" if unit == "day" else "%b %d %H:%M"
    # A tick count, not explicit values: Vega then picks round UTC instants itself (explicit values
    # become datetime() signals, which the CSP-safe expression interpreter does not label).
    count = max(2, int(span // (step * UNIT_S[unit])))
    return {"format": fmt, "tickCount": count, "labelOverlap": True, "title": None, "labelFlush": True}


def _fmt_s(s: float) -> str:
    return f"{s:g} s" if s < 120 else f"{s / 60:g} min"


@dataclass(frozen=True)
class XEnc:
    """The shared time axis: every layer of every panel gets the same scale and axis (layers whose
    x definitions differ lose the axis settings when Vega-Lite merges them)."""

    lo: int
    hi: int

    def __call__(self, field: str, orient: str = "bottom") -> alt.X:
        # no explicit domain: the shared scale is the union of the data (explicit domains repeated in
        # every layer make Vega-Lite warn about conflicting domains)
        return alt.X(f"{field}:T", scale=alt.Scale(type="utc"),
                     axis=alt.Axis(**time_axis(self.lo, self.hi), orient=orient))  # fmt: skip


def _panel(p: Panel, long: pl.DataFrame, eps: pl.DataFrame, x: XEnc, per: str, options: Any):
    data = long.filter(pl.col("panel") == p.key).drop("panel")
    present = set(data["series"].unique().to_list())
    labels = [lbl for _, lbl, _ in p.series if lbl in present]
    colors = [c for _, lbl, c in p.series if lbl in present]
    shapes = [MARKER_SHAPES.get(lbl, "circle") for lbl in labels]
    symbol = "circle" if p.kind == "markers" else "stroke"
    color = alt.Color("series:N", scale=alt.Scale(domain=labels, range=colors), title=None,
                      legend=alt.Legend(orient="top", direction="horizontal", symbolType=symbol, symbolStrokeWidth=2.5))
    tooltip = [alt.Tooltip("time:N", title="window start (UTC)"), alt.Tooltip("series:N", title=p.title),
               alt.Tooltip("value:Q", format=".1%" if p.percent else ",.3~f")]  # fmt: skip
    base = alt.Chart(data)
    layers = []
    if eps.height:
        layers.append(
            alt.Chart(_bands(eps)).mark_rect(opacity=0.14).encode(
                x=x("start"), x2="end:T", fill=alt.Fill("cls:N", scale=_class_scale(eps["cls"].to_list()), legend=None)
            )
        )
    if p.kind == "markers":
        layers.append(
            base.mark_point(filled=True, opacity=0.85).encode(
                x=x("t"), y=alt.Y("series:N", title="events", sort=labels, axis=alt.Axis(labels=False, ticks=False)),
                color=color, shape=alt.Shape("series:N", scale=alt.Scale(domain=labels, range=shapes), legend=None),
                size=alt.Size("value:Q", title="count", scale=alt.Scale(range=[25, 260]), legend=None),
                tooltip=tooltip,
            )  # fmt: skip
        )
        life = data.filter(pl.col("series").is_in(list(MARKER_SHAPES)) & (pl.col("series") != "vLLM aborts"))
        if life.height:  # starts, deaths and OOMs also cross the panel: they are rare and decisive
            layers.append(alt.Chart(life).mark_rule(strokeDash=[3, 3], opacity=0.7).encode(
                x=x("t"), color=color, tooltip=tooltip))  # fmt: skip
        height = max(PANEL_H // 2, 16 * len(labels))
    else:
        y_title = per if p.kind == "step" and p.y_title == "requests" else p.y_title
        y = alt.Y("value:Q", title=y_title, axis=alt.Axis(format="%" if p.percent else "~s"))
        if p.percent:
            y = alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%"))
        interp = "step-after" if p.kind == "step" else "linear"
        layers.append(base.mark_line(interpolate=interp, clip=True).encode(x=x("t"), y=y, color=color, tooltip=tooltip))
        # invisible hover targets for tooltips, visible where a value stands alone between gaps
        layers.append(base.mark_point(size=18, filled=True, clip=True).encode(
            x=x("t"), y=y, color=color, opacity=alt.condition("datum.lone", alt.value(1), alt.value(0)),
            tooltip=tooltip))  # fmt: skip
        slo = getattr(options, p.slo, None) if p.slo else None
        if slo:
            rule = pl.DataFrame({"slo": [float(slo)], "label": [f"SLO {slo:g} s"]})
            layers.append(alt.Chart(rule).mark_rule(strokeDash=[5, 4], color="#d62728").encode(y="slo:Q"))
            layers.append(
                alt.Chart(rule).mark_text(align="left", dx=4, dy=-6, color="#d62728", fontSize=10).encode(
                    y="slo:Q", x=alt.value(0), text="label:N"
                )
            )
        height = PANEL_H
    return alt.layer(*layers).properties(width=WIDTH, height=height, title=p.title)
