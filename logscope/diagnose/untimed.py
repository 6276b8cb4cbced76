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


def timed() -> pl.Expr:
    """A requests row with a start or an end: one a range can place, counted among the folder's requests, outcomes
    and latencies (outcomes.rows; compare.sources.requests). A row with neither is counted apart, here."""
    return pl.col("ts_start").is_not_null() | pl.col("ts_end").is_not_null()


# the layer an untimed request was read from (requests.origin), never 'the callers' by default
LAYER = {"client": "the client's records", "gateway": "the gateway's log", "server": "the server's log"}


@dataclass(frozen=True)
class Apart:
    """The logical requests of a folder with no time, counted apart from the rest: how many, and the records they
    were read from. One statement of them for analyze's finding and compare's tables."""

    requests: int
    read_from: str  # "the gateway's log", "the client's records and the gateway's log"

    @property
    def text(self) -> str:
        """'1 logical request(s) read from the gateway's log with no time'."""
        return f"{self.requests:,} logical request(s) read from {self.read_from} with no time"


def apart(req: pl.DataFrame) -> Apart | None:
    """The untimed requests of ``req`` (a requests table with ts_start, ts_end and origin) as counted apart; None
    when every row carries a time."""
    if not req.height or not {"ts_start", "ts_end"} <= set(req.columns):
        return None
    un = req.filter(~timed())
    return Apart(un.height, read_from(un)) if un.height else None


def read_from(req: pl.DataFrame) -> str:
    """Which layer's records the requests come from (requests.origin), never 'the callers' by default."""
    origins = req["origin"].drop_nulls().unique().to_list() if "origin" in req.columns else []
    got = sorted({LAYER.get(o, o) for o in origins})
    return " and ".join(got) or "records of an unknown layer"


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
    req = read(out, "requests", REQUEST_COLUMNS, ~timed())
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
