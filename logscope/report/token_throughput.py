"""The server's token throughput for the timeline (``tokens``): prompt and generation tokens/s from
``server_stats.parquet``, summed over replicas, per window.
"""

from __future__ import annotations

import polars as pl

from ..scalars import int_value
from .load import Loaded
from .panels import GAP_SAMPLES, Panel, bridged
from .time_cols import hms


def tokens(ld: Loaded, grid: pl.Series, width_ms: int, panel: Panel) -> pl.DataFrame:
    """Prompt and generation tokens/s of the server, summed over replicas, as the panel's long rows: each
    replica's stats lines (its log's, else its metrics', never both) averaged per window and carried back over
    the windows up to its next line (a line states the average since the one before), within GAP_SAMPLES of its
    usual interval."""
    cols = [c for c, _, _ in panel.series]
    st = (
        ld.scan("server_stats")
        .select("ts", "replica", "origin", *cols)
        .filter(pl.any_horizontal(pl.col(c).is_not_null() for c in cols))
        .collect()
    )
    if st.height == 0 or grid.len() == 0:
        return pl.DataFrame()
    lo = int_value(grid.min())
    st = st.with_columns(pl.col("replica").fill_null(""), pl.col("ts").dt.epoch("ms").alias("t"))
    has_log = st.group_by("replica").agg((pl.col("origin") == "log").any().alias("has_log"))
    st = st.join(has_log, on="replica").filter((pl.col("origin") == "log") == pl.col("has_log"))
    usual = st.sort("replica", "t").select(pl.col("t").diff().over("replica").median()).item() or width_ms
    reach = max(1, int(GAP_SAMPLES * usual // width_ms))
    per = st.group_by("replica", ((pl.col("t") - lo) // width_ms).alias("bin")).agg(
        pl.col(c).mean() for c in cols
    )
    bins = pl.DataFrame({"bin": ((grid - lo) // width_ms).unique().sort()})
    full = bins.join(per.select("replica").unique(), how="cross").join(per, on=["replica", "bin"], how="left")
    full = full.sort("replica", "bin").with_columns(
        pl.col(c).fill_null(strategy="backward", limit=reach).over("replica") for c in cols
    )
    tot = (
        full.group_by("bin")
        .agg(pl.when(pl.col(c).count() > 0).then(pl.col(c).sum()).alias(c) for c in cols)
        .sort("bin")
    )
    tot = tot.with_columns((lo + pl.col("bin") * width_ms).alias("t")).with_columns(hms("t").alias("time"))
    frames = []
    for col, label, _ in panel.series:
        f = tot.select(
            "t",
            "time",
            pl.lit(panel.key).alias("panel"),
            pl.lit(label).alias("series"),
            pl.col(col).cast(pl.Float64).alias("value"),
        )
        f = bridged(f, width_ms)
        if f.height:
            v = pl.col("value")
            frames.append(
                f.with_columns((v.is_not_null() & v.shift(1).is_null() & v.shift(-1).is_null()).alias("lone"))
            )
    return pl.concat(frames) if frames else pl.DataFrame()
