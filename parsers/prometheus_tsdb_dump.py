"""``promtool tsdb dump`` output: one sample a line, labels, value, epoch milliseconds.

    {__name__="vllm:num_preemptions_total", engine="0", instance="127.0.0.1:8001", job="vllm", model_name="tiny"} 456 1795940583955

Upstream: prometheus/cmd/promtool/tsdb.go ``dumpSamples`` prints ``fmt.Printf("%s %g %d\\n", labels,
value, ts)``; ``labels.String()`` quotes values with ``strconv.Quote``. A ``NaN`` value is a
staleness marker (series gone at that scrape). Histogram ``_bucket`` series are kept.
"""

from __future__ import annotations

import polars as pl

from . import _prom
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "prometheus_tsdb_dump"
KIND = "metrics"
DESCRIPTION = "Prometheus `promtool tsdb dump` samples (labels, value, epoch ms)"
MODE = "lines"
SAMPLES = [
    '{__name__="vllm:num_preemptions_total", engine="0", instance="127.0.0.1:8001", job="vllm", model_name="tiny"} 456 1795940583955',
    '{__name__="vllm:num_requests_running", engine="0", instance="127.0.0.1:8001", job="vllm", model_name="tiny"} 0 1795942102916',
    '{__name__="vllm:gpu_cache_usage_perc", instance="127.0.0.1:8001", job="vllm", model_name="tiny"} NaN 1795945110911',
]

# a line is its series' labels, then ' value ts': the two are matched apart, the labels once per series
# (a dump repeats each series' labels on every sample: 7,238 lines, 44 series in the lab's)
_TAIL = r" (?P<value>" + _prom.VALUE + r") (?P<ts>-?[0-9]+)$"
_LABELS = r'^\{(?P<labels>__name__="(?P<name>(?:[^"\\]|\\.)*)"(?:, ' + _prom.LABEL_PAIR + r")*)\}$"
_DETECT = r'^\{__name__="[^"]+"(?:, [a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\} \S+ -?[0-9]+\s*$'  # CRLF endings, trailing blanks


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    return per_head(nonblank(frame), n, s=share(_DETECT)).get_column("s")


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    line = pl.col("line").str.strip_chars_end()  # CRLF endings, trailing blanks
    parts = lines.select(line.alias("line"), line.str.extract_groups(_TAIL).alias("g")).unnest("g")
    # the series: what precedes ' value ts' (ASCII, so characters are bytes)
    tail_len = pl.col("value").str.len_chars() + pl.col("ts").str.len_chars() + 2
    parts = parts.select(
        pl.col("line").str.head(pl.col("line").str.len_chars() - tail_len).alias("series"), "value", "ts"
    )
    series = (
        parts.select(pl.col("series").drop_nulls().unique())
        .with_columns(pl.col("series").str.extract_groups(_LABELS).alias("g"))
        .unnest("g")
        .filter(pl.col("labels").is_not_null())
    )
    series = series.with_columns(_prom.pairs_expr(pl.col("labels")).alias("_pairs")).select(
        "series",
        pl.col("name").str.replace_all(r'\\(["\\])', "${1}"),
        _prom.label_value_expr(pl.col("_pairs"), "instance").alias("instance"),
        _prom.labels_expr(pl.col("_pairs")).alias("labels"),
    )
    parts = parts.join(series, on="series", how="left", maintain_order="left")
    ok = parts["labels"].is_not_null()
    df = parts.filter(ok).select(
        _prom.epoch_ms_to_ts(pl.col("ts").cast(pl.Int64, strict=False)).alias("ts"),
        "name",
        "instance",
        "labels",
        _prom.value_expr(pl.col("value")).alias("value"),
    )
    state["nan"] = state.get("nan", 0) + int(df["value"].is_nan().sum())
    return ChunkResult(
        recognized=ok,
        tables={"server_metrics": _prom.metrics_frame(df, ctx)},
        assumptions=["promtool dump timestamps are epoch milliseconds (UTC)"],
    )


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    n = state.get("nan", 0)
    return ChunkResult(messages=[_prom.NAN_MESSAGE.format(n=n)]) if n else None
