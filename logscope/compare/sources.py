"""Each run's per-request latencies by clock, so that a figure is only ever set against one of the same clock.

Clocks (the team's vocabulary): ``client`` (what the callers measured: client records, a load test's
per-request results, client spans), ``gateway`` (its access log's span of a request) and ``engine`` (vLLM's or
SGLang's own figures: the Prometheus histograms, its spans). A requests row carries one latency, of the layer
that defined it: its ``latency_clock`` / ``latency_source`` columns when the correlation wrote them, else
derived from ``origin`` (client -> client, gateway -> gateway, server -> engine). The gateway's own times are
its span of each logical request (requests.gateway_e2e_s) whatever the row's origin; the engine's per-request
figures from its ``llm_request`` spans when the folder holds traces (never required).
"""

from __future__ import annotations

import polars as pl

from ..diagnose import stated
from ..diagnose import untimed as _untimed
from .runs import Run

CLOCK_OF_ORIGIN = {"client": "client", "gateway": "gateway", "server": "engine"}
SOURCE_OF_ORIGIN = {"gateway": "gateway_log", "server": "engine_log"}
LOAD_TESTS = {
    "vllm_bench",
    "aiperf",
    "guidellm",
}  # formats whose records are a load test's per-request results
# how each source is named to a reader
SOURCE_TEXT = {
    "client_records": "client records",
    "load_test": "load-test results",
    "gateway_log": "gateway access log",
    "engine_histogram": "engine metrics histogram",
    "engine_log": "engine log",
    "engine_metrics": "engine metrics",
    "spans": "spans",
}
CLOCK_TEXT = {"client": "callers' clock", "gateway": "gateway's clock", "engine": "engine's clock"}


def client_source(run: Run) -> str | None:
    """load_test when the callers' records are a load generator's per-request results, client_records for a
    client's own logs, None without any."""
    cr = run.table("client_requests")
    if cr.height == 0 or "source" not in cr.columns:
        return None
    files = run.table("files")
    fmt = (
        dict(zip(files["path"].to_list(), files["format"].to_list(), strict=True))
        if {"path", "format"} <= set(files.columns)
        else {}
    )
    kinds = {fmt.get(s) for s in cr["source"].drop_nulls().unique().to_list()}
    return "load_test" if kinds & LOAD_TESTS else "client_records"


def timed(run: Run) -> pl.DataFrame:
    """The run's logical requests a time places, as analyze counts them (diagnose.untimed.timed): a request with no
    time is counted apart (g09: LiteLLM's uvicorn access line before any timed record counted among compare's
    requests and successes while analyze's outcomes left it out)."""
    r = run.table("requests")
    return r.filter(_untimed.timed()) if r.height and {"ts_start", "ts_end"} <= set(r.columns) else r


def untimed(run: Run) -> _untimed.Apart | None:
    """The run's logical requests with no time, counted apart (None: none)."""
    return _untimed.apart(run.table("requests"))


APART = "counted apart, as analyze counts them"


def untimed_notes(runs: list[Run]) -> list[str]:
    """A note per run with requests no time places: how many, read from which records, and that no figure here
    counts them."""
    return [
        f"{r.label}: {u.text}, {APART}: not among the requests, outcomes or latencies compared here"
        for r in runs
        if (u := untimed(r))
    ]


def untimed_said(*sides: dict) -> str:
    """Beside a count of requests: the requests with no time each side left out ('' when none)."""
    said = [
        f"{s}: {n:,} more with no time" for s, m in zip("AB", sides, strict=True) if (n := m.get("untimed"))
    ]
    return f"; {'; '.join(said)}, {APART}" if said else ""


def requests(run: Run) -> pl.DataFrame:
    """The logical requests a time places (``timed``) with ``latency_clock`` and ``latency_source`` (the
    correlation's columns when present, derived from the origin when not)."""
    r = timed(run)
    if r.height == 0 or "origin" not in r.columns:
        return r.with_columns(
            pl.lit(None, pl.String).alias("latency_clock"),
            pl.lit(None, pl.String).alias("latency_source"),
            pl.lit(None, pl.String).alias("stated_outcome"),
            pl.lit(None, pl.String).alias("stated_by"),
            pl.lit(None, pl.String).alias("stated_source"),
        )
    derived_clock = pl.col("origin").replace_strict(CLOCK_OF_ORIGIN, default=None, return_dtype=pl.String)
    client = client_source(run) or "client_records"
    derived_source = (
        pl.when(pl.col("origin") == "client")
        .then(pl.lit(client))
        .otherwise(pl.col("origin").replace_strict(SOURCE_OF_ORIGIN, default=None, return_dtype=pl.String))
    )
    clock = (
        pl.coalesce(pl.col("latency_clock"), derived_clock) if "latency_clock" in r.columns else derived_clock
    )
    source = (
        pl.coalesce(pl.col("latency_source"), derived_source)
        if "latency_source" in r.columns
        else derived_source
    )
    # each request's outcome and the record that stated it (analyze's own field: diagnose.stated), that record
    # named as a source: its row's (the caller's records, the gateway's log, the engine's own end)
    return stated.of(r, run.table("server_requests")).with_columns(
        clock.alias("latency_clock"),
        source.alias("latency_source"),
        pl.when(pl.col("stated_by").is_not_null()).then(source).alias("stated_source"),
    )


def client_source_of(r: pl.DataFrame) -> str | None:
    """The source of the callers' rows of a requests frame (with latency_source), None when none is the callers'."""
    c = r.filter(pl.col("latency_clock") == "client")["latency_source"].drop_nulls() if r.height else None
    return None if c is None or c.len() == 0 else str(c.mode().sort()[0])


def engine_spans(run: Run) -> pl.DataFrame:
    """The engine's request spans (vLLM's ``llm_request``): ts_start and its own queue, TTFT and e2e seconds;
    empty when the folder holds no traces."""
    s = run.table("spans")
    need = {"layer", "role", "start", "queue_s", "ttft_s", "e2e_s"}
    if s.height == 0 or not need <= set(s.columns):
        return pl.DataFrame(
            schema={
                "ts_start": pl.Datetime("us", "UTC"),
                "queue_s": pl.Float64,
                "ttft_s": pl.Float64,
                "e2e_s": pl.Float64,
            }
        )
    return (
        s.filter((pl.col("layer") == "engine") & (pl.col("role") == "request"))
        .select(pl.col("start").alias("ts_start"), "queue_s", "ttft_s", "e2e_s")
        .sort(["ts_start", "e2e_s", "ttft_s", "queue_s"], nulls_last=True)
    )


def between(df: pl.DataFrame, lo, hi, col: str = "ts_start") -> pl.DataFrame:
    """Rows whose ``col`` falls in [lo, hi) (both None: all)."""
    if lo is None or hi is None or df.height == 0:
        return df
    return df.filter((pl.col(col) >= lo) & (pl.col(col) < hi))


def titled(title: str, engine: str | None) -> str:
    """A title naming the engine whose records gave the figure ('SGLang executions per logical request'), or
    'engine' where the runs' engines differ or are unknown: a vLLM label on a TGI run's row named the wrong one."""
    return title.replace("{engine}", engine or "engine").replace(
        "{owner}", f"{engine}'s" if engine else "the engine's"
    )
