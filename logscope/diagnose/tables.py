"""Reading the ingest/correlation tables and shaping the windows the diagnosis works on (the server's series:
``server_series``).

Everything here degrades: a missing or empty table gives an empty frame with the declared
schema, so a folder holding one vLLM excerpt (no client, no gateway, no correlation) still yields
server series, and the request-level series come from whatever layer is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .. import schemas
from ..parsers.openai_client import PHASE_ANCHORING
from ..resources import time_range
from ..resources.time_range import Range
from .server_series import preemption_series, server_series
from .undated import mtime_anchored

# max/mean of the server's state over a span: episodes, steps and windows use the same figures
SERVER_STATE_AGGS = (
    pl.col("running").max().cast(pl.Float64).alias("running_max"),
    pl.col("running").mean().alias("running_mean"),
    pl.col("waiting").max().cast(pl.Float64).alias("waiting_max"),
    pl.col("waiting").mean().alias("waiting_mean"),
    pl.col("kv").max().alias("kv_max"),
    pl.col("kv").mean().alias("kv_mean"),
)

TS = schemas.TS
OUTCOME_OK = "ok"
# the outcomes of a request that failed: a truncated answer (logged 2xx, then cut or failed mid-stream) is one
FAILED_OUTCOMES = ("error", "timeout", "truncated")


# the columns the diagnosis reads of the request-level tables: at a million requests the others (ids,
# prompts, user agents, URLs, messages) are most of their memory (5 GB bench folder: 2.2 -> 0.89 GB of RSS once loaded)
COLUMNS = {
    "server_requests": (
        "replica",
        "endpoint",
        "received_ts",
        "added_ts",
        "finished_ts",
        "aborted_ts",
        "failed_ts",
        "max_tokens",
        "prompt_tokens",
        "preempted",
    ),
    "gateway_attempts": (
        "ts_start",
        "ts_end",
        "attempt",
        "attempts_total",
        "status",
        "upstream",
        "upstream_status",
        "gateway",  # whose count attempts_total is (retry_spread.stated)
        "flags",  # a proxy's lines apart from its access lines are no requests (schemas.gateway_apart)
        "method",  # an access line names its request, a proxy's line apart from it does not
        # the gateway's own clock for the clock gap (clockgap.at_gateway): one access line = one request
        "source",
        "line_no",
        "request_time_s",
        "duration_s",
        "header_s",  # null: no response header came (an upstream that never answered, findings/errors.py)
    ),
    "gateway_errors": ("ts", "source", "kind", "upstream", "line_no"),  # line_no: an untimed stop's place
}
# vLLM's uvicorn access lines are nearly all of server_events (one per request): they are kept apart,
# with the few columns read of them, from the other events (starts, deaths, capacity, preemptions)
ACCESS = "http_access"
# events kept whatever the time range: what the server was (capacity, config, version) and when it
# started, became ready or stopped (a death in the range is told from the start before it)
CONTEXT_KINDS = (
    "capacity",
    "config",
    "version",
    "server_start",
    "server_ready",
    "server_listen",
    "server_stop",
)
ACCESS_COLUMNS = ("ts", "ts_inferred", "replica", "kind", "pid", "seq", "http_status")


# string columns of a few values, held as categories where nothing joins or stacks them with strings (5 GB
# bench folder: gateway_errors 150 -> 47 MB, gateway_attempts 121 -> 105 MB)
CATEGORIES = {
    "gateway_errors": ("source", "kind", "upstream"),
    "gateway_attempts": ("upstream", "gateway", "flags"),
}


def read(
    out: Path,
    name: str,
    columns: tuple[str, ...] | None = None,
    where: pl.Expr | None = None,
    rng: Range = time_range.ALL,
) -> pl.DataFrame:
    """A table as declared (only ``columns`` of it, only rows ``where`` and in the time range ``rng``); empty
    when absent or unreadable."""
    p = out / f"{name}.parquet"
    empty = schemas.empty(name).select(columns) if columns else schemas.empty(name)
    if not p.exists():
        return empty
    try:
        lf = time_range.scan(out, name, rng)
        lf = lf.filter(where) if where is not None else lf
        lf = lf.select(columns) if columns else lf
        cats = [c for c in CATEGORIES.get(name, ()) if c in (columns or lf.collect_schema().names())]
        return lf.with_columns(pl.col(cats).cast(pl.Categorical)).collect()
    except Exception:  # noqa: BLE001 - a half-written table must not stop the diagnosis
        return empty


@dataclass
class Inputs:
    stats: pl.DataFrame
    events: pl.DataFrame  # server events but the access lines
    # vLLM's uvicorn access lines (ACCESS_COLUMNS); with correlated windows only their distinct ts, ts_inferred
    # and replica (a million lines are a few hundred thousand seconds)
    access: pl.DataFrame
    server_requests: pl.DataFrame  # COLUMNS["server_requests"]
    requests: pl.DataFrame  # one row per logical request, from the best layer present
    requests_origin: str  # correlated | client | server | gateway | none
    windows: pl.DataFrame
    window_s: float
    windows_origin: str  # correlated | built
    phases: pl.DataFrame
    gateway: pl.DataFrame  # COLUMNS["gateway_attempts"]
    gateway_errors: pl.DataFrame  # COLUMNS["gateway_errors"]
    rng: Range = time_range.ALL  # the time range examined (logscope.resources.time_range)
    access_lines: int = 0  # how many access lines there are
    # the server's 404 answers on the inference paths (access lines: ts, replica, http_path), few in any run
    not_found: pl.DataFrame | None = None
    access_served: int = 0  # access lines of a POST answered 2xx (generations served)
    load_tests: pl.DataFrame | None = None  # a load-test tool's summaries (findings/load_tests.py)
    untimed: object | None = None  # untimed.Untimed: the records no time places (set by diagnose.run)
    undated: tuple[str, ...] = ()  # files timed only by their modification time (undated.mtime_anchored)


def load(out: Path, window: str | None = None, rng: Range = time_range.ALL) -> Inputs:
    """The inputs of the diagnosis; with a range, only the records that overlap it (``logscope.resources.time_range``)."""
    stats = read(out, "server_stats", rng=rng).filter(pl.col("ts").is_not_null())
    in_range = time_range.where("server_events", rng)
    if (
        in_range is not None
    ):  # and the server's set-up and starts outside it (capacity; whose death is inside)
        in_range = in_range | pl.col("kind").is_in(CONTEXT_KINDS)
    events = read(
        out,
        "server_events",
        where=pl.col("kind").ne_missing(ACCESS) & (in_range if in_range is not None else True),
    )
    win = read(out, "windows", rng=rng).filter(pl.col("ts").is_not_null())
    correlated = bool(win.height and win["window_s"].drop_nulls().len())
    is_access = pl.col("kind") == ACCESS
    access_lines, access_served = (
        time_range.scan(out, "server_events", rng)
        .filter(is_access)
        .select(
            pl.len(),
            # a POST answered 2xx: a generation served (not a GET of /v1/models or /health)
            ((pl.col("http_method") == "POST") & pl.col("http_status").is_between(200, 299)).sum(),
        )
        .collect()
        .row(0)
        if (out / "server_events.parquet").exists()
        else (0, 0)
    )
    if correlated:  # only when and where the server logged is read of them: one row per replica and second
        access = read(out, "server_events", ("ts", "ts_inferred", "replica"), is_access, rng).unique(
            maintain_order=True
        )
    else:  # the windows are built from them
        access = read(out, "server_events", ACCESS_COLUMNS, is_access, rng)
    not_found = read(
        out,
        "server_events",
        ("ts", "replica", "http_path"),
        is_access
        & (pl.col("http_status") == 404)
        & pl.col("http_path").str.contains(r"^/v1/(?:chat/)?completions\b"),
        rng,
    )
    sreq = read(out, "server_requests", COLUMNS["server_requests"], rng=rng)
    requests, origin = _requests(out, sreq, rng)
    gateway = read(out, "gateway_attempts", COLUMNS["gateway_attempts"], rng=rng)
    gw_err = read(out, "gateway_errors", COLUMNS["gateway_errors"], rng=rng)
    phases = read(out, "client_phases", rng=rng).filter(
        pl.col("ts_start").is_not_null() & pl.col("ts_end").is_not_null()
    )
    # one phase can be described by two files of the same client (its log and its JSON lines): keep one file's
    # rows throughout (one that records its ends, then the one describing most phases, then by name), never by
    # which stamp is a microsecond earlier (ladder-b's last step came from the JSON lines, the others from the
    # log: two clients, a step lost), nor by the files' names (renamed, traced-2r-kill's log came first and its
    # extended phase ended at its stated 180 s, 3 min early)
    stated = (
        (pl.col("anchoring") == PHASE_ANCHORING).fill_null(False)
        if "anchoring" in phases.columns
        else pl.lit(False)
    )
    phases = (
        phases.with_columns(
            pl.col("ts_start").dt.truncate("1s").alias("_s"),
            pl.len().over("source").alias("_n"),
            stated.any().over("source").alias("_stated"),
        )
        .sort(["_s", "_stated", "_n", "source", "phase"], descending=[False, False, True, False, False])
        .unique(subset=["_s", "value", "mode"], keep="first", maintain_order=True)
        .drop("_s", "_n", "_stated")
        .sort(["ts_start", "source", "phase"])
    )
    if correlated:
        window_s = float(win["window_s"].drop_nulls()[0])
        w_origin = "correlated"
    else:
        window_s = _window_s(window, stats, requests)
        win = build_windows(window_s, stats, requests, gateway, access)
        w_origin = "built"
    return Inputs(
        stats,
        events,
        access,
        sreq,
        requests,
        origin,
        win.sort("ts"),
        window_s,
        w_origin,
        phases,
        gateway,
        gw_err,
        rng,
        access_lines,
        not_found,
        int(access_served or 0),
        read(out, "load_tests"),
        undated=tuple(mtime_anchored(read(out, "files", ("path", "assumptions")))),
    )


def _requests(out: Path, sreq: pl.DataFrame, rng: Range) -> tuple[pl.DataFrame, str]:
    """Logical requests: the correlated table, else the client's, else vLLM's own Received lines."""
    cols = [
        "ts_start",
        "ts_end",
        "outcome",
        "ttft_s",
        "e2e_s",
        "prompt_tokens",
        "max_tokens",
        "output_tokens",
        "phase",
        "concurrency",
        "client_attempts",
        "gateway_attempts",
        "server_requests",
        "orphaned_executions",
        "orphan_s",
        "status",
        "origin",
        "latency_clock",
        "latency_source",
        "mid_stream",
        "mid_stream_evidence",
        "upstream_status",
    ]  # origin: which layer a row's latencies come from (histograms.request_source); the clock and source of
    # its ttft_s / e2e_s (latency_named.py names them beside every latency)
    req = read(out, "requests", tuple(cols), pl.col("ts_start").is_not_null(), rng)
    if req.height:
        return req.sort("ts_start"), "correlated"
    cr = read(out, "client_requests", rng=rng).filter(pl.col("ts_start").is_not_null())
    if cr.height:
        outcome = (
            pl.when(pl.col("timed_out").fill_null(False))
            .then(pl.lit("timeout"))
            .when(pl.col("error").is_not_null() | (pl.col("status") >= 400))
            .then(pl.lit("error"))
            .when(pl.col("status").is_between(200, 299))
            .then(pl.lit(OUTCOME_OK))
            .otherwise(pl.lit("unknown"))
        )
        df = cr.with_columns(
            outcome.alias("outcome"),
            pl.col("attempts").alias("client_attempts"),
            pl.lit(None, pl.Int64).alias("gateway_attempts"),
            pl.lit(None, pl.Int64).alias("server_requests"),
            pl.lit(None, pl.Int64).alias("orphaned_executions"),
            pl.lit(None, pl.Float64).alias("orphan_s"),
            pl.lit("client").alias("origin"),
            pl.lit("client").alias(
                "latency_clock"
            ),  # the client's own rows: its clock; the kind of log unsaid
            pl.lit(None, pl.String).alias("latency_source"),
            pl.lit(None, pl.String).alias("mid_stream"),
            pl.lit(None, pl.String).alias("mid_stream_evidence"),
            pl.lit(None, pl.Int64).alias("upstream_status"),
        )
        return df.select(cols).sort("ts_start"), "client"
    sr = sreq.filter(pl.col("endpoint").is_in(["completion", "chat", "other"]) | pl.col("endpoint").is_null())
    sr = sr.with_columns(
        pl.coalesce("received_ts", "added_ts", "finished_ts", "aborted_ts", "failed_ts").alias("ts_start")
    ).filter(pl.col("ts_start").is_not_null())
    if sr.height:
        df = sr.with_columns(
            pl.coalesce("finished_ts", "aborted_ts", "failed_ts").alias("ts_end"),
            # an abort is the caller leaving: not an outcome vLLM can judge; a request it failed is an error
            pl.when(pl.col("failed_ts").is_not_null() & pl.col("finished_ts").is_null())
            .then(pl.lit("error"))
            .otherwise(pl.lit("unknown"))
            .alias("outcome"),
            *[pl.lit(None, pl.Float64).alias(c) for c in ("ttft_s", "e2e_s")],
            *[
                pl.lit(None, pl.Int64).alias(c)
                for c in (
                    "output_tokens",
                    "concurrency",
                    "client_attempts",
                    "gateway_attempts",
                    "orphaned_executions",
                    "status",
                    "upstream_status",
                )
            ],
            pl.lit(None, pl.String).alias("phase"),
            pl.lit(None, pl.Float64).alias("orphan_s"),
            pl.lit(1, pl.Int64).alias("server_requests"),
            pl.lit("server").alias("origin"),
            *[
                pl.lit(None, pl.String).alias(c)
                for c in ("latency_clock", "latency_source", "mid_stream", "mid_stream_evidence")
            ],
        )
        return df.select(cols).sort("ts_start"), "server"
    empty = pl.DataFrame(schema={c: schemas.TABLES["requests"][c][0] for c in cols})
    return empty, "none"


_STEPS = (5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def _window_s(window: str | None, stats: pl.DataFrame, requests: pl.DataFrame) -> float:
    """Window width: the user's (``10s``, ``1m``), else about span/100 snapped to a round value, at least 5 s."""
    if window:
        w = window.strip().lower()
        mult = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        for suf in ("ms", "s", "m", "h"):
            if w.endswith(suf):
                try:
                    return max(float(w[: -len(suf)]) * mult[suf], 0.001)
                except ValueError:
                    break
    lo, hi = span(stats, requests)
    if lo is None:
        return 10.0
    target = (hi - lo).total_seconds() / 100
    return next((s for s in _STEPS if s >= target), _STEPS[-1])


