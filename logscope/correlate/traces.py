"""Spans joined to the logical requests the logs rebuilt: ``request_spans.parquet`` and correlation.json's
``traces``.

A trace joins its logical request by what the logs carry of it, in this order: the trace id a client record
names (the traced lab client's attempts), the trace id in the ``traceparent`` the gateway logged
(``$http_traceparent``), and the engine span's ``gen_ai.request.id`` against the X-Request-Id the gateway sent
upstream (vLLM names requests ``cmpl-<X-Request-Id>-0-<8 hex>``) or the client's own. Inside a trace, the
engine span's parent is the client attempt that carried the ``traceparent`` (the parent/child link). The row
says which joined it (``joined_by``).

Per logical request: the engine span's queue, prefill, decode, TTFT and e2e (clock ``engine``, source
``spans``), the client attempt spans' statuses and resend counts (clock ``client``, source ``spans``), the time
from the attempt's start to its engine span's start (gateway + API server + network, across two hosts' clocks),
and for client attempts with no engine span, the likely reason the logs support: never reached an engine (the
gateway answered without an upstream reply) or reached one whose spans were lost (vLLM exports spans in
batches every 5 s: a process killed loses the last batch), with the evidence.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .. import schemas
from ..resources import time_range
from . import span_gaps, span_skew

_TP = r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$"


def _read(out: Path, name: str, cols: list[str]) -> pl.DataFrame:
    p = out / f"{name}.parquet"
    if not p.exists():
        return schemas.empty(name).select(cols) if name in schemas.TABLES else pl.DataFrame()
    have = pl.read_parquet_schema(p)
    return pl.read_parquet(p, columns=[c for c in cols if c in have]).with_columns(
        [
            pl.lit(None, schemas.schema(name)[c]).alias(c)
            for c in cols
            if c not in have and name in schemas.TABLES
        ]
    )


def run(out: Path, rng: time_range.Range = time_range.ALL) -> dict | None:
    """Write ``request_spans.parquet`` when the folder has spans (those overlapping the range); the summary for
    correlation.json."""
    out = Path(out)
    if not (out / "spans.parquet").exists():
        return None
    spans = time_range.scan(out, "spans", rng).collect()
    if spans.height == 0:
        return None
    tabs = {
        "requests": _read(
            out,
            "requests",
            [
                "logical_request_id",
                "ts_start",
                "ts_end",
                "status",
                "outcome",
                "ttft_s",
                "e2e_s",
                "latency_clock",
                "latency_source",
            ],
        ),
        "client_attempts": _read(
            out,
            "client_attempts",
            ["logical_request_id", "request_id", "attempt", "trace_id", "span_id", "error", "timed_out"],
        ),
        "gateway_attempts": _read(
            out,
            "gateway_attempts",
            [
                "request_id",
                "client_request_id",
                "attempt",
                "traceparent",
                "status",
                "upstream_status",
                "upstream",
                "flags",
                "ts_start",
                "ts_end",
                "header_s",
                "source",
            ],
        ),
        "server_requests": _read(
            out,
            "server_requests",
            [
                "request_id",
                "base_request_id",
                "replica",
                "received_ts",
                "aborted_ts",
                "finished_ts",
                "failed_ts",
            ],
        ),
        "server_events": _read(out, "server_events", ["ts", "replica", "kind", "ts_inferred"]),
        "server_stats": _read(out, "server_stats", ["ts", "replica", "origin"]),
        "gateway_errors": _read(out, "gateway_errors", ["ts", "kind", "upstream"]),
    }
    table, summ = build(spans, tabs)
    schemas.conform(table, "request_spans").write_parquet(out / "request_spans.parquet")
    return summ


def _trace_keys(spans: pl.DataFrame, t: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """(trace_id, lr, how): every way a trace names a logical request."""
    ca, ga = t["client_attempts"], t["gateway_attempts"]
    lr_of_xid = (
        pl.concat(  # an X-Request-Id the gateway saw -> the client's logical request
            [
                ca.select(pl.col("request_id").alias("xid"), pl.col("logical_request_id").alias("lr")),
                t["requests"].select(
                    pl.col("logical_request_id").alias("xid"), pl.col("logical_request_id").alias("lr")
                ),
            ]
        )
        .drop_nulls()
        .unique("xid")
    )
    by_client = ca.select(
        "trace_id", pl.col("logical_request_id").alias("lr"), pl.lit("trace_id (client)").alias("how")
    )
    gw = ga.select(
        pl.col("traceparent").str.extract(_TP, 1).alias("trace_id"),
        pl.col("client_request_id").alias("xid"),
        pl.col("request_id").alias("gw_id"),
    )
    by_gw = gw.join(lr_of_xid, on="xid", how="inner").select(
        "trace_id", "lr", pl.lit("trace_id (gateway)").alias("how")
    )
    # the engine span's request id: the X-Request-Id the gateway sent upstream ($request_id), else the client's
    eng = spans.filter((pl.col("layer") == "engine") & pl.col("base_request_id").is_not_null()).select(
        "trace_id", pl.col("base_request_id").alias("bid")
    )
    via_gw = eng.join(gw.select(pl.col("gw_id").alias("bid"), "xid").drop_nulls(), on="bid").join(
        lr_of_xid, on="xid"
    )
    via_xid = eng.join(lr_of_xid.rename({"xid": "bid"}), on="bid")
    by_id = pl.concat([via_gw.select("trace_id", "lr"), via_xid.select("trace_id", "lr")]).with_columns(
        pl.lit("request_id (engine span)").alias("how")
    )
    keys = pl.concat([by_client, by_gw, by_id]).drop_nulls(["trace_id", "lr"]).unique()
    # a trace goes to the logical request most of its keys name (one request's attempts share its trace)
    order = {"trace_id (client)": 0, "trace_id (gateway)": 1, "request_id (engine span)": 2}
    keys = keys.with_columns(pl.col("how").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
    best = keys.sort("_o").group_by("trace_id", maintain_order=True).agg(pl.col("lr").first())
    return (
        keys.join(best, on=["trace_id", "lr"])
        .group_by("trace_id", "lr")
        .agg(pl.col("how").sort_by("_o").str.join(", ").alias("joined_by"))
    )


def build(spans: pl.DataFrame, t: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, dict]:
    # the traces with spans here (in the range): the logs name every trace, the range cuts the spans
    keys = _trace_keys(spans, t).join(spans.select("trace_id").unique(), on="trace_id", how="semi")
    # traces no log names: requests of their own, keyed by their trace (a folder of spans and few logs)
    seen = spans.filter(
        pl.col("layer").is_in(["client", "engine"]) & pl.col("role").is_in(["request", "attempt"])
    )
    alone = seen.select("trace_id").unique().join(keys, on="trace_id", how="anti")
    keys = pl.concat(
        [
            keys,
            alone.with_columns(
                pl.lit(None, pl.String).alias("lr"), pl.lit("spans only (no log names it)").alias("joined_by")
            ).select(keys.columns),
        ]
    ).with_columns(pl.coalesce("lr", pl.lit("trace:") + pl.col("trace_id")).alias("k"))
    att = spans.filter((pl.col("layer") == "client") & (pl.col("role") == "attempt"))
    eng = spans.filter((pl.col("layer") == "engine") & (pl.col("role") == "request"))
    # the parent/child link: an engine span under a client attempt
    eng = eng.join(
        att.select("trace_id", pl.col("span_id").alias("parent_span_id"), pl.col("start").alias("att_start")),
        on=["trace_id", "parent_span_id"],
        how="left",
    )
    att = att.join(
        eng.select("trace_id", pl.col("parent_span_id").alias("span_id"), pl.lit(True).alias("has_engine")),
        on=["trace_id", "span_id"],
        how="left",
    ).with_columns(pl.col("has_engine").fill_null(False))
    found = span_gaps.stops(spans, t)
    att = span_gaps.classify(att, spans, t, found)
    secs = lambda a, b: (pl.col(a) - pl.col(b)).dt.total_microseconds() / 1e6  # noqa: E731
    e = (
        eng.join(keys, on="trace_id", how="inner")
        .sort("start")
        .group_by("k", maintain_order=True)
        .agg(
            pl.len().alias("engine_spans"),
            pl.col("service").last().alias("engine_service"),
            pl.col("request_id").last().alias("engine_request_id"),
            *[
                pl.col(c).last().alias(f"span_{c}")
                for c in ("queue_s", "ttft_s", "e2e_s", "prefill_s", "decode_s")
            ],
            pl.col("prompt_tokens").last().alias("span_prompt_tokens"),
            pl.col("output_tokens").last().alias("span_output_tokens"),
            pl.col("start").last().alias("engine_start"),
            pl.col("end").last().alias("engine_end"),
            pl.col("att_start").last().alias("engine_attempt_start"),
            secs("start", "att_start").last().alias("before_engine_s"),
            pl.col("att_start").is_not_null().any().alias("_parent"),
        )
    )
    a = (
        att.join(keys, on="trace_id", how="inner")
        .sort("start")
        .group_by("k", maintain_order=True)
        .agg(
            pl.len().alias("attempt_spans"),
            pl.col("http_status").cast(pl.String).fill_null("-").str.join(",").alias("attempt_statuses"),
            pl.col("resend_count").max().alias("resend_count_max"),
            (~pl.col("has_engine")).sum().alias("attempts_without_engine"),
            pl.col("why").drop_nulls().first().alias("no_engine_reason"),
            pl.col("why_class").drop_nulls().first().alias("no_engine_class"),
            pl.col("http_status").drop_nulls().last().alias("last_http_status"),
            pl.col("start").first().alias("client_start"),
            pl.col("end").last().alias("client_end"),
        )
    )
    # the caller's own span over its attempts (the traced client's logical request), when it has one
    r = (
        spans.filter((pl.col("layer") == "client") & (pl.col("role") == "request"))
        .join(keys, on="trace_id", how="inner")
        .sort("start")
        .group_by("k", maintain_order=True)
        .agg(
            pl.col("start").first().alias("request_start"),
            pl.col("end").last().alias("request_end"),
            pl.col("status").last().alias("request_span_status"),
            pl.col("status_message").drop_nulls().last().alias("request_span_error"),
        )
    )
    g = (
        spans.filter(pl.col("layer") == "gateway")
        .join(keys, on="trace_id", how="inner")
        .group_by("k")
        .agg(pl.len().alias("gateway_spans"))
    )
    tr = keys.group_by("k").agg(pl.col("lr").first(), pl.col("trace_id").first(), pl.col("joined_by").first())
    rq = t["requests"]
    # the callers' own TTFT beside the engine span's: only on the callers' clock (never a gateway's or the engine's)
    caller = (pl.col("latency_clock") == "client") if "latency_clock" in rq.columns else pl.lit(False)
    req = rq.select(
        pl.col("logical_request_id").alias("lr"),
        "ts_start",
        "ts_end",
        "status",
        "outcome",
        (
            pl.when(caller).then(pl.col("ttft_s")) if "ttft_s" in rq.columns else pl.lit(None, pl.Float64)
        ).alias("caller_ttft_s"),
        (
            pl.when(caller).then(pl.col("latency_source"))
            if "latency_source" in rq.columns
            else pl.lit(None, pl.String)
        )
        .cast(pl.String)
        .alias("caller_ttft_source"),
    )
    df = (
        tr.join(a, on="k", how="left")
        .join(r, on="k", how="left")
        .join(e, on="k", how="left")
        .join(g, on="k", how="left")
        .join(req, on="lr", how="left")
        .with_columns(
            pl.when(pl.col("_parent"))
            .then(pl.col("joined_by") + ", parent span (engine under the attempt)")
            .otherwise(pl.col("joined_by"))
            .alias("joined_by"),
            secs("engine_attempt_start", "request_start").alias("before_attempt_s"),
            secs("request_end", "engine_end").alias("after_engine_s"),
            pl.lit("engine").alias("engine_clock"),
            pl.lit("client").alias("attempt_clock"),
            pl.lit("spans").alias("latency_source"),
        )
        .rename({"lr": "logical_request_id"})
        .drop("k")
        .sort("logical_request_id", "trace_id", nulls_last=True)  # the same bytes on every run
    )
    # each engine's clock against its callers': the offset removed from the split, or the split unknown
    skews = span_skew.measure(df)
    df = span_skew.apply(df, skews)
    # the gateway log's clock against the client's spans: the waterfall puts its lines on the spans' clock
    ga = t["gateway_attempts"]
    ga = ga.with_columns(
        [
            pl.lit(None, pl.Float64 if c == "header_s" else pl.String).alias(c)
            for c in ("header_s", "source")
            if c not in ga.columns
        ]
    ).with_columns(
        pl.col("traceparent").str.extract(_TP, 1).alias("trace_id"),
        pl.col("traceparent").str.extract(_TP, 2).alias("span_id"),
    )
    gws = span_skew.gateway(att, ga)
    return df, {
        **_summary(df, spans, t, att, found),
        "client_span_vs_record": _span_vs_record(df, rq),
        "clock_skew": [s.doc() for s in skews],
        "gateway_clock": None if gws is None else gws.doc(),
    }


AGREE_S = (
    1.0  # a caller's span and its own record of one request further apart than this are told, one by one
)


def _span_vs_record(df: pl.DataFrame, rq: pl.DataFrame) -> dict | None:
    """The caller's request span against its own record of the request (both on the client's clock): how far
    apart per request, and each request where they differ by more than AGREE_S (shown, never averaged)."""
    if "e2e_s" not in rq.columns or "latency_clock" not in rq.columns:
        return None
    rec = rq.filter(pl.col("latency_clock") == "client").select(
        pl.col("logical_request_id"), pl.col("e2e_s").alias("_rec")
    )
    d = (
        df.join(rec, on="logical_request_id", how="inner")
        .select(
            "logical_request_id",
            ((pl.col("request_end") - pl.col("request_start")).dt.total_microseconds() / 1e6).alias("span_s"),
            "_rec",
        )
        .drop_nulls()
        .with_columns((pl.col("span_s") - pl.col("_rec")).abs().alias("diff"))
        .sort("logical_request_id")
    )
    if d.height == 0:
        return None
    far = d.filter(pl.col("diff") > AGREE_S)
    return {
        "compared": d.height,
        "diff_p50_ms": round(float(d["diff"].median()) * 1000, 3),  # type: ignore[arg-type]
        "diff_max_ms": round(float(d["diff"].max()) * 1000, 3),  # type: ignore[arg-type]
        "within_s": AGREE_S,
        "disagree": len(far),
        "disagree_examples": [
            f"{r['logical_request_id']}: span {r['span_s']:.3f} s, record {r['_rec']:.3f} s"
            for r in far.head(10).iter_rows(named=True)
        ],
        "clock": "client",
        "what": "the caller's request span's duration against its own record's e2e, per request",
    }


def _summary(
    df: pl.DataFrame,
    spans: pl.DataFrame,
    t: dict[str, pl.DataFrame],
    att: pl.DataFrame,
    found: list[span_gaps.Stop],
) -> dict:
    n_req = t["requests"].height
    layer = spans.group_by("layer").agg(pl.len()).sort("layer")
    joined = int(df["logical_request_id"].is_not_null().sum())
    # the gateway's layer: its spans, or its log lines carrying the trace (nginx $http_traceparent)
    gw_traces = t["gateway_attempts"]["traceparent"].str.extract(_TP, 1).drop_nulls().unique()
    in_gw_log = df["trace_id"].is_in(gw_traces.implode())  # as a list: polars 2 deprecates a bare Series
    traced = {
        "client": int(df["attempt_spans"].is_not_null().sum()),
        "gateway": int(df["gateway_spans"].is_not_null().sum()),
        "gateway_log": int(in_gw_log.sum()),
        "engine": int(df["engine_spans"].is_not_null().sum()),
    }
    three = df.filter(
        pl.col("attempt_spans").is_not_null()
        & (pl.col("gateway_spans").is_not_null() | in_gw_log)
        & pl.col("engine_spans").is_not_null()
    )
    missing = att.filter(~pl.col("has_engine"))
    # retries as sibling attempt spans: an attempt after the first of its trace; reached = an engine span under it
    retry = att.sort("start").with_columns((pl.int_range(pl.len()).over("trace_id") > 0).alias("_retry"))
    retries = retry.filter(pl.col("_retry"))
    startup = spans.filter(pl.col("role") == "startup")
    return {
        "spans": spans.height,
        "spans_by_layer": dict(layer.iter_rows()),
        "spans_by_service": dict(spans.group_by("service").len().sort("service").iter_rows()),
        "requests": n_req,
        "requests_joined": joined,
        "requests_three_layers": three.height,
        "traces_alone": int(df["logical_request_id"].is_null().sum()),
        "traced_share": {k: (round(v / n_req, 4) if n_req else None) for k, v in traced.items()},
        "traced": traced,
        "joined_by": dict(df.group_by("joined_by").agg(pl.len()).sort("len", descending=True).iter_rows()),
        "attempt_spans": att.height,
        "attempts_with_engine": int(att["has_engine"].sum()),
        "retried_attempts": {
            "retries": retries.height,
            "with_engine_span": int(retries["has_engine"].sum()),
            "without_engine_span": int((~retries["has_engine"]).sum()),
            "definition": "client attempt spans after the first of their trace (siblings under the caller's "
            "span); with_engine_span: an engine span's parent is that attempt (it reached an engine)",
        },
        "no_engine_span": {
            "attempts": missing.height,
            "by_class": {c: n for c in span_gaps.CLASSES if (n := int((missing["why_class"] == c).sum()))},
            # the first attempt's reason in each class: the facts it rests on, or what is missing for one
            "examples": {
                c: g["why"][0]
                for c in span_gaps.CLASSES
                if (g := missing.filter(pl.col("why_class") == c).sort("start")).height
            },
            "by_class_and_replica": missing.group_by("why_class", pl.col("srv_replica").alias("replica"))
            .len("attempts")
            .sort("why_class", "replica", nulls_last=True)
            .to_dicts(),
        },
        "stops": [s.doc() for s in found],
        "startup_spans": startup.height,
        "startup": None
        if startup.height == 0
        else {
            "start": str(startup["start"].min()),
            "end": str(startup["end"].max()),
            "services": sorted(startup["service"].drop_nulls().unique().to_list()),
        },
        "clocks": {"engine figures": "engine (span attributes)", "attempts": "client (spans)"},
    }
