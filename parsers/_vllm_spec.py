"""vllm_server's speculative-decoding metrics lines -> server_spec_decode (one row a line).

The wordings (vllm-project/vllm; each field is read on its own, so every order and subset of them parses):

* V0, ``vllm/engine/metrics.py`` (0.4.3-0.10): ``Speculative metrics: Draft acceptance rate: %.3f, System
  efficiency: %.3f, Number of speculative tokens: N, Number of accepted tokens: N, Number of draft tokens: N,
  Number of emitted tokens: N.`` (0.4.x wrote ``draft tokens tokens`` and ``emitted tokens tokens``);
* V1, ``vllm/v1/spec_decode/metrics.py``: 0.8.0-0.8.2 the same opening without ``System efficiency`` (or with
  it as ``nan``), then ``SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: N tokens, Drafted: N
  tokens``, then with ``Mean acceptance length``, ``Accepted throughput`` / ``Drafted throughput`` (tokens/s)
  and ``Per-position acceptance rate: r1, r2, ...``, and later with the rate last as ``Avg Draft acceptance
  rate: %.1f%%``.

The V1 line names no engine: ``LoggingStatLogger`` writes it right after its engine's stats line, so it takes the
engine of the stats line just before it from the same process in the same second.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int

from .base import ParseContext

_LEADS = ("SpecDecoding metrics: ", "Speculative metrics: ")
_RATE = r"Draft acceptance rate: ([0-9.]+|nan)(%?)"
_PER_POSITION = r"Per-position acceptance rate: ([0-9.]+(?:, [0-9.]+)*)"


def _num(pat: str) -> pl.Expr:
    return pl.col("msg").str.extract(pat).cast(pl.Float64, strict=False)


def _count(*pats: str) -> pl.Expr:
    return pl.coalesce([pl.col("msg").str.extract(p).pipe(to_int) for p in pats])


def _spec(df: pl.DataFrame, ctx: ParseContext, stats: pl.DataFrame) -> pl.DataFrame:
    m = pl.col("msg")
    rows = df.filter(pl.any_horizontal(m.str.starts_with(x) for x in _LEADS))
    if rows.height == 0:
        return pl.DataFrame()
    rate, pct = m.str.extract(_RATE, 1).cast(pl.Float64, strict=False), m.str.extract(_RATE, 2)
    eff = m.str.extract(r"System efficiency: ([0-9.]+|nan)")
    per_pos = m.str.extract(_PER_POSITION).str.split(", ").cast(pl.List(pl.Float64))
    v1 = m.str.starts_with("SpecDecoding") | eff.is_null() | (eff == "nan")  # V0 always wrote a number there
    out = rows.with_columns(
        pl.when(pl.col("stamped")).then(pl.col("ts")).alias("ts"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.when(v1).then(pl.lit("v1")).otherwise(pl.lit("v0")).alias("era"),
        pl.col("lvl").alias("level"),
        # V0 and V1 0.8.0 wrote a ratio (0.642), later V1 a percentage (88.8%)
        pl.when(rate.is_nan())
        .then(None)
        .when(pct == "%")
        .then((rate / 100).round(6))
        .otherwise(rate)
        .alias("draft_acceptance_rate"),
        _num(r"Mean acceptance length: ([0-9.]+)").alias("mean_acceptance_length"),
        _num(r"Accepted throughput: ([0-9.]+) tokens/s").alias("accepted_tps"),
        _num(r"Drafted throughput: ([0-9.]+) tokens/s").alias("drafted_tps"),
        _count(r"Accepted: ([0-9]+) tokens", r"Number of accepted tokens: ([0-9]+)").alias("accepted_tokens"),
        _count(r"Drafted: ([0-9]+) tokens", r"Number of draft tokens(?: tokens)?: ([0-9]+)").alias(
            "drafted_tokens"
        ),
        _count(r"Number of emitted tokens(?: tokens)?: ([0-9]+)").alias("emitted_tokens"),
        pl.coalesce(
            _count(r"Number of speculative tokens: ([0-9]+)"), per_pos.list.len().cast(pl.Int64)
        ).alias("num_spec_tokens"),
        pl.when(eff != "nan").then(eff.cast(pl.Float64, strict=False)).alias("system_efficiency"),
        per_pos.alias("per_position_acceptance"),
    )
    return _engine(out, stats)


def _engine(out: pl.DataFrame, stats: pl.DataFrame) -> pl.DataFrame:
    """Each row's engine: that of the stats row just before it, when from the same process in the same second."""
    if stats.height == 0 or "engine" not in stats.columns:
        return out.with_columns(pl.lit(None, dtype=pl.String).alias("engine"))
    prev = stats.select(
        "seq",
        pl.col("engine").alias("_engine"),
        pl.col("ts").alias("_sts"),
        pl.col("proc").alias("_sproc"),
        pl.col("pid").alias("_spid"),
    ).sort("seq")
    out = out.sort("seq").join_asof(prev, on="seq", strategy="backward")
    same = (
        (pl.col("_sts") == pl.col("ts"))
        & pl.col("_sproc").eq_missing(pl.col("proc"))
        & pl.col("_spid").eq_missing(pl.col("pid"))
    )
    return out.with_columns(pl.when(same).then(pl.col("_engine")).alias("engine")).drop(
        "_engine", "_sts", "_sproc", "_spid"
    )