def span(stats: pl.DataFrame, requests: pl.DataFrame):
    """Observed span: from the first to the last stats line or request (startup chatter excluded)."""
    ts = pl.concat(
        [
            stats.select(pl.col("ts").alias("t")),
            requests.select(pl.col("ts_start").alias("t")),
            requests.select(pl.col("ts_end").alias("t")),
        ]
    ).drop_nulls()
    if ts.height == 0:
        return None, None
    return ts["t"].min(), ts["t"].max()


def build_windows(
    window_s: float, stats: pl.DataFrame, requests: pl.DataFrame, gateway: pl.DataFrame, access: pl.DataFrame
) -> pl.DataFrame:
    """A reduced ``windows`` table when the correlation stage left none: server state per window from
    server_stats, request figures from the best request layer, gateway 5xx from its access log (or
    the uvicorn access lines of vLLM itself).

    Why this is not ``correlate.windows.build`` over other frames: that one has what only a correlation
    gives, and this cannot: executions with their ends (in flight integrated over time, orphans counted in
    every window they touch), completions and errors at their end time, per-replica server state summed
    (KV pooled), empty windows kept. Here each request is one row at its start (no end is known for a
    server-only folder), the server state is aggregated across replicas' samples, and in flight is the
    mean 'Running:'. Sharing one helper would give one of them the other's wrong answers; the aggregates
    both do compute (SERVER_STATE_AGGS, the quantiles of diagnose.figures) are shared already."""
    every = f"{int(round(window_s * 1e6))}us"
    frames = []
    st = server_series(stats)
    if st.height:
        frames.append(
            st.group_by_dynamic("ts", every=every, group_by=None).agg(
                *SERVER_STATE_AGGS,
                pl.col("running").mean().alias("inflight_server"),
            )
        )
        pre = preemption_series(stats)
        if pre.height:
            frames.append(pre.sort("ts").group_by_dynamic("ts", every=every).agg(pl.col("preemptions").sum()))
    if requests.height:
        r = requests.sort("ts_start").rename({"ts_start": "ts"})
        frames.append(
            r.group_by_dynamic("ts", every=every).agg(
                pl.len().cast(pl.Int64).alias("arrivals"),
                (pl.col("outcome") == OUTCOME_OK).sum().cast(pl.Int64).alias("completions"),
                (pl.col("outcome") == "error").sum().cast(pl.Int64).alias("errors"),
                (pl.col("outcome") == "timeout").sum().cast(pl.Int64).alias("timeouts"),
                (pl.col("client_attempts").fill_null(1) - 1)
                .clip(0)
                .sum()
                .cast(pl.Int64)
                .alias("client_retries"),
                pl.col("ttft_s").quantile(0.5).alias("ttft_p50"),
                pl.col("ttft_s").quantile(0.95).alias("ttft_p95"),
                pl.col("e2e_s").quantile(0.5).alias("e2e_p50"),
                pl.col("e2e_s").quantile(0.95).alias("e2e_p95"),
                pl.col("prompt_tokens").mean().alias("prompt_tokens_mean"),
                pl.col("max_tokens").mean().alias("max_tokens_mean"),
                pl.col("output_tokens").mean().alias("output_tokens_mean"),
                pl.col("orphaned_executions").sum().cast(pl.Int64).alias("orphaned"),
            )
        )
    gw = gateway.filter(pl.col("ts_end").is_not_null() & schemas.gateway_request_row())
    if gw.height:
        frames.append(
            gw.sort("ts_end")
            .rename({"ts_end": "ts"})
            .group_by_dynamic("ts", every=every)
            .agg(
                (pl.col("status") >= 500).sum().cast(pl.Int64).alias("gateway_5xx"),
                (pl.col("status") == 499).sum().cast(pl.Int64).alias("gateway_499"),
                (pl.col("attempts_total").fill_null(1) - 1)
                .clip(0)
                .sum()
                .cast(pl.Int64)
                .alias("gateway_retries"),
            )
        )
    else:
        acc = access.filter(pl.col("ts").is_not_null())
        if acc.height:
            frames.append(
                acc.sort("ts")
                .group_by_dynamic("ts", every=every)
                .agg((pl.col("http_status") >= 500).sum().cast(pl.Int64).alias("gateway_5xx"))
            )
    out = schemas.empty("windows")
    if not frames:
        return out
    merged = frames[0]
    for f in frames[1:]:
        merged = merged.join(f, on="ts", how="full", coalesce=True)
    merged = merged.with_columns(pl.lit(window_s).alias("window_s"))
    return schemas.conform(merged, "windows").sort("ts")
