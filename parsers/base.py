"""The contract every format module in ``parsers/`` fulfils.

A format module is a plain module (no class needed) exposing:

``NAME``         short identifier written to files.parquet ``format``
``KIND``         'server' | 'gateway' | 'client' | 'metrics' | 'config'
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
``parse_document(text: str, ctx: ParseContext) -> ChunkResult``  (MODE 'document')

Parsers are vectorised: a chunk is parsed with polars string expressions (``str.extract_groups``,
``str.contains``), never a Python loop over lines. Regexes are module-level constants, compiled once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl


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


def safe_detect(module, head: list[str]) -> float:
    """Call a format's detect(); an exception or a bad value scores 0 (detection never raises)."""
    try:
        score = float(module.detect(head))
    except Exception:  # noqa: BLE001 - detection must never take the run down
        return 0.0
    if score != score:  # NaN
        return 0.0
    return max(0.0, min(1.0, score))


def hit_share(head: list[str], pattern: str, min_lines: int = 1) -> float:
    """Share of non-blank head lines matching ``pattern`` (a Rust-regex, vectorised)."""
    lines = [h for h in head if h.strip()]
    if len(lines) < min_lines or not lines:
        return 0.0
    s = pl.Series(lines, dtype=pl.String)
    return float(s.str.contains(pattern).mean() or 0.0)
