"""The report's charts, as Vega-Lite dicts (golden-testable, embedded as JSON; ``vl`` says why not altair).

The timeline is built from the ``windows`` table (already aggregated by the correlation stage, re-binned
here when there are too many windows) and from per-window counts of the request and stats tables, never
from raw rows, so the page stays small whatever the size of the logs. Its panels are in ``panels``, its
top lane (load phases from ``load_phases``, server events from ``server_events``) in ``lanes``, the outcome
and throughput panels in ``outcome_panel`` and ``token_throughput``, the section charts in ``section_charts``;
here, the timeline put together and its episode lane.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import cast

import polars as pl

from ..scalars import float_or_none, int_or_none
from . import gpu_panel, lanes, load_phases, outcome_panel, server_events, span_panel, token_throughput
from .load import Loaded
from .options import ReportOptions
from .panels import (
    CLASS_COLORS,
    PANELS,
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
from .vl import Data, finish, theme, tip

__all__ = [
    "theme",
    "coarsen",
    "timeline",
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
