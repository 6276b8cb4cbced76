"""Reading one long stream in pieces on every core, with the same rows as a whole read.

A piece is a file of a rotated set or a segment of a large uncompressed file (``sources.segments``). The
first piece is read on the stream's thread; the others at once on the pool, each from a parser state
guessed by replaying the stream's first chunk and the lines just before the piece, then kept if that
guess was the true state but for the row counters (``SEGMENT_COUNTERS``, parsers/base.py), else read
again in turn. docs/performance.md (item 25) says what it buys.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Protocol

import polars as pl

from logscope.parsers.base import ParseContext

from . import sources, unrecognized
from .options import cores
from .store import Store, shifted
from .streams import FileState, Job, add_repairs, context, cost, failed, finish, headed, read

# bytes before a piece replayed to guess its parser's state: a record open across the cut must start
# within them for the guess to hold (a traceback is a few KB; else the piece is read again in turn)
SEGMENT_WINDOW = 1024 * 1024


@dataclass(frozen=True)
class Piece:
    """A part of a stream read on its own: a file of a rotated set, or a segment of a large uncompressed file."""

    member: int  # the file's index in the stream
    span: sources.Span


def plan(members: list[FileState], mod, job: Job, slots: int | None = None) -> list[Piece] | None:
    """The pieces to read a stream in on every core, or None to read it whole, in order.

    Only a format that allows it (``SEGMENT_COUNTERS``, parsers/base.py; on a cluster also one whose chunks are
    independent, ``INDEPENDENT_CHUNKS``: a gateway's access log) is cut, when the stream is longer
    than its folder's share of a core (a folder of one large vLLM log used 1.16 cores): each file of a
    rotated set is a piece, and an uncompressed file that is itself that long is cut into segments of at
    least ``opts.segment_bytes``. ``opts.segments`` forces the cutting (tests, bench). ``slots``: the workers
    to cut for in place of this process's cores (a cluster's, ``logscope.cluster.ingest``)."""
    opts, share = job.opts, job.share
    if (job.pool is None and slots is None) or mod is None or mod.MODE != "lines" or not cuttable(mod, slots):
        return None

    def ways(sts: list[FileState]) -> int:
        if opts.segments or share <= 0:
            return opts.segments or 1
        # a cluster's pieces are at most its share of the work (no task above 1 % of it on 128 workers); here
        # a stream barely over a core's share is not worth its pieces' replays
        return min(slots or cores(), math.ceil(cost(sts) / share) if slots else round(cost(sts) / share))

    if ways(members) < 2:
        return None
    pieces = []
    for j, st in enumerate(members):
        n = (
            min(ways([st]), max(st.f.size, 0) // max(opts.segment_bytes, 1))
            if not opts.segments
            else opts.segments
        )
        pieces += [
            Piece(j, sp)
            for sp in (sources.segments(st.f, n, opts.chunk_bytes) if n > 1 else [sources.Span(0, 0, None)])
        ]
    return pieces if len(pieces) > 1 else None


def cuttable(mod, slots: int | None) -> bool:
    """A format read in pieces: one whose state only numbers rows past its first chunk (``SEGMENT_COUNTERS``), or,
    for a cluster's workers, one whose chunks need nothing but the first chunk's state (``INDEPENDENT_CHUNKS``: in
    this process its chunks already run on every core, ``streams.parsed``)."""
    return bool(getattr(mod, "SEGMENT_COUNTERS", None)) or (slots is not None and independent(mod))


def independent(mod) -> bool:
    return bool(getattr(mod, "INDEPENDENT_CHUNKS", False))


@dataclass
class _Ahead:
    """A piece read ahead of its turn, from a state guessed by ``warm``."""

    assumed: dict  # the guessed state at the piece's start
    end: dict  # the state at its end
    part: FileState  # its lines, coverage, shapes and notes
    tally: Counter  # lines cut to MAX_LINE_CHARS, pieces of lines joined (sources.tally_messages)


class LinesBefore(Protocol):
    """What ``warm`` is told of the lines before a piece: ``_Lines`` here, cluster/tasks.py's ``_Known`` on a
    worker (from the counts of tasks)."""

    def first_line(self, p: int) -> int: ...

    def tail(self, j: int) -> pl.DataFrame: ...


class _Lines:
    """What the pieces need to know of the lines before them, read on the pool: a piece's first line within
    its file (the lines a whole read yields for the segments before it) and, for a piece that opens a file,
    the last lines of the file before it (``SEGMENT_WINDOW`` bytes, numbered)."""

    def __init__(self, members: list[FileState], pieces: list[Piece], job: Job) -> None:
        pool = job.pool
        assert pool is not None
        self.pieces = pieces
        self.spans = {
            p: pool.submit(sources.span_lines, members[pc.member].f, pc.span, job.opts.chunk_bytes)
            for p, pc in enumerate(pieces)
            if pc.span.stop is not None
        }
        opened = {pc.member - 1 for pc in pieces if pc.span.start == 0 and pc.member > 0}
        self.tails = {
            j: pool.submit(sources.tail_lines, members[j].f.quiet(), SEGMENT_WINDOW) for j in sorted(opened)
        }

    def first_line(self, p: int) -> int:
        m = self.pieces[p].member
        return sum(self.spans[q].result() for q in range(p) if self.pieces[q].member == m)

    def tail(self, j: int) -> pl.DataFrame:
        return self.tails[j].result()


def parse(idx: int, members: list[FileState], mod, pieces: list[Piece], job: Job) -> None:
    """A stream on every core, with the same rows as a whole read.

    The first piece is read here, the others at once on the pool, each from a state guessed by replaying
    the stream's first chunk and the lines just before the piece (``warm``); ``settle`` then keeps or reads
    again each of them in turn.
    """
    pool = job.pool
    assert pool is not None  # plan() cuts a stream only when there is a pool
    ctxs = [context(st, job) for st in members]
    lines = _Lines(members, pieces, job)
    head = pool.submit(head_state, mod, members[0].f.quiet(), ctxs[0], job.opts.chunk_bytes)
    cancel = threading.Event()
    ahead = {
        p: pool.submit(_read_ahead, idx, mod, members, ctxs, pieces, p, lines, head, job, cancel)
        for p in range(1, len(pieces))
    }
    settle(idx, members, mod, pieces, job, ctxs, lines.first_line, ahead, cancel)


def settle(
    idx: int,
    members: list[FileState],
    mod,
    pieces: list[Piece],
    job: Job,
    ctxs: list[ParseContext],
    first_line: Callable[[int], int],
    ahead: dict[int, Future],
    cancel: threading.Event,
    start: dict | None = None,
) -> None:
    """The pieces read ahead (``ahead``: by piece, those read, or being read), taken in order.

    When the piece before is done, its end state is the true one: a guess equal to it, but for the counters
    that number rows (``SEGMENT_COUNTERS``), keeps the piece's rows, shifted by the counters' difference; any
    other difference (a record open across the cut that began before the replayed lines, a restart's new
    settings) drops them and reads the piece again here, from the true state; so does a piece not read ahead
    (the first, in-process). ``start``: the true state before the first piece (a cluster's access log: its head's,
    ``head_state``), else empty. A file whose parser fails stops there, as in a whole read: the pieces of it read
    ahead are dropped. ``logscope.cluster.ingest`` settles pieces read by tasks the same way.
    """
    store = job.store
    tally: dict[int, Counter] = {j: Counter() for j in range(len(members))}
    state: dict = dict(start or {})
    broken: set[int] = set()

    def close(
        p: int,
    ) -> None:  # the last piece of a file: say how many of its lines were cut, as a whole read
        m = pieces[p].member
        if (p + 1 == len(pieces) or pieces[p + 1].member != m) and m not in broken:
            members[m].f.messages.extend(sources.tally_messages(tally[m]))

    try:
        for p, piece in enumerate(pieces):
            m, st = piece.member, members[piece.member]
            if m in broken:  # a whole read stops at a file's failure: the rest of the file is not read
                _drop(ahead.pop(p, None), store, (idx, p))
                continue
            got = _result(ahead.pop(p, None))
            offsets = (
                _rebase(getattr(mod, "SEGMENT_COUNTERS", ()), got.assumed, state) if got is not None else None
            )
            if got is not None and offsets is not None:
                store.shift((idx, p), offsets)
                _merge(st, got.part)
                tally[m] += got.tally
                state = _shift_state(got.end, offsets)
            else:
                store.drop((idx, p))
                span = replace(piece.span, first_line=first_line(p))
                try:
                    _read_segment(mod, st, ctxs[m], span, state, (idx, p), job, tally[m])
                except Exception as e:  # noqa: BLE001 - one bad file must not stop the stream
                    broken.add(m)
                    failed(st, mod, e)
            close(p)
        last = len(members) - 1
        if last not in broken:
            try:
                finish(mod, members[last], ctxs[last], state, store, (idx, len(pieces), 0), members[:last])
            except Exception as e:  # noqa: BLE001
                failed(members[last], mod, e)
    finally:
        cancel.set()
        for p, fut in ahead.items():  # after an error: wait for the reads ahead to stop, then drop their rows
            _drop(fut, store, (idx, p))


def _result(fut: Future | None) -> _Ahead | None:
    """A piece read ahead, or None: cancelled, or its parser failed (then it is read again in turn, and a
    failure there stops its file where a whole read would)."""
    if fut is None:
        return None
    try:
        return fut.result()
    except Exception:  # noqa: BLE001
        return None


def _drop(fut: Future | None, store: Store, seg: tuple[int, int]) -> None:
    _result(fut)  # wait for it to stop
    store.drop(seg)


def _read_segment(
    mod,
    st: FileState,
    ctx: ParseContext,
    span: sources.Span,
    state: dict,
    seg: tuple[int, int],
    job: Job,
    tally: Counter,
    cancel: threading.Event | None = None,
) -> bool:
    """Parse one span into ``st`` and the store; False when cancelled."""
    chunks = sources.iter_line_chunks(st.f, job.opts.chunk_bytes, span, tally, job.meter.reader(st.f))
    return read(mod, st, ctx, chunks, state, job, seg, cancel=cancel) is not None


def _read_ahead(
    idx: int,
    mod,
    members: list[FileState],
    ctxs: list[ParseContext],
    pieces: list[Piece],
    p: int,
    lines: _Lines,
    head: Future,
    job: Job,
    cancel: threading.Event,
) -> _Ahead | None:
    """A piece read from a guessed state (on the pool, before the pieces ahead of it are done)."""
    span = replace(pieces[p].span, first_line=lines.first_line(p))
    state = warm(mod, members, ctxs, pieces[p], span, lines, head.result())
    if cancel.is_set():
        return None
    return read_from(idx, mod, members, ctxs, pieces[p], p, span, state, job, cancel)


def read_from(
    idx: int,
    mod,
    members: list[FileState],
    ctxs: list[ParseContext],
    piece: Piece,
    p: int,
    span: sources.Span,
    state: dict,
    job: Job,
    cancel: threading.Event,
) -> _Ahead | None:
    """Piece ``p`` read from ``state`` (a guess, or the true state of a first piece), its tallies apart from its
    file's, to be merged by ``settle``; None when cancelled."""
    st = members[piece.member]
    assumed = {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}
    # a generous shape limit: merged into the file's counter later, in order, it then bounds them the same
    part = FileState(
        st.f.quiet(),
        st.format,
        st.kind,
        st.confidence,
        st.replica,
        copy_of=st.copy_of,
        plausible=st.plausible,
        shapes=unrecognized.ShapeCounter(limit=10 * unrecognized.MAX_SHAPES),
    )
    tally: Counter = Counter()
    if not _read_segment(mod, part, ctxs[piece.member], span, state, (idx, p), job, tally, cancel):
        return None
    return _Ahead(assumed, state, part, tally)


