"""Prometheus exposition text (``curl /metrics``, ``/federate``), one or several scrapes in one file.

    vllm:num_requests_running{engine="0",instance="127.0.0.1:19301",job="vllm",model_name="tiny"} 8 1795945886534

Upstream: https://prometheus.io/docs/instrumenting/exposition_formats/ (text format 0.0.4:
``# HELP`` / ``# TYPE`` comments, ``name{labels} value [timestamp_ms]``); OpenMetrics text
(``# EOF``, timestamps in seconds) is read too. A plain ``curl /metrics`` has no timestamps: the
samples are placed at the file's modification time. Several concatenated scrapes (a series seen
again) cannot be told apart in time then, which is said in the file's messages.
"""

from __future__ import annotations

import polars as pl

from . import _prom
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "prometheus_text"
KIND = "metrics"
DESCRIPTION = "Prometheus / OpenMetrics exposition text (curl /metrics, /federate), with or without timestamps"
MODE = "lines"
SAMPLES = [
    "# HELP vllm:num_requests_running Number of requests in model execution batches.",
    "# TYPE vllm:num_requests_running gauge",
    'vllm:num_requests_running{engine="0",model_name="tiny"} 3.0',
    "# TYPE vllm:num_preemptions_total untyped",
    'vllm:num_preemptions_total{engine="0",instance="127.0.0.1:19301",job="vllm",model_name="tiny"} 91 1795945886534',
]

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABELS = r'(?:[^"}]|"(?:[^"\\]|\\.)*")*'
_SAMPLE = (
    r"^(?P<name>" + _NAME + r")[ \t]*(?:\{(?P<labels>" + _LABELS + r")\})?[ \t]+(?P<value>" + _prom.VALUE + r")"
    r"(?:[ \t]+(?P<ts>-?[0-9]+(?:\.[0-9]+)?))?(?:[ \t]+#[ \t]+\{.*)?[ \t]*$"
)
_COMMENT = r"^#"  # HELP, TYPE, UNIT, EOF and free comments all belong to the format
_META = r"^#[ \t]+(?:HELP|TYPE)[ \t]+" + _NAME + r"(?:[ \t]|$)"
_BRACED = r"^" + _NAME + r"\{"
_MS_FLOOR = 1e11  # a timestamp above this is in milliseconds (text 0.0.4), below in seconds (OpenMetrics)


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line").str.strip_suffix("\r")
    sample = s.str.contains(_SAMPLE)
    g = per_head(nonblank(frame), n, ok=s.str.contains(_META).any() | (sample & s.str.contains(_BRACED)).any(),
                 m=(sample | s.str.contains(_COMMENT)).mean())
    return g.select(pl.when(pl.col("ok")).then(pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    line = pl.col("line").str.strip_suffix("\r")
    parts = lines.select(
        line.str.extract_groups(_SAMPLE).alias("g"),
        (line.str.contains(_COMMENT) | (line.str.strip_chars() == "")).alias("_other"),
    ).unnest("g")
    is_sample = parts["value"].is_not_null()
    df = parts.filter(is_sample).with_columns(
        _prom.pairs_expr(pl.col("labels").fill_null("")).alias("_pairs"),
        (pl.col("name") + "{" + pl.col("labels").fill_null("") + "}").alias("_key"),
    )
    df = _scrape_index(df, state)
    ts, res = _timestamps(df, ctx, state)
    out = df.select(
        ts.alias("ts"),
        "name",
        _prom.label_value_expr(pl.col("_pairs"), "instance").alias("instance"),
        _prom.labels_expr(pl.col("_pairs")).alias("labels"),
        _prom.value_expr(pl.col("value")).alias("value"),
    )
    res.recognized = is_sample | parts["_other"]
    res.tables["server_metrics"] = _prom.metrics_frame(out, ctx)
    res.messages += _prom.nan_messages(out)
    return res


def _scrape_index(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """0-based scrape number of each sample: how many times its series was seen before in the file."""
    seen: pl.DataFrame = state.get("seen", pl.DataFrame(schema={"_key": pl.String, "_n": pl.Int64}))
    df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("_key").alias("_occ"))
    df = df.join(seen, on="_key", how="left", maintain_order="left").with_columns(
        (pl.col("_occ") + pl.col("_n").fill_null(0)).alias("_scrape")
    )
    counts = df.group_by("_key").agg(pl.len().cast(pl.Int64).alias("_n"))
    state["seen"] = pl.concat([seen, counts]).group_by("_key").agg(pl.col("_n").sum())
    return df.drop("_occ", "_n")


def _timestamps(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.Expr, ChunkResult]:
    res = ChunkResult()
    raw = pl.col("ts").cast(pl.Float64)
    stamped = pl.when(raw.abs() >= _MS_FLOOR).then(_prom.epoch_s_to_ts(raw / 1000)).otherwise(_prom.epoch_s_to_ts(raw))
    n_bare = df.filter(pl.col("ts").is_null()).height
    if df.height and n_bare < df.height:
        res.assumptions.append("sample timestamps above 1e11 read as epoch milliseconds (text format), below as seconds (OpenMetrics)")
    if not n_bare:
        return stamped, res
    scrapes = int(df.filter(pl.col("ts").is_null())["_scrape"].max()) + 1
    state["bare_scrapes"] = max(state.get("bare_scrapes", 0), scrapes)
    if ctx.file_mtime is None:
        res.messages.append(f"{n_bare} samples have no timestamp and the file has no modification time: ts left null")
        return stamped, res
    at = ctx.file_mtime.isoformat(timespec="seconds")
    res.assumptions.append(f"samples without timestamp placed at the file's modification time ({at})")
    if state["bare_scrapes"] > 1:
        res.messages.append(
            f"{state['bare_scrapes']} scrapes without timestamps are concatenated in this file: they cannot be "
            f"placed in time; every sample is kept at the file's modification time ({at}), the derived stats "
            "keep the last scrape"
        )
    mtime = pl.lit(ctx.file_mtime).cast(_prom.TS)
    return pl.when(pl.col("ts").is_null()).then(mtime).otherwise(stamped), res
