"""The ingest's tasks, as a worker runs them: the same parser code as the in-process ingest, on the same units.

A unit is a stream read whole (``whole``) or a piece of a long one (``piece``), cut by ``pieces.plan``; a
stream in pieces is then settled by one more task (``settle``: ``pieces.settle``, the code the in-process
ingest settles its pieces with). Each task writes its rows as Parquet part files into its own folder under
OUT/_parts (a task run again after its worker died writes a new one: nothing is shared between attempts) and
hands back their paths with its files' tallies: the client assembles the tables from them. Nothing here
imports Dask: a task is a plain function of picklable values.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from ..ingest import pieces, sources, stream_parser, streams
from ..ingest.options import IngestOptions
from ..ingest.store import Store
from ..ingest.streams import FileState, Job, Meter

Parts = dict[str, list[tuple[tuple[int, int, int], Path]]]  # table -> (key, part file), as ``Store.spilled``


@dataclass
class Done:
    """A stream read: its files' tallies and notes, its rows' part files, the counter shifts of its pieces."""

    members: list[FileState]
    parts: Parts
    shifts: dict[tuple[int, int], dict[str, int]]


def _job(opts: IngestOptions, when: tuple, parts: Path | None, name: str) -> Job:
    folder = parts / f"{name}-{uuid.uuid4().hex[:12]}" if parts is not None else Path("_unused")
    return Job(opts, when, Store(folder, opts.memory_bytes), None, 0.0, Meter(1, None))


def whole(idx: int, members: list[FileState], opts: IngestOptions, when: tuple, parts: Path) -> Done:
    """A stream read whole, in order (``streams.parse``)."""
    job = _job(opts, when, parts, f"{idx:05d}")
    streams.parse(idx, members, stream_parser(members), job)
    return Done(members, job.store.flush(), {})


def count(f: sources.InputFile, span: sources.Span, chunk_bytes: int) -> int:
    """The lines of one piece (the first line of the pieces after it in its file)."""
    return sources.span_lines(f, span, chunk_bytes)


def head(members: list[FileState], opts: IngestOptions, when: tuple) -> tuple[dict, int]:
    """The parser's state after the stream's first chunk (``pieces.head_state``)."""
    job = _job(opts, when, None, "")
    return pieces.head_state(
        stream_parser(members), members[0].f.quiet(), streams.context(members[0], job), opts.chunk_bytes
    )


class _Known:
    """What ``pieces._Lines`` tells the pieces (``pieces.LinesBefore``), from the counts of tasks: a piece's
    first line, a file's tail."""

    def __init__(self, members: list[FileState], plan: list[pieces.Piece], counts: list[int | None]) -> None:
        self.members, self.plan, self.counts = members, plan, counts

    def first_line(self, p: int) -> int:
        m = self.plan[p].member
        return sum(self.counts[q] or 0 for q in range(p) if self.plan[q].member == m)

    def tail(self, j: int) -> pl.DataFrame:
        return sources.tail_lines(self.members[j].f.quiet(), pieces.SEGMENT_WINDOW)


def piece(
    idx: int,
    members: list[FileState],
    plan: list[pieces.Piece],
    p: int,
    counts: list[int | None],
    head_state: tuple[dict, int],
    opts: IngestOptions,
    when: tuple,
    parts: Path,
) -> tuple:
    """Piece ``p`` read ahead: the first from the stream's true start, any other from the state guessed as
    ``pieces._read_ahead`` guesses it. A parser's failure hands back nothing (as in-process: ``settle`` reads
    the piece again in turn, and the failure stops its file there)."""
    job = _job(opts, when, parts, f"{idx:05d}-{p:03d}")
    mod = stream_parser(members)
    ctxs = [streams.context(st, job) for st in members]
    lines = _Known(members, plan, counts)
    span = replace(plan[p].span, first_line=lines.first_line(p))
    try:
        # a format whose chunks need only its head's state (an access log's layout) starts every piece from it,
        # the first too: its first piece may hold fewer lines than the head a whole read infers from (streams.headed)
        first = p == 0 and not pieces.independent(mod)
        state = {} if first else pieces.warm(mod, members, ctxs, plan[p], span, lines, head_state)
        got = pieces.read_from(idx, mod, members, ctxs, plan[p], p, span, state, job, threading.Event())
    except Exception:  # noqa: BLE001 - see above
        job.store.drop((idx, p))
        got = None
    return got, job.store.flush()


def settle(
    idx: int,
    members: list[FileState],
    plan: list[pieces.Piece],
    counts: list[int | None],
    read: list[tuple],
    head_state: tuple[dict, int],
    opts: IngestOptions,
    when: tuple,
    parts: Path,
) -> Done:
    """The pieces read ahead (``read``, in order) settled as in-process (``pieces.settle``): kept and shifted, or
    read again here; then the rows the parser gives at the stream's end."""
    job = _job(opts, when, parts, f"{idx:05d}-settle")
    for _, spilled in read:
        for name, items in spilled.items():
            job.store.spilled.setdefault(name, []).extend(items)
    ahead: dict[int, Future] = {}
    for p, (got, _) in enumerate(read):
        ahead[p] = Future()
        ahead[p].set_result(got)
    mod = stream_parser(members)
    ctxs = [streams.context(st, job) for st in members]
    start = dict(head_state[0]) if pieces.independent(mod) else {}  # the true state before the first piece
    pieces.settle(
        idx,
        members,
        mod,
        plan,
        job,
        ctxs,
        _Known(members, plan, counts).first_line,
        ahead,
        threading.Event(),
        start,
    )
    return Done(members, job.store.flush(), dict(job.store.shifts))