def head_state(mod, f: sources.InputFile, ctx: ParseContext, chunk_bytes: int) -> tuple[dict, int]:
    """The state after the stream's first chunk (where the server states its settings), and its last line."""
    state: dict = {}
    chunks = sources.iter_line_chunks(f, chunk_bytes)
    head = next(
        headed(chunks) if independent(mod) else chunks, None
    )  # the first chunk ``streams.parsed`` takes
    if head is None or head.height == 0:
        return state, 0
    mod.parse_chunk(head, ctx, state)
    return state, int(head["line_no"][-1])


def warm(
    mod,
    members: list[FileState],
    ctxs: list[ParseContext],
    piece: Piece,
    span: sources.Span,
    lines: LinesBefore,
    head: tuple[dict, int],
) -> dict:
    """The state a parser would likely have at the start of ``piece``: after the stream's first chunk and the
    SEGMENT_WINDOW bytes before the piece (in its file, or at the end of the file before it: open records,
    the last time and month). The rows these give are not kept."""
    state, head_last = dict(head[0]), head[1]
    if independent(mod):  # its state is the first chunk's: the lines before the piece change nothing
        return state
    if span.start > 0:
        j = piece.member
        window = sources.lines_before(members[j].f.quiet(), span.start, SEGMENT_WINDOW, span.first_line)
    else:
        j = piece.member - 1
        window = lines.tail(j)
    if j == 0:  # lines the first chunk already gave
        window = window.filter(pl.col("line_no") > head_last)
    if window.height:
        mod.parse_chunk(window, ctxs[j], state)
    return state


