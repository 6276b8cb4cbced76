"""The timeline's panels and their parts: series, colours, windows as long rows, episode bands, time axis.

Every panel is a Vega-Lite layer dict: the shared backgrounds (load phases, episodes), the series, and the
server's starts and stops as rules (``server_events``) drawn over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, cast

import polars as pl

from .. import clock
from ..scalars import float_or_none
from . import fmt
from .options import ReportOptions, slo_of
from .vl import ZERO_PLAIN, Data, int_scale, legend, tip

WIDTH = 860  # the timeline's plot width at the page's narrowest (1024 px); the page widens it to fit (report.html)
PANEL_H = 78
CLASS_COLORS = {"spike": "#e4572e", "sustained": "#7b2cbf", "recurring": "#f3a712", "crash": "#1f2933"}
# tick steps tried in order; the first giving at most MAX_TICKS ticks over the span is used
TICK_STEPS = ((1, "second"), (5, "second"), (10, "second"), (15, "second"), (30, "second"), (1, "minute"),
              (2, "minute"), (5, "minute"), (10, "minute"), (15, "minute"), (30, "minute"), (1, "hour"),
              (2, "hour"), (3, "hour"), (6, "hour"), (12, "hour"), (1, "day"), (7, "day"))  # fmt: skip
UNIT_S = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
MAX_TICKS = 12
GAP_SAMPLES = (
    3  # a gauge's line bridges up to this many of its usual sampling intervals; a longer silence breaks it
)
CAP_QUANTILE, CAP_FACTOR = 0.98, 2.0  # an outlier above FACTOR x this quantile of a panel's values is cut off


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    y_title: str
    series: tuple[tuple[str, str, str], ...]  # (column, legend label, colour)
    kind: str = "line"  # line | step (counts per window)
    percent: bool = False
    slo: str | None = None  # option name of an SLO drawn as a dashed rule
    gauge: bool = False  # sampled (stats lines): the line bridges short gaps between samples
    integer: bool = False  # counts: whole-number ticks only
    source: str = "windows"  # windows | tokens (server_stats, token_throughput.tokens)
    cap: bool = True  # one outlier window may not flatten the panel: the axis is cut and the title says so


BLUE, ORANGE, GREEN, RED, PURPLE, BROWN, PINK, GREY = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
)
P50, P95, P99 = "#9ecae1", "#3182bd", "#08306b"
PANELS = (
    Panel("load", "Arrivals", "requests", (
        ("arrivals", "logical requests started", BLUE), ("server_requests", "vLLM requests received", GREY),
    ), "step", integer=True),
    Panel("queue", "Running and waiting at the server", "requests", (
        ("running_max", "running (max)", BLUE), ("waiting_max", "waiting (max)", ORANGE),
        ("inflight_server", "in flight at vLLM (mean)", GREY),
    ), gauge=True, cap=False),
    Panel("kv", "KV-cache usage", "usage", (("kv_max", "max", PURPLE), ("kv_mean", "mean", "#c5b0d5")),
          percent=True, gauge=True, cap=False),
    Panel("tokens", "Token throughput (server)", "tokens/s", (
        ("prompt_tps", "prompt tokens/s", "#17becf"), ("gen_tps", "generation tokens/s", PURPLE),
    ), gauge=True, source="tokens"),
    Panel("preempt", "Preemptions", "per window", (("preemptions", "preemptions", RED),), "step", integer=True),
    Panel("errors", "Errors at the gateway and the server", "per window", (
        ("gateway_5xx", "gateway 5xx", BROWN), ("gateway_499", "gateway 499 (client left)", PINK),
        ("timeouts", "attempts timed out (client)", ORANGE), ("server_aborts", "vLLM aborts", GREY),
        ("oom_events", "OOM", "#000000"), ("engine_deaths", "engine deaths", "#000000"),
    ), "step", integer=True),
    Panel("retries", "Retries and orphaned work", "per window", (
        ("client_retries", "client retries", BLUE), ("gateway_retries", "gateway retries", ORANGE),
        ("orphaned", "orphaned executions", RED),
    ), "step", integer=True),
    Panel("amp", "Amplification", "× logical", (
        ("amplification", "vLLM executions per logical request", PURPLE),), cap=False),
    Panel("ttft", "Time to first token", "seconds", (
        ("ttft_p50", "p50", P50), ("ttft_p95", "p95", P95), ("ttft_p99", "p99", P99),
    ), slo="slo_ttft_s"),
    Panel("e2e", "End-to-end latency", "seconds", (
        ("e2e_p50", "p50", P50), ("e2e_p95", "p95", P95), ("e2e_p99", "p99", P99),
    ), slo="slo_e2e_s"),
)  # fmt: skip
SUMMED = {"arrivals", "completions", "errors", "timeouts", "gateway_5xx", "gateway_499", "client_attempts",
        "client_retries", "gateway_retries", "server_requests", "server_aborts", "preemptions", "oom_events",
        "engine_deaths", "server_restarts", "orphaned"}  # fmt: skip
LONG_SCHEMA = {"t": pl.Int64, "time": pl.String, "panel": pl.String, "series": pl.String, "value": pl.Float64,
               "lone": pl.Boolean}  # fmt: skip


def bridged(f: pl.DataFrame, width_ms: int) -> pl.DataFrame:
    """A gauge's samples (non-null), with a null row after each silence longer than GAP_SAMPLES of its usual
    interval, so that its line joins samples a few windows apart (stats every 10 s in 1 s windows drew dots
    only) but breaks where the server was silent."""
    f = f.filter(pl.col("value").is_not_null())
    if f.height < 2:
        return f
    dt = pl.col("t").diff()
    usual = f.select(dt.median()).item() or width_ms
    limit = max(GAP_SAMPLES * usual, 2 * width_ms)
    gaps = (
        f.with_columns(dt.alias("_dt"))
        .filter(pl.col("_dt") > limit)
        .with_columns(
            (pl.col("t") - pl.col("_dt") + width_ms).alias("t"),
            pl.lit(None, pl.Float64).alias("value"),
            pl.lit(None, pl.String).alias("time"),
        )
    )
    return pl.concat([f, gaps.select(f.columns)]).sort("t") if gaps.height else f


def named(panels: tuple[Panel, ...], engine: str | None) -> tuple[Panel, ...]:
    """The panels with the engine the server rows came from in their labels (summary.json's retries.server_engine):
    a TGI or SGLang folder's legend read 'vLLM requests received', 'vLLM aborts'."""
    eng = engine or "server"
    return tuple(
        replace(p, series=tuple((c, lbl.replace("vLLM", eng), col) for c, lbl, col in p.series))
        for p in panels
    )


def long_rows(
    w: pl.DataFrame, panels: tuple[Panel, ...] = PANELS, width_ms: int | None = None
) -> pl.DataFrame:
    """Windows as (t, time, panel, series, value, lone) rows: one dataset per panel."""
    t = pl.col("ts").dt.epoch("ms").alias("t")
    time = pl.col("ts").dt.strftime(clock.time_format()).alias("time")
    if width_ms is None:
        width_ms = (
            int((float_or_none(w["window_s"].drop_nulls().median()) or 1.0) * 1000)
            if "window_s" in w.columns
            else 1000
        )
    frames = []
    for p in panels:
        for col, label, _ in p.series:
            if col not in w.columns or w[col].null_count() == w.height:
                continue
            v = pl.col(col).cast(pl.Float64)
            f = w.select(
                t, time, pl.lit(p.key).alias("panel"), pl.lit(label).alias("series"), v.alias("value")
            )
            if p.gauge:
                f = bridged(f, width_ms)
            elif p.kind == "step" or col in SUMMED:
                f = f.filter(pl.col("value").is_not_null())
            # a value between two gaps draws no line segment: flag it so a dot shows it
            v = pl.col("value")
            lone = v.is_not_null() & v.shift(1).is_null() & v.shift(-1).is_null()
            frames.append(f.with_columns(lone.alias("lone")))
    if not frames:
        return pl.DataFrame(schema=LONG_SCHEMA)
    return pl.concat(frames)


def episode_frame(episodes: list[dict], min_ms: int) -> pl.DataFrame:
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


def episode_bands(eps: pl.DataFrame) -> pl.DataFrame:
    """Shading of the panels: overlapping or touching episodes of one class are one band (the same
    picture with far fewer marks when a long incident has hundreds of episodes)."""
    e = eps.select("cls", "start", "end").sort("cls", "start")
    new = (pl.col("start") > pl.col("end").cum_max().shift(1).over("cls")).fill_null(True)
    return (
        e.with_columns(new.cast(pl.Int64).cum_sum().over("cls").alias("_b"))
        .group_by("cls", "_b", maintain_order=True)
        .agg(pl.col("start").min(), pl.col("end").max())
        .drop("_b")
    )


def class_scale(classes: list[str]) -> dict:
    """Fixed colour per class; only the classes present appear in the legend."""
    dom = [c for c in CLASS_COLORS if c in classes] + sorted(c for c in set(classes) if c not in CLASS_COLORS)
    return {"domain": dom, "range": [CLASS_COLORS.get(c, "#9aa5b1") for c in dom]}


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


def fmt_s(s: float) -> str:
    return f"{s:g} s" if s < 120 else f"{s / 60:g} min"


@dataclass(frozen=True)
class XEnc:
    """The shared time axis: every layer of every panel gets the same scale and axis (layers whose
    x definitions differ lose the axis settings when Vega-Lite merges them)."""

    lo: int
    hi: int

    def __call__(self, field: str, orient: str = "bottom") -> dict:
        # no explicit domain: the shared scale is the union of the data (explicit domains repeated in
        # every layer make Vega-Lite warn about conflicting domains)
        return {
            "field": field,
            "type": "temporal",
            "scale": {"type": "utc"},
            "axis": {**time_axis(self.lo, self.hi), "orient": orient},
        }

    def px(self, ms: float, width: int = WIDTH) -> float:
        """Where ``ms`` falls on the narrowest plot (labels are placed so that they fit there, and wider)."""
        return (ms - self.lo) / max(self.hi - self.lo, 1) * width


@dataclass
class Backdrop:
    """What every panel draws behind (load phases, episodes) and over (server starts and stops) its series."""

    behind: list[dict] = field(default_factory=list)
    over: list[dict] = field(default_factory=list)


def episode_shading(eps: pl.DataFrame, x: XEnc, data: Data) -> list[dict]:
    if not eps.height:
        return []
    return [
        {
            "data": data.add("episode-bands", episode_bands(eps)),
            "mark": {"type": "rect", "opacity": 0.14},
            "encoding": {
                "x": x("start"),
                "x2": {"field": "end"},
                "fill": {
                    "field": "cls",
                    "type": "nominal",
                    "scale": class_scale(eps["cls"].to_list()),
                    "legend": None,
                },
            },
        }
    ]


def cap_of(values: pl.Series) -> float | None:
    """Where to cut a panel's axis so that one outlier does not flatten it: None unless a few values stand far
    above the rest (above CAP_FACTOR x the CAP_QUANTILE of the non-zero values, and at most 2 % of them)."""
    v = values.drop_nulls()
    v = v.filter(v > 0)
    if v.len() < 20:
        return None
    q = cast("float | None", v.quantile(CAP_QUANTILE)) or 0.0  # positive numbers: a float
    top = float(cast(float, v.max()))
    if q <= 0 or top <= CAP_FACTOR * q * 1.25:
        return None
    cap = CAP_FACTOR * q
    return cap if cast(float, (v > cap).mean()) <= 0.02 else None


def figure(x: float, unit: str | None = None) -> str:
    """A value of a panel's axis as the note says it: a latency in three significant figures with its unit
    ('1.42 s', '850 ms'), anything else in three significant figures ('1.5', '37', '1,200'); kv-blip's e2e note
    read 'axis cut at 1: 1 at 09:53:48' for a cut at 1.2 s and a top of 1.5 s."""
    if unit is not None and unit.startswith("seconds"):  # 'seconds (clock client)'
        return fmt.seconds(x)
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def cut_note(data: pl.DataFrame, cap: float, value: str = "value", unit: str | None = None) -> str:
    # nulls last: a panel's gaps are null rows, and polars sorts them first (kv-blip's timeline was not drawn)
    top = data.sort(value, descending=True, nulls_last=True).row(0, named=True)
    return f"axis cut at {figure(cap, unit)}: {figure(top[value], unit)} at {top['time']} (drawn at the top)"


def y_axis(p: Panel, title: str, values: pl.Series) -> tuple[dict, float | None]:
    """The panel's y encoding, and where its axis was cut (None: not cut). Counts get whole-number ticks."""
    cap = cap_of(values) if p.cap and not p.percent else None
    # d3's SI ticks share one prefix: 0 was drawn '0k' beside '0.5k'
    axis: dict[str, Any] = {"format": "%"} if p.percent else {"format": "~s", "labelExpr": ZERO_PLAIN}
    scale: dict[str, Any] = {}
    if p.percent:
        scale = {"domain": [0, 1]}
    elif p.integer:
        axis, scale = int_scale(cap if cap is not None else values.max())  # type: ignore[arg-type]
        cap = scale["domain"][1] if cap is not None else None
    elif cap is not None:
        scale = {"domain": [0, cap], "nice": False}
    if cap is not None:
        scale["clamp"] = True
    y: dict[str, Any] = {"field": "value", "type": "quantitative", "title": title, "axis": axis}
    if scale:
        y["scale"] = scale
    return y, cap


def panel(
    p: Panel, data: pl.DataFrame, back: Backdrop, x: XEnc, per: str, options: ReportOptions, d: Data
) -> dict:
    """One line panel: its series over the shared backgrounds, with hover points for tooltips."""
    present = set(data["series"].unique().to_list())
    labels = [lbl for _, lbl, _ in p.series if lbl in present]
    colors = [c for _, lbl, c in p.series if lbl in present]
    color = {
        "field": "series",
        "type": "nominal",
        "title": None,
        "scale": {"domain": labels, "range": colors},
        "legend": legend(labels, WIDTH),
    }
    tooltip = [
        tip("time", "window start (UTC)"),
        tip("series", p.title),
        tip("value", None, "quantitative", ".1%" if p.percent else ",.3~f"),
    ]
    y_title = per if p.kind == "step" and p.y_title in ("requests", "per window") else p.y_title
    y, cap = y_axis(p, y_title, data["value"])
    ref = d.add(f"panel-{p.key}", data)
    interp = "step-after" if p.kind == "step" else "linear"
    layers = [
        *back.behind,
        {
            "data": ref,
            "mark": {"type": "line", "interpolate": interp, "clip": True},
            "encoding": {"x": x("t"), "y": y, "color": color, "tooltip": tooltip},
        },
        # invisible hover targets for tooltips, visible where a value stands alone between gaps
        {
            "data": ref,
            "mark": {"type": "point", "size": 18, "filled": True, "clip": True},
            "encoding": {
                "x": x("t"),
                "y": y,
                "color": color,
                "tooltip": tooltip,
                "opacity": {"condition": {"test": "datum.lone", "value": 1}, "value": 0},
            },
        },
    ]
    slo = slo_of(options, p.slo) if p.slo else None
    if slo and (cap is None or slo <= cap):
        rule = d.add(f"slo-{p.key}", [{"slo": float(slo), "label": f"SLO {slo:g} s"}])
        layers.append(
            {
                "data": rule,
                "mark": {"type": "rule", "strokeDash": [5, 4], "color": RED},
                "encoding": {"y": {"field": "slo", "type": "quantitative"}},
            }
        )
        layers.append(
            {
                "data": rule,
                "mark": {"type": "text", "align": "left", "dx": 4, "dy": -6, "color": RED, "fontSize": 10},
                "encoding": {
                    "y": {"field": "slo", "type": "quantitative"},
                    "x": {"value": 0},
                    "text": {"field": "label", "type": "nominal"},
                },
            }
        )
    layers += clipped(data, cap, x, d, p.key)
    layers += back.over
    return {"layer": layers, "width": WIDTH, "height": PANEL_H, "title": title(p.title, data, cap, p.y_title)}


MAX_CLIPPED_LABELS = 3


def clipped(data: pl.DataFrame, cap: float | None, x: XEnc, d: Data, key: str) -> list[dict]:
    """The values above a cut axis, written at the top of the plot where they were cut ('↑48'): a burst cut
    off still reads as one."""
    if cap is None:
        return []
    top = data.filter(pl.col("value") > cap).sort("value", descending=True).head(MAX_CLIPPED_LABELS)
    top = top.with_columns(("↑" + pl.col("value").round(0).cast(pl.Int64).cast(pl.String)).alias("cut"))
    right = pl.Series([x.px(t) > WIDTH - 40 for t in top["t"]], dtype=pl.Boolean)
    out = []
    for side, align, dx in ((False, "left", 3), (True, "right", -3)):
        part = top.filter(right == side)
        if part.height:
            out.append(
                {
                    "data": d.add(f"clipped-{key}", part.select("t", "cut", "time")),
                    "mark": {
                        "type": "text",
                        "align": align,
                        "dx": dx,
                        "baseline": "top",
                        "dy": 1,
                        "fontSize": 10,
                        "fontWeight": 600,
                        "color": "#1f2933",
                    },
                    "encoding": {"x": x("t"), "y": {"value": 0}, "text": {"field": "cut", "type": "nominal"}},
                }
            )
    return out


def title(text: str, data: pl.DataFrame, cap: float | None, unit: str | None = None) -> dict | str:
    if cap is None:
        return text
    note = cut_note(data, cap, unit=unit)
    return {"text": text, "subtitle": note, "subtitleFontSize": 11, "subtitleColor": "#52606d"}
