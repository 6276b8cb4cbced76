"""AIPerf ``profile_export.jsonl`` (one record per request) -> ``client_attempts``, ``client_requests``,
``client_phases``.

Sample (tests/data/clients/aiperf-profile_export.jsonl, produced by aiperf 0.13.0 here; cut)::

    {"metadata":{"session_num":1,"x_request_id":"0373f9f9-...","x_correlation_id":"30b38a4b-...","request_start_ns":1795945861649328758,"request_end_ns":1795945861817347398,"benchmark_phase":"profiling","was_cancelled":false,...},"metrics":{"time_to_first_token":{"value":15.098554,"unit":"ms"},"request_latency":{"value":168.01864,"unit":"ms"},...}}

Source: ai-dynamo/aiperf ``common/models/record_models.py``; ``x_request_id`` is sent as the
``X-Request-ID`` header (``transports/base_transports.py``), timestamps are wall-clock epoch ns. AIPerf
does not retry: one record = one logical request = one attempt. Failed records carry ``error``
``{code, type, message}``; a cancellation (``--request-cancellation-rate``) is AIPerf's own
``499 RequestCancellationError``, not a status a server sent.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int

from ._common import decode_json
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "aiperf"
KIND = "client"
DESCRIPTION = "AIPerf profile_export.jsonl (per-request records with X-Request-ID)"
MODE = "lines"
SAMPLES = [  # record 5 of tests/data/clients/aiperf-profile_export.jsonl (a 502)
    '{"metadata":{"session_num":7,"x_request_id":"ca7334fb-7cc4-4fd0-b527-ffb45a9850e5","x_correlation_id":"fbbe7624-1fe0-409f-8d53-e52d1fd6a0d8","conversation_id":"session_000007","turn_index":0,"credit_issued_ns":1795946242022324812,"request_start_ns":1795946242025264634,"request_end_ns":1795946242025264634,"worker_id":"worker_f7e23c36","record_processor_id":"record_processor_153b0afb","benchmark_phase":"profiling","phase_index":0,"profiling_index":0,"phase_name":"profiling","phase_kind":"profiling","was_cancelled":false,"context_overflow_skip":false,"agent_depth":0,"root_correlation_id":"fbbe7624-1fe0-409f-8d53-e52d1fd6a0d8"},"metrics":{"error_isl":{"value":20,"unit":"tokens"}},"error":{"code":502,"type":"Bad Gateway","message":"{\\"error\\": {\\"message\\": \\"bad gateway (test server)\\", \\"type\\": \\"server_error\\"}}"}}',
]

CLIENT = "aiperf"
_V = pl.Struct({"value": pl.Float64, "unit": pl.String})
_METRICS = [
    "time_to_first_token",
    "request_latency",
    "input_sequence_length",
    "output_sequence_length",
    "usage_prompt_tokens",
    "usage_completion_tokens",
]
DTYPE = pl.Struct(
    {
        "metadata": pl.Struct(
            {
                "x_request_id": pl.String,
                "x_correlation_id": pl.String,
                "conversation_id": pl.String,
                "turn_index": pl.Int64,
                "request_start_ns": pl.Int64,
                "request_ack_ns": pl.Int64,
                "request_end_ns": pl.Int64,
                "benchmark_phase": pl.String,
                "was_cancelled": pl.Boolean,
                "cancellation_time_ns": pl.Int64,
                "worker_id": pl.String,
            }
        ),
        "metrics": pl.Struct({m: _V for m in _METRICS}),
        "error": pl.Struct({"code": pl.Int64, "type": pl.String, "message": pl.String}),
    }
)
_DETECT = r'^\s*\{"metadata":\s*\{.*"x_request_id":.*"request_start_ns":'
_TS = pl.Datetime("us", "UTC")


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    return per_head(nonblank(frame), n, s=share(_DETECT)).select(0.97 * pl.col("s")).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _seconds(metric: str) -> pl.Expr:
    """A {value, unit} time metric in seconds."""
    v = pl.col("metrics").struct.field(metric)
    val, unit = v.struct.field("value"), v.struct.field("unit")
    scale = (
        pl.when(unit == "ms")
        .then(1e-3)
        .when(unit == "us")
        .then(1e-6)
        .when(unit == "ns")
        .then(1e-9)
        .when(unit.is_in(["s", "sec"]))
        .then(1.0)
    )
    return val * scale


def _count(metric: str) -> pl.Expr:
    return pl.col("metrics").struct.field(metric).struct.field("value").round(0).pipe(to_int)


def _ns(field: str) -> pl.Expr:
    return (
        pl.from_epoch(pl.col("metadata").struct.field(field), time_unit="ns")
        .dt.replace_time_zone("UTC")
        .cast(_TS)
    )


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    obj = lines.filter(pl.col("line").str.contains(r"^\s*\{.*\}\s*$"))
    dec = (
        obj.select("line_no", decode_json(obj["line"], DTYPE).alias("r"))
        .filter(pl.col("r").struct.field("metadata").struct.field("request_start_ns").is_not_null())
        .unnest("r")
    )
    ok = lines.select(pl.col("line_no").is_in(dec["line_no"].implode())).to_series()
    if not dec.height:
        return ChunkResult(recognized=ok)
    md = pl.col("metadata")
    err = pl.col("error")
    cancelled = md.struct.field("was_cancelled").fill_null(False)
    code = err.struct.field("code")
    etype = err.struct.field("type")
    http_status = (
        pl.when(err.is_null())
        .then(pl.lit(200))
        .when(~cancelled & code.is_between(100, 599) & (etype != "RequestCancellationError"))
        .then(code)
    )
    ts_end = pl.coalesce(_ns("request_end_ns"), _ns("cancellation_time_ns"))
    rows = dec.select(
        _ns("request_start_ns").alias("ts_start"),
        ts_end.alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(CLIENT).alias("client"),
        md.struct.field("x_request_id").alias("logical_request_id"),
        md.struct.field("x_request_id").alias("request_id"),
        pl.lit(1).alias("attempt"),
        pl.lit(1).alias("attempts"),
        http_status.alias("status"),
        etype.alias("error"),
        (etype.str.contains("(?i)timeout") & ~cancelled).fill_null(False).alias("timed_out"),
        _seconds("time_to_first_token").alias("ttft_s"),
        pl.coalesce(
            _seconds("request_latency"), (ts_end - _ns("request_start_ns")).dt.total_microseconds() / 1e6
        ).alias("e2e_s"),
        pl.coalesce(_count("usage_prompt_tokens"), _count("input_sequence_length")).alias("prompt_tokens"),
        pl.coalesce(_count("output_sequence_length"), _count("usage_completion_tokens")).alias(
            "output_tokens"
        ),
        md.struct.field("benchmark_phase").alias("phase"),
        pl.lit("exact").alias("grouping"),
        pl.lit(1.0).alias("grouping_confidence"),
        "line_no",
    )
    part = rows.group_by("phase").agg(pl.col("ts_start").min(), pl.col("ts_end").max())
    prev = state.get("phases")
    state["phases"] = (
        (pl.concat([prev, part]) if prev is not None else part)
        .group_by("phase")
        .agg(pl.col("ts_start").min(), pl.col("ts_end").max())
    )
    return ChunkResult(
        tables={"client_attempts": rows, "client_requests": rows},
        recognized=ok,
        assumptions=[
            "aiperf records: one request = one attempt (aiperf does not retry); x_request_id is the "
            "X-Request-ID sent; a cancellation (499 RequestCancellationError) is aiperf's own, no status; "
            "concurrency is not in the records"
        ],
    )


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    ph = state.get("phases")
    if ph is None or not ph.height:
        return None
    return ChunkResult(
        tables={
            "client_phases": ph.sort("ts_start").select(
                pl.lit(ctx.source).alias("source"),
                pl.lit(CLIENT).alias("client"),
                "phase",
                "ts_start",
                "ts_end",
                pl.lit("exact: first request start to last request end of the phase's records").alias(
                    "anchoring"
                ),
            )
        }
    )