def _rebase(counters: tuple[str, ...], assumed: dict, true: dict) -> dict[str, int] | None:
    """The counter offsets that turn a segment read from ``assumed`` into one read from ``true``, or None
    when the two states differ in anything else."""
    if assumed.keys() != true.keys():
        return None
    offsets = {c: int(true.get(c) or 0) - int(assumed.get(c) or 0) for c in counters}
    if all(key in counters or _same(a, true[key], offsets) for key, a in assumed.items()):
        return offsets
    return None


def _same(a, b, offsets: dict[str, int]) -> bool:
    if isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame):
        moved = shifted(a, offsets, a.columns)  # a DataFrame, as ``a`` is
        return a.schema == b.schema and isinstance(moved, pl.DataFrame) and moved.equals(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], offsets) for k in a)
    return type(a) is type(b) and a == b


def _shift_state(state: dict, offsets: dict[str, int]) -> dict:
    return {
        k: (
            v + offsets[k]
            if k in offsets
            else shifted(v, offsets, v.columns)
            if isinstance(v, pl.DataFrame)
            else v
        )
        for k, v in state.items()
    }


def _merge(st: FileState, part: FileState) -> None:
    """A segment's tallies added to its file's (segments are merged in file order)."""
    st.lines_total += part.lines_total
    st.lines_parsed += part.lines_parsed
    st.outliers += part.outliers
    st.outlier_example = st.outlier_example or part.outlier_example
    st.bad_times += part.bad_times
    st.bad_time_example = st.bad_time_example or part.bad_time_example
    st.bad_values += part.bad_values
    st.bad_value_example = st.bad_value_example or part.bad_value_example
    add_repairs(st.repairs, part.repairs)
    st.shapes.merge(part.shapes)
    st.assumptions += [a for a in part.assumptions if a not in st.assumptions]
    st.f.messages += [m for m in part.f.messages if m not in st.f.messages]
