"""Reading one stream (a file, or a rotated set oldest first) of a folder, and what every read of a stream
shares: the file's tallies (``FileState``), the ingest's settings (``Job``), progress, the rows handed to the
store. A long stream of a format that allows it is read in pieces instead (``logscope.ingest.pieces``)."""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import overload

import polars as pl

import logscope.parsers as parsers
from logscope.parsers.base import ChunkResult, ParseContext

from ..errors import LogscopeError
from . import checks, outliers, sources, unrecognized
from .options import IngestOptions, Progress, cores
from .store import Store, compact

DEFAULT_SPEED = 100  # MB/s on one core of a parser that states none (parsers/base.py)


@dataclass
class FileState:
    """What ingest knows of one input file: its format and replica, its line tallies, shapes and notes."""

    f: sources.InputFile
    format: str
    kind: str
    confidence: float
    replica: str
    binary: bool = False
    lines_total: int = 0
    lines_parsed: int = 0
    assumptions: list[str] = field(default_factory=list)
    shapes: unrecognized.ShapeCounter = field(default_factory=unrecognized.ShapeCounter)
    stamps: list[datetime] = field(
        default_factory=list
    )  # full timestamps in the head, for the reference year
    head_key: int | None = (
        None  # hash of the first ingest.COPY_KEY_LINES lines: files that may be copies share it
    )
    short_key: bool = False  # head_key holds the whole (short) file: only an identical file is its copy
    copy_of: str | None = None  # another input holds all of this file's lines: its rows are not added
    listen: str | None = None  # HOST:PORT its start-up banner names (``replicas``: servers sharing a folder)
    also: str | None = None  # a second format interleaved line by line (parsers/_mixed.py)
    plausible: outliers.Bounds | None = None  # times outside are outliers (``logscope.ingest.outliers``)
    outliers: int = 0  # records whose time was an outlier (set unknown)
    outlier_example: str | None = None
    bad_times: int = 0  # records whose written time is no time (ChunkResult.bad_times)
    bad_time_example: str | None = None
    bad_values: int = 0  # values set null (ChunkResult.bad_values)
    bad_value_example: str | None = None
    repairs: dict[str, int] = field(
        default_factory=dict
    )  # what the parser mended in a paste (ChunkResult.repairs)
    batch: int = 0  # files of the batch it was read in (``logscope.ingest.batches``); 0: read alone


def cost(members: list[FileState]) -> float:
    """A stream's expected parse time, to start the longest first so that every worker stays busy to the
    end: bytes over the parser's speed (a vLLM log costs twice an nginx access log of its size)."""
    mod = parsers.BY_NAME.get(members[0].format)
    return sum(max(m.f.size, 0) for m in members) / getattr(mod, "SPEED", DEFAULT_SPEED)


