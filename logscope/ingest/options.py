"""The ingest's settings, result and progress callback, and the cores it may use: what every part of the
stage shares, kept below them so that the stage's entry, its streams and its pieces import them one way."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import sources


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers() -> int:
    """Streams parsed at once: one more than the cores this process may use, at most 4. Polars releases
    the GIL in its kernels, but each stream also runs Python between them and some single-threaded
    kernels: a third stream on 2 cores fills those gaps (1 GB bench: 11.7 -> 11.2 s, peak RSS at 5 GB
    unchanged). Each stream holds a chunk's intermediate columns, hence the cap."""
    return min(4, cores() + 1)


@dataclass
class IngestOptions:
    tz: str = "UTC"
    include_prompts: bool = False
    replica: str | None = None  # force one replica name for every server file
    nginx_log_format: str | None = None
    follow_links: bool = False  # read links whose target is outside the input folder (``sources.discover``)
    workers: int = field(default_factory=default_workers)
    chunk_bytes: int = sources.CHUNK_BYTES
    # parsed rows held in memory before spilling to part files (as estimated: their real footprint is larger);
    # 64 MiB against 128: 5 GB ingest 817-839 -> 703-730 MiB in the same 54-55 s (docs/performance.md item 29)
    memory_bytes: int = 64 * 1024 * 1024
    # the whole run's memory budget (--max-memory): the batches above shrink to hold it (logscope.resources.shape)
    memory_budget: int | None = None
    segment_bytes: int = 32 * 1024 * 1024  # the smallest segment a large file is cut into (``pieces.plan``)
    segments: int | None = (
        None  # force this many segments per file of a format that allows them (tests, bench)
    )
    # files at most this long, of one format, folder and replica, are parsed together (``batches``); 0: never
    small_bytes: int = 256 * 1024


@dataclass
class IngestResult:
    out_dir: Path
    files: pl.DataFrame
    seconds: float
    bytes_in: int
    reused: bool = False  # the tables of an earlier ingest of the same files (``reuse``)

    def table(self, name: str) -> pl.DataFrame:
        return pl.read_parquet(self.out_dir / f"{name}.parquet")


Progress = Callable[[str, float], None]
