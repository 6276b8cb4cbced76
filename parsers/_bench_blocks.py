"""The result block a serving benchmark prints (``vllm bench serve`` and vLLM's ``benchmark_serving.py``, SGLang's
``bench_serving``) -> ``load_tests`` rows, one per block.

Sample (public-2 c04, vllm-project/vllm#24005; the lab's bench-cN.log hold whole blocks)::

    Maximum request concurrency: 2
    100%|██████████| 100/100 [00:02<00:00, 34.85it/s]
    ============ Serving Benchmark Result ============
    Successful requests:                     1
    Maximum request concurrency:             2
    Benchmark duration (s):                  2.87

Line kinds: the block opens on ``=+ Serving Benchmark Result =+`` and closes on a line of ``=``; inside, ``<Key>:
<number>`` lines (and ``-+<Section>-+`` rules); before it, the run's settings (``Traffic request rate: inf``,
``Maximum request concurrency: 2``) and its progress bar (``100/100``: the requests sent). Keys are matched whole,
times in milliseconds become seconds. SGLang prints ``Backend: sglang`` and its own keys (``Concurrency:``, the
measured mean in flight; ``Mean E2E Latency (ms)``); vLLM ``Mean E2EL (ms)``. A key not printed is null: an old
``vllm bench serve`` printed no ``Failed requests`` line (public-2 c04: 1 successful of 100 sent).
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int

HEADER = r"^=+ Serving Benchmark Result =+\s*$"
_CLOSE = r"^=+\s*$"
_KV = (
    r"^(?P<key>[A-Za-z][A-Za-z0-9 ()/.%,_-]*?):\s+(?P<val>-?[\d,]*\.?\d+|inf|nan|not set|[A-Za-z][\w.-]*)\s*$"
)
_BAR = r"(\d+)/(\d+) \["
# key as printed -> (column, factor)
_KEYS = {
    "Successful requests": ("successful", 1.0),
    "Failed requests": ("failed", 1.0),
    "Benchmark duration (s)": ("duration_s", 1.0),
    "Traffic request rate": ("request_rate", 1.0),
    "Request rate configured (RPS)": ("request_rate", 1.0),
    "Maximum request concurrency": ("concurrency", 1.0),
    "Max request concurrency": ("concurrency", 1.0),
    "Concurrency": ("concurrency_mean", 1.0),
    "Request throughput (req/s)": ("throughput_rps", 1.0),
    "Output token throughput (tok/s)": ("output_tps", 1.0),
    "Mean TTFT (ms)": ("ttft_mean_s", 1e-3),
    "Median TTFT (ms)": ("ttft_median_s", 1e-3),
    "P99 TTFT (ms)": ("ttft_p99_s", 1e-3),
    "Mean TPOT (ms)": ("tpot_mean_s", 1e-3),
    "Median TPOT (ms)": ("tpot_median_s", 1e-3),
    "P99 TPOT (ms)": ("tpot_p99_s", 1e-3),
    "Mean ITL (ms)": ("itl_mean_s", 1e-3),
    "Median ITL (ms)": ("itl_median_s", 1e-3),
    "P99 ITL (ms)": ("itl_p99_s", 1e-3),
    "Mean E2EL (ms)": ("e2e_mean_s", 1e-3),
    "Median E2EL (ms)": ("e2e_median_s", 1e-3),
    "P99 E2EL (ms)": ("e2e_p99_s", 1e-3),
    "Mean E2E Latency (ms)": ("e2e_mean_s", 1e-3),
    "Median E2E Latency (ms)": ("e2e_median_s", 1e-3),
    "P99 E2E Latency (ms)": ("e2e_p99_s", 1e-3),
}
COLUMNS = list(dict.fromkeys(c for c, _ in _KEYS.values()))


def blocks(lines: pl.Series, source: str) -> pl.DataFrame:
    """One ``load_tests`` row per result block of ``lines`` (a file's lines, in order)."""
    df = pl.DataFrame({"line": lines}).with_row_index("i", 1).with_columns(pl.col("i").cast(pl.Int64))
    line = pl.col("line").str.strip_chars_end()
    head = line.str.contains(HEADER)
    if not bool(df.select(head.any()).item()):
        return pl.DataFrame()
    closing = line.str.contains(_CLOSE) & ~head
    n = head.cast(pl.Int32).cum_sum()
    inside = (n - closing.cast(pl.Int32).cum_sum().shift(1, fill_value=0)) > 0
    # a line before a block's header (the run's settings, its progress bar) belongs to the block it opens
    df = df.with_columns(pl.when(inside).then(n).otherwise(n + 1).alias("blk"), head.alias("head"))
    kv = (
        df.with_columns(line.str.extract_groups(_KV).alias("kv"))
        .unnest("kv")
        .filter(pl.col("key").is_not_null())
    )
    backend = (
        kv.filter(pl.col("key") == "Backend").group_by("blk").agg(pl.col("val").first().alias("backend"))
    )
    kv = kv.filter(pl.col("key").is_in(list(_KEYS))).with_columns(
        pl.col("key").replace_strict({k: c for k, (c, _) in _KEYS.items()}).alias("col"),
        pl.col("key")
        .replace_strict({k: f for k, (_, f) in _KEYS.items()}, return_dtype=pl.Float64)
        .alias("f"),
        pl.col("val").str.replace_all(",", "").cast(pl.Float64, strict=False).alias("v"),
    )
    # inside the block wins over the settings printed before it
    kv = kv.sort("blk", "i").group_by("blk", "col").agg((pl.col("v") * pl.col("f")).last())
    wide = kv.pivot(on="col", index="blk", values="v")
    sent = (
        df.with_columns(line.str.extract_groups(_BAR).alias("b"))
        .unnest("b")
        .filter(pl.col("2").is_not_null())
    )
    sent = sent.group_by("blk").agg(pl.col("2").last().pipe(to_int).alias("requests"))
    starts = df.filter("head").select("blk", pl.col("i").alias("line_no"))
    out = (
        starts.join(wide, on="blk", how="left")
        .join(sent, on="blk", how="left")
        .join(backend, on="blk", how="left")
    )
    out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias(c) for c in COLUMNS if c not in out.columns)
    rate = pl.col("request_rate")
    return out.select(
        pl.lit(source).alias("source"),
        pl.when(pl.col("backend").is_not_null())  # only SGLang's bench_serving prints its backend
        .then(pl.lit("sglang bench_serving"))
        .otherwise(pl.lit("vllm bench serve"))
        .alias("tool"),
        pl.col("blk").cast(pl.Int64).alias("run"),
        pl.coalesce("requests", (pl.col("successful") + pl.col("failed")).pipe(to_int)).alias("requests"),
        pl.col("successful").pipe(to_int),
        pl.col("failed").pipe(to_int),
        *[pl.col(c) for c in COLUMNS if c not in ("successful", "failed", "request_rate")],
        pl.when(rate.is_finite()).then(rate).alias("request_rate"),  # 'inf': all sent at once, no rate
        pl.lit("client").alias("clock"),
        pl.lit("load_test").alias("latency_source"),
        "line_no",
    )
