"""The report's charts, as Vega-Lite dicts (golden-testable, embedded as JSON; ``vl`` says why not altair).

The timeline is built from the ``windows`` table (already aggregated by the correlation stage, re-binned
here when there are too many windows) and from per-window counts of the request and stats tables, never
from raw rows, so the page stays small whatever the size of the logs. Its panels are in ``panels``, its
top lane (load phases from ``load_phases``, server events from ``server_events``) in ``lanes``, the outcome
and throughput panels in ``outcome_panel`` and ``token_throughput``; here, the timeline put together, its
episode lane, and the section charts.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import polars as pl

from ..correlate.exprs import group_first
from ..scalars import float_or_none, float_value, int_or_none, int_value
from . import gpu_panel, lanes, load_phases, outcome_panel, server_events, span_panel, token_throughput
from .load import Loaded
from .options import ReportOptions
from .panels import (
    BLUE,
    CLASS_COLORS,
    GREEN,
    ORANGE,
    P50,
    P95,
    PANELS,
    RED,
    SUMMED,
    WIDTH,
    XEnc,
    class_scale,
    episode_frame,
    fmt_s,
    long_rows,
    named,
    panel,
)
from .vl import VALIDATE as VALIDATE  # charts.VALIDATE, as compare.charts reads it
from .vl import Data, finish, int_scale, legend, theme, tip

__all__ = [
    "theme",
    "coarsen",
    "timeline",
    "range_overview",
    "ladder_chart",
    "retry_gap_chart",
    "output_length_chart",
    "VALIDATE",
]

MAX_WINDOWS = 720  # more windows than this are merged: a 1,040 px wide chart cannot show more
MAX_EPISODE_ROWS = 16  # more episodes than this share one row per class
# usermeta: the page widens the chart to its card (report.html's script); room = what the chart needs beside its
# plot (y-axis title and labels, padding: 68 px measured in Chromium, with a margin)
FIT = {"fit": "width", "room": 76}


def coarsen(w: pl.DataFrame) -> pl.DataFrame:
    """Merge windows so that at most MAX_WINDOWS remain (sums stay sums, maxima stay maxima)."""
    if w.height <= MAX_WINDOWS:
        return w
    width = float_or_none(w["window_s"].drop_nulls().median()) or 1.0
    span = (cast(datetime, w["ts"].max()) - cast(datetime, w["ts"].min())).total_seconds() + width
    factor = int(-(-span // (width * MAX_WINDOWS)))
    every = f"{int(width * factor * 1_000_000)}us"
    aggs = []
    for c in w.columns:
        if c in ("ts",):
            continue
        if c == "window_s":
            aggs.append(pl.lit(width * factor).alias(c))
        elif c in SUMMED:
            aggs.append(pl.col(c).sum().alias(c) if w[c].null_count() < w.height else pl.col(c).first())
        elif c.endswith("_mean") or c.startswith("inflight") or c == "amplification":
            aggs.append(pl.col(c).mean().alias(c))
        else:  # maxima and percentiles: the worst window wins
            aggs.append(pl.col(c).max().alias(c))
    return w.sort("ts").group_by_dynamic("ts", every=every).agg(aggs)


LATENCY_PANELS = ("ttft", "e2e")


def timeline(ld: Loaded, summary: dict, options: ReportOptions) -> tuple[dict | None, list[str]]:
    """The stacked timeline (Vega-Lite dict) and notes on panels left out for lack of data."""
    w = ld.table("windows")
    if w.height == 0:
        return None, [ld.why("windows") or "the windows table is empty: no timed event was found"]
    w = coarsen(w.sort("ts"))
    width_s = float_or_none(w["window_s"].drop_nulls().median()) or 1.0
    width_ms = int(width_s * 1000)
    lo = int(cast(datetime, w["ts"].min()).timestamp() * 1000)  # windows all have a time
    hi = int(cast(datetime, w["ts"].max()).timestamp() * 1000 + width_ms)
    shown = named(PANELS, (summary.get("retries") or {}).get("server_engine"))  # whose server rows
    tokens_panel = next(p for p in shown if p.key == "tokens")
    long = pl.concat(
        [
            long_rows(w, shown, width_ms),
            token_throughput.tokens(ld, w["ts"].dt.epoch("ms"), width_ms, tokens_panel),
        ],
        how="diagonal_relaxed",
    )
    eps = episode_frame(summary.get("episodes", []), width_ms)
    ph, what = load_phases.phases(ld, summary)
    ev = server_events.events(ld, summary)
    # the axis is the union of what is drawn (a server start before the first request widens it): labels are
    # placed on that span
    ends = [
        v
        for f, cols in ((ph, ("start", "end")), (ev, ("t", "ready")), (eps, ("start", "end")))
        if f.height
        for c in cols
        for v in (int_or_none(f[c].min()), int_or_none(f[c].max()))  # epoch ms
        if v is not None
    ]
    x = XEnc(min([lo, *ends]), max([hi, *ends]))
    d = Data()
    back = lanes.backdrop(ph, ev, eps, x, d)
    per = f"per {fmt_s(width_s)} window"
    rows: list[dict] = []
    notes: list[str] = []
    if not what:
        notes.append("Load phases: none shown (no ladder was found and no client log states its phases)")
    top = lanes.lane(ph, what, ev, x, d)
    if top is not None:
        rows.append(top)
    if eps.height:
        rows.append(_episode_lane(eps, x, d))
    oc = outcome_panel.outcomes(ld, lo, width_ms)  # on the windows' grid
    if oc.height:
        rows.append(outcome_panel.outcome_panel(oc, back, x, per, d))
    else:
        notes.append("Outcomes as callers saw them: no data (the requests table is empty)")
    beside = len(rows)
    clocks = w["latency_clock"].drop_nulls().unique().to_list() if "latency_clock" in w.columns else []
    clk = clocks[0] if len(clocks) == 1 else None
    # a count that stayed at zero is said in a note, not drawn as a flat line (nor listed in its panel's legend)
    flat = long.group_by("panel", "series").agg((pl.col("value").fill_null(0) == 0).all().alias("zero"))
    zero = {(p, s) for p, s, z in flat.rows() if z}
    for p in shown:
        series = [lbl for c, lbl, _ in p.series if (p.key, lbl) in zero and (p.kind == "step" or c in SUMMED)]
        data = long.filter((pl.col("panel") == p.key) & ~pl.col("series").is_in(series)).drop("panel")
        if data.height == 0:
            if series:
                notes.append(f"{p.title}: zero throughout ({', '.join(series)})")
                continue
            src = (
                "the server's stats lines give no token throughput"
                if p.source == "tokens"
                else ", ".join(c for c, _, _ in p.series) + " are empty for these inputs"
            )
            notes.append(f"{p.title}: no data ({src})")
            continue
        if series:
            notes.append(f"{p.title}: {', '.join(series)} zero throughout")
        if p.key in LATENCY_PANELS and clk:  # the percentiles are on one clock (windows.latency_clock): named
            p = replace(p, y_title=f"{p.y_title} (clock {clk})")
        rows.append(panel(p, data, back, x, per, options, d))
    spans = span_panel.spans_panel(
        ld, lo, width_ms, back, x, per, options, d
    )  # engine spans by service (#38)
    if spans is not None:
        rows.insert(beside, spans)  # under the outcomes: where the callers' errors are
    gpu = gpu_panel.panel(ld, summary, back, x, d)  # GPU memory over time, when DCGM's series are here (#40)
    if gpu is not None:
        rows.append(gpu)
    if not rows:
        return None, notes
    spec = {
        "vconcat": rows,
        "spacing": 16,
        "usermeta": FIT,
        "resolve": {"scale": {"x": "shared", "y": "independent", "color": "independent"}},
    }
    return finish(spec, d), notes


def _episode_lane(eps: pl.DataFrame, x: XEnc, d: Data) -> dict:
    """One bar per episode, coloured by class, labelled 'E1 · spike · preemptions' inside it when it fits,
    else beside it on the side with room; past MAX_EPISODE_ROWS episodes, one row per class with the labels
    in tooltips (a row per episode would make the chart thousands of pixels tall)."""
    fill = {"field": "cls", "type": "nominal", "scale": class_scale(eps["cls"].to_list()), "legend": None}
    tooltip = [tip("label", "episode")]

    def bars(y: dict) -> dict:  # the episodes' bars, on a row per class or per episode
        return {
            "data": d.add("episodes", eps),
            "mark": {"type": "bar", "height": 14, "cornerRadius": 2},
            "encoding": {
                "x": x("start", "top"),
                "x2": {"field": "end"},
                "y": y,
                "fill": fill,
                "tooltip": tooltip,
            },
        }

    if eps.height > MAX_EPISODE_ROWS:
        classes = [c for c in CLASS_COLORS if c in set(eps["cls"].to_list())] + sorted(
            set(eps["cls"].to_list()) - set(CLASS_COLORS)
        )
        y = {
            "field": "cls",
            "type": "nominal",
            "sort": classes,
            "title": None,
            "axis": {"ticks": False, "domain": False, "grid": False},
        }
        return {
            **bars(y),
            "width": WIDTH,
            "height": 22 * len(classes),
            "title": f"Episodes: {eps.height}, one row per class (hover for ids; shaded below)",
        }
    y = {
        "field": "id",
        "type": "nominal",
        "sort": None,
        "title": None,
        "axis": {"labels": False, "ticks": False, "domain": False, "grid": False},
    }
    layers = [bars(y)]
    # where each label goes, judged on the narrowest plot (a wider one only has more room)
    place = []
    for a, b, label in eps.select("start", "end", "label").rows():
        need = lanes.CHAR_PX * len(label) + 8
        x0, x1 = x.px(a), x.px(b)
        place.append(
            "inside"
            if x1 - x0 >= need
            else "after"
            if x1 + need <= WIDTH
            else "before"
            if x0 - need >= 0
            else "inside"
        )
    eps = eps.with_columns(pl.Series("place", place))
    for where, field, align, dx, color in (
        ("inside", "start", "left", 5, "#ffffff"),
        ("after", "end", "left", 4, None),
        ("before", "start", "right", -4, None),
    ):
        part = eps.filter(pl.col("place") == where)
        if part.height:
            mark = {
                "type": "text",
                "align": align,
                "dx": dx,
                "fontSize": 11,
                "fontWeight": 600,
                "color": color or "#1f2933",
                "limit": WIDTH,
            }
            layers.append(
                {
                    "data": d.add("episode-labels", part),
                    "mark": mark,
                    "encoding": {
                        "x": x(field, "top"),
                        "y": y,
                        "text": {"field": "label", "type": "nominal"},
                        "tooltip": tooltip,
                    },
                }
            )
    return {
        "layer": layers,
        "width": WIDTH,
        "height": max(22, 20 * eps.height),
        "title": "Episodes (shaded on every panel below)",
    }


# ---------------------------------------------------------------- section charts


def _counts(top: Any) -> dict:
    """A count axis's encoding parts: whole-number ticks from 0 to ``top``."""
    axis, scale = int_scale(top if isinstance(top, int | float) else None)
    return {"axis": axis, "scale": scale}


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

    bars = (
        pl.DataFrame(ov["bins"])
        .with_columns(ms("t").alias("t"))
        .with_columns((pl.col("t") + ov["bin_s"] * 1000).alias("end"))
    )
    spans = [{"kind": "range analysed", "since": rng["since"], "until": rng["until"]}] + [
        {"kind": "other ranges named", "since": o["since"], "until": o["until"]}
        for o in chosen.get("others") or []
    ]
    bands = pl.DataFrame(spans).with_columns(ms("since"), ms("until"))
    lo = min(int_value(bars["t"].min()), int_value(bands["since"].min()))
    hi = max(int_value(bars["end"].max()), int_value(bands["until"].max()))
    x = XEnc(lo, hi)
    kinds = ["range analysed", "other ranges named"]
    d = Data()
    shade = {
        "data": d.add("ranges", bands),
        "mark": {"type": "rect", "opacity": 0.35},
        "encoding": {
            "x": x("since"),
            "x2": {"field": "until"},
            "fill": {
                "field": "kind",
                "type": "nominal",
                "title": None,
                "scale": {"domain": kinds, "range": [BLUE, ORANGE]},
                "legend": legend(kinds, WIDTH, "square"),
            },
        },
    }
    per = fmt_s(float(ov["bin_s"]))
    col = {
        "data": d.add("trouble", bars),
        "mark": {"type": "rect", "color": "#9aa5b1"},
        "encoding": {
            "x": x("t"),
            "x2": {"field": "end"},
            "y": {
                "field": "trouble",
                "type": "quantitative",
                "title": f"per {per}",
                **_counts(bars["trouble"].max()),
            },
            "y2": {"datum": 0},
            "tooltip": [
                tip("t", "from (UTC)", "temporal", "%Y-%m-%d %H:%M"),
                tip("trouble", None, "quantitative", ","),
            ],
        },
    }
    # the shading over the bars: a range shows whatever its height
    spec = {
        "layer": [col, shade],
        "width": WIDTH,
        "height": 78,
        "usermeta": FIT,
        "title": "Trouble signs over the whole input (failures, server warnings, queue / preemption / full-KV "
        "stats lines)",
    }
    return finish(spec, d)


