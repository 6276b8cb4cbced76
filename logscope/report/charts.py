"""Altair charts of the report, returned as Vega-Lite dicts (golden-testable, embedded as JSON).

The timeline is built from the ``windows`` table only (already aggregated by the correlation
stage, re-binned here when there are too many windows), never from raw rows, so the page stays
small whatever the size of the logs. Its panels and their parts are in ``panels``; here, every chart
finished as a dict, the timeline's windows merged to fit and its episode lane.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import altair as alt
import polars as pl

from ..correlate.frames import group_first
from .load import Loaded
from .panels import (
    _SUM,
    BLUE,
    CLASS_COLORS,
    GREEN,
    ORANGE,
    P50,
    P95,
    PANEL_H,
    PANELS,
    RED,
    WIDTH,
    XEnc,
    _class_scale,
    _episode_frame,
    _fmt_s,
    _long,
    _panel,
)
from .panels import _bands as _bands  # charts._bands, as the tests read it

MAX_WINDOWS = 720  # more windows than this are merged: a 1,040 px wide chart cannot show more
MAX_EPISODE_ROWS = 16  # more episodes than this share one row per class


def theme() -> dict:
    text = resources.files("report_templates").joinpath("chart_theme.json").read_text(encoding="utf-8")
    return json.loads(text)


# altair checks every spec against the Vega-Lite JSON schema (0.17 s on a busy timeline): the tests turn
# it on (tests/test_report.py), a run does not pay for it
VALIDATE = False


def _finish(chart: alt.TopLevelMixin) -> dict:
    spec = chart.to_dict(validate=VALIDATE)
    spec["config"] = theme()  # altair's default view size would override the theme's
    return spec


def coarsen(w: pl.DataFrame) -> pl.DataFrame:
    """Merge windows so that at most MAX_WINDOWS remain (sums stay sums, maxima stay maxima)."""
    if w.height <= MAX_WINDOWS:
        return w
    width = float(w["window_s"].drop_nulls().median() or 1.0)
    span = (w["ts"].max() - w["ts"].min()).total_seconds() + width
    factor = int(-(-span // (width * MAX_WINDOWS)))
    every = f"{int(width * factor * 1_000_000)}us"
    aggs = []
    for c in w.columns:
        if c in ("ts",):
            continue
        if c == "window_s":
            aggs.append(pl.lit(width * factor).alias(c))
        elif c in _SUM:
            aggs.append(pl.col(c).sum().alias(c) if w[c].null_count() < w.height else pl.col(c).first())
        elif c.endswith("_mean") or c.startswith("inflight") or c == "amplification":
            aggs.append(pl.col(c).mean().alias(c))
        else:  # maxima and percentiles: the worst window wins
            aggs.append(pl.col(c).max().alias(c))
    return w.sort("ts").group_by_dynamic("ts", every=every).agg(aggs)


def timeline(ld: Loaded, summary: dict, options: Any) -> tuple[dict | None, list[str]]:
    """The stacked timeline (Vega-Lite dict) and notes on panels left out for lack of data."""
    w = ld.table("windows")
    if w.height == 0:
        return None, [ld.why("windows") or "the windows table is empty: no timed event was found"]
    w = coarsen(w.sort("ts"))
    width_s = float(w["window_s"].drop_nulls().median() or 1.0)
    lo = int(w["ts"].min().timestamp() * 1000)
    hi = int(w["ts"].max().timestamp() * 1000 + width_s * 1000)
    long = _long(w)
    eps = _episode_frame(summary.get("episodes", []), int(width_s * 1000))
    x = XEnc(lo, hi)
    per = f"per {_fmt_s(width_s)} window"
    rows: list[alt.TopLevelMixin] = []
    notes: list[str] = []
    if eps.height:
        rows.append(_episode_lane(eps, x))
    have = set(long["panel"].unique().to_list()) if long.height else set()
    for p in PANELS:
        if p.key not in have:
            cols = ", ".join(c for c, _, _ in p.series)
            notes.append(f"{p.title}: no data ({cols} are empty for these inputs)")
            continue
        rows.append(_panel(p, long, eps, x, per, options))
    if not rows:
        return None, notes
    chart = alt.vconcat(*rows, spacing=14).resolve_scale(x="shared", y="independent", color="independent")
    return _finish(chart), notes


def _episode_lane(eps: pl.DataFrame, x: XEnc) -> alt.TopLevelMixin:
    """One bar per episode, coloured by class, labelled 'E1 · spike · preemptions' beside it; past
    MAX_EPISODE_ROWS episodes, one row per class with the labels in tooltips (a row per episode would
    make the chart thousands of pixels tall)."""
    if eps.height > MAX_EPISODE_ROWS:
        classes = [c for c in CLASS_COLORS if c in set(eps["cls"].to_list())] + sorted(
            set(eps["cls"].to_list()) - set(CLASS_COLORS))
        y = alt.Y("cls:N", sort=classes, title=None, axis=alt.Axis(ticks=False, domain=False, grid=False))
        bars = alt.Chart(eps).mark_bar(height=14, cornerRadius=2).encode(
            x=x("start", "top"), x2="end:T", y=y,
            fill=alt.Fill("cls:N", scale=_class_scale(eps["cls"].to_list()), legend=None),
            tooltip=[alt.Tooltip("label:N", title="episode")],
        )  # fmt: skip
        return bars.properties(width=WIDTH, height=22 * len(classes),
                               title=f"Episodes: {eps.height}, one row per class (hover for ids; shaded below)")
    y = alt.Y("id:N", sort=None, title="episode",
              axis=alt.Axis(labels=False, ticks=False, domain=False, grid=False))  # fmt: skip
    bars = alt.Chart(eps).mark_bar(height=14, cornerRadius=2).encode(
        x=x("start", "top"), x2="end:T", y=y,
        fill=alt.Fill("cls:N", scale=_class_scale(eps["cls"].to_list()), legend=None),
        tooltip=[alt.Tooltip("label:N", title="episode")],
    )  # fmt: skip
    # labels right of the bar, or left of it when the bar ends in the last quarter of the axis
    cut = x.lo + 0.75 * (x.hi - x.lo)
    after, before = eps.filter(pl.col("end") <= cut), eps.filter(pl.col("end") > cut)
    layers = [bars]
    for part, field, align, dx in ((after, "end", "left", 4), (before, "start", "right", -4)):
        if part.height:
            layers.append(
                alt.Chart(part).mark_text(align=align, dx=dx, fontSize=11, fontWeight=600, color="#1f2933").encode(
                    x=x(field, "top"), y=y, text="label:N"
                )
            )
    return alt.layer(*layers).properties(
        width=WIDTH, height=max(22, 20 * eps.height), title="Episodes (shaded on every panel below)"
    )


# ---------------------------------------------------------------- section charts


LADDER_METRICS = {"ttft_p50": ("TTFT p50", P50), "ttft_p95": ("TTFT p95", P95),
                  "e2e_p50": ("e2e p50", "#fdd0a2"), "e2e_p95": ("e2e p95", ORANGE)}  # fmt: skip


def range_overview(summary: dict) -> dict | None:
    """When logscope chose the range to fit memory: trouble signs over the whole input, the
    range analysed shaded blue and the other ranges it names orange (None otherwise)."""
    rng = (summary.get("span") or {}).get("range") or {}
    chosen = rng.get("chosen") or {}
    ov = chosen.get("overview") or {}
    if not ov.get("bins"):
        return None

    def ms(col: str) -> pl.Expr:
        return pl.col(col).str.to_datetime(time_zone="UTC").dt.epoch("ms")

    bars = pl.DataFrame(ov["bins"]).with_columns(ms("t").alias("t")).with_columns(
        (pl.col("t") + ov["bin_s"] * 1000).alias("end"))
    spans = [{"kind": "range analysed", "since": rng["since"], "until": rng["until"]}] + [
        {"kind": "other ranges named", "since": o["since"], "until": o["until"]} for o in chosen.get("others") or []]
    bands = pl.DataFrame(spans).with_columns(ms("since"), ms("until"))
    lo = int(min(bars["t"].min(), bands["since"].min()))
    hi = int(max(bars["end"].max(), bands["until"].max()))
    x = XEnc(lo, hi)
    kinds = ["range analysed", "other ranges named"]
    shade = alt.Chart(bands).mark_rect(opacity=0.35).encode(
        x=x("since"), x2="until:T",
        fill=alt.Fill("kind:N", title=None, scale=alt.Scale(domain=kinds, range=[BLUE, ORANGE]),
                      legend=alt.Legend(orient="top", direction="horizontal")),
    )  # fmt: skip
    per = _fmt_s(float(ov["bin_s"]))
    col = alt.Chart(bars).mark_rect(color="#9aa5b1").encode(
        x=x("t"), x2="end:T", y=alt.Y("trouble:Q", title=f"per {per}", axis=alt.Axis(format="~s")), y2=alt.datum(0),
        tooltip=[alt.Tooltip("t:T", title="from (UTC)", format="%Y-%m-%d %H:%M"), alt.Tooltip("trouble:Q", format=",")],
    )  # fmt: skip
    chart = alt.layer(col, shade).properties(  # the shading over the bars: a range shows whatever its height
        width=WIDTH, height=PANEL_H, title="Trouble signs over the whole input (failures, server warnings, queue / preemption / full-KV stats lines)")
    return _finish(chart)


def ladder_chart(summary: dict, options: Any) -> dict | None:
    """Latency, throughput and preemptions by step, the working boundary as a green rule."""
    lad = summary.get("ladder") or {}
    steps = [s for s in lad.get("steps", []) if s.get("concurrency") is not None]
    if not steps:
        return None
    df = pl.DataFrame(steps, infer_schema_length=None)
    cols = [c for c in LADDER_METRICS if c in df.columns]
    lat = (
        df.unpivot(index="concurrency", on=cols, variable_name="metric", value_name="seconds")
        .drop_nulls()
        .with_columns(pl.col("metric").replace_strict({k: v[0] for k, v in LADDER_METRICS.items()}))
    )
    x = alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2), title="concurrency",
              axis=alt.Axis(values=sorted({float(s["concurrency"]) for s in steps}), format="~g"))  # fmt: skip
    wb = lad.get("working_boundary") if isinstance(lad.get("working_boundary"), dict) else {}
    boundary = pl.DataFrame({"concurrency": [float(wb["concurrency"])]}) if wb.get("concurrency") else None

    def with_boundary(chart: alt.Chart) -> alt.TopLevelMixin:
        if boundary is None:
            return chart
        rule = alt.Chart(boundary).mark_rule(color=GREEN, strokeWidth=2, strokeDash=[6, 3]).encode(x=x)
        return alt.layer(chart, rule)

    charts = []
    if lat.height:
        names = [v[0] for k, v in LADDER_METRICS.items() if k in cols]
        colors = [v[1] for k, v in LADDER_METRICS.items() if k in cols]
        line = alt.Chart(lat).mark_line(point=True).encode(
            x=x, y=alt.Y("seconds:Q", title="seconds"),
            color=alt.Color("metric:N", title=None, scale=alt.Scale(domain=names, range=colors)),
            tooltip=["concurrency:Q", "metric:N", alt.Tooltip("seconds:Q", format=".3f")],
        )  # fmt: skip
        slo = [(getattr(options, "slo_ttft_s", None), "TTFT SLO"), (getattr(options, "slo_e2e_s", None), "e2e SLO")]
        rules = pl.DataFrame({"s": [float(v) for v, _ in slo if v], "label": [n for v, n in slo if v]})
        if rules.height and lat["seconds"].max() is not None:
            rules = rules.filter(pl.col("s") <= lat["seconds"].max() * 1.5)  # off-scale SLOs would flatten it
        layers = [line]
        if rules.height:
            layers.append(alt.Chart(rules).mark_rule(color=RED, strokeDash=[5, 4]).encode(y="s:Q"))
        charts.append(with_boundary(alt.layer(*layers)).properties(width=300, height=190, title="Latency by step"))
    for col, title in (("throughput_tps", "Output tokens/s"), ("preemptions", "Preemptions")):
        if col in df.columns and df[col].null_count() < df.height:
            bars = alt.Chart(df.select("concurrency", col).drop_nulls()).mark_bar(width=14, color=BLUE).encode(
                x=x, y=alt.Y(f"{col}:Q", title=None), tooltip=["concurrency:Q", f"{col}:Q"]
            )  # fmt: skip
            charts.append(with_boundary(bars).properties(width=260, height=190, title=title))
    if not charts:
        return None
    return _finish(alt.hconcat(*charts, spacing=30).resolve_scale(color="independent"))


def retry_gap_chart(ld: Loaded) -> tuple[dict | None, dict | None]:
    """Histogram of seconds between a failed client attempt and the next one (the retry back-off)."""
    key = ("source", "logical_request_id")
    ca = ld.scan("client_attempts").select(*key, "attempt", "ts_start", "ts_end")
    used = (ld.doc("correlation").get("sources") or {}).get("client")
    if used:  # a client log and its own JSONL can describe the same sends: count them once
        ca = ca.filter(pl.col("source").is_in(used))
    ca = ca.filter(pl.col("logical_request_id").is_not_null()).collect()  # read for this chart alone, not kept
    if ca.height == 0:
        return None, None
    # each attempt against the previous one of its request: rows sorted by request, then a shift (a window
    # over a million small groups costs more than the sort)
    gaps = (
        ca.sort([*key, "attempt", "ts_start"])
        .select(
            "attempt",
            pl.when(~group_first(*key)).then((pl.col("ts_start") - pl.col("ts_end").shift(1)).dt.total_microseconds()
                                             / 1e6)
            .alias("gap_s"),
        )
        .filter(pl.col("attempt") > 1)
        .select("gap_s")
        .drop_nulls()
    )
    if gaps.height == 0:
        return None, None
    stats = {
        "retries": gaps.height,
        "p50_s": gaps["gap_s"].quantile(0.5),
        "p95_s": gaps["gap_s"].quantile(0.95),
        "max_s": gaps["gap_s"].max(),
    }
    # binned here, not by Vega: the page carries 40 bars, never one row per retry
    gap = pl.col("gap_s").clip(0.0, None)
    width = max(float(gaps["gap_s"].clip(0.0, None).max() or 0.0), 1e-3) / 40
    hist = (
        gaps.group_by((gap / width).floor().clip(0, 39).alias("bin"))
        .agg(pl.len().alias("retries"))
        .with_columns((pl.col("bin") * width).alias("lo"), ((pl.col("bin") + 1) * width).alias("hi"))
        .sort("lo")
    )
    chart = alt.Chart(hist).mark_bar(color="#1f77b4").encode(
        x=alt.X("lo:Q", title="seconds from a failed attempt to the retry"),
        x2="hi:Q",
        y=alt.Y("retries:Q", title="retries"),
        y2=alt.datum(0),
        tooltip=[alt.Tooltip("lo:Q", format=".2f", title="from s"), alt.Tooltip("hi:Q", format=".2f", title="to s"),
                 "retries:Q"],
    ).properties(width=520, height=170, title="Retry timing (client)")  # fmt: skip
    return _finish(chart), stats


def output_length_chart(ld: Loaded) -> tuple[dict | None, dict | None]:
    """Generated tokens as a share of the requested max_tokens (requests that say both)."""
    req = ld.table("requests", ("max_tokens", "output_tokens")).filter(
        pl.col("max_tokens").is_not_null() & pl.col("output_tokens").is_not_null() & (pl.col("max_tokens") > 0)
    )
    if req.height == 0:
        return None, None
    req = req.with_columns((pl.col("output_tokens") / pl.col("max_tokens")).clip(0.0, 1.0).alias("share"))
    stats = {
        "requests": req.height,
        "max_tokens_mean": req["max_tokens"].mean(),
        "output_tokens_mean": req["output_tokens"].mean(),
        "hit_max_share": float((req["output_tokens"] >= req["max_tokens"]).mean()),
    }
    hist = (
        req.group_by((pl.col("share") * 20).floor().clip(0, 19).truediv(20).alias("lo"))
        .agg(pl.len().alias("requests"))
        .with_columns((pl.col("lo") + 0.05).alias("hi"))
        .sort("lo")
    )
    chart = alt.Chart(hist).mark_bar(color="#2ca02c").encode(
        x=alt.X("lo:Q", title="generated tokens / requested max_tokens", scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%")),
        x2="hi:Q",
        y=alt.Y("requests:Q", title="requests"),
        y2=alt.datum(0),
        tooltip=[alt.Tooltip("lo:Q", format=".0%", title="from"), "requests:Q"],
    ).properties(width=520, height=170, title="Requested vs generated length")  # fmt: skip
    return _finish(chart), stats
