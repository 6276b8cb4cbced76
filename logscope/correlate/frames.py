"""The per-layer frames the correlation works on, built from the ingest tables.

Times are carried as float epoch seconds (``t0``/``t1``) inside the stage: clock offsets, as-of
tolerances and durations are then plain arithmetic. Every entity gets an integer key
(``ca`` client attempt, ``lr`` logical request, ``gr`` gateway request, ``ga`` gateway upstream
attempt, ``sr`` server execution) so links between layers are small integer tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from .. import schemas
from .client_sources import pick_client_sources
from .exprs import cumsum_after, cumsum_before, group_first, secs
from .ingest_tables import CLIENT_PICK

# gateway paths that never reach the model (bench /tokenize calls, scrapes, health checks)
NON_INFERENCE_PATH = r"^/(?:tokenize|detokenize|metrics|health|ping|version|v1/models|load|server_info)\b"
NON_INFERENCE_ENDPOINTS = ("tokenize",)
# where a client row's latencies come from, by its file's format (files.parquet): a load-test tool's per-request
# results, else the client's own records (its log, its JSON lines); a client-spans format adds itself here
LATENCY_SOURCE = {"vllm_bench": "load_test", "aiperf": "load_test", "guidellm": "load_test"}
# the callers' spans as the client's records (correlate/span_sources.py): their latencies are the spans'
LATENCY_SOURCE |= dict.fromkeys(
    ("otlp_json", "jaeger_json", "zipkin_json", "otel_console", "otel_debug"), "spans"
)
CLIENT_RECORDS = "client_records"


@dataclass
class Frames:
    """One frame per layer; each row keyed by its integer column (``ca``, ``lr``, ``ga``, ``gr``, ``sr``)."""

    client_attempts: pl.DataFrame  # key ca (and lr, its logical request)
    client_requests: pl.DataFrame  # client logical requests: key lr
    # gateway upstream attempts (one row per attempt, pseudo 'no live upstream' rows kept): key ga
    gateway_attempts: pl.DataFrame
    gateway_requests: pl.DataFrame  # gateway requests (one access-log line): key gr
    server_requests: pl.DataFrame  # server executions (vLLM requests, tokenize calls left out): key sr
    client_sources: list[str]
    dropped_client_sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ids_as_sent: dict[str, str] = field(default_factory=dict)  # logical_ids_as_sent's answer


# the raw request-level tables: build() takes them out of the dict it is given, each released once its
# frame is made (at a million requests each is near a gigabyte: holding them all with the frames sets the peak)
CONSUMED = ("client_attempts", "client_requests", "gateway_attempts", "server_requests")


def build(tabs: dict[str, pl.DataFrame], ids_as_sent: dict[str, str] | None = None) -> Frames:
    """The frames of the ingest tables in ``tabs``; the tables of CONSUMED are popped from it.

    ``ids_as_sent`` (source -> note) is the whole input's answer to ``logical_ids_as_sent`` for a time slice
    of it, whose few rows could answer otherwise."""
    pick = tabs.get(CLIENT_PICK)
    if pick is not None:  # decided by read_tables
        keep = pick.filter(pl.col("kept"))["source"].to_list()
        dropped = dict(pick.filter(~pl.col("kept")).select("source", "why").iter_rows())
    else:
        keep, dropped = pick_client_sources(tabs["client_attempts"], tabs["client_requests"])
    ca = _client_attempts(tabs.pop("client_attempts").filter(pl.col("source").is_in(keep)))
    cr = _client_requests(tabs.pop("client_requests").filter(pl.col("source").is_in(keep)), ca)
    cr = cr.with_columns(_latency_source(tabs.get("files")).alias("latency_source"))
    ca = ca.join(
        cr.select("source", "logical_request_id", "lr"), on=["source", "logical_request_id"], how="left"
    )
    ca = _left_unfinished(ca, cr)
    ga, gr = _gateway(tabs.pop("gateway_attempts"))
    sr = _server(tabs.pop("server_requests"))
    if ids_as_sent is None:
        ids_as_sent = logical_ids_as_sent(ca, gr, sr)
    if ids_as_sent:
        ca = ca.with_columns(
            pl.when(pl.col("source").is_in(list(ids_as_sent)))
            .then(pl.col("logical_request_id"))
            .otherwise(pl.col("request_id"))
            .alias("request_id")
        )
    return Frames(ca, cr, ga, gr, sr, keep, dropped, list(ids_as_sent.values()), dict(ids_as_sent))


def _latency_source(files: pl.DataFrame | None) -> pl.Expr:
    """Each client row's ``latency_source`` (LATENCY_SOURCE), from its file's format."""
    fmt = {}
    if files is not None and {"path", "format"} <= set(files.columns):
        fmt = {
            p: LATENCY_SOURCE.get(f, CLIENT_RECORDS) for p, f in files.select("path", "format").iter_rows()
        }
    return pl.col("source").replace_strict(fmt, default=pl.lit(CLIENT_RECORDS), return_dtype=pl.String)


def _left_unfinished(ca: pl.DataFrame, cr: pl.DataFrame) -> pl.DataFrame:
    """``left_unfinished``: for the last attempt of an unfinished request (the one in flight), when its caller
    left, i.e. the last time its client's log recorded anything (a killed client leaves when its log stops). In
    a time slice that is the slice's last record of the client: a later bound, never an earlier one."""
    unf = cr.filter(pl.col("unfinished").fill_null(False))["lr"]
    if unf.len() == 0:
        return ca.with_columns(pl.lit(None, pl.Float64).alias("left_unfinished"))
    last = ca.group_by("source").agg(pl.max_horizontal("t0", "t1").max().alias("_last"))
    final = ca.filter(pl.col("lr").is_in(unf.implode())).sort("lr", "t0", "ca").unique("lr", keep="last")
    final = final.select("ca", pl.lit(True).alias("_final"))
    return (
        ca.join(last, on="source", how="left")
        .join(final, on="ca", how="left")
        .with_columns(pl.when(pl.col("_final")).then(pl.col("_last")).alias("left_unfinished"))
        .drop("_last", "_final")
    )


