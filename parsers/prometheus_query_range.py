"""Prometheus HTTP API answers (``/api/v1/query_range``, also instant ``/api/v1/query``) saved as JSON.

    {"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"vllm:num_preemptions_total","engine":"0","instance":"127.0.0.1:8001","job":"vllm","model_name":"tiny"},"values":[[1795940338.037,"0"],...]}]}}

Upstream: https://prometheus.io/docs/prometheus/latest/querying/api/ (range vectors: "values" as
[epoch seconds, "value string"]; instant vectors: "value"). Values are the query evaluated at each
step, i.e. the last raw sample within the lookback window (5 min by default), not raw samples.
"""

from __future__ import annotations

import io

import polars as pl

from . import _prom
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "prometheus_query_range"
KIND = "metrics"
DESCRIPTION = "Prometheus HTTP API query_range / query answer (JSON matrix or vector)"
MODE = "document"
SAMPLES = ['{"status":"success","data":{"resultType":"matrix","result":[]}}']

_STATUS = r'^\s*\{\s*"status"\s*:\s*"(?:success|error)"'
_SHAPE = r'"resultType"\s*:\s*"(?:matrix|vector|scalar|string)"|"errorType"\s*:'
ASSUMPTION = (
    "query_range values are Prometheus' evaluation at each step (the last sample within the lookback, "
    "5 min by default), not raw scrapes: a scrape gap shorter than the lookback shows as repeated "
    "values; when a promtool dump of the same series is also given, the dump is used"
)


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    text = pl.col("text").str.slice(0, 20000)
    g = per_head(frame, n, text=pl.col("line").str.join("\n"))
    return g.select(
        pl.when(text.str.contains(_STATUS) & text.str.contains(_SHAPE)).then(1.0).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    n_lines = _lines(text)
    try:
        doc = pl.read_json(io.StringIO(text))
    except Exception as e:  # noqa: BLE001 - truncated or broken JSON is a message, not a crash
        return ChunkResult(
            lines_parsed=0, messages=[f"not readable as JSON ({type(e).__name__}): nothing read"]
        )
    if "status" not in doc.columns or doc.height != 1:
        return ChunkResult(
            lines_parsed=0, messages=["JSON without a Prometheus 'status' field: nothing read"]
        )
    status = doc["status"][0]
    if status != "success" or "data" not in doc.columns:
        why = ": ".join(str(doc[c][0]) for c in ("errorType", "error") if c in doc.columns)
        return ChunkResult(
            lines_parsed=n_lines, messages=[f"Prometheus answered status={status} ({why}): no samples"]
        )
    res = ChunkResult(lines_parsed=n_lines, assumptions=[ASSUMPTION])
    if "warnings" in doc.columns:
        res.messages += [f"Prometheus warning: {w}" for w in (doc["warnings"][0] or [])]
    data = doc.select(pl.col("data").struct.unnest())
    rtype = data["resultType"][0] if "resultType" in data.columns else None
    if rtype not in ("matrix", "vector") or "result" not in data.columns:
        res.messages.append(f"resultType {rtype!r} holds no series: nothing read")
        return res
    series = data.select(pl.col("result").explode()).drop_nulls()
    if series.height == 0 or not isinstance(series["result"].dtype, pl.Struct):
        res.messages.append("the answer holds no series (the query matched nothing in that range)")
        return res
    df = _samples(series.unnest("result"), rtype)
    res.messages += _prom.nan_messages(df)
    n_unnamed = df.filter(pl.col("name").is_null()).height
    if n_unnamed:
        res.messages.append(
            f"{n_unnamed} samples have no __name__ (the query applied a function): name left null"
        )
    res.tables["server_metrics"] = _prom.metrics_frame(df, ctx)
    return res


def _samples(series: pl.DataFrame, rtype: str) -> pl.DataFrame:
    """One row per sample: ts, name, instance, labels, value."""
    metric = series["metric"] if "metric" in series.columns else None
    fields = (
        [f.name for f in metric.dtype.fields]
        if metric is not None and isinstance(metric.dtype, pl.Struct)
        else []
    )
    pairs = (
        pl.concat_list(
            [
                pl.when(pl.col("metric").struct.field(k).is_not_null()).then(
                    pl.lit(f"{k}=") + pl.col("metric").struct.field(k)
                )
                for k in fields
            ]
        ).list.drop_nulls()
        if fields
        else pl.lit([], dtype=pl.List(pl.String))
    )
    name = (
        pl.col("metric").struct.field("__name__") if "__name__" in fields else pl.lit(None, dtype=pl.String)
    )
    col = "values" if rtype == "matrix" else "value"
    if col not in series.columns:
        return pl.DataFrame(
            schema={
                "ts": _prom.TS,
                "name": pl.String,
                "instance": pl.String,
                "labels": pl.String,
                "value": pl.Float64,
            }
        )
    df = series.select(name.alias("name"), pairs.alias("_pairs"), pl.col(col).alias("_pt"))
    if rtype == "matrix":
        df = df.explode("_pt").drop_nulls("_pt")
    return df.select(
        _prom.epoch_s_to_ts(pl.col("_pt").list.get(0).cast(pl.Float64)).alias("ts"),
        "name",
        _prom.label_value_expr(pl.col("_pairs"), "instance").alias("instance"),
        _prom.labels_expr(pl.col("_pairs")).alias("labels"),
        _prom.value_expr(pl.col("_pt").list.get(1)).alias("value"),
    )
