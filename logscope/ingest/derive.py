"""Tables derived after parsing, from the assembled Parquet files (streaming, bounded memory)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from logscope.parsers._common import endpoint_expr, tgi_endpoint_expr

from .. import schemas
from ..scalars import int_or_none
from . import metric_stats, span_relations

TABLES = ("server_requests",)  # tables made here (server_stats, a parsed table, is completed here too)


# runs a function on each of a list of argument tuples, giving back the results in order: here one after the
# other; on a Dask cluster as its tasks (``logscope.cluster.ingest``)
Map = Callable[[Callable[..., Any], list[tuple]], list]


def serially(fn: Callable[..., Any], args: list[tuple]) -> list:
    return [fn(*a) for a in args]


def finalize(
    out: Path, logs: dict[str, str] | None = None, run: Map = serially, pass_rows: int | None = None
) -> list[str]:
    """Build the derived tables; returns notes (assumptions) about the whole folder. ``logs`` names the log each
    source file is part of (the files of a rotated set are one log), by default the file itself. ``run`` runs
    server_requests' passes (``request_pass``), independent of each other; ``pass_rows``, the request events a
    pass may hold when memory is tight (``resources.shape``; ONE_PASS_MAX and ROWS_PER_PASS otherwise)."""
    _server_requests(out, logs or {}, run, pass_rows)
    span_relations.relate(out)
    notes = metric_stats.append_derived_stats(out)
    _stats_intervals(out)
    return notes


# request events aggregated in one pass up to ONE_PASS_MAX; more are split into passes of about ROWS_PER_PASS
# over buckets of request ids, so the aggregation's memory stays bounded (3 M events in one pass peak at
# 1.9 GB, 600 k at 0.9-1.0 GB, 200 k at 0.5 GB; docs/performance.md item 27)
ONE_PASS_MAX = 600_000
ROWS_PER_PASS = 200_000
SPLIT_BATCH = 500_000  # events read at a time when splitting them into the passes' buckets
MERGE_BATCH = 100_000  # rows per batch when merging the passes' sorted outputs
PART_ROW_GROUP = (
    8_000  # rows per row group of a pass's output: a cursor's read decodes only the groups it takes
)
MERGE_WINDOW = 1_000_000  # sort keys the merge orders at a time (12 bytes each)
SAMPLE_EVERY = 1_000  # every how many keys one is sampled to place the windows' bounds
STATS_BATCH_ROWS = 150_000  # stats rows sorted at a time for their intervals (whole series)
# rows the merge's cursors hold in all: each reads CURSOR_ROWS / parts rows of its part at a time (a read costs
# ~5 ms before its first row, so fewer rows a read means more reads)
CURSOR_ROWS = 1_000_000
_ENGINE_SUFFIX = r"-[0-9a-f]{8}$"
# the columns of server_request_events that _requests_of reads
_EVENT_COLUMNS = [
    "source",
    "replica",
    "event",
    "request_id",
    "base_request_id",
    "ts",
    "max_tokens",
    "prompt_tokens",
    "prompt",
    "seq",
    "engine_kind",
]


def _server_requests(
    out: Path, logs: dict[str, str] | None = None, run: Map = serially, pass_rows: int | None = None
) -> None:
    logs = logs or {}
    src = out / "server_request_events.parquet"
    dest = out / "server_requests.parquet"
    n = pl.scan_parquet(src).select(pl.len()).collect().item()
    one, per = (ONE_PASS_MAX, ROWS_PER_PASS) if pass_rows is None else (pass_rows, pass_rows)
    passes = 1 if n <= one else -(-n // per)
    if passes == 1:
        schemas.conform(_requests_of(pl.scan_parquet(src), logs), "server_requests").sink_parquet(dest)
        return
    with _scratch(out / "_server_requests") as tmp:
        buckets, names, span = _split(src, passes, tmp, logs)
        parts = run(
            request_pass,
            [(bucket, logs, names, span, tmp / f"part-{k:03d}.parquet") for k, bucket in enumerate(buckets)],
        )
        _merge_sorted(parts, dest, tmp)


def request_pass(
    bucket: list[Path], logs: dict[str, str], names: list[str], span: tuple[int, int], part: Path
) -> Path:
    """One pass: the requests of one bucket's events (``_split``), sorted, with the merge's ``_key``, into
    ``part``; the bucket's files are then deleted. Run again (a cluster's worker died before it told), a pass
    whose part is there is done: the part is renamed into place whole before any bucket file goes."""
    if part.exists() and not all(f.exists() for f in bucket):
        return part
    writing = part.with_name(part.name + ".writing")
    _requests_of(pl.scan_parquet(bucket), logs).with_columns(_sort_key(names, span)).sink_parquet(
        writing, row_group_size=PART_ROW_GROUP
    )
    writing.replace(part)
    for f in bucket:
        f.unlink()
    return part


@contextmanager
def _scratch(path: Path) -> Iterator[Path]:
    """An empty folder for part files inside the output folder (a run killed before could have left one),
    removed afterwards."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _log(logs: dict[str, str]) -> pl.Expr:
    """The log an event's file is part of (a rotated set's files are one: a request received before the
    rotation and finished after it is one request), by default the file."""
    src = pl.col("source")
    return (src.replace_strict(logs, default=src, return_dtype=pl.String) if logs else src).alias("_log")


