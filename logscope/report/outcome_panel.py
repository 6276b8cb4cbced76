"""The callers' outcomes by status, per window of the timeline (``outcomes``, from ``requests.parquet``), and the
panel that stacks them (``outcome_panel``).
"""

from __future__ import annotations

import polars as pl

from ..correlate.broken import CUT, READ_TIMEOUT
from ..correlate.stream_failures import FAILED
from .load import Loaded
from .panels import WIDTH, Backdrop, Panel, XEnc, clipped, title, y_axis
from .time_cols import hms
from .vl import Data, legend, tip

# a break-off named by what its log says, and which log says it: nginx's error log after the access log's 2xx
# ('upstream prematurely closed connection', or its own read timeout's 'upstream timed out ... while reading
# upstream': correlate.broken), LiteLLM's stream-error line tied to its access line (stream_failures), the caller
# that gave up (its own log's timeout) or left (nginx's 499: 'client closed request')
BROKE_OFF = {
    CUT: "2xx, upstream closed (nginx error log)",
    READ_TIMEOUT: "2xx, read timeout cut (nginx error log)",
    FAILED: "2xx, stream failed (LiteLLM log)",
}
TRUNCATED = "2xx, then broken off"  # an analysis that predates requests.mid_stream
TIMED_OUT = "caller timed out (client log)"
CLIENT_LEFT = "499, client left (gateway log)"
OUTCOME_COLORS = {"ok": "#2ca02c", TIMED_OUT: "#ff7f0e", CLIENT_LEFT: "#ffbb78", "error, no status": "#7f0000",
                  BROKE_OFF[CUT]: "#f3a712", BROKE_OFF[READ_TIMEOUT]: "#e6550d", BROKE_OFF[FAILED]: "#c98a00",
                  TRUNCATED: "#f3a712",
                  "unfinished (log ended)": "#9aa5b1", "unknown": "#c7c7c7"}  # fmt: skip
STATUS_COLORS = (
    "#d62728",
    "#8c564b",
    "#e377c2",
    "#9467bd",
    "#bcbd22",
)  # the most frequent statuses, in order
MAX_STATUSES = len(STATUS_COLORS)  # more HTTP statuses than this share one 'HTTP other'


def outcomes(ld: Loaded, lo_ms: int, width_ms: int) -> pl.DataFrame:
    """Logical requests per window of their outcome (when the caller saw it: the end, else the start), by
    outcome and HTTP status: (t, end, time, outcome, n, k) with k the stacking order."""
    r = ld.scan("requests")
    mid = pl.col("mid_stream") if "mid_stream" in r.collect_schema().names() else pl.lit(None, pl.String)
    r = r.select(
        pl.coalesce("ts_end", "ts_start").dt.epoch("ms").alias("at"), "outcome", "status", mid.alias("how")
    ).drop_nulls("at")
    counts = (
        r.group_by(((pl.col("at") - lo_ms) // width_ms).alias("bin"), "outcome", "status", "how")
        .agg(pl.len().alias("n"))
        .collect()
    )
    if counts.height == 0:
        return pl.DataFrame()
    errs = counts.filter(
        (pl.col("outcome") == "error") & pl.col("status").is_not_null() & (pl.col("status") != 499)
    )
    ranked = errs.group_by("status").agg(pl.col("n").sum()).sort(["n", "status"], descending=[True, False])
    top = ranked["status"].head(MAX_STATUSES).sort().to_list()
    name = (
        pl.when(pl.col("outcome") == "ok")
        .then(pl.lit("ok"))
        .when((pl.col("outcome") == "error") & (pl.col("status") == 499))
        .then(pl.lit(CLIENT_LEFT))
        .when((pl.col("outcome") == "error") & pl.col("status").is_in(top))
        .then("HTTP " + pl.col("status").cast(pl.String))
        .when((pl.col("outcome") == "error") & pl.col("status").is_not_null())
        .then(pl.lit("HTTP other"))
        .when(pl.col("outcome") == "error")
        .then(pl.lit("error, no status"))
        .when(pl.col("outcome") == "truncated")
        .then(pl.col("how").replace_strict(BROKE_OFF, default=TRUNCATED, return_dtype=pl.String))
        .when(pl.col("outcome") == "unfinished")
        .then(pl.lit("unfinished (log ended)"))
        .when(pl.col("outcome") == "timeout")
        .then(pl.lit(TIMED_OUT))
        .otherwise(pl.lit("unknown"))
    )
    order = [
        "ok",
        *[f"HTTP {s}" for s in top],
        "HTTP other",
        "error, no status",
        CLIENT_LEFT,
        TIMED_OUT,
        *BROKE_OFF.values(),
        TRUNCATED,
        "unfinished (log ended)",
        "unknown",
    ]
    out = counts.group_by("bin", name.alias("outcome")).agg(pl.col("n").sum().cast(pl.Int64))
    # stacked here (y0..y1 in the window's column, ok at the bottom): Vega-Lite stacks no bar spanning x..x2
    return (
        out.with_columns(
            (lo_ms + pl.col("bin") * width_ms).alias("t"),
            (lo_ms + (pl.col("bin") + 1) * width_ms).alias("end"),
            pl.col("outcome")
            .replace_strict(order, list(range(len(order))), return_dtype=pl.Int64)
            .alias("k"),
        )
        .sort("t", "k")
        .with_columns(
            hms("t").alias("time"),
            pl.col("n").cum_sum().over("t").alias("y1"),
        )
        .with_columns((pl.col("y1") - pl.col("n")).alias("y0"))
        .drop("bin")
    )


def outcome_colors(present: list[str]) -> list[str]:
    statuses = iter(STATUS_COLORS)
    return [
        OUTCOME_COLORS.get(o) or (next(statuses, "#b3261e") if o != "HTTP other" else "#f7b6d2")
        for o in present
    ]


OUTCOMES = Panel("outcomes", "Outcomes as callers saw them", "per window", (), "step", integer=True)


def outcome_panel(oc: pl.DataFrame, back: Backdrop, x: XEnc, per: str, d: Data) -> dict:
    present = oc.sort("k")["outcome"].unique(maintain_order=True).to_list()
    totals = oc.group_by("t").agg(pl.col("n").sum().alias("value"), pl.col("time").first())
    y, cap = y_axis(OUTCOMES, per, totals["value"].cast(pl.Float64))
    y["field"] = "y1"
    color = {
        "field": "outcome",
        "type": "nominal",
        "title": None,
        "legend": legend(present, WIDTH, "square"),
        "scale": {"domain": present, "range": outcome_colors(present)},
    }
    bars = {
        "data": d.add("outcomes", oc),
        "mark": {"type": "rect", "clip": True},
        "encoding": {
            "x": x("t"),
            "x2": {"field": "end"},
            "y": y,
            "y2": {"field": "y0"},
            "color": color,
            "tooltip": [
                tip("time", "window start (UTC)"),
                tip("outcome", "outcome"),
                tip("n", "requests", "quantitative", ","),
            ],
        },
    }
    note = totals.sort("value", descending=True)
    return {
        "layer": [*back.behind, bars, *clipped(totals, cap, x, d, "outcomes"), *back.over],
        "width": WIDTH,
        "height": 90,
        "title": title("Outcomes as callers saw them (requests by how they ended)", note, cap),
    }
