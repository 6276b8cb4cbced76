"""Finding abnormal stretches in one signal's series.

Method, and why:

* **Baseline = median and MAD of the signal's own series** (MAD scaled by 1.4826 to match a standard
  deviation for normal data). Both ignore up to half of the samples being abnormal, so an incident
  does not inflate its own baseline the way a mean and standard deviation would.
* A sample is abnormal when it reaches the signal's **hard level** (a level that is abnormal on any
  server: a preemption, KV >= 90 %, a waiting queue, a latency above the SLO), or when it is a
  **robust outlier** (> median + k * MAD) **and** at least the signal's **floor**. The floor is what
  makes a flat-zero baseline work: with median = MAD = 0 every non-zero value would be an outlier,
  and a lone error must not become an incident. The hard levels are what make an excerpt that is
  abnormal from its first line to its last work (it has no healthy part to learn a baseline from).
* Consecutive abnormal samples form a stretch; a gap between samples of more than
  ``max_sample_gap_factor`` typical intervals breaks it (vLLM demotes idle stats lines to DEBUG, so a
  silent gap is not 'still abnormal'). Stretches closer than ``merge_gap_s`` are merged: a preemption
  burst with one quiet scrape in the middle is one burst.
* Stretch times are sample times (first to last abnormal sample), the convention of the lab's
  ground truth: a Prometheus scrape at t reports what happened in the interval ending at t.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..scalars import float_value

MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Rule:
    hard: float | None = None  # value >= hard is abnormal
    floor: float | None = None  # robust outliers count only from this value up (None: no outlier path)
    min_samples: int = 1  # stretches with fewer samples are dropped ...
    keep_peak: float | None = None  # ... unless their peak reaches this


def robust(values: pl.Series) -> tuple[float | None, float | None]:
    v = values.drop_nulls().cast(pl.Float64)
    if v.len() == 0:
        return None, None
    med = float_value(v.median())
    mad = float_value((v - med).abs().median()) * MAD_SCALE
    return med, mad


def abnormal(df: pl.DataFrame, col: str, rule: Rule, k: float) -> pl.DataFrame:
    """Adds boolean ``ab`` and the robust threshold used (``thr``) to a series frame."""
    med, mad = robust(df[col]) if df.height else (None, None)
    x = pl.col(col)
    cond = pl.lit(False)
    if rule.hard is not None:
        cond = cond | (x >= rule.hard)
    thr = None
    if rule.floor is not None and med is not None:
        thr = max(rule.floor, med + k * (mad or 0.0))
        cond = cond | ((x >= rule.floor) & (x > med + k * (mad or 0.0)))
    return df.with_columns(
        cond.fill_null(False).alias("ab"),
        pl.lit(thr, pl.Float64).alias("thr"),
        pl.lit(med, pl.Float64).alias("med"),
    )


def stretches(
    df: pl.DataFrame,
    col: str,
    rule: Rule,
    k: float,
    merge_gap_s: float,
    gap_factor: float,
    key: str = "replica",
) -> pl.DataFrame:
    """Abnormal stretches of ``col`` per ``key``: key, start, end, samples, peak, total, mean.

    ``df`` has columns key, ts, col, sorted by ts within key.
    """
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        key: pl.String,
        "start": df.schema.get("ts", pl.Datetime("us", "UTC")),
        "end": pl.Datetime("us", "UTC"),
        "samples": pl.UInt32,
        "peak": pl.Float64,
        "total": pl.Float64,
        "mean": pl.Float64,
        "med": pl.Float64,
    }
    if df.height == 0:
        return pl.DataFrame(schema=schema)
    parts = []
    for _, g in df.sort([key, "ts"]).group_by(key, maintain_order=True):
        parts.append(abnormal(g.filter(pl.col(col).is_not_null()), col, rule, k))
    d = pl.concat(parts).sort([key, "ts"])
    gap = pl.col("ts").diff().over(key).dt.total_microseconds() / 1e6
    typical = d.with_columns(gap.alias("_g")).group_by(key).agg(pl.col("_g").median().alias("_typ"))
    d = d.join(typical, on=key, how="left").with_columns(gap.alias("_g"))
    too_long = pl.col("_g") > pl.max_horizontal(pl.col("_typ").fill_null(0) * gap_factor, pl.lit(merge_gap_s))
    brk = (pl.col("ab") != pl.col("ab").shift(1).over(key)).fill_null(True) | too_long.fill_null(False)
    runs = (
        d.with_columns(brk.cum_sum().over(key).alias("_run"))
        .filter(pl.col("ab"))
        .group_by([key, "_run"], maintain_order=True)
        .agg(
            pl.col("ts").min().alias("start"),
            pl.col("ts").max().alias("end"),
            pl.len().alias("samples"),
            pl.col(col).max().cast(pl.Float64).alias("peak"),
            pl.col(col).sum().cast(pl.Float64).alias("total"),
            pl.col("med").first(),
        )
    )
    if rule.min_samples > 1:
        keep = pl.col("samples") >= rule.min_samples
        if rule.keep_peak is not None:
            keep = keep | (pl.col("peak") >= rule.keep_peak)
        runs = runs.filter(keep)
    return merge(runs, merge_gap_s, key).select(list(schema))


def merge(runs: pl.DataFrame, gap_s: float, key: str = "replica") -> pl.DataFrame:
    """Merge stretches of one key closer than ``gap_s`` seconds."""
    if runs.height == 0:
        return (
            runs.with_columns(pl.lit(None, pl.Float64).alias("mean")) if "mean" not in runs.columns else runs
        )
    r = runs.sort([key, "start"])
    prev_end = pl.col("end").cum_max().shift(1).over(key)
    new = ((pl.col("start") - prev_end).dt.total_microseconds() / 1e6 > gap_s).fill_null(True)
    return (
        r.with_columns(new.cum_sum().over(key).alias("_grp"))
        .group_by([key, "_grp"], maintain_order=True)
        .agg(
            pl.col("start").min(),
            pl.col("end").max(),
            pl.col("samples").sum(),
            pl.col("peak").max(),
            pl.col("total").sum(),
            pl.col("med").first(),
        )
        .with_columns((pl.col("total") / pl.col("samples")).alias("mean"))
        .drop("_grp")
    )
