"""Spans as the request records no log gave: a folder holding only traces gets the requests, errors and latencies
its spans show, through the same correlation as a client's log and vLLM's (the outcomes, windows, retries and
episodes of the report), instead of "Nothing to diagnose".

- No client log gave attempts: the callers' spans are the client's records (source: the span file). Each HTTP
  CLIENT span is an attempt (its status, its error, a timeout when its message says so: httpx writes
  'ReadTimeout: timed out'); the caller's span over them is the logical request (start, end, e2e and error on
  the client's clock); a trace with attempts and no such span is one request of its attempts. Logical ids are
  the trace ids, so the trace join names them (``trace_id (client)``).
- Neither a log nor the callers' spans gave requests: vLLM's engine request spans are its request records
  (received at the span's start, finished at its end, replica = the span's service). Only then: vLLM writes the
  span when a request finishes, so the requests it aborted or lost in a death are not among them, and beside the
  callers' records they would read as requests that never reached it (amplification below 1). With the callers'
  spans, the engine spans stay in request_spans (their figures, clock engine).

The latencies stay on their clocks: a client attempt's e2e is its span (for a stream, httpx's span ends at the
headers), the request's e2e the caller's span; no TTFT is made up for the client (httpx's spans carry none):
the engine's TTFT stays in the engine spans' figures (clock engine, source spans).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .. import schemas
from ..resources import time_range
from . import ingest_tables

_TIMEOUT = r"(?i)timeout|timed out"
ENGINE_NOTE = "no request log and no caller's spans"
ORIGIN_ENGINE = "spans (engine)"


def _spans(out: Path, rng: time_range.Range) -> pl.DataFrame:
    if not (Path(out) / "spans.parquet").exists():
        return schemas.empty("spans")
    return time_range.scan(out, "spans", rng).collect()


def fill(out: Path, tabs: dict[str, pl.DataFrame], rng: time_range.Range = time_range.ALL) -> list[str]:
    """Put the spans' client and server records into ``tabs`` (``ingest_tables.read_tables``' dict) where no log
    gave any; the notes saying so (the last one starting with ENGINE_NOTE when the engine spans are vLLM's records:
    ``engine_latencies`` then gives the requests their figures)."""
    need_client = not (tabs["client_attempts"].height or tabs["client_requests"].height)
    need_server = tabs["server_requests"].height == 0
    if not (need_client or need_server):
        return []
    sp = _spans(out, rng)
    notes = []
    have_client = not need_client
    if need_client:
        ca, cr = client_records(sp)
        if ca.height or cr.height:
            tabs["client_attempts"] = schemas.conform(ca, "client_attempts")
            tabs["client_requests"] = schemas.conform(cr, "client_requests")
            sources = sorted(set(ca["source"].to_list()) | set(cr["source"].to_list()))
            pick = tabs.get(ingest_tables.CLIENT_PICK)
            kept = [] if pick is None else pick.filter(pl.col("kept"))["source"].to_list()
            tabs[ingest_tables.CLIENT_PICK] = ingest_tables.pick_table([*kept, *sources], {})
            notes.append(
                f"no client log: the callers' spans are the client's records ({cr.height:,} requests, "
                f"{ca.height:,} attempts from {', '.join(sources)})"
            )
            have_client = True
    if need_server and not have_client:
        sr = server_records(sp)
        if sr.height:
            tabs["server_requests"] = schemas.conform(sr, "server_requests")
            notes.append(
                f"{ENGINE_NOTE}: its {sr.height:,} engine spans are its request records (finished requests "
                "only: vLLM writes no span for a request it aborts); their TTFT and e2e are vLLM's own (clock "
                "engine, requests' origin 'spans (engine)')"
            )
    return notes


def client_records(sp: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(client_attempts, client_requests) rows of the callers' spans."""
    att = sp.filter(
        (pl.col("layer") == "client") & (pl.col("role") == "attempt") & pl.col("start").is_not_null()
    )
    req = sp.filter(
        (pl.col("layer") == "client") & (pl.col("role") == "request") & pl.col("start").is_not_null()
    )
    if att.height == 0 and req.height == 0:
        return schemas.empty("client_attempts"), schemas.empty("client_requests")
    failed = pl.col("status") == "error"
    error = pl.when(failed).then(pl.coalesce("status_message", pl.lit("error")))
    ca = att.sort("start").select(
        pl.col("start").alias("ts_start"),
        pl.col("end").alias("ts_end"),
        "source",
        pl.col("service").alias("client"),
        pl.col("trace_id").alias("logical_request_id"),
        pl.lit(None, pl.String).alias("request_id"),
        pl.int_range(1, pl.len() + 1).over("trace_id").cast(pl.Int64).alias("attempt"),
        pl.col("http_status").alias("status"),
        error.alias("error"),
        pl.col("status_message").str.contains(_TIMEOUT).fill_null(False).alias("timed_out"),
        pl.col("duration_s").alias("e2e_s"),
        pl.col("url"),
        pl.lit("exact").alias("grouping"),
        pl.lit(1.0).alias("grouping_confidence"),
        "line_no",
        "trace_id",
        "span_id",
    )
    per = ca.group_by("logical_request_id").agg(
        pl.len().alias("attempts"),
        pl.col("status").drop_nulls().last().alias("_status"),
        pl.col("error").last().alias("_error"),
        pl.col("timed_out").last().alias("_timed_out"),
        pl.col("ts_start").min().alias("_start"),
        pl.col("ts_end").max().alias("_end"),
        pl.col("source").first().alias("_source"),
        pl.col("client").first().alias("_client"),
    )
    own = (
        req.sort("start")
        .group_by("trace_id")
        .agg(
            pl.col("start").first(),
            pl.col("end").last(),
            pl.col("source").first(),
            pl.col("service").first(),
            pl.col("status").last(),
            pl.col("status_message").drop_nulls().last(),
        )
    )
    cr = (
        per.join(
            own.rename({"trace_id": "logical_request_id"}), on="logical_request_id", how="full", coalesce=True
        )
        .select(
            "logical_request_id",
            pl.coalesce("source", "_source").alias("source"),
            pl.coalesce("service", "_client").alias("client"),
            pl.coalesce("start", "_start").alias("ts_start"),
            pl.coalesce("end", "_end").alias("ts_end"),
            pl.col("_status").alias("status"),
            # the caller's own error (its request span) before its last attempt's
            pl.coalesce(pl.when(pl.col("status") == "error").then(pl.col("status_message")), "_error").alias(
                "error"
            ),
            (
                pl.coalesce(
                    pl.when(pl.col("status") == "error").then(pl.col("status_message")), pl.lit("")
                ).str.contains(_TIMEOUT)
                | pl.col("_timed_out").fill_null(False)
            ).alias("timed_out"),
            pl.col("attempts").fill_null(0),
            ((pl.col("end") - pl.col("start")).dt.total_microseconds() / 1e6).alias("e2e_s"),
        )
        .sort("ts_start")
    )
    return ca, cr


