"""Tables derived after parsing, from the assembled Parquet files (streaming, bounded memory)."""

from __future__ import annotations

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


def _server_requests(out: Path) -> None:
    ev = pl.scan_parquet(out / "server_request_events.parquet")
    received = ev.filter(pl.col("event") == "received").select(
        "source", "replica", pl.col("request_id").alias("recv_id"), pl.col("base_request_id").alias("recv_base")
    )
    # 0.14+ engine suffix on Added/Aborted ids of chat requests: settle by the Received ids
    ev = ev.with_columns(pl.col("request_id").str.replace(r"-[0-9a-f]{8}$", "").alias("_trim"))
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
    schemas.conform(agg, "server_requests").sink_parquet(out / "server_requests.parquet")


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
