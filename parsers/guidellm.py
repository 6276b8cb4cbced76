"""GuideLLM benchmark report JSON (``guidellm run --output kind=json``) -> ``client_requests``,
``client_attempts``, ``client_phases``.

Sample (tests/data/clients/guidellm-benchmarks.json, produced by guidellm 0.8.1 here; one JSON object, cut)::

    {"metadata": {"version": 2, "guidellm_version": "0.8.1", ...}, "config": {...}, "benchmarks": [{"type_": "generative_benchmark", "config": {"strategy": {"type_": "concurrent", "streams": 1, ...}}, "requests": {"successful": [...], "errored": [...], "incomplete": [...]}, "start_time": 1795946257.47, "end_time": 1795946259.97, ...}]}

Source: vllm-project/guidellm ``benchmark/schemas`` (``GenerativeBenchmarksReport``). Each request has
GuideLLM's own ``request_id`` (it is not sent to the server: vllm-project/guidellm#452) and
``info.timings`` in Unix seconds. GuideLLM does not retry: one request = one attempt. Prompt and
output text (``request_args``, ``output``) are never read into the tables.
"""

from __future__ import annotations

import json

import polars as pl

from logscope.numbers import number, to_int

from ._common import epoch_to_utc
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "guidellm"
KIND = "client"
DESCRIPTION = "GuideLLM benchmark report JSON (per-request timings of each benchmark)"
MODE = "document"
SAMPLES = [
    '{"metadata": {"version": 2, "guidellm_version": "0.8.1", "python_version": "3.11.7", '
    '"platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36"}, "config": {"metadata": {"labels": {}}, "spec":',
]

CLIENT = "guidellm"
_DETECT = r'^\s*\{\s*"metadata":\s*\{[^{}]*"guidellm_version"|"type_":\s*"generative_benchmark"'
_REQ_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "info": pl.Struct(
        {
            "status": pl.String,
            "error": pl.String,
            "timings": pl.Struct(
                {
                    "request_start": pl.Float64,
                    "first_token_iteration": pl.Float64,
                    "request_end": pl.Float64,
                    "resolve_end": pl.Float64,
                }
            ),
        }
    ),
    "request_latency": pl.Float64,
    "prompt_tokens": pl.Float64,
    "output_tokens": pl.Float64,
    "time_to_first_token_ms": pl.Float64,
}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    first = frame.filter((pl.col("i") < 5) & pl.col("nb").is_not_null())
    g = per_head(first, n, hit=pl.col("line").str.contains(_DETECT).any())
    return g.select(pl.when(pl.col("hit")).then(0.95).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _strategy(b: dict) -> tuple[str, str | None, float | None]:
    st = (b.get("config") or {}).get("strategy") or {}
    kind = str(st.get("type_") or "benchmark")
    conc = st.get("streams") or st.get("max_concurrency")
    if kind == "synchronous":
        conc = 1
    rate = st.get("rate")
    if conc is not None and kind in ("concurrent", "synchronous", "throughput"):
        return f"{kind}@{conc}", "concurrency", number(conc)
    if rate is not None:
        return f"{kind}@{rate}", "rate", number(rate)
    return kind, None, None


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return ChunkResult(lines_parsed=0, messages=[f"not valid JSON ({e.msg} at line {e.lineno})"])
    benches = doc.get("benchmarks") if isinstance(doc, dict) else None
    if not isinstance(benches, list):
        return ChunkResult(lines_parsed=0, messages=["no 'benchmarks' list: not a GuideLLM report"])
    reqs, phases = [], []
    for k, b in enumerate(benches):
        label, mode, value = _strategy(b)
        label = f"{k}:{label}"
        phases.append(
            {
                "phase": label,
                "ts_start": b.get("start_time"),
                "ts_end": b.get("end_time"),
                "mode": mode,
                "value": value,
            }
        )
        groups = b.get("requests") or {}
        for status in ("successful", "errored", "incomplete"):
            items = groups.get(status) or []
            if items:
                df = pl.from_dicts(items, schema=_REQ_SCHEMA, strict=False)
                reqs.append(
                    df.with_columns(
                        pl.lit(status).alias("outcome"),
                        pl.lit(label).alias("phase"),
                        pl.lit(value if mode == "concurrency" else None, dtype=pl.Float64).alias("conc"),
                    )
                )
    tables = {}
    if reqs:
        tables["client_requests"] = tables["client_attempts"] = _rows(pl.concat(reqs), ctx)
    ph = pl.DataFrame(
        phases,
        schema={
            "phase": pl.String,
            "ts_start": pl.Float64,
            "ts_end": pl.Float64,
            "mode": pl.String,
            "value": pl.Float64,
        },
    )
    tables["client_phases"] = ph.select(
        pl.lit(ctx.source).alias("source"),
        pl.lit(CLIENT).alias("client"),
        "phase",
        epoch_to_utc(pl.col("ts_start")).alias("ts_start"),
        epoch_to_utc(pl.col("ts_end")).alias("ts_end"),
        "mode",
        "value",
        pl.lit("exact: benchmark start_time/end_time (Unix time)").alias("anchoring"),
    )
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return ChunkResult(
        tables=tables,
        lines_parsed=n_lines,
        assumptions=[
            "guidellm: one request = one attempt (no retries); its request_id is GuideLLM's own, "
            "not sent to the server; errored/incomplete requests end at info.timings.resolve_end"
        ],
    )


def _rows(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    t = pl.col("info").struct.field("timings")
    err = pl.col("info").struct.field("error")
    start = t.struct.field("request_start")
    end = pl.coalesce(t.struct.field("request_end"), t.struct.field("resolve_end"))
    ok = pl.col("outcome") == "successful"
    http = err.str.extract(r"'(\d{3}) [^']*' for url", 1).pipe(to_int)
    return df.select(
        epoch_to_utc(start).alias("ts_start"),
        epoch_to_utc(end).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(CLIENT).alias("client"),
        pl.col("request_id").alias("logical_request_id"),
        pl.lit(1).alias("attempt"),
        pl.lit(1).alias("attempts"),
        pl.when(ok).then(pl.lit(200)).otherwise(http).alias("status"),
        pl.when(ok)
        .then(None)
        .when(pl.col("outcome") == "incomplete")
        .then(pl.coalesce(pl.lit("cancelled: ") + err, pl.lit("cancelled")))
        .otherwise(err.str.extract(r"^(\w+)", 1))
        .alias("error"),
        err.str.contains("Timeout").fill_null(False).alias("timed_out"),
        pl.when(ok).then(pl.col("time_to_first_token_ms") / 1e3).alias("ttft_s"),
        pl.coalesce(pl.col("request_latency"), end - start).alias("e2e_s"),
        pl.col("prompt_tokens").pipe(to_int).alias("prompt_tokens"),
        pl.col("output_tokens").pipe(to_int).alias("output_tokens"),
        pl.col("conc").pipe(to_int).alias("concurrency"),
        "phase",
        pl.lit("exact").alias("grouping"),
        pl.lit(1.0).alias("grouping_confidence"),
    ).sort("ts_start")