def server_records(sp: pl.DataFrame) -> pl.DataFrame:
    """server_requests rows of vLLM's (or SGLang's) engine request spans."""
    eng = sp.filter(
        (pl.col("layer") == "engine") & (pl.col("role") == "request") & pl.col("start").is_not_null()
    )
    return eng.select(
        pl.coalesce("request_id", pl.lit("span:") + pl.col("span_id")).alias("request_id"),
        pl.coalesce("base_request_id", "request_id", pl.lit("span:") + pl.col("span_id")).alias(
            "base_request_id"
        ),
        "source",
        pl.coalesce("service", "replica").alias("replica"),
        pl.col("start").alias("received_ts"),
        pl.col("start").alias("added_ts"),
        pl.col("end").alias("finished_ts"),
        pl.lit(None, schemas.schema("server_requests")["aborted_ts"]).alias("aborted_ts"),
        pl.lit(None, schemas.schema("server_requests")["failed_ts"]).alias("failed_ts"),
        "max_tokens",
        "prompt_tokens",
        pl.lit(None, pl.String).alias("endpoint"),
        pl.when(pl.col("name") == "llm_request")
        .then(pl.lit("vllm"))
        .when(pl.col("name").str.starts_with("Req "))
        .then(pl.lit("sglang"))
        .alias("engine_kind"),
    )


def engine_latencies(
    out: Path, requests: pl.DataFrame, rng: time_range.Range = time_range.ALL
) -> pl.DataFrame:
    """Requests correlated from the engine spans alone (``fill``'s server records): their TTFT and e2e are the
    spans' own (clock engine) and their origin says so; the outcome stays unknown (the engine finished them, what
    the caller got is not in the folder)."""
    eng = server_records(_spans(out, rng)).select("base_request_id", "finished_ts")
    figs = (
        _spans(out, rng)
        .filter((pl.col("layer") == "engine") & (pl.col("role") == "request"))
        .select(
            pl.coalesce("base_request_id", "request_id", pl.lit("span:") + pl.col("span_id")).alias("_id"),
            pl.col("ttft_s").alias("_ttft"),
            pl.col("e2e_s").alias("_e2e"),
            pl.col("prompt_tokens").alias("_pt"),
            pl.col("output_tokens").alias("_ot"),
        )
        .unique("_id")
    )
    if eng.height == 0 or figs.height == 0:
        return requests
    got = requests.join(figs, left_on="logical_request_id", right_on="_id", how="left")
    hit = pl.col("_e2e").is_not_null() | pl.col("_ttft").is_not_null()
    return got.with_columns(
        pl.when(hit).then(pl.col("_ttft")).otherwise(pl.col("ttft_s")).alias("ttft_s"),
        pl.when(hit).then(pl.coalesce("_e2e", "e2e_s")).otherwise(pl.col("e2e_s")).alias("e2e_s"),
        pl.coalesce("prompt_tokens", "_pt").alias("prompt_tokens"),
        pl.coalesce("output_tokens", "_ot").alias("output_tokens"),
        pl.when(hit).then(pl.lit(ORIGIN_ENGINE)).otherwise(pl.col("origin")).alias("origin"),
        pl.when(hit).then(pl.lit("engine")).otherwise(pl.col("latency_clock")).alias("latency_clock"),
        pl.when(hit).then(pl.lit("spans")).otherwise(pl.col("latency_source")).alias("latency_source"),
    ).drop("_ttft", "_e2e", "_pt", "_ot")
