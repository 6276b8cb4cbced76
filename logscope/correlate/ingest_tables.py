"""The ingest tables correlation reads (``INPUTS``), in the columns it reads (``columns_read``): ``read_tables``
reads them all, the client tables of the kept client sources only (``client_sources``), beside the choice of
those sources (``CLIENT_PICK``) and the access lines a failed stream is tied to (``STREAM_MARKS``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .. import schemas
from ..resources import time_range
from ..resources.time_range import Range
from . import stream_failures
from .client_sources import kept_client_sources

INPUTS = (
    "files",
    "server_stats",
    "server_events",
    "server_requests",
    "gateway_attempts",
    "gateway_errors",
    "client_attempts",
    "client_requests",
    "client_phases",
)


# the stage reads only these columns of the event tables (their message texts are large)
USED_COLUMNS = {
    "server_events": ("ts", "source", "replica", "kind", "preemption_mode"),
    "gateway_errors": ("ts", "source", "kind", "upstream", "line_no"),
}
# and these facts of their messages, not the texts: nginx's timeout while it relayed an answer's body, after its 2xx
# ('upstream timed out ... while reading upstream'), not before the headers (a 504: '... reading response header')
BODY_TIMEOUT = "in_body"
DERIVED_COLUMNS = {
    "gateway_errors": (pl.col("message").str.contains(" while reading upstream(?:,|$)").alias(BODY_TIMEOUT),),
}
# nor these of the request tables (at a million rows each column is tens of megabytes)
UNUSED_COLUMNS = {
    "client_attempts": ("e2e_s", "phase", "thread", "grouping", "grouping_confidence", "url", "line_no"),
    "gateway_attempts": ("attempts_total", "user_agent", "port"),
    "server_requests": ("prompt",),
}


CLIENT_TABLES = ("client_attempts", "client_requests")


def columns_read(table: str) -> list[str]:
    """The columns of a table correlation reads (USED_COLUMNS, else all but UNUSED_COLUMNS)."""
    cols = USED_COLUMNS.get(table) or schemas.schema(table).names()
    return [c for c in cols if c not in UNUSED_COLUMNS.get(table, ())]


# which client sources correlation uses, decided before the client tables are read whole (a table of
# its own in read_tables' dict: source, kept, why)
CLIENT_PICK = "client_sources"
# the access lines a failed stream is tied to or may belong to (stream_failures.marks: decided on whole files, so
# read whole whatever the range; a table of its own in read_tables' dict)
STREAM_MARKS = "stream_marks"


def read_tables(out: Path, rng: Range = time_range.ALL) -> dict[str, pl.DataFrame]:
    """The ingest tables (an absent file reads as an empty table of its declared schema).

    A client's DEBUG log and its JSON lines describe the same sends and only one is used: which one is
    decided on a few columns first, so the client tables are read for the kept sources only (at a million
    requests each copy is a gigabyte). With a time range, only the records that overlap it are read."""
    keep, dropped = kept_client_sources(out, rng)
    tabs = {name: read_table(out, name, rng, keep) for name in INPUTS}
    tabs[CLIENT_PICK] = pick_table(keep, dropped)
    tabs[STREAM_MARKS] = stream_failures.marks(out)
    return tabs


def read_table(
    out: Path, name: str, rng: Range, keep: list[str], where: pl.Expr | None = None
) -> pl.DataFrame:
    """One ingest table in the columns correlation reads: the rows in the range (and ``where``), of the client
    sources in ``keep`` for the client tables."""
    lf = time_range.scan(out, name, rng)
    if where is not None:
        lf = lf.filter(where)
    if name in CLIENT_TABLES:
        lf = lf.filter(pl.col("source").is_in(keep))
    return lf.select(*columns_read(name), *DERIVED_COLUMNS.get(name, ())).collect()


def pick_table(keep: list[str], dropped: dict[str, str]) -> pl.DataFrame:
    """The client sources kept and those left out (with why), as ``tabs[CLIENT_PICK]``."""
    return pl.DataFrame(
        {
            "source": [*keep, *dropped],
            "kept": [True] * len(keep) + [False] * len(dropped),
            "why": [None] * len(keep) + list(dropped.values()),
        },
        schema={"source": pl.String, "kept": pl.Boolean, "why": pl.String},
    )