def ladder_chart(summary: dict, options: ReportOptions) -> dict | None:
    """Latency, throughput and preemptions by step, the working boundary as a green rule."""
    lad = summary.get("ladder") or {}
    steps = [s for s in lad.get("steps", []) if s.get("concurrency") is not None]
    if not steps:
        return None
    df = pl.DataFrame(steps, infer_schema_length=None)
    cols = [c for c in LADDER_METRICS if c in df.columns]
    lat = (
        (
            df.unpivot(index="concurrency", on=cols, variable_name="metric", value_name="seconds")
            .drop_nulls()
            .with_columns(pl.col("metric").replace_strict({k: v[0] for k, v in LADDER_METRICS.items()}))
        )
        if cols
        else pl.DataFrame()
    )
    x = {
        "field": "concurrency",
        "type": "quantitative",
        "scale": {"type": "log", "base": 2},
        "title": "concurrency",
        "axis": {"values": sorted({float(s["concurrency"]) for s in steps}), "format": "~g"},
    }
    wb = given if isinstance(given := lad.get("working_boundary"), dict) else {}
    d = Data()
    boundary = (
        d.add("boundary", [{"concurrency": float(wb["concurrency"])}]) if wb.get("concurrency") else None
    )

    def with_boundary(layers: list[dict]) -> list[dict]:
        if boundary is None:
            return layers
        return [
            *layers,
            {
                "data": boundary,
                "mark": {"type": "rule", "color": GREEN, "strokeWidth": 2, "strokeDash": [6, 3]},
                "encoding": {"x": x},
            },
        ]

    charts = []
    if lat.height:
        names = [v[0] for k, v in LADDER_METRICS.items() if k in cols]
        colors = [v[1] for k, v in LADDER_METRICS.items() if k in cols]
        line = {
            "data": d.add("latency", lat),
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": x,
                "y": {"field": "seconds", "type": "quantitative", "title": "seconds"},
                "color": {
                    "field": "metric",
                    "type": "nominal",
                    "title": None,
                    "scale": {"domain": names, "range": colors},
                    "legend": legend(names, 280),
                },
                "tooltip": [
                    tip("concurrency", None, "quantitative"),
                    tip("metric"),
                    tip("seconds", None, "quantitative", ".3f"),
                ],
            },
        }
        slo = [
            (options.slo_ttft_s, "TTFT SLO"),
            (options.slo_e2e_s, "e2e SLO"),
        ]
        rules = pl.DataFrame({"s": [float(v) for v, _ in slo if v], "label": [n for v, n in slo if v]})
        top = cast("float | None", lat["seconds"].max())
        if rules.height and top is not None:
            rules = rules.filter(pl.col("s") <= top * 1.5)  # off-scale SLOs would flatten it
        layers = [line]
        if rules.height:
            layers.append(
                {
                    "data": d.add("slo", rules),
                    "mark": {"type": "rule", "color": RED, "strokeDash": [5, 4]},
                    "encoding": {"y": {"field": "s", "type": "quantitative"}},
                }
            )
        charts.append(
            {"layer": with_boundary(layers), "width": 280, "height": 190, "title": "Latency by step"}
        )
    for col, title in (("throughput_tps", "Output tokens/s"), ("preemptions", "Preemptions")):
        if col in df.columns and df[col].null_count() < df.height:
            bars = {
                "data": d.add(col, df.select("concurrency", col).drop_nulls()),
                "mark": {"type": "bar", "width": 14, "color": BLUE},
                "encoding": {
                    "x": x,
                    "y": {
                        "field": col,
                        "type": "quantitative",
                        "title": None,
                        **(_counts(df[col].max()) if col == "preemptions" else {}),
                    },
                    "tooltip": [
                        tip("concurrency", None, "quantitative"),
                        tip(col, None, "quantitative", ",.4~f"),
                    ],
                },
            }
            charts.append({"layer": with_boundary([bars]), "width": 210, "height": 190, "title": title})
    if not charts:
        return None
    return finish({"hconcat": charts, "spacing": 24, "resolve": {"scale": {"color": "independent"}}}, d)


