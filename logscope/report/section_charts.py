"""The report's section charts, as Vega-Lite dicts: the whole-input overview when the range was chosen to fit
memory, the concurrency ladder's steps, and the histograms of retry timing and of generated vs requested length.
"""

from __future__ import annotations

from typing import Any, cast

import polars as pl

from ..correlate.exprs import group_first
from ..scalars import float_or_none, float_value, int_value
from .charts import FIT
from .load import Loaded
from .options import ReportOptions
from .panels import (
    BLUE,
    GREEN,
    ORANGE,
    P50,
    P95,
    RED,
    WIDTH,
    XEnc,
    fmt_s,
)
from .vl import Data, finish, int_scale, legend, tip


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
