"""Tables derived after parsing, from the assembled Parquet files (streaming, bounded memory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from parsers._common import endpoint_expr

from . import metric_stats, schemas


def finalize(out: Path) -> list[str]:
    """Build the derived tables; returns notes (assumptions) about the whole folder."""
    _server_requests(out)
    notes = metric_stats.append_derived_stats(out)
    _stats_intervals(out)
    return notes


# request events aggregated per pass: more are split into passes over buckets of request ids, so the
# aggregation's memory stays bounded (3M events in one pass peak at 1.9 GB; docs/performance.md)
ROWS_PER_PASS = 500_000
_ENGINE_SUFFIX = r"-[0-9a-f]{8}$"


def _server_requests(out: Path) -> None:
    src = out / "server_request_events.parquet"
    dest = out / "server_requests.parquet"
    n = pl.scan_parquet(src).select(pl.len()).collect().item()
    passes = max(1, -(-n // ROWS_PER_PASS))
    if passes == 1:
        schemas.conform(_requests_of(pl.scan_parquet(src)), "server_requests").sink_parquet(dest)
        return
    tmp = out / "_server_requests"
    tmp.mkdir(exist_ok=True)
    # every event of one request (and its Received line, for the join) falls in one bucket: the id
    # with all trailing engine suffixes stripped is the same for 'x', 'x-1a2b3c4d' and for a received
    # id that itself ends like a suffix (see _requests_of)
    bucket = (
        pl.concat_str(["source", "replica", pl.col("request_id").str.replace(r"(?:-[0-9a-f]{8})+$", "")],
                      separator="\x00").hash() % passes
    )
    parts = []
    for k in range(passes):
        part = tmp / f"{k:03d}.parquet"
        _requests_of(pl.scan_parquet(src).filter(bucket == k)).with_columns(_order_key()).sink_parquet(part)
        parts.append(pl.scan_parquet(part))
    merged = parts[0]
    for lf in parts[1:]:  # each part is sorted by (source, first event): merge, do not sort again
        merged = merged.merge_sorted(lf, key="_order")
    schemas.conform(merged, "server_requests").sink_parquet(dest)
    shutil.rmtree(tmp, ignore_errors=True)


def _order_key() -> pl.Expr:
    """(source, first seq) as one sortable string, for merging sorted parts."""
    return pl.concat_str([pl.col("source"), pl.col("_first").cast(pl.String).str.zfill(20)], separator="\x00").alias(
        "_order"
    )


def _requests_of(ev: pl.LazyFrame) -> pl.LazyFrame:
    """server_requests rows (plus the ``_first`` seq they are sorted by) from request events."""
    received = ev.filter(pl.col("event") == "received").select(
        "source", "replica", pl.col("request_id").alias("recv_id"), pl.col("base_request_id").alias("recv_base")
    )
    # 0.14+ engine suffix on Added/Aborted ids of chat requests: settle by the Received ids
    ev = ev.with_columns(pl.col("request_id").str.replace(_ENGINE_SUFFIX, "").alias("_trim"))
    ev = ev.join(received, left_on=["source", "replica", "_trim"], right_on=["source", "replica", "recv_id"],
                 how="left").with_columns(
        pl.when(pl.col("recv_base").is_not_null() & (pl.col("event") != "received"))
        .then(pl.col("recv_base"))
        .otherwise(pl.col("base_request_id"))
        .alias("base_request_id"),
        pl.when(pl.col("recv_base").is_not_null() & (pl.col("event") != "received"))
        .then(pl.col("_trim"))
        .otherwise(pl.col("request_id"))
        .alias("key_id"),
    )
    # one server request per (replica, external id); retries of one client id get new ids upstream
    agg = (
        ev.sort("seq")
        .group_by(["source", "replica", "key_id"])
        .agg(
            pl.col("base_request_id").drop_nulls().first(),
            pl.col("ts").filter(pl.col("event") == "received").min().alias("received_ts"),
            pl.col("ts").filter(pl.col("event") == "added").min().alias("added_ts"),
            pl.col("ts").filter(pl.col("event") == "finished").min().alias("finished_ts"),
            pl.col("ts").filter(pl.col("event") == "aborted").min().alias("aborted_ts"),
            pl.col("max_tokens").drop_nulls().first(),
            pl.col("prompt_tokens").drop_nulls().first(),
            (pl.col("event") == "preempted").any().alias("preempted_v0"),
            pl.col("prompt").drop_nulls().first(),
            pl.col("seq").min().alias("_first"),
        )
        .rename({"key_id": "request_id"})
        .with_columns(
            pl.when(pl.col("preempted_v0")).then(True).otherwise(None).alias("preempted"),
            endpoint_expr("request_id").alias("endpoint"),
        )
        .sort(["source", "_first"])
    )
    return agg


def _stats_intervals(out: Path) -> None:
    p = out / "server_stats.parquet"
    df = (
        pl.scan_parquet(p)
        .sort(["replica", "origin", "ts", "seq"])
        .with_columns(
            (pl.col("ts").diff().over(["replica", "origin"]).dt.total_microseconds() / 1e6).alias("interval_s")
        )
        .collect()
    )
    schemas.conform(df, "server_stats").write_parquet(p)