def _histogram(
    name: str, hist: pl.DataFrame, count: str, color: str, x: dict, tooltip: list, title: str
) -> tuple[dict, Data]:
    """A section's histogram of bins pre-computed into ``hist`` (columns lo, hi and ``count``): one bar a bin,
    ``x`` the bins' axis title and its extra encoding, ``count`` on whole-number ticks."""
    d = Data()
    spec = {
        "data": d.add(name, hist),
        "mark": {"type": "bar", "color": color},
        "encoding": {
            "x": {"field": "lo", "type": "quantitative", **x},
            "x2": {"field": "hi"},
            "y": {"field": count, "type": "quantitative", "title": count, **_counts(hist[count].max())},
            "y2": {"datum": 0},
            "tooltip": tooltip,
        },
        "width": 520,
        "height": 170,
        "title": title,
    }
    return spec, d


def retry_gap_chart(ld: Loaded) -> tuple[dict | None, dict | None]:
    """Histogram of seconds between a failed client attempt and the next one (the retry back-off)."""
    key = ("source", "logical_request_id")
    lazy = ld.scan("client_attempts").select(*key, "attempt", "ts_start", "ts_end")
    used = (ld.doc("correlation").get("sources") or {}).get("client")
    if used:  # a client log and its own JSONL can describe the same sends: count them once
        lazy = lazy.filter(pl.col("source").is_in(used))
    ca = lazy.filter(
        pl.col("logical_request_id").is_not_null()
    ).collect()  # read for this chart alone, not kept
    if ca.height == 0:
        return None, None
    # each attempt against the previous one of its request: rows sorted by request, then a shift (a window
    # over a million small groups costs more than the sort)
    gaps = (
        ca.sort([*key, "attempt", "ts_start"])
        .select(
            "attempt",
            pl.when(~group_first(*key))
            .then((pl.col("ts_start") - pl.col("ts_end").shift(1)).dt.total_microseconds() / 1e6)
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
    width = max(float_or_none(gaps["gap_s"].clip(0.0, None).max()) or 0.0, 1e-3) / 40
    hist = (
        gaps.group_by((gap / width).floor().clip(0, 39).alias("bin"))
        .agg(pl.len().alias("retries"))
        .with_columns((pl.col("bin") * width).alias("lo"), ((pl.col("bin") + 1) * width).alias("hi"))
        .sort("lo")
    )
    tooltip = [
        tip("lo", "from s", "quantitative", ".2f"),
        tip("hi", "to s", "quantitative", ".2f"),
        tip("retries", None, "quantitative"),
    ]
    x = {"title": "seconds from a failed attempt to the retry"}
    spec, d = _histogram("retry-gaps", hist, "retries", BLUE, x, tooltip, "Retry timing (client)")
    return finish(spec, d), stats


def output_length_chart(ld: Loaded) -> tuple[dict | None, dict | None]:
    """Generated tokens as a share of the requested max_tokens (requests that say both)."""
    req = ld.table("requests", ("max_tokens", "output_tokens")).filter(
        pl.col("max_tokens").is_not_null()
        & pl.col("output_tokens").is_not_null()
        & (pl.col("max_tokens") > 0)
    )
    if req.height == 0:
        return None, None
    req = req.with_columns((pl.col("output_tokens") / pl.col("max_tokens")).clip(0.0, 1.0).alias("share"))
    stats = {
        "requests": req.height,
        "max_tokens_mean": req["max_tokens"].mean(),
        "output_tokens_mean": req["output_tokens"].mean(),
        "hit_max_share": float_value((req["output_tokens"] >= req["max_tokens"]).mean()),
    }
    hist = (
        req.group_by((pl.col("share") * 20).floor().clip(0, 19).truediv(20).alias("lo"))
        .agg(pl.len().alias("requests"))
        .with_columns((pl.col("lo") + 0.05).alias("hi"))
        .sort("lo")
    )
    tooltip = [tip("lo", "from", "quantitative", ".0%"), tip("requests", None, "quantitative")]
    x = {
        "title": "generated tokens / requested max_tokens",
        "scale": {"domain": [0, 1]},
        "axis": {"format": "%"},
    }
    spec, d = _histogram("lengths", hist, "requests", GREEN, x, tooltip, "Requested vs generated length")
    return finish(spec, d), stats
