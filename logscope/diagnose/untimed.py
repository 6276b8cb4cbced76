"""Records that carry no time: a pasted table of requests, an openai-python log without ``asctime``, a
stats line pasted without its prefix (SGLang's ``Decode batch.`` alone). No episode can hold them and no range
can place them, yet they are evidence: the diagnosis counts them, says what they show, and says that when is
unknown, instead of 'nothing recognised' (public-2 c05, c06, s02)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .tables import read

REQUEST_COLUMNS = (
    "outcome",
    "status",
    "error",
    "client_attempts",
    "gateway_attempts",
    "ttft_s",
    "e2e_s",
    "latency_clock",
    "latency_source",
    "origin",
)
STATS_COLUMNS = (
    "source",
    "engine_kind",
    "running",
    "waiting",
    "kv_usage",
    "gpu_kv_usage",
    "gen_tps",
    "line_no",
)


@dataclass
class Untimed:
    requests: pl.DataFrame  # logical requests with no start time (REQUEST_COLUMNS of the requests table)
    stats: pl.DataFrame  # the server's state lines with no time (STATS_COLUMNS of server_stats)
    parsed: dict[
        str, int
    ]  # lines recognised per format (files.parquet): what 'nothing recognised' is judged by

    @property
    def empty(self) -> bool:
        return not self.requests.height and not self.stats.height


def load(out: Path) -> Untimed:
    """The untimed rows of the folder's tables, whatever the range asked (a range cannot place them)."""
    req = read(out, "requests", REQUEST_COLUMNS, pl.col("ts_start").is_null() & pl.col("ts_end").is_null())
    stats = read(out, "server_stats", STATS_COLUMNS, pl.col("ts").is_null()).filter(
        pl.col("running").is_not_null() | pl.col("waiting").is_not_null()
    )
    files = read(out, "files", ("format", "lines_parsed"))
    parsed = (
        {
            f: int(n)
            for f, n in files.group_by("format").agg(pl.col("lines_parsed").sum()).sort("format").iter_rows()
            if f and n
        }
        if files.height
        else {}
    )
    return Untimed(req, stats, parsed)