def logical_ids_as_sent(ca: pl.DataFrame, gr: pl.DataFrame, sr: pl.DataFrame) -> dict[str, str]:
    """A client log that names its logical requests but not the X-Request-Id it sent (the openai DEBUG
    log plus the app's own 'request <id> done' lines): when most of those names are ids the gateway
    (or vLLM) logged, the client evidently sent them as X-Request-Id, and they are used as such.
    Returns those sources, each with its note."""
    no_ids = ca.filter(pl.col("request_id").is_null().all().over("source"))
    if (
        no_ids.height == 0
    ):  # every source names its X-Request-Ids (the ids seen are millions on a day's folder)
        return {}
    seen = pl.concat([gr["client_request_id"].drop_nulls(), sr["base_request_id"].drop_nulls()]).unique()
    if seen.len() == 0:
        return {}
    share = (
        no_ids.group_by("source")
        .agg(pl.col("logical_request_id").drop_nulls().unique().is_in(seen.implode()).mean().alias("share"))
        .filter(pl.col("share") >= 0.5)
        .sort("source")
    )
    return {
        r["source"]: f"{r['source']} logs no X-Request-Id, but {r['share']:.0%} of its logical request ids "
        "appear as ids in the gateway/vLLM logs: they are matched as the ids it sent"
        for r in share.iter_rows(named=True)
    }


def _client_attempts(ca: pl.DataFrame) -> pl.DataFrame:
    return (
        ca.select(
            "source",
            "client",
            "request_id",
            "attempt",
            "status",
            "error",
            "timed_out",
            "ttft_s",
            "prompt_tokens",
            "max_tokens",
            "output_tokens",
            "concurrency",
            "ts_start",
            "ts_end",
            *[c for c in ("retry_delay_s",) if c in ca.columns],  # proposed column: the logged backoff
            secs("ts_start").alias("t0"),
            secs("ts_end").alias("t1"),
            pl.coalesce("logical_request_id", "request_id").alias("logical_request_id"),
        )
        .sort(["source", "t0"], nulls_last=True)
        .with_row_index("ca")
        .with_columns(pl.col("ca").cast(pl.Int64))
    )