class Meter:
    """Progress by bytes read, so that a folder of one large file moves the bar too (at most every 1 % or
    0.25 s). A file counts up to its size: a compressed one is whole when its stream is done."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.progress = max(total, 1), progress
        self.by_file: dict[str, int] = {}
        self.count = 0
        self.shown, self.at = 0.0, 0.0
        self.lock = threading.Lock()

    def read(self, f: sources.InputFile, n: int, label: str = "reading", force: bool = False) -> None:
        if self.progress is None:
            return
        with self.lock:
            had = self.by_file.get(f.rel, 0)
            now = min(had + n, max(f.size, 0))
            self.by_file[f.rel] = now
            self.count += now - had
            frac, t = self.count / self.total, time.monotonic()
            if not force and frac - self.shown < 0.01 and t - self.at < 0.25:
                return
            self.shown, self.at = frac, t
            self.progress(f"{label} {f.rel}", frac)  # under the lock: the bar never goes back

    def reader(self, f: sources.InputFile) -> Callable[[int], None] | None:
        return None if self.progress is None else functools.partial(self.read, f)

    def done(self, members: list[FileState]) -> None:
        for m in members:
            self.read(m.f, max(m.f.size, 0), "parsed", force=m is members[-1])


@dataclass
class Job:
    """What the streams of one ingest share."""

    opts: IngestOptions
    when: tuple  # (year, how it was chosen, a full reference timestamp) for yearless stamps
    store: Store
    pool: ThreadPoolExecutor | None  # a thread per core: the chunks of INDEPENDENT_CHUNKS formats, segments
    share: float  # the folder's expected parse time per core (``pieces.plan``)
    meter: Meter
    # bytes of a stream's chunks parsed ahead of the one taken (``parsed``); None: only their count bounds them
    ahead_bytes: int | None = None


def parse(idx: int, members: list[FileState], mod, job: Job) -> None:
    """Parse one stream whole, in order, into the store under index ``idx`` (``mod``: its format's module,
    None for a format logscope does not read: the lines are counted, grouped by shape when unknown)."""
    opts, store = job.opts, job.store
    state: dict = {}
    n_chunk = 0
    if mod is not None and mod.MODE == "document" and len(members) > 1:
        return _document_set(idx, members, mod, job)
    for st in members:
        f = st.f
        if mod is None:
            if st.format == "unknown":  # one read: count the lines while grouping their shapes
                for chunk in sources.iter_line_chunks(f, opts.chunk_bytes, meter=job.meter.reader(f)):
                    st.lines_total += chunk.height
                    st.shapes.add(chunk)
            else:  # a file not read (an image, a link out of the folder) has no lines
                st.lines_total = sources.count_lines(f) if f.size > 0 and not f.skipped else 0
            continue
        ctx = context(st, job)
        try:
            if mod.MODE == "document":
                text = sources.read_text(f)
                st.lines_total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
                res = mod.parse_document(text, ctx)
                take(res, st, store, (idx, 0, n_chunk), None)
                n_chunk += 1
            else:
                chunks = sources.iter_line_chunks(f, opts.chunk_bytes, meter=job.meter.reader(f))
                n_chunk = read(mod, st, ctx, chunks, state, job, (idx, 0), n_chunk, job.pool)
                if st is members[-1]:
                    n_chunk += finish(mod, st, ctx, state, store, (idx, 0, n_chunk), members[:-1])
        except Exception as e:  # noqa: BLE001 - one bad file must not stop the folder
            failed(st, mod, e)


def _document_set(idx: int, members: list[FileState], mod, job: Job) -> None:
    """A rotated set of a document format (a table, a result block: logrotate cuts it anywhere) read as one
    document, oldest first; each row given back to its file by its line number."""
    texts, starts, line = [], [], 0
    for st in members:
        text = sources.read_text(st.f)
        st.lines_total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        texts.append(text if text.endswith("\n") or not text else text + "\n")
        starts.append(line)
        line += st.lines_total
    last = members[-1]
    try:
        res = mod.parse_document("".join(texts), context(last, job))
    except Exception as e:  # noqa: BLE001 - one bad set must not stop the folder
        return failed(last, mod, e)
    names = pl.Series([st.f.rel for st in members], dtype=pl.String)
    first = pl.Series(starts, dtype=pl.Int64)
    own: dict[int, dict[str, pl.DataFrame]] = {}
    split: dict[str, pl.DataFrame] = {}
    for name, df in res.tables.items():
        if df is not None and df.height and "line_no" in df.columns:
            k = (first.search_sorted(df["line_no"] - 1, side="right") - 1).cast(pl.Int64)
            split[name] = df.with_columns(
                k.alias("_k"), names.gather(k).alias("source"), df["line_no"] - first.gather(k)
            )
    # rows that name no line (a client's request, whose attempts do): the file of their first line's row, else
    # the set's newest file
    ids = [
        df.select("logical_request_id", "_k") for df in split.values() if "logical_request_id" in df.columns
    ]
    where = pl.concat(ids).unique("logical_request_id", keep="first") if ids else None
    for name, df in res.tables.items():
        if df is None or not df.height or name in split:
            continue
        newest = pl.lit(len(members) - 1, dtype=pl.Int64)
        if where is not None and "logical_request_id" in df.columns:
            df = df.join(where, on="logical_request_id", how="left").with_columns(
                pl.col("_k").fill_null(newest)
            )
        else:
            df = df.with_columns(newest.alias("_k"))
        split[name] = df.with_columns(names.gather(df["_k"]).alias("source"))
    for name, df in split.items():
        for (i,), rows in df.partition_by("_k", as_dict=True, include_key=False).items():
            own.setdefault(int(i), {})[name] = rows
    # the parser counts the lines it read, not which: a whole read is each file's, else shared out and said so
    total = sum(st.lines_total for st in members)
    parsed = min(res.lines_parsed or 0, total)
    shares = [st.lines_total * parsed // total if total else 0 for st in members]
    shares[-1] += parsed - sum(shares)
    for i, st in enumerate(members):
        part = ChunkResult(
            tables=own.get(i, {}),
            lines_parsed=shares[i],
            assumptions=res.assumptions,
            messages=res.messages,
            bad_times=res.bad_times if st is last else 0,
            bad_time_example=res.bad_time_example if st is last else None,
            bad_values=res.bad_values if st is last else 0,
            bad_value_example=res.bad_value_example if st is last else None,
            repairs=res.repairs if st is last else {},
        )
        take(part, st, job.store, (idx, 0, i), None)
        st.f.messages.append(
            "read as one document with the other files of its rotated set (oldest first): "
            + (
                "every line of the set parsed"
                if parsed == total
                else f"{parsed:,} of the set's {total:,} lines parsed, counted for each file in proportion"
            )
        )


@overload
def read(
    mod,
    st: FileState,
    ctx: ParseContext,
    chunks: Iterator[pl.DataFrame],
    state: dict,
    job: Job,
    key: tuple[int, int],
    first: int = 0,
    pool: ThreadPoolExecutor | None = None,
    cancel: None = None,
) -> int: ...  # nothing to cancel it: always the next chunk number


@overload
def read(
    mod,
    st: FileState,
    ctx: ParseContext,
    chunks: Iterator[pl.DataFrame],
    state: dict,
    job: Job,
    key: tuple[int, int],
    first: int = 0,
    pool: ThreadPoolExecutor | None = None,
    cancel: threading.Event | None = None,
) -> int | None: ...


def read(
    mod,
    st: FileState,
    ctx: ParseContext,
    chunks: Iterator[pl.DataFrame],
    state: dict,
    job: Job,
    key: tuple[int, int],
    first: int = 0,
    pool: ThreadPoolExecutor | None = None,
    cancel: threading.Event | None = None,
) -> int | None:
    """Parse ``chunks`` of one file into ``st`` and the store, under keys (*key, first), (*key, first + 1)...;
    the next chunk number, or None when ``cancel`` was set (no chunk is parsed after it)."""
    n = first
    for chunk, res in parsed(mod, chunks, ctx, state, pool, job.ahead_bytes):
        st.lines_total += chunk.height
        take(res, st, job.store, (*key, n), chunk)
        compact_state(state)
        n += 1
        if cancel is not None and cancel.is_set():
            return None
    return n


def finish(
    mod,
    st: FileState,
    ctx: ParseContext,
    state: dict,
    store: Store,
    key: tuple[int, int, int],
    members: Sequence[FileState] = (),
) -> int:
    """The rows a parser gives at the end of its stream (requests still open), stored under ``key``, the
    stream's last file being ``st``; 1 when there were some, else 0. What it assumed is the whole stream's, so
    each of its ``members`` (a rotated set's older files) states it too: openai_client's 'no DEBUG lines' of a
    set was said of its newest file alone."""
    res = mod.finish(ctx, state) if hasattr(mod, "finish") else None
    if res is None:
        return 0
    take(res, st, store, key, None)
    for other in members:
        once(other.assumptions, res.assumptions)
    return 1


def context(st: FileState, job: Job) -> ParseContext:
    year, year_source, ref_ts = job.when
    opts, f = job.opts, st.f
    return ParseContext(
        source=f.rel,
        replica=st.replica,
        tz=opts.tz,
        year=year,
        year_source=year_source,
        include_prompts=opts.include_prompts,
        options={"nginx_log_format": opts.nginx_log_format, "path": str(f.path)},
        file_mtime=_mtime(f),
        reference_ts=ref_ts,
    )


def _mtime(f: sources.InputFile) -> datetime | None:
    """The file's modification time; None when it has none a datetime holds (year past 9999, or gone)."""
    try:
        return datetime.fromtimestamp(f.path.stat().st_mtime, UTC)
    except (OSError, OverflowError, ValueError):
        return None


def failed(st: FileState, mod, e: Exception) -> None:
    """A parser failed on a file: the rows read before are kept, and the lines after the failure still count,
    as unrecognized (nothing read is lost from the coverage). An error of the output (its disk full: the store
    could not spill the rows) is no parser's: it stops the run."""
    if isinstance(e, LogscopeError):
        raise e
    f = st.f
    st.lines_total = max(st.lines_total, sources.count_lines(f))
    st.lines_parsed = min(st.lines_parsed, st.lines_total)
    said = (
        str(e) if len(str(e)) <= 500 else f"{str(e)[:500]}... ({len(str(e)):,} characters)"
    )  # a regex of MBs
    f.messages.append(
        f"parser {mod.NAME} failed: {type(e).__name__}: {said}; the rows read before are kept, "
        f"the {st.lines_total - st.lines_parsed:,} lines not parsed count as unrecognized"
    )


def parsed(
    mod,
    chunks: Iterator[pl.DataFrame],
    ctx: ParseContext,
    state: dict,
    pool: ThreadPoolExecutor | None,
    ahead_bytes: int | None = None,
) -> Iterator[tuple[pl.DataFrame, ChunkResult]]:
    """Each chunk with its result, in file order. A format whose chunks are independent once the first
    has set the stream's state (``INDEPENDENT_CHUNKS``, parsers/base.py) has the others parsed on every
    core at once, a few ahead of the one taken (one large access log no longer runs on one core): at most
    ``cores() + 1`` chunks, and past the first no more than ``ahead_bytes`` of them (``Job.ahead_bytes``, from
    ``--max-memory``). The stream's own thread takes their results before it hands out more, so what is in flight
    does not grow when it is starved of CPU."""
    if getattr(mod, "INDEPENDENT_CHUNKS", False) or getattr(mod, "HEAD_STATE", False):
        chunks = headed(chunks)
    if pool is None or not getattr(mod, "INDEPENDENT_CHUNKS", False):
        for chunk in chunks:
            yield chunk, mod.parse_chunk(chunk, ctx, state)
        return
    first = next(chunks, None)
    if first is None:
        return
    yield first, mod.parse_chunk(first, ctx, state)
    ahead: deque[tuple[pl.DataFrame, Future, int]] = deque()
    limit = cores() + 1  # in flight: enough to keep every core busy, few for memory
    held = 0  # the chunks' bytes in flight
    try:
        for chunk in chunks:
            size = int(chunk.estimated_size())
            while ahead and ahead_bytes is not None and held + size > ahead_bytes:
                c, fut, n = ahead.popleft()
                held -= n
                yield c, fut.result()
            ahead.append((chunk, pool.submit(mod.parse_chunk, chunk, ctx, state), size))
            held += size
            if len(ahead) >= limit:  # taken before the next chunk is read: no chunk held that is not parsing
                c, fut, n = ahead.popleft()
                held -= n
                yield c, fut.result()
        while ahead:
            c, fut, _ = ahead.popleft()
            yield c, fut.result()
    finally:
        for _, fut, _ in ahead:  # a failed chunk stops the file: the ones behind it are dropped
            fut.cancel()


# the non-blank lines a file's first chunk is joined up to: those nginx infers its layout from (the first 200,
# parsers/_nginx_format.py ``candidates``), the lines detection reads
HEAD_JOINED = sources.HEAD_LINES


def headed(chunks: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """``chunks`` with the first ones joined until they hold the file's first HEAD_JOINED non-blank lines: a format
    whose first chunk sets its state (``INDEPENDENT_CHUNKS``: an access log's layout; ``HEAD_STATE``) then sets it
    from the same lines whatever the chunk size (16 KiB chunks of the lab's nginx logs held 43-52 lines: '52 of the first lines
    match', 200 read whole). At most CHUNK_BYTES (or CHUNK_LINES rows) are joined, as a whole read's first chunk
    holds: lines of over 20 KB on average still give a head that depends on the chunks."""
    held: list[pl.DataFrame] | None = []  # None: the head is out
    size = rows = filled = 0
    for chunk in chunks:
        if held is None:
            yield chunk
            continue
        held.append(chunk)
        line = chunk.get_column("line")
        size += int(line.str.len_bytes().sum())
        rows += chunk.height
        filled += int((line.str.strip_chars() != "").sum())
        if filled >= HEAD_JOINED or size >= sources.CHUNK_BYTES or rows >= sources.CHUNK_LINES:
            yield held[0] if len(held) == 1 else pl.concat(held)
            held = None
    if held:
        yield held[0] if len(held) == 1 else pl.concat(held)


def take(
    res: ChunkResult, st: FileState, store: Store, key: tuple[int, int, int], chunk: pl.DataFrame | None
) -> None:
    for name, df in res.tables.items():
        if df is None or df.height == 0 or st.copy_of:
            continue
        # numbers no field holds set null, the schema's casts, times no incident holds set unknown, strings copied
        df, (n, example), (far, far_example) = checks.checked(df, name, st.plausible)
        st.bad_values += n
        st.bad_value_example = st.bad_value_example or example
        st.outliers += far
        st.outlier_example = st.outlier_example or far_example
        store.add(name, key, df, compacted=True)
    if res.recognized is not None and chunk is not None:
        ok = res.recognized.fill_null(False)
        n_ok = int(ok.sum())
        st.lines_parsed += n_ok
        if n_ok < chunk.height:  # shape grouping only when something was not recognised
            st.shapes.add(chunk.filter(~ok))
    elif res.lines_parsed is not None:
        st.lines_parsed += res.lines_parsed
    st.bad_times += res.bad_times
    st.bad_time_example = st.bad_time_example or res.bad_time_example
    st.bad_values += res.bad_values
    st.bad_value_example = st.bad_value_example or res.bad_value_example
    add_repairs(st.repairs, res.repairs)
    once(st.assumptions, res.assumptions)
    once(st.f.messages, res.messages)


def once(said: list[str], more: Iterable[str]) -> None:
    """``more`` added to ``said`` in order, each text once (a file's assumptions and messages)."""
    for x in more:
        if x not in said:
            said.append(x)


def add_repairs(total: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


# what each kind of repair says, in a file's messages (ChunkResult.repairs)
_REPAIRS = (
    ("joined", "hard-wrapped line(s) (a record cut at a fixed width) joined to the record they continue"),
    ("split", "record(s) split out of lines that held several (a paste flattened or glued them)"),
    ("markdown", "line(s) read after removing the markdown in front of them (quote, list, table, code)"),
    ("bare", "record(s) recognised by their text alone, pasted without their header"),
    ("untimed", "row(s) without any time (none written, none before them): ts is null"),
)


def repair_messages(repairs: dict[str, int]) -> list[str]:
    """The file's messages for what its parser mended: '3 hard-wrapped line(s) ... joined ...'."""
    return [f"{repairs[k]:,} {what}" for k, what in _REPAIRS if repairs.get(k)]


def compact_state(state: dict) -> None:
    """Rows a parser carries to the next chunk (open records, pending requests) are compacted too."""
    for k, v in state.items():
        if isinstance(v, pl.DataFrame) and v.height:
            state[k] = compact(v)