def _split(
    src: Path, passes: int, tmp: Path, logs: dict[str, str]
) -> tuple[list[list[Path]], list[str], tuple[int, int]]:
    """The events in ``passes`` buckets of request ids, written in one read of ``src``, a batch at a time:
    a file per batch and bucket (a pass that scanned every event for its bucket read them all ``passes`` times:
    25 reads of a 25 GB folder's 14.8 M events took 35 s; its 74 passes of 200 k now read 30 files each). Every
    event of one request, and the Received line it joins, fall in one bucket: the id with all trailing engine
    suffixes stripped is the same for 'x', 'x-1a2b3c4d' and for a received id that itself ends like a suffix
    (see _requests_of). Also the events' source names and their least and greatest ``seq``, for the merge."""
    bucket = (
        pl.concat_str(
            [_log(logs), "replica", pl.col("request_id").str.replace(r"(?:-[0-9a-f]{8})+$", "")],
            separator="\x00",
        ).hash()
        % passes
    )
    files: list[list[Path]] = [[] for _ in range(passes)]
    names: set[str] = set()
    seqs: list[int] = []  # each batch's least and greatest seq
    for i, batch in enumerate(_slices(pl.scan_parquet(src).select(_EVENT_COLUMNS), SPLIT_BATCH)):
        names.update(batch["source"].drop_nulls().unique().to_list())
        seqs += [
            v for v in (int_or_none(batch["seq"].min()), int_or_none(batch["seq"].max())) if v is not None
        ]
        for (k,), rows in (
            batch.with_columns(bucket.alias("_bucket"))
            .partition_by("_bucket", as_dict=True, include_key=False)
            .items()
        ):
            path = tmp / f"bucket-{k:03d}-{i:05d}.parquet"
            rows.write_parquet(path, compression="lz4")
            files[k].append(path)
    return [f for f in files if f], sorted(names), (min(seqs, default=0), max(seqs, default=0))


def _slices(scan: pl.LazyFrame, rows: int) -> Iterator[pl.DataFrame]:
    """A Parquet scan's rows in order, ``rows`` at a time (only the row groups each slice needs are read)."""
    at = 0
    while True:
        part = scan.slice(at, rows).collect()
        if part.height == 0:
            return
        at += part.height
        yield part


