"""The contract every format module in ``parsers/`` fulfils: ``FormatModule`` (and ``LinesFormat`` or
``DocumentFormat`` by its MODE) below, checked by tests/test_registry.py. docs/formats.md says how to add one.

A format module is a plain module (no class needed) exposing:

``NAME``         short identifier written to files.parquet ``format``
``KIND``         'server' | 'gateway' | 'client' | 'metrics' | 'config' | 'traces' | 'platform' (``Kind``)
``DESCRIPTION``  one line for ``logscope formats``
``MODE``         'lines' (streamed in chunks of lines) or 'document' (whole text, e.g. JSON)
``SPEED``        optional: MB/s this parser reads on one core (measured with bench/); the slowest
                 streams are started first so that no core idles at the end (default 100)
``SAMPLES``      real example lines (copied from ../shared fixtures), used by the registry tests
``detect(head: list[str]) -> float``
                 score 0..1 from the first lines of a file; must never raise (the registry
                 wraps it anyway, like pygments' make_analysator)
``parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult``  (MODE 'lines')
                 ``lines`` has columns ``line_no`` (1-based Int64) and ``line`` (String, without the
                 newline; a trailing CR is kept so multi-line vLLM records can be recognised). It is
                 called once per chunk, in file order, with one ``state`` dict shared by every chunk
                 of every file of the stream (rotated sets), so parsers can carry context (last
                 timestamp, open traceback, year rollover) across chunk and file boundaries.
``finish(ctx: ParseContext, state: dict) -> ChunkResult | None``  optional, flushes carried state
``INDEPENDENT_CHUNKS``  optional, True when a chunk's result depends only on the chunk and on what the
                 stream's first chunk put in ``state`` (read, never written, afterwards): ingest then
                 parses the other chunks of a file on every core at once (tests/test_ingest_parallel.py)
``HEAD_STATE``   optional, True when the first chunk sets a state the rows depend on (whether a client logs at DEBUG):
                 ingest then joins a file's first chunks until they hold its first 200 non-blank lines, as it does
                 for ``INDEPENDENT_CHUNKS`` formats (``streams.headed``), so that state is the same at any chunk size
``FILE_KEYED``   optional, True when ``parse_chunk`` and ``finish`` key every state they carry by a ``_file``
                 column (Int64) when the chunk has one, and give it on every row: ingest then parses many small
                 files of a folder as one chunk, each line naming its file, and ``finish`` once
                 (logscope/ingest/batches.py; tests/test_ingest_smallfiles.py checks each file's rows equal a read
                 of it alone)
``SEGMENT_COUNTERS``  optional, the names of the ``state`` keys that only number rows (row and record
                 counters, also columns of the state's frames and of the output rows): a large file or
                 rotated set of the format may then be read in pieces (segments, files) on every core.
                 Each piece after the first is parsed from a state guessed by replaying the stream's
                 first chunk and the lines before the piece; it is kept when that state equals the true
                 one but for these counters (its rows' counter columns are then shifted), else read
                 again in turn. Requires ``parse_chunk`` to be a function of (chunk, ctx, state), blind
                 to the counters' absolute values (tests/test_ingest_segments.py checks the rows equal
                 a whole read's)
``CONTAINER_TIME``  optional, True when the format reads an RFC 3339 stamp in front of a line (``docker logs
                 --timestamps``): a container runtime's log file of it then gives each line with the
                 runtime's time in front (``logscope/ingest/envelopes.py``), else the line alone
``listen_address(lines: list[str]) -> str | None``  optional, a server format's: the HOST:PORT its start-up banner
                 names in a file's first lines, which tells two servers' logs in one folder apart
                 (``logscope/ingest/replicas.py``)
``parse_document(text: str, ctx: ParseContext) -> ChunkResult``  (MODE 'document')

Parsers are vectorised: a chunk is parsed with polars string expressions (``str.extract_groups``,
``str.contains``), never a Python loop over lines. Regexes are module-level constants, compiled once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, get_args, runtime_checkable

import polars as pl

# a line longer than this reaches a parser cut to exactly this many characters (the reader says so in the file's
# messages): a regex over 10 MB buys nothing. A JSON value holding such a line cannot decode (``_jsonstream``)
MAX_LINE_CHARS = 1_000_000

# what a format's rows are about: the stage that reads them (files.parquet ``kind``)
Kind = Literal["server", "gateway", "client", "metrics", "config", "traces", "platform"]
Mode = Literal["lines", "document"]  # streamed in chunks of lines, or read whole (a JSON document)
KINDS: tuple[str, ...] = get_args(Kind)
MODES: tuple[str, ...] = get_args(Mode)


@dataclass
class ParseContext:
    source: str  # path shown in outputs (relative to the analysed folder)
    replica: str  # replica name for rows of this file
    tz: str = "UTC"  # zone of timestamps that carry none (vLLM, python logging)
    year: int = 1970  # year for timestamps that carry none (vLLM 'MM-DD HH:MM:SS')
    year_source: str = "default"  # how ``year`` was chosen, for the assumptions list
    include_prompts: bool = False
    options: dict = field(default_factory=dict)  # format options, e.g. {'nginx_log_format': '...'}
    file_mtime: datetime | None = None
    reference_ts: datetime | None = None  # a full timestamp seen elsewhere in the folder (UTC)


@dataclass
class ChunkResult:
    """What a parser returns for one chunk (or one document)."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    # Boolean per input line (aligned with the chunk's rows): was the line recognised?
    # For documents, use ``lines_parsed`` instead and leave this None.
    recognized: pl.Series | None = None
    lines_parsed: int | None = None  # documents: lines accounted as parsed
    assumptions: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    # records kept whose written time is no time (2026/02/30, 02-29 of a common year, a local time in a DST
    # gap): their time is null; ingest sums them per file and says so, with the first as an example
    bad_times: int = 0
    bad_time_example: str | None = None
    # values written but not kept (a count past 2**53, a share outside [0, 1]): the field is null, the row kept
    bad_values: int = 0
    bad_value_example: str | None = None
    # what a parser mended in a pasted excerpt, by kind (vllm_server: 'joined' hard-wrapped lines, 'split'
    # records out of flattened lines, 'markdown' leads removed, 'bare' records read without their header,
    # 'untimed' rows without any time): ingest sums them per file and says so (ingest.repair_messages)
    repairs: dict[str, int] = field(default_factory=dict)


