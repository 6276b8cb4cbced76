"""The timeline's spans panel (issue #38): the engine request spans each service exported, per window by their
end, beside the client attempts that got no engine span, under the server's starts and deaths. A replica killed
without a word in its log shows here as its spans stopping at the death's rule, and the attempts it held as the
red series (correlate/span_gaps.py says why each has none)."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..scalars import int_value
from .load import Loaded
from .panels import RED, Backdrop, Panel, XEnc, panel

SERVICE_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#bcbd22", "#e377c2", "#7f7f7f")
MAX_SERVICES = len(SERVICE_COLORS)
MISSING = "client attempts with no engine span"


def _counts(ts: pl.Series, lo: int, width_ms: int) -> pl.DataFrame:
    """(t, value) per window of the grid that starts at ``lo`` (ms), windows with none left out."""
    t = ((ts.dt.epoch("ms") - lo) // width_ms) * width_ms + lo
    return t.alias("t").to_frame().group_by("t").len().rename({"len": "value"})


def long(ld: Loaded, lo: int, width_ms: int) -> tuple[pl.DataFrame, list[tuple[str, str, str]]]:
    """The panel's rows (t, time, series, value, lone) and its series (column, label, colour)."""
    sp = ld.table("spans", ("layer", "role", "service", "end", "trace_id", "span_id", "parent_span_id"))
    if sp.height == 0:
        return pl.DataFrame(), []
    eng = sp.filter((pl.col("layer") == "engine") & (pl.col("role") == "request"))
    ended = eng.drop_nulls("end")
    services = (
        ended.group_by("service").len().sort("len", descending=True)["service"].to_list()[:MAX_SERVICES]
    )
    parts, series = [], []
    for i, svc in enumerate(services):
        label = f"{svc} spans"
        c = _counts(ended.filter(pl.col("service") == svc)["end"], lo, width_ms)
        parts.append(c.with_columns(pl.lit(label).alias("series")))
        series.append((label, label, SERVICE_COLORS[i]))
    # an attempt with no engine span: no engine request span names it as its parent
    att = sp.filter((pl.col("layer") == "client") & (pl.col("role") == "attempt"))
    lone = att.join(
        eng.select("trace_id", pl.col("parent_span_id").alias("span_id")),
        on=["trace_id", "span_id"],
        how="anti",
    )
    if lone.height:
        parts.append(
            _counts(lone["end"].drop_nulls(), lo, width_ms).with_columns(pl.lit(MISSING).alias("series"))
        )
        series.append((MISSING, MISSING, RED))
    if not parts:
        return pl.DataFrame(), []
    rows = pl.concat(parts).with_columns(pl.col("value").cast(pl.Float64))
    # windows with none are zeros of a step line, not gaps: the grid's every window for each series
    grid = pl.int_ranges(pl.lit(lo), int_value(rows["t"].max()) + width_ms, width_ms).alias("t")
    full = pl.select(grid).explode("t").join(rows.select("series").unique(), how="cross")
    rows = full.join(rows, on=["t", "series"], how="left").with_columns(pl.col("value").fill_null(0.0))
    return rows.with_columns(
        pl.from_epoch("t", time_unit="ms").dt.strftime("%H:%M:%S").alias("time"), pl.lit(False).alias("lone")
    ).sort("series", "t"), series


def spans_panel(
    ld: Loaded, lo: int, width_ms: int, back: Backdrop, x: XEnc, per: str, options: Any, d: Any
) -> dict | None:
    rows, series = long(ld, lo, width_ms)
    if not series:
        return None
    p = Panel(
        "spans",
        "Engine spans exported, by service (by their end), and client attempts with no engine span",
        "per window",
        tuple(series),
        "step",
        integer=True,
        cap=False,
    )
    return panel(p, rows, back, x, per, options, d)