def _client_requests(cr: pl.DataFrame, ca: pl.DataFrame) -> pl.DataFrame:
    """Logical requests: the client's own records, plus any logical id seen only in attempts."""
    from_attempts = (
        ca.filter(pl.col("logical_request_id").is_not_null())
        .sort("t0")
        .group_by(["source", "logical_request_id"])
        .agg(
            pl.col("client").first(),
            pl.col("ts_start").min(),
            pl.col("ts_end").max(),
            pl.col("status").drop_nulls().last(),
            pl.col("error").last(),
            pl.col("timed_out").last(),
            pl.len().alias("attempts"),
            pl.col("ttft_s").drop_nulls().last(),
            pl.col("prompt_tokens").drop_nulls().first(),
            pl.col("max_tokens").drop_nulls().first(),
            pl.col("output_tokens").drop_nulls().last(),
            pl.col("concurrency").drop_nulls().first(),
        )
    )
    own = schemas.conform(cr, "client_requests")
    extra = from_attempts.join(
        own.select("source", "logical_request_id"), on=["source", "logical_request_id"], how="anti"
    )
    # an id a client logged attempts for and no record of, from a client that writes records: its log ended
    # with it in flight (the client was stopped or killed): unfinished, never 'ok' by its headers' 200
    writes = own["source"].drop_nulls().unique().implode()
    # a record its parser marks in flight when the log ended (the openai DEBUG log's sends with no outcome), or
    # an id seen only in attempts of a source that writes records: unfinished, whatever the client's log kind
    both = pl.concat(
        [
            own.with_columns(pl.col("unfinished").fill_null(False)),
            schemas.conform(extra, "client_requests").with_columns(
                pl.col("source").is_in(writes).alias("unfinished")
            ),
        ]
    )
    return (
        both.with_columns(secs("ts_start").alias("t0"), secs("ts_end").alias("t1"))
        .sort(["t0", "source", "logical_request_id"], nulls_last=True)
        .with_row_index("lr")
        .with_columns(pl.col("lr").cast(pl.Int64))
    )


