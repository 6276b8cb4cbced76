"""The load the client gave, as the timeline's labelled bands (``phases``) and the panels' shading
(``phase_shading``): the ladder steps of diagnosis.json (summary ``ladder``), else ``client_phases.parquet`` (a load
generator's own phase lines). Nothing here guesses phases from the arrival rate: without a phase source there is no
band.
"""

from __future__ import annotations

import polars as pl

from .load import Loaded
from .panels import XEnc
from .time_cols import hms, ms
from .vl import Data


def phases(ld: Loaded, summary: dict) -> tuple[pl.DataFrame, str]:
    """(start, end, label, shade) of each ladder step, else of each client phase, and what they are."""
    steps = [
        s for s in (summary.get("ladder") or {}).get("steps") or [] if s.get("ts_start") and s.get("ts_end")
    ]
    if steps:
        rows = [
            {
                "start": s["ts_start"],
                "end": s["ts_end"],
                "mode": s.get("mode") or "concurrency",
                "value": s.get("concurrency"),
                "name": f"step {s.get('step')}",
            }
            for s in steps
        ]
        df, what = pl.DataFrame(rows, infer_schema_length=None), "ladder steps"
        df = df.with_columns(ms("start"), ms("end"))
    else:
        ph = ld.table("client_phases").drop_nulls(["ts_start", "ts_end"])
        if ph.height == 0:
            return pl.DataFrame(), ""
        used = (ld.doc("correlation").get("sources") or {}).get("client") or []
        srcs = sorted(ph["source"].unique().to_list())
        src = next(
            (s for s in srcs if s in used), srcs[0]
        )  # a client's .jsonl and .log state the same phases
        df = (
            ph.filter(pl.col("source") == src)
            .sort("ts_start")
            .select(
                pl.col("ts_start").dt.epoch("ms").alias("start"),
                pl.col("ts_end").dt.epoch("ms").alias("end"),
                pl.col("mode").fill_null("concurrency"),
                "value",
                ("phase " + pl.col("phase")).alias("name"),
            )
        )
        what = "client load phases"
    v = pl.col("value").cast(pl.Float64).round(3).cast(pl.String).str.replace(r"\.0$", "")
    label = (
        pl.when(pl.col("value").is_null())
        .then(pl.col("name"))
        .when(pl.col("mode") == "rate")
        .then(v + " req/s")
        .when(pl.col("mode") == "inflight")
        .then("~" + v + " in flight")
        .otherwise("c=" + v)
    )
    df = (
        df.sort("start")
        .with_row_index("i")
        .with_columns(
            label.alias("label"),
            hms("start").alias("from"),
            hms("end").alias("to"),
            # neighbouring bands alternate in depth so that touching phases stay apart
            pl.when(pl.col("i") % 2 == 0).then(0.09).otherwise(0.045).alias("shade"),
        )
    )
    return df.drop("i"), what


def phase_shading(ph: pl.DataFrame, x: XEnc, d: Data) -> list[dict]:
    if ph.height == 0:
        return []
    return [
        {
            "data": d.add("phase-bands", ph.select("start", "end", "shade")),
            "mark": {"type": "rect", "fill": "#52606d"},
            "encoding": {
                "x": x("start"),
                "x2": {"field": "end"},
                "opacity": {"field": "shade", "type": "quantitative", "scale": None},
            },
        }
    ]