@runtime_checkable
class FormatModule(Protocol):
    """What every format module holds (the optional attributes are in this module's docstring)."""

    NAME: str
    KIND: Kind
    DESCRIPTION: str
    MODE: Mode
    SAMPLES: Sequence[str]

    def detect(self, head: list[str]) -> float: ...


@runtime_checkable
class LinesFormat(FormatModule, Protocol):
    """MODE 'lines': parsed a chunk at a time, ``state`` carried across the chunks and files of a stream."""

    def parse_chunk(self, lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult: ...


@runtime_checkable
class DocumentFormat(FormatModule, Protocol):
    """MODE 'document': the whole text at once."""

    def parse_document(self, text: str, ctx: ParseContext) -> ChunkResult: ...


def counted(state: dict, key: str, message: str) -> ChunkResult | None:
    """A stream's closing word on the rows its chunks counted under ``state[key]`` (``message``, ``{n}`` the count);
    None when there were none."""
    n = state.get(key, 0)
    return ChunkResult(messages=[message.format(n=n)]) if n else None


def safe_detect(module, head: list[str]) -> float:
    """Call a format's detect(); an exception or a bad value scores 0 (detection never raises)."""
    try:
        score = float(module.detect(head))
    except Exception:  # noqa: BLE001 - detection must never take the run down
        return 0.0
    if score != score:  # NaN
        return 0.0
    return max(0.0, min(1.0, score))


def hit_share(head: list[str], pattern: str) -> float:
    """Share of non-blank head lines matching ``pattern`` (a Rust-regex, vectorised)."""
    return one_head(lambda frame, n: per_head(nonblank(frame), n, s=share(pattern)).get_column("s"), head)


# --- many files' heads scored at once (``parsers.detect_many``) ---
# A format's ``detect_heads(frame, n)`` scores every head of ``head_frame`` in one pass (a polars call costs
# ~0.1-1 ms whatever its rows: 10,000 small files took ~10 ms each to detect one head at a time); its
# ``detect(head)`` is ``one_head(detect_heads, head)``, so the two never differ.
_BLANK = (
    r"^[\s\x1c-\x1f]*$"  # what str.strip() empties: Rust's \s and Python's white space differ by \x1c-\x1f
)


def head_frame(heads: list[list[str]]) -> pl.DataFrame:
    """The head lines of many files as one frame: ``h`` (the head's index), ``i`` (the line's index in its
    head), ``nb`` (its index among the head's non-blank lines; null for a blank line), ``line``."""
    sizes = pl.Series([len(h) for h in heads], dtype=pl.UInt32)
    lines = pl.Series("line", [ln for h in heads for ln in h], dtype=pl.String)
    # an empty head explodes to a null: dropped
    h = pl.select(pl.int_range(len(heads), dtype=pl.UInt32).repeat_by(pl.lit(sizes)).explode().drop_nulls())
    full = pl.DataFrame({"h": h.to_series(), "line": lines})
    seen = ~pl.col("line").str.contains(_BLANK)
    return full.with_columns(
        i=pl.int_range(pl.len(), dtype=pl.UInt32).over("h"),
        nb=pl.when(seen).then(seen.cast(pl.UInt32).cum_sum().over("h") - 1),
    )


def nonblank(frame: pl.DataFrame, first: int | None = None) -> pl.DataFrame:
    """The non-blank lines of every head (the first ``first`` of each)."""
    keep = pl.col("nb").is_not_null()
    return frame.filter(keep if first is None else keep & (pl.col("nb") < first))


def share(pattern: str, literal: bool = False) -> pl.Expr:
    """Aggregate: the share of a head's lines that hold ``pattern``."""
    return pl.col("line").str.contains(pattern, literal=literal).mean()


def per_head(frame: pl.DataFrame, n: int, **aggs: pl.Expr) -> pl.DataFrame:
    """One row per head 0..n-1, in order: ``aggs`` over its lines of ``frame`` (null for a head with none)."""
    got = frame.group_by("h").agg(**aggs)
    heads = pl.DataFrame({"h": pl.Series(range(n), dtype=pl.UInt32)})
    return heads.join(got, on="h", how="left").sort("h")


def one_head(detect_heads, head: list[str]) -> float:
    """A format's ``detect`` of one head by its ``detect_heads``."""
    return float(detect_heads(head_frame([head]), 1).fill_null(0.0)[0])