def _gateway(g: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Attempt rows and one row per gateway request (an access-log line: source + line number). A proxy's lines
    apart from its access lines (``schemas.gateway_apart``) stay in the table and out of the requests."""
    ga = (
        g.filter(~schemas.gateway_apart())
        .with_columns(secs("ts_start").alias("t0"), secs("ts_end").alias("t1"))
        .with_columns(
            pl.col("line_no").fill_null(pl.int_range(pl.len()) + 1),
        )
    )
    # nginx keeps the group name with a 502 when no server could be selected: no upstream attempt at all
    pseudo = pl.col("flags").fill_null("").str.contains("no_live_upstreams") | (
        pl.col("upstream").is_not_null()
        & ~pl.col("upstream").str.contains(":")
        & (pl.col("upstream_status") == 502)
        & pl.col("connect_s").is_null()
    )
    # an attempt reached a server when a connection was made (nginx logs '-' connect time otherwise)
    connect_known = pl.col("connect_s").is_not_null().any().over("source")
    reached = ~pseudo & pl.when(connect_known).then(pl.col("connect_s").is_not_null()).otherwise(
        pl.col("upstream_status").fill_null(0) != 502
    )
    ga = (
        ga.sort(["source", "line_no", "attempt"])
        .with_columns(group_first("source", "line_no").alias("_first"))
        # numbered in row order, so sorted: flagged so, the group-by below takes each request's rows as a slice
        # (10 M attempts: 4.2-5.0 -> 2.1-3.0 s for this function)
        .with_columns((pl.col("_first").cum_sum().cast(pl.Int64) - 1).set_sorted().alias("gr"))
        .with_columns(
            pseudo.alias("pseudo"),
            reached.alias("reached"),
            # attempts run one after another, and the gateway logs the request when its last one ends: an attempt
            # ends at the request's end less the later attempts' upstream times, never before the request's
            # start plus its own and the earlier ones' (the time nginx spends outside upstreams, reading the
            # request body, lies before them: anchored at the start, a line that first tried a dead upstream
            # ended 0.6 s early)
            pl.max_horizontal(
                pl.col("t1") - cumsum_after(pl.col("duration_s").fill_null(0)),
                pl.col("t0")
                + cumsum_before(pl.col("duration_s").fill_null(0))
                + pl.col("duration_s").fill_null(0),
            ).alias("_end"),
        )
        .with_columns(pl.min_horizontal("_end", "t1").alias("a1"), pl.col("t1").alias("gr_t1"))
        .with_columns((pl.col("a1") - pl.col("duration_s").fill_null(0)).alias("a0"))
        .drop("_first", "_end")
        .with_row_index("ga")
        .with_columns(pl.col("ga").cast(pl.Int64))
    )
    gr = (
        ga.group_by("gr")
        .agg(
            pl.col("source").first(),
            pl.col("gateway").first(),
            pl.col("t0").min(),
            pl.col("t1").max(),
            pl.col("request_id").first(),
            pl.col("client_request_id").first(),
            pl.col("client_retry").first(),
            pl.col("status").first(),
            pl.col("method").first(),
            pl.col("path").first(),
            pl.col("request_time_s").first(),
            pl.col("bytes_sent").first(),
            pl.col("header_s").filter(pl.col("reached")).last().alias("header_s"),
            (~pl.col("pseudo")).sum().cast(pl.Int64).alias("n_attempts"),
            pl.col("reached").sum().cast(pl.Int64).alias("n_reached"),
            pl.col("line_no").first(),
            # the log gives the request's span (nginx's $request_time, an attempt's duration): a uvicorn answer
            # line of a proxy has one time only, where t1 - t0 = 0 s is no latency
            (
                pl.col("request_time_s").is_not_null().any()
                | pl.col("duration_s").is_not_null().any()
                | (pl.col("t1").max() > pl.col("t0").min())
            ).alias("spanned"),
        )
        .with_columns(
            (
                pl.col("path").fill_null("").str.contains(NON_INFERENCE_PATH)
                | (pl.col("method").fill_null("POST") == "GET")
            )
            .not_()
            .alias("inference")
        )
        .with_columns(  # what a request that is no inference call was ("GET /"), named beside the counts that leave it out
            pl.when(~pl.col("inference"))
            .then(pl.concat_str(pl.col("method").fill_null("?"), pl.lit(" "), pl.col("path").fill_null("?")))
            .alias("other_call")
        )
        .sort("gr")
    )
    # what the stage reads of an attempt once its request's row is made: the attempts are copied whole
    # by several joins, and at two million of them every column left behind is ~16 MB per copy
    return ga.select(GA_COLUMNS), gr


GA_COLUMNS = (
    "ga",
    "gr",
    "source",
    "attempt",
    "upstream",
    "upstream_status",
    "duration_s",
    "error",
    "pseudo",
    "reached",
    "t0",
    "t1",
    "a0",
    "a1",
    "gr_t1",
)


def _server(s: pl.DataFrame) -> pl.DataFrame:
    sr = s.filter(~pl.col("endpoint").fill_null("").is_in(NON_INFERENCE_ENDPOINTS))
    return (
        sr.with_columns(
            secs("received_ts").alias("received"),
            secs("added_ts").alias("added"),
            secs("finished_ts").alias("finished"),
            secs("aborted_ts").alias("aborted"),
            secs("failed_ts").alias("failed"),
        )
        .with_columns(pl.coalesce("received", "added").alias("t0"))
        .with_row_index("_order")  # log order (derive writes server_requests in it): keeps ties in order
        .sort(["t0", "_order"], nulls_last=True)
        .drop(
            "_order",
            "received_ts",
            "added_ts",
            "finished_ts",
            "aborted_ts",
            "failed_ts",
            "prompt",
            "endpoint",
            strict=False,
        )
        .with_row_index("sr")
        .with_columns(pl.col("sr").cast(pl.Int64))
    )


def whole_seconds(df: pl.DataFrame | pl.LazyFrame, col: str) -> dict[str, float]:
    """Per source: 1.0 when every stamp of ``col`` is a whole second (vLLM logs), else 0.0. A lazy frame is
    aggregated as it is scanned (the whole input's, for a time slice)."""
    res = (
        df.filter(pl.col(col).is_not_null())
        .group_by("source")
        .agg(((pl.col(col) % 1).abs() < 1e-6).all().alias("whole"))
    )
    if isinstance(res, pl.LazyFrame):
        res = res.collect(engine="streaming")
    return {r["source"]: (1.0 if r["whole"] else 0.0) for r in res.iter_rows(named=True)}


def fill_timeouts(F: Frames) -> Frames:
    """A timed-out attempt the client log gives no end for ended at send + the client's timeout setting."""
    if F.client_attempts.height == 0:
        return F
    F.client_attempts = (
        F.client_attempts.join(F.client_requests.select("lr", "timeout_s"), on="lr", how="left")
        .with_columns(
            pl.when(pl.col("t1").is_null() & pl.col("timed_out").fill_null(False))
            .then(pl.col("t0") + pl.col("timeout_s"))
            .otherwise(pl.col("t1"))
            .alias("t1")
        )
        .drop("timeout_s")
    )
    return F
