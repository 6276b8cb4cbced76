"""Tables derived after parsing, from the assembled Parquet files (streaming, bounded memory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from parsers._common import endpoint_expr

from . import metric_stats, schemas

TABLES = ("server_requests",)  # tables made here (server_stats, a parsed table, is completed here too)


def finalize(out: Path) -> list[str]:
    """Build the derived tables; returns notes (assumptions) about the whole folder."""
    _server_requests(out)
    notes = metric_stats.append_derived_stats(out)
    _stats_intervals(out)
    return notes


# request events aggregated per pass: more are split into passes over buckets of request ids, so the
# aggregation's memory stays bounded (3M events in one pass peak at 1.9 GB; docs/performance.md)
ROWS_PER_PASS = 600_000
MERGE_BATCH = 100_000  # rows per batch when merging the passes' sorted outputs
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
        part = tmp / f"part-{k:03d}.parquet"
        _requests_of(pl.scan_parquet(src).filter(bucket == k)).sink_parquet(part)
        parts.append(part)
    _merge_sorted(parts, ["source", "_first"], dest, tmp)
    shutil.rmtree(tmp, ignore_errors=True)


def _merge_sorted(parts: list[Path], by: list[str], dest: Path, tmp: Path) -> None:
    """Merge Parquet files each sorted by ``by`` into ``dest`` (conformed to server_requests), MERGE_BATCH
    rows at a time: the first n rows of the merge are a prefix of every part, so each batch reads one
    contiguous slice per part. Memory: the sort keys plus one batch (sorting the whole output at once
    peaks at ~4x its size)."""
    keys = pl.concat(
        [pl.scan_parquet(p).select(*by, pl.lit(i, dtype=pl.Int32).alias("_part"),
                                   pl.int_range(pl.len(), dtype=pl.Int64).alias("_row")).collect()
         for i, p in enumerate(parts)]
    ).sort(by, maintain_order=True).select("_part", "_row")  # ties: part order, as a stable merge
    out, batch = [], MERGE_BATCH
    for i in range(0, keys.height, batch):
        b = keys.slice(i, batch)
        spans = b.group_by("_part").agg(pl.col("_row").min().alias("lo"), pl.col("_row").max().alias("hi"))
        frames, offset = [], {}
        n = 0
        for part, lo, hi in spans.sort("_part").iter_rows():
            offset[part] = n - lo
            frames.append(pl.scan_parquet(parts[part]).slice(lo, hi - lo + 1).collect())
            n += hi - lo + 1
        rows = pl.concat(frames, how="vertical_relaxed")
        at = b.select(pl.col("_row") + pl.col("_part").replace_strict(offset, return_dtype=pl.Int64))
        path = tmp / f"merged-{i // batch:05d}.parquet"
        schemas.conform(rows[at.to_series()], "server_requests").write_parquet(path)
        out.append(path)
    if not out:
        schemas.empty("server_requests").write_parquet(dest)
        return
    schemas.conform(pl.scan_parquet(out), "server_requests").sink_parquet(dest)


def _requests_of(ev: pl.LazyFrame) -> pl.LazyFrame:
    """server_requests rows (plus the ``_first`` seq they are sorted by) from request events."""
    # one row per received id: an id received again (a retry that kept its X-Request-Id, a log collected
    # twice into one file) would otherwise multiply its events by its receptions (k^2 rows); the base id is
    # a function of the id, so which row is kept does not matter
    received = ev.filter(pl.col("event") == "received").select(
        "source", "replica", pl.col("request_id").alias("recv_id"), pl.col("base_request_id").alias("recv_base")
    ).unique(["source", "replica", "recv_id"])
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