def _merge_sorted(parts: list[Path], dest: Path, tmp: Path) -> None:
    """Merge Parquet files each sorted by (source, _first), with the ``_key`` of that order (``_sort_key``), into
    ``dest`` (conformed to server_requests), MERGE_BATCH rows at a time. Each part is read in order, once for its
    rows and three times for its keys. The keys are sorted a window of about MERGE_WINDOW rows at a time, the
    windows' bounds picked from every SAMPLE_EVERY-th key: a part's rows in one window are a run of it, so a
    window's keys are each part's next ones (sorting every key at once held 16 bytes a request and peaked at
    1.46 GB for 24 M requests, a ~100 GB folder). A window's sorted keys name the part of each output row; a
    batch takes the next rows of each part it names (a scan per part and batch had cost 5 ms each: 8 s for 6 M
    requests). Memory: one window's keys, one batch, and CURSOR_ROWS rows and keys over the parts' cursors."""
    keys = [pl.scan_parquet(p).select("_key") for p in parts]
    bounds = pl.concat([k.gather_every(SAMPLE_EVERY).collect() for k in keys])["_key"].sort()
    bounds = bounds.gather_every(
        max(1, MERGE_WINDOW // SAMPLE_EVERY), offset=max(1, MERGE_WINDOW // SAMPLE_EVERY)
    )
    # rows of each part in each window: windows are numbered by the bounds at or below a key
    counts = [_per_window(bounds, k.collect()["_key"]) for k in keys]
    step = max(1, CURSOR_ROWS // len(parts))
    key_cursors = [_Cursor(k, step) for k in keys]
    row_cursors = [_Cursor(pl.scan_parquet(p), step) for p in parts]
    out: list[Path] = []
    for w in range(bounds.len() + 1):
        window = [
            key_cursors[i].take(c[w]).with_columns(pl.lit(i, dtype=pl.Int32).alias("_part"))
            for i, c in enumerate(counts)
            if c[w]
        ]
        if not window:
            continue
        order = pl.concat(window).sort("_key", maintain_order=True)[
            "_part"
        ]  # ties: part order, a stable merge
        for i in range(0, order.len(), MERGE_BATCH):
            path = tmp / f"merged-{len(out):05d}.parquet"
            _take(order.slice(i, MERGE_BATCH), row_cursors).write_parquet(path)
            out.append(path)
    if not out:
        schemas.empty("server_requests").write_parquet(dest)
        return
    schemas.conform(pl.scan_parquet(out), "server_requests").sink_parquet(dest)


def _per_window(bounds: pl.Series, keys: pl.Series) -> list[int]:
    """How many of ``keys`` fall in each window (window w: keys with w of ``bounds`` at or below them)."""
    counts = [0] * (bounds.len() + 1)
    for w, n in pl.Series(bounds.search_sorted(keys, side="right")).value_counts().iter_rows():
        counts[w] = n
    return counts


def _sort_key(names: list[str], span: tuple[int, int]) -> pl.Expr:
    """The merge's sort key of a part's row, as one Int64 column ``_key``: the rank of its source among
    ``names`` in the bits above its ``_first`` less the least of ``span`` (the events' least and greatest
    ``seq``) plus one; a missing source or ``_first`` is 0 there, first, as the parts' sort put it."""
    lo, hi = span
    bits = (hi - lo + 1).bit_length()
    if (len(names) + 1).bit_length() + bits > 62:  # 2^62 / sources: no folder holds that many events
        raise ValueError(f"request events numbered {lo} to {hi} in {len(names)} sources: too many to merge")
    rank = {name: i + 1 for i, name in enumerate(names)}
    source = pl.col("source").replace_strict(rank, default=0, return_dtype=pl.Int64)
    return (source * (1 << bits) + (pl.col("_first").cast(pl.Int64) - lo + 1).fill_null(0)).alias("_key")


def _take(order: pl.Series, cursors: list[_Cursor]) -> pl.DataFrame:
    """The rows ``order`` names (a part number a row), each part's next ones, in that order."""
    b = order.to_frame("_part")
    counts = b.group_by("_part").len().sort("_part")
    frames, offset, n = [], {}, 0
    for part, count in counts.iter_rows():
        offset[part] = n
        frames.append(cursors[part].take(count))
        n += count
    rows = pl.concat(frames, how="vertical_relaxed")
    at = b.select(
        pl.int_range(pl.len(), dtype=pl.Int64).over("_part")
        + pl.col("_part").replace_strict(offset, return_dtype=pl.Int64)
    )
    return schemas.conform(rows[at.to_series()], "server_requests")


class _Cursor:
    """The rows of a scan, taken in order, ``step`` read at a time."""

    def __init__(self, scan: pl.LazyFrame, step: int) -> None:
        self.slices = _slices(scan, step)
        self.rows = pl.DataFrame()

    def take(self, n: int) -> pl.DataFrame:
        got = []
        while n > 0:
            if self.rows.height == 0:
                rows = next(self.slices, None)
                if rows is None:
                    raise ValueError("a part ended before the merge took all its rows")
                self.rows = rows
            got.append(self.rows.head(n))
            self.rows = self.rows.slice(n)
            n -= got[-1].height
        return pl.concat(got)


def _requests_of(ev: pl.LazyFrame, logs: dict[str, str] | None = None) -> pl.LazyFrame:
    """server_requests rows (plus the ``_first`` seq they are sorted by) from request events, of each log (file,
    or rotated set, and replica) apart: a log's ids are its keys, with the log's number (``_g``) beside them. One
    query for every log: a query per log, concatenated, grew with the logs (a fleet of 3,000 small vLLM logs
    spent over 20 minutes in it, 800 of them 15 s); an integer beside the id costs little (the three string
    columns as a key cost 1.5x). A request's ``source`` is the file of its first event. The events are read into
    memory: at most ONE_PASS_MAX, or one pass's bucket."""
    ev = ev.select(_EVENT_COLUMNS).with_columns(_log(logs or {}))
    return _requests_of_log(
        ev.with_columns(pl.struct("_log", "replica").rank("dense").cast(pl.UInt32).alias("_g"))
        .collect()
        .lazy()
    ).sort(["source", "_first"])


def _requests_of_log(ev: pl.LazyFrame) -> pl.LazyFrame:
    # one row per received id: an id received again (a retry that kept its X-Request-Id, a log collected
    # twice into one file) would otherwise multiply its events by its receptions (k^2 rows); the base id is
    # a function of the id, so which row is kept does not matter
    received = (
        ev.filter(pl.col("event") == "received")
        .select("_g", pl.col("request_id").alias("recv_id"), pl.col("base_request_id").alias("recv_base"))
        .unique(["_g", "recv_id"])
    )
    # 0.14+ engine suffix on Added/Aborted ids of chat requests: settle by the Received ids
    ev = ev.with_columns(pl.col("request_id").str.replace(_ENGINE_SUFFIX, "").alias("_trim"))
    ev = ev.join(received, left_on=["_g", "_trim"], right_on=["_g", "recv_id"], how="left").with_columns(
        pl.when(pl.col("recv_base").is_not_null() & (pl.col("event") != "received"))
        .then(pl.col("recv_base"))
        .otherwise(pl.col("base_request_id"))
        .alias("base_request_id"),
        pl.when(pl.col("recv_base").is_not_null() & (pl.col("event") != "received"))
        .then(pl.col("_trim"))
        .otherwise(pl.col("request_id"))
        .alias("key_id"),
    )
    # one server request per (log, replica, external id); retries of one client id get new ids upstream
    return (
        ev.sort("seq")
        .group_by("_g", "key_id")
        .agg(
            pl.col("base_request_id").drop_nulls().first(),
            pl.col("ts").filter(pl.col("event") == "received").min().alias("received_ts"),
            pl.col("ts").filter(pl.col("event") == "added").min().alias("added_ts"),
            pl.col("ts").filter(pl.col("event") == "finished").min().alias("finished_ts"),
            pl.col("ts").filter(pl.col("event") == "aborted").min().alias("aborted_ts"),
            pl.col("ts").filter(pl.col("event") == "failed").min().alias("failed_ts"),
            pl.col("max_tokens").drop_nulls().first(),
            pl.col("prompt_tokens").drop_nulls().first(),
            (pl.col("event") == "preempted").any().alias("preempted_v0"),
            pl.col("prompt").drop_nulls().first(),
            pl.col("seq").min().alias("_first"),
            pl.col("source").first(),
            pl.col("replica").first(),
            pl.col("engine_kind").drop_nulls().first(),
        )
        .select(
            "source",
            "replica",
            pl.col("key_id").alias("request_id"),
            pl.exclude("key_id", "source", "replica", "_g"),
        )
        .with_columns(
            pl.when(pl.col("preempted_v0")).then(True).otherwise(None).alias("preempted"),
            # SGLang's ids (its own uuid, or the client's) say nothing of the endpoint; TGI's name its route
            pl.when(pl.col("engine_kind") == "tgi")
            .then(tgi_endpoint_expr("request_id"))
            .when(pl.col("engine_kind").ne_missing("sglang"))
            .then(endpoint_expr("request_id"))
            .alias("endpoint"),
        )
    )


def _stats_intervals(out: Path) -> None:
    """Each stats row's ``interval_s``, the table sorted by (replica, origin, ts, seq), ties in stream order:
    a batch of (replica, origin) series at a time, up to STATS_BATCH_ROWS rows (or one series), each batch
    written to a part file, then the parts streamed into the table (sorting the whole table at once peaked at
    1.70–1.87 GB for 2.8 M rows, a ~100 GB folder's stats; a scan per series would read the table once per
    replica, and a fleet has hundreds)."""
    p = out / "server_stats.parquet"
    scan = pl.scan_parquet(p)
    keys = ["replica", "origin"]
    series = scan.group_by(keys).len().sort(keys).collect()
    with _scratch(out / "_server_stats") as tmp:
        parts = []
        for i, batch in enumerate(_batches(series, STATS_BATCH_ROWS)):
            rows = (
                # a filter, not a join: it is applied as the table is read (a semi join read it all first)
                scan.filter(
                    pl.struct(keys).is_in(
                        batch.select(pl.struct(keys)).to_series().implode(), nulls_equal=True
                    )
                )
                .sort([*keys, "ts", "seq"], maintain_order=True)
                # per engine: data-parallel engines each log a stats line in the same second
                .with_columns(
                    (pl.col("ts").diff().over([*keys, "engine"]).dt.total_microseconds() / 1e6).alias(
                        "interval_s"
                    )
                )
            )
            parts.append(tmp / f"part-{i:05d}.parquet")
            schemas.conform(rows, "server_stats").sink_parquet(parts[-1])
        if parts:
            schemas.conform(pl.scan_parquet(parts), "server_stats").sink_parquet(p)


def _batches(series: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
    """Consecutive runs of ``series`` (one row each, with its ``len``) holding up to ``rows`` rows in all, or
    one series that alone holds more."""
    start, total = 0, 0
    for i, n in enumerate(series["len"].to_list()):
        if i > start and total + n > rows:
            yield series.slice(start, i - start)
            start, total = i, 0
        total += n
    if series.height > start:
        yield series.slice(start)
