"""Ingest: detect every file's format, parse streams in parallel, write the Parquet tables.

Memory stays bounded: files are read in chunks of lines; parsed rows are kept in memory up to
a budget (``IngestOptions.memory_bytes``) and spilled to Parquet part files past it, one part
per stream and table, and the final tables are then assembled by polars' streaming engine.
Small folders never touch a part file. docs/performance.md says where the time goes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

import parsers
from parsers.base import ChunkResult, ParseContext

from . import __version__, derive, schemas, sources, unrecognized

PARSED_TABLES = (
    "server_stats",
    "server_events",
    "server_request_events",
    "server_metrics",
    "gateway_attempts",
    "gateway_errors",
    "client_attempts",
    "client_requests",
    "client_phases",
)
# rows per Parquet row group: a streaming scan decodes a few groups at once, so smaller groups keep
# every later scan (derive, correlate) light (64k: 314 MB vs 574 MB scanning 3M request events)
ROW_GROUP = 64_000
# a file whose first lines are another file's first lines may be a copy of it (or the same log collected
# earlier): only such files are compared byte by byte; a copy shorter than this is not looked for
COPY_KEY_LINES = 50
COPY_NOTE = "every line of it is in "  # how a copy's message starts (files.parquet, the CLI's note)
DEFAULT_SPEED = 100  # MB/s on one core of a parser that states none (parsers/base.py)
# bytes before a segment's start replayed to guess its parser's state: a record open across the cut must
# start within them for the guess to hold (a traceback is a few KB; else the segment is read again in turn)
SEGMENT_WINDOW = 1024 * 1024
_YEAR = re.compile(r"(?<![\d.])(20\d\d)[-/](0[1-9]|1[0-2])[-/](0[1-9]|[12]\d|3[01])[T ]\d\d:\d\d")
_EPOCH = re.compile(r"(?<![\d.])(1[5-9]\d{8})(?:\.\d+|\d{3})?(?![\d])")


def default_workers() -> int:
    """Streams parsed at once: one more than the cores this process may use, at most 4. Polars releases
    the GIL in its kernels, but each stream also runs Python between them and some single-threaded
    kernels: a third stream on 2 cores fills those gaps (1 GB bench: 11.7 -> 11.2 s, peak RSS at 5 GB
    unchanged). Each stream holds a chunk's intermediate columns, hence the cap."""
    return min(4, _cores() + 1)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass
class IngestOptions:
    tz: str = "UTC"
    include_prompts: bool = False
    replica: str | None = None  # force one replica name for every server file
    nginx_log_format: str | None = None
    workers: int = field(default_factory=default_workers)
    chunk_bytes: int = sources.CHUNK_BYTES
    memory_bytes: int = 128 * 1024 * 1024  # parsed rows held in memory before spilling to part files
    segment_bytes: int = 32 * 1024 * 1024  # the smallest segment a large file is cut into (``_plan``)
    segments: int | None = None  # force this many segments per file of a format that allows them (tests, bench)


@dataclass
class FileState:
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
    stamps: list[datetime] = field(default_factory=list)  # full timestamps in the head, for the reference year
    head_key: int | None = None  # hash of the first COPY_KEY_LINES lines: files that may be copies share it
    copy_of: str | None = None  # another input holds all of this file's lines: its rows are not added


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


def ingest(
    root: str | Path, out_dir: str | Path, options: IngestOptions | None = None, progress: Progress | None = None
) -> IngestResult:
    """Parse every log under ``root`` into Parquet tables in ``out_dir``."""
    t0 = time.perf_counter()
    opts = options or IngestOptions()
    root, out = Path(root), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / sources.OUTPUT_MARKER).write_text("logscope output folder: ingest skips it\n")
    # written last: a folder whose ingest stopped half-way holds none, so it is never reused
    (out / "ingest.json").unlink(missing_ok=True)
    parts = out / "_parts"  # created only when rows spill out of memory
    shutil.rmtree(parts, ignore_errors=True)

    found = _found(root, out)
    # chunks of formats whose chunks are independent (parsers/base.py) run here, a file on every core
    chunk_pool = ThreadPoolExecutor(max_workers=_cores(), thread_name_prefix="chunk") if opts.workers > 1 else None
    with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as ex:
        states = _detect(found, opts, root, ex)
        year, year_source, ref_ts = _reference_year(states, found)
        streams = _streams(states)
        store = _Store(parts, opts.memory_bytes)
        job = _Job(opts, (year, year_source, ref_ts), store, chunk_pool, sum(_cost(m) for m in streams) / _cores(),
                   _Meter(sum(max(s.f.size, 0) for s in states), progress))

        def run(item):
            idx, members = item
            _parse_stream(idx, members, job)
            job.meter.done(members)

        # streams in parallel: polars releases the GIL, and most of a parser's kernels use one core
        try:
            # a stream's index orders the tables' rows (by path); the slowest streams start first
            list(ex.map(run, sorted(enumerate(streams), key=lambda item: -_cost(item[1]))))
        finally:
            if chunk_pool is not None:
                chunk_pool.shutdown()

    for name in PARSED_TABLES:
        store.write(name, out / f"{name}.parquet")
    notes = derive.finalize(out)
    files = _files_table(states, out)
    files.write_parquet(out / "files.parquet")
    _unrec_table(states).write_parquet(out / "unrecognized.parquet")
    shutil.rmtree(parts, ignore_errors=True)
    meta = {
        "logscope_version": __version__,
        "input": str(root),
        "tz": opts.tz,
        "year": year,
        "year_source": year_source,
        "notes": notes,
        "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "fingerprint": fingerprint(root, found, opts),
    }
    (out / "ingest.json").write_text(json.dumps(meta, indent=1))
    return IngestResult(out, files, time.perf_counter() - t0, sum(max(s.f.size, 0) for s in states))


def reuse(root: str | Path, out_dir: str | Path, options: IngestOptions | None = None) -> IngestResult | None:
    """The result of the ingest ``out_dir`` already holds when it read the same files (path, size,
    modification time) with the same options and the same code; None when anything differs, so a
    second ``analyze`` of a folder (another SLO, another range) skips the parse."""
    root, out = Path(root), Path(out_dir)
    try:
        meta = json.loads((out / "ingest.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    found = _found(root, out)
    if meta.get("fingerprint") != fingerprint(root, found, options or IngestOptions()):
        return None
    needed = [*PARSED_TABLES, *derive.TABLES, "files", "unrecognized"]
    if not all((out / f"{n}.parquet").is_file() for n in needed):
        return None
    files = pl.read_parquet(out / "files.parquet")
    return IngestResult(out, files, 0.0, sum(max(f.size, 0) for f in found), reused=True)


def fingerprint(root: Path, found: list[sources.InputFile], opts: IngestOptions) -> dict:
    """What an ingest's tables depend on: the folder, every input file's path, size and modification
    time, the options that change parsing, and the code (logscope's and the parsers' sources, polars'
    version). The folder is there for the report, which names it: a copy elsewhere is parsed again."""
    files = [[f.rel, f.size, f.mtime_ns] for f in found]
    options = {"tz": opts.tz, "include_prompts": opts.include_prompts, "replica": opts.replica,
               "nginx_log_format": opts.nginx_log_format}
    return {"root": str(Path(root).resolve()), "files": files, "options": options, "code": _code_digest()}


@functools.cache
def _code_digest() -> str:
    h = hashlib.sha256(f"{__version__} polars {pl.__version__}".encode())
    for pkg in (Path(__file__).parent, Path(parsers.__file__).parent):
        for p in sorted(pkg.rglob("*.py")):
            h.update(p.relative_to(pkg).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _found(root: Path, out: Path) -> list[sources.InputFile]:
    return [f for f in sources.discover(root) if not _inside(f.path, out)]


def _inside(p: Path, d: Path) -> bool:
    try:
        p.resolve().relative_to(d.resolve())
        return True
    except ValueError:
        return False


def _detect(found: list[sources.InputFile], opts: IngestOptions, root: Path, ex: ThreadPoolExecutor) -> list[FileState]:
    """Every file's format. The heads are read on the pool (reading, decompressing); the detectors then run
    format by format over all heads (``parsers.detect_many``; 420 small files: 3.0 -> 1.2 s)."""
    probes = list(ex.map(_probe, found))
    heads = [p for p in probes if isinstance(p, list)]
    detections = iter(parsers.detect_many(heads, ex, opts.workers))
    states = [p if isinstance(p, FileState) else _detected(f, p, next(detections), opts, root)
              for f, p in zip(found, probes, strict=True)]
    _mark_copies(states)
    return states


def _mark_copies(states: list[FileState]) -> None:
    """A file whose bytes another input holds too (a copy, or the same log collected at an earlier time, a
    prefix of the later one) is parsed for its coverage but adds no rows: a server log collected twice
    must not count each request twice. The longer file is kept; of two equal ones, the first by path."""
    groups: dict[tuple, list[FileState]] = {}
    for st in states:
        if st.head_key is not None:
            groups.setdefault((st.format, st.head_key), []).append(st)
    for members in groups.values():
        members.sort(key=lambda m: m.f.rel)
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if a.copy_of or b.copy_of:
                    continue
                rel = sources.prefix_relation(a.f, b.f)
                if rel in ("same", "b"):
                    b.copy_of = a.f.rel
                elif rel == "a":
                    a.copy_of = b.f.rel
        kept = {m.f.rel: m for m in members}
        for st in members:
            while st.copy_of and kept[st.copy_of].copy_of:  # a copy of a copy: name the file that is kept
                st.copy_of = kept[st.copy_of].copy_of
        for st in members:
            if st.copy_of:
                st.f.messages.append(f"{COPY_NOTE}{st.copy_of} (a copy, or the same log collected earlier): parsed "
                                     "for the coverage, its rows not added, so nothing counts twice")


def _probe(f: sources.InputFile) -> FileState | list[str]:
    """A file's head lines; a FileState already for a file that holds no text to detect."""
    if f.size == 0:
        st = FileState(f, "empty", "other", 0.0, "")
        f.messages.append("empty file")
        return st
    if f.size < 0:
        f.messages.append("unreadable: cannot stat the file")
        return FileState(f, "unreadable", "other", 0.0, "")
    lines, binary = sources.head(f)
    if binary:
        f.messages.append("binary file (NUL bytes in the first 8 KiB): not parsed, lines counted as unrecognized")
        return FileState(f, "binary", "other", 0.0, "", binary=True)
    return lines


def _detected(f: sources.InputFile, lines: list[str], detection: tuple, opts: IngestOptions, root: Path) -> FileState:
    mod, score, _ = detection
    stamps = _full_stamps(lines)
    if mod is None:
        if any(ln.strip() for ln in lines):
            f.messages.append(f"unknown format (best detection score {score:.2f}): lines counted as unrecognized")
        else:
            f.messages.append("no text lines")
        return FileState(f, "unknown", "other", score, "")
    replica = opts.replica if (opts.replica and mod.KIND == "server") else _replica(f, root)
    text = [ln for ln in lines if ln.strip()]
    key = hash("\n".join(text[:COPY_KEY_LINES])) if len(text) >= COPY_KEY_LINES else None
    return FileState(f, mod.NAME, mod.KIND, score, replica, stamps=stamps, head_key=key)


def _replica(f: sources.InputFile, root: Path) -> str:
    """The file's folder name when it sits in a sub-folder, else its stem."""
    parent = f.path.parent
    if root.is_dir() and parent.resolve() != root.resolve():
        return parent.name
    name = f.path.name
    for suf in (".gz", ".zst", ".zstd", ".bz2", ".xz"):
        name = name.removesuffix(suf)
    return re.sub(r"(\.\d{1,3})?(\.(log|txt|jsonl|json))?$", "", name) or name


def _full_stamps(lines: list[str]) -> list[datetime]:
    """Dates of the full timestamps (with a year) in a file's head lines, one per line at most."""
    out = []
    for ln in lines[:200]:
        m = _YEAR.search(ln)
        if m:
            out.append(datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC))
            continue
        m = _EPOCH.search(ln)
        if m:
            out.append(datetime.fromtimestamp(int(m.group(1)), UTC))
    return out


def _reference_year(states: list[FileState], found) -> tuple[int, str, datetime | None]:
    """Year for yearless timestamps (and a full reference timestamp): from full timestamps in the
    folder's other files (read from the heads detection already read), else the files' modification times."""
    years: Counter[int] = Counter()
    where: dict[int, str] = {}
    first: dict[int, datetime] = {}
    for st in states:
        for ts in st.stamps:
            years[ts.year] += 1
            where.setdefault(ts.year, st.f.rel)
            first[ts.year] = min(first.get(ts.year, ts), ts)
    if years:
        y = years.most_common(1)[0][0]
        return y, f"year {y} from full timestamps in {where[y]}", first[y]
    mtimes = [f.path.stat().st_mtime for f in found if f.size >= 0]
    if mtimes:
        y = datetime.fromtimestamp(max(mtimes), UTC).year
        return y, f"year {y} from the files' modification time (no full timestamp in the folder)", None
    return datetime.now(UTC).year, "year of today (nothing better was found)", None


def _streams(states: list[FileState]) -> list[list[FileState]]:
    groups: dict[tuple[str, str], list[FileState]] = {}
    for st in states:
        groups.setdefault((st.f.stream_key, st.format), []).append(st)
    out = []
    for members in groups.values():
        members.sort(key=lambda s: -s.f.rotation)  # vllm.log.3 (oldest) ... vllm.log (newest)
        out.append(members)
    return sorted(out, key=lambda ms: ms[-1].f.rel)  # the order of the tables' rows: by path


def _cost(members: list[FileState]) -> float:
    """A stream's expected parse time, to start the longest first so that every worker stays busy to the
    end: bytes over the parser's speed (a vLLM log costs twice an nginx access log of its size)."""
    mod = parsers.BY_NAME.get(members[0].format)
    return sum(max(m.f.size, 0) for m in members) / getattr(mod, "SPEED", DEFAULT_SPEED)


class _Meter:
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
class _Job:
    """What the streams of one ingest share."""

    opts: IngestOptions
    when: tuple  # (year, how it was chosen, a full reference timestamp) for yearless stamps
    store: _Store
    pool: ThreadPoolExecutor | None  # a thread per core: the chunks of INDEPENDENT_CHUNKS formats, segments
    share: float  # the folder's expected parse time per core (``_plan``)
    meter: _Meter


def _parse_stream(idx: int, members: list[FileState], job: _Job) -> None:
    """Parse one stream (a file, or a rotated set oldest first) into the store under index ``idx``."""
    opts, store = job.opts, job.store
    mod = parsers.BY_NAME.get(members[0].format)
    if len(members) > 1 and mod is not None:
        names = ", ".join(m.f.rel for m in members)
        for m in members:
            m.assumptions.append(f"read as one stream with {names} (oldest first)")
    if mod is not None and mod.MODE == "lines" and (pieces := _plan(members, mod, opts, job.share, job.pool)):
        _parse_pieces(idx, members, mod, pieces, job)
        return
    state: dict = {}
    n_chunk = 0
    for st in members:
        f = st.f
        if mod is None:
            if st.format == "unknown":  # one read: count the lines while grouping their shapes
                for chunk in sources.iter_line_chunks(f, opts.chunk_bytes, meter=job.meter.reader(f)):
                    st.lines_total += chunk.height
                    st.shapes.add(chunk)
            else:
                st.lines_total = sources.count_lines(f) if f.size > 0 else 0
            continue
        ctx = _context(st, job)
        try:
            if mod.MODE == "document":
                text = sources.read_text(f)
                st.lines_total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
                res = mod.parse_document(text, ctx)
                _take(res, st, store, (idx, 0, n_chunk), None)
                n_chunk += 1
            else:
                chunks = sources.iter_line_chunks(f, opts.chunk_bytes, meter=job.meter.reader(f))
                for chunk, res in _parsed(mod, chunks, ctx, state, job.pool):
                    st.lines_total += chunk.height
                    _take(res, st, store, (idx, 0, n_chunk), chunk)
                    _compact_state(state)
                    n_chunk += 1
                if st is members[-1] and hasattr(mod, "finish"):
                    res = mod.finish(ctx, state)
                    if res is not None:
                        _take(res, st, store, (idx, 0, n_chunk), None)
                        n_chunk += 1
        except Exception as e:  # noqa: BLE001 - one bad file must not stop the folder
            _failed(st, mod, e)


def _context(st: FileState, job: _Job) -> ParseContext:
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
        file_mtime=datetime.fromtimestamp(f.path.stat().st_mtime, UTC),
        reference_ts=ref_ts,
    )


def _failed(st: FileState, mod, e: Exception) -> None:
    """A parser failed on a file: the rows read before are kept, and the lines after the failure still count,
    as unrecognized (nothing read is lost from the coverage)."""
    f = st.f
    st.lines_total = max(st.lines_total, sources.count_lines(f))
    st.lines_parsed = min(st.lines_parsed, st.lines_total)
    f.messages.append(f"parser {mod.NAME} failed: {type(e).__name__}: {e}; the rows read before are kept, "
                      f"the {st.lines_total - st.lines_parsed:,} lines not parsed count as unrecognized")


@dataclass(frozen=True)
class _Piece:
    """A part of a stream read on its own: a file of a rotated set, or a segment of a large uncompressed file."""

    member: int  # the file's index in the stream
    span: sources.Span


def _plan(members: list[FileState], mod, opts, share: float, pool: ThreadPoolExecutor | None) -> list[_Piece] | None:
    """The pieces to read a stream in on every core, or None to read it whole, in order.

    Only a format that allows it (``SEGMENT_COUNTERS``, parsers/base.py) is cut, when the stream is longer
    than its folder's share of a core (a folder of one large vLLM log used 1.16 cores): each file of a
    rotated set is a piece, and an uncompressed file that is itself that long is cut into segments of at
    least ``opts.segment_bytes``. ``opts.segments`` forces the cutting (tests, bench)."""
    if pool is None or not getattr(mod, "SEGMENT_COUNTERS", None):
        return None

    def ways(sts: list[FileState]) -> int:
        return opts.segments or min(_cores(), round(_cost(sts) / share) if share > 0 else 1)

    if ways(members) < 2:
        return None
    pieces = []
    for j, st in enumerate(members):
        n = min(ways([st]), max(st.f.size, 0) // max(opts.segment_bytes, 1)) if not opts.segments else opts.segments
        pieces += [_Piece(j, sp) for sp in (sources.segments(st.f, n, opts.chunk_bytes) if n > 1
                                            else [sources.Span(0, 0, None)])]
    return pieces if len(pieces) > 1 else None


@dataclass
class _Ahead:
    """A piece read ahead of its turn, from a state guessed by ``_warm``."""

    assumed: dict  # the guessed state at the piece's start
    end: dict  # the state at its end
    part: FileState  # its lines, coverage, shapes and notes
    cuts: list[int]  # lines cut to MAX_LINE_CHARS


class _Lines:
    """What the pieces need to know of the lines before them, read on the pool: a piece's first line within
    its file (the lines a whole read yields for the segments before it) and, for a piece that opens a file, the last lines of
    the file before it (``SEGMENT_WINDOW`` bytes, numbered)."""

    def __init__(self, members: list[FileState], pieces: list[_Piece], job: _Job) -> None:
        pool = job.pool
        assert pool is not None
        self.pieces = pieces
        self.spans = {p: pool.submit(sources.span_lines, members[pc.member].f, pc.span, job.opts.chunk_bytes)
                      for p, pc in enumerate(pieces) if pc.span.stop is not None}
        opened = {pc.member - 1 for pc in pieces if pc.span.start == 0 and pc.member > 0}
        self.tails = {j: pool.submit(sources.tail_lines, members[j].f.quiet(), SEGMENT_WINDOW) for j in sorted(opened)}

    def first_line(self, p: int) -> int:
        m = self.pieces[p].member
        return sum(self.spans[q].result() for q in range(p) if self.pieces[q].member == m)

    def tail(self, j: int) -> pl.DataFrame:
        return self.tails[j].result()


def _parse_pieces(idx: int, members: list[FileState], mod, pieces: list[_Piece], job: _Job) -> None:
    """A stream on every core, with the same rows as a whole read.

    The first piece is read here, the others at once on the pool, each from a state guessed by replaying
    the stream's first chunk and the lines just before the piece (``_warm``). When the piece before is
    done, its end state is the true one: a guess equal to it, but for the counters that number rows
    (``SEGMENT_COUNTERS``), keeps the piece's rows, shifted by the counters' difference; any other
    difference (a record open across the cut that began before the replayed lines, a restart's new
    settings) drops them and reads the piece again here, from the true state. A file whose parser fails
    stops there, as in a whole read: the pieces of it read ahead are dropped.
    """
    store, pool = job.store, job.pool
    assert pool is not None  # _plan cuts a stream only when there is a pool
    ctxs = [_context(st, job) for st in members]
    lines = _Lines(members, pieces, job)
    head = pool.submit(_head_state, mod, members[0].f.quiet(), ctxs[0], job.opts.chunk_bytes)
    cancel = threading.Event()
    ahead = {p: pool.submit(_read_ahead, idx, mod, members, ctxs, pieces, p, lines, head, job, cancel)
             for p in range(1, len(pieces))}
    cuts: dict[int, list[int]] = {j: [] for j in range(len(members))}
    state: dict = {}
    failed: set[int] = set()

    def close(p: int) -> None:  # the last piece of a file: say how many of its lines were cut, as a whole read
        m = pieces[p].member
        if (p + 1 == len(pieces) or pieces[p + 1].member != m) and m not in failed and sum(cuts[m]):
            members[m].f.messages.append(sources.cut_message(sum(cuts[m])))

    try:
        for p, piece in enumerate(pieces):
            m, st = piece.member, members[piece.member]
            if m in failed:  # a whole read stops at a file's failure: the rest of the file is not read
                _drop(ahead.pop(p, None), store, (idx, p))
                continue
            got = _result(ahead.pop(p, None))
            offsets = _rebase(mod.SEGMENT_COUNTERS, got.assumed, state) if got is not None else None
            if offsets is not None:
                store.shift((idx, p), offsets)
                _merge(st, got.part)
                cuts[m] += got.cuts
                state = _shift_state(got.end, offsets)
            else:
                store.drop((idx, p))
                span = replace(piece.span, first_line=lines.first_line(p))
                try:
                    _read_segment(mod, st, ctxs[m], span, state, (idx, p), job, cuts[m])
                except Exception as e:  # noqa: BLE001 - one bad file must not stop the stream
                    failed.add(m)
                    _failed(st, mod, e)
            close(p)
        last = len(members) - 1
        if hasattr(mod, "finish") and last not in failed:
            try:
                res = mod.finish(ctxs[last], state)
                if res is not None:
                    _take(res, members[last], store, (idx, len(pieces), 0), None)
            except Exception as e:  # noqa: BLE001
                _failed(members[last], mod, e)
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


def _drop(fut: Future | None, store: _Store, seg: tuple[int, int]) -> None:
    _result(fut)  # wait for it to stop
    store.drop(seg)


def _read_segment(mod, st: FileState, ctx: ParseContext, span: sources.Span, state: dict, seg: tuple[int, int],
                  job: _Job, cuts: list[int], cancel: threading.Event | None = None) -> bool:
    """Parse one span into ``st`` and the store; False when cancelled."""
    chunks = sources.iter_line_chunks(st.f, job.opts.chunk_bytes, span, cuts, job.meter.reader(st.f))
    for n, chunk in enumerate(chunks):
        if cancel is not None and cancel.is_set():
            return False
        res = mod.parse_chunk(chunk, ctx, state)
        st.lines_total += chunk.height
        _take(res, st, job.store, (*seg, n), chunk)
        _compact_state(state)
    return True


def _read_ahead(idx: int, mod, members: list[FileState], ctxs: list[ParseContext], pieces: list[_Piece], p: int,
                lines: _Lines, head: Future, job: _Job, cancel: threading.Event) -> _Ahead | None:
    """A piece read from a guessed state (on the pool, before the pieces ahead of it are done)."""
    piece = pieces[p]
    st = members[piece.member]
    span = replace(piece.span, first_line=lines.first_line(p))
    state = _warm(mod, members, ctxs, piece, span, lines, head.result())
    if cancel.is_set():
        return None
    assumed = {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}
    # a generous shape limit: merged into the file's counter later, in order, it then bounds them the same
    part = FileState(st.f.quiet(), st.format, st.kind, st.confidence, st.replica, copy_of=st.copy_of,
                     shapes=unrecognized.ShapeCounter(limit=10 * unrecognized.MAX_SHAPES))
    cuts: list[int] = []
    if not _read_segment(mod, part, ctxs[piece.member], span, state, (idx, p), job, cuts, cancel):
        return None
    return _Ahead(assumed, state, part, cuts)


def _head_state(mod, f: sources.InputFile, ctx: ParseContext, chunk_bytes: int) -> tuple[dict, int]:
    """The state after the stream's first chunk (where the server states its settings), and its last line."""
    state: dict = {}
    head = next(sources.iter_line_chunks(f, chunk_bytes), None)
    if head is None or head.height == 0:
        return state, 0
    mod.parse_chunk(head, ctx, state)
    return state, int(head["line_no"][-1])


def _warm(mod, members: list[FileState], ctxs: list[ParseContext], piece: _Piece, span: sources.Span,
          lines: _Lines, head: tuple[dict, int]) -> dict:
    """The state a parser would likely have at the start of ``piece``: after the stream's first chunk and the
    SEGMENT_WINDOW bytes before the piece (in its file, or at the end of the file before it: open records,
    the last time and month). The rows these give are not kept."""
    state, head_last = dict(head[0]), head[1]
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
        return a.schema == b.schema and _shift_frame(a, offsets).equals(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], offsets) for k in a)
    return type(a) is type(b) and a == b


def _shift_frame(df: pl.DataFrame, offsets: dict[str, int]) -> pl.DataFrame:
    return df.with_columns(pl.col(c) + off for c, off in offsets.items() if c in df.columns and off)


def _shift_state(state: dict, offsets: dict[str, int]) -> dict:
    return {k: (v + offsets[k] if k in offsets else _shift_frame(v, offsets) if isinstance(v, pl.DataFrame) else v)
            for k, v in state.items()}


def _merge(st: FileState, part: FileState) -> None:
    """A segment's tallies added to its file's (segments are merged in file order)."""
    st.lines_total += part.lines_total
    st.lines_parsed += part.lines_parsed
    st.shapes.merge(part.shapes)
    st.assumptions += [a for a in part.assumptions if a not in st.assumptions]
    st.f.messages += [m for m in part.f.messages if m not in st.f.messages]


def _parsed(mod, chunks: Iterator[pl.DataFrame], ctx: ParseContext, state: dict,
            pool: ThreadPoolExecutor | None) -> Iterator[tuple[pl.DataFrame, ChunkResult]]:
    """Each chunk with its result, in file order. A format whose chunks are independent once the first
    has set the stream's state (``INDEPENDENT_CHUNKS``, parsers/base.py) has the others parsed on every
    core at once, a few ahead of the one taken (one large access log no longer runs on one core)."""
    if pool is None or not getattr(mod, "INDEPENDENT_CHUNKS", False):
        for chunk in chunks:
            yield chunk, mod.parse_chunk(chunk, ctx, state)
        return
    first = next(chunks, None)
    if first is None:
        return
    yield first, mod.parse_chunk(first, ctx, state)
    ahead: deque[tuple[pl.DataFrame, Future]] = deque()
    limit = _cores() + 1  # in flight: enough to keep every core busy, few for memory
    try:
        for chunk in chunks:
            ahead.append((chunk, pool.submit(mod.parse_chunk, chunk, ctx, state)))
            if len(ahead) >= limit:
                c, fut = ahead.popleft()
                yield c, fut.result()
        while ahead:
            c, fut = ahead.popleft()
            yield c, fut.result()
    finally:
        for _, fut in ahead:  # a failed chunk stops the file: the ones behind it are dropped
            fut.cancel()


def _take(res: ChunkResult, st: FileState, store: _Store, key: tuple[int, int, int], chunk: pl.DataFrame | None) -> None:
    for name, df in res.tables.items():
        if df is None or df.height == 0 or st.copy_of:
            continue
        store.add(name, key, schemas.conform(df, name))
    if res.recognized is not None and chunk is not None:
        ok = res.recognized.fill_null(False)
        n_ok = int(ok.sum())
        st.lines_parsed += n_ok
        if n_ok < chunk.height:  # shape grouping only when something was not recognised
            st.shapes.add(chunk.filter(~ok))
    elif res.lines_parsed is not None:
        st.lines_parsed += res.lines_parsed
    for a in res.assumptions:
        if a not in st.assumptions:
            st.assumptions.append(a)
    for m in res.messages:
        if m not in st.f.messages:
            st.f.messages.append(m)


def _compact(df: pl.DataFrame) -> pl.DataFrame:
    """Copy out the bytes the string columns use: a column sliced or filtered from a chunk shares the
    chunk's whole buffer, so a few kept rows would otherwise hold every chunk read so far in memory."""
    return df.with_columns(pl.col(pl.String) + pl.lit(""))


def _compact_state(state: dict) -> None:
    """Rows a parser carries to the next chunk (open records, pending requests) are compacted too."""
    for k, v in state.items():
        if isinstance(v, pl.DataFrame) and v.height:
            state[k] = _compact(v)


class _Store:
    """Parsed rows of every table, in memory up to ``budget`` bytes, then spilled to part files.

    Rows are keyed (stream index, segment, chunk number), so every table comes out in stream order (by
    path) and, within a stream, file order, whichever worker finished first. A spill writes one part file
    per table, stream and segment, so a large folder makes a few large parts rather than one per chunk.
    A piece read ahead of its turn (``_parse_pieces``) may be dropped, or have its counters shifted.
    """

    def __init__(self, parts: Path, budget: int) -> None:
        self.parts, self.budget = parts, budget
        self.frames: dict[str, list[tuple[tuple[int, int, int], pl.DataFrame]]] = {}
        self.spilled: dict[str, list[tuple[tuple[int, int, int], Path]]] = {}
        self.shifts: dict[tuple[int, int], dict[str, int]] = {}  # (stream, segment) -> counter offsets
        self.size = 0
        self.lock = threading.Lock()

    def add(self, name: str, key: tuple[int, int, int], df: pl.DataFrame) -> None:
        df = _compact(df)
        with self.lock:
            self.frames.setdefault(name, []).append((key, df))
            self.size += df.estimated_size()
            if self.size > self.budget:
                for table in list(self.frames):
                    self._spill(table)
                self.size = 0

    def drop(self, seg: tuple[int, int]) -> None:
        """Forget the rows of one segment (read from a state that turned out not to be the file's)."""
        with self.lock:
            for name in list(self.frames):
                self.frames[name] = [(k, df) for k, df in self.frames[name] if k[:2] != seg]
            for name in list(self.spilled):
                for k, path in self.spilled[name]:
                    if k[:2] == seg:
                        path.unlink(missing_ok=True)
                self.spilled[name] = [(k, p) for k, p in self.spilled[name] if k[:2] != seg]

    def shift(self, seg: tuple[int, int], offsets: dict[str, int]) -> None:
        """Add ``offsets`` to the named columns of one segment's rows when the tables are written."""
        if any(offsets.values()):
            self.shifts[seg] = offsets

    def _spill(self, name: str) -> None:
        by_seg: dict[tuple[int, int], list[tuple[tuple[int, int, int], pl.DataFrame]]] = {}
        for key, df in self.frames.pop(name, []):
            by_seg.setdefault(key[:2], []).append((key, df))
        d = self.parts / name
        d.mkdir(parents=True, exist_ok=True)
        for items in by_seg.values():
            items.sort(key=lambda kv: kv[0])
            first = items[0][0]
            path = d / f"{first[0]:05d}-{first[1]:03d}-{first[2]:06d}.parquet"
            pl.concat([df for _, df in items], rechunk=False).write_parquet(path, compression="lz4", row_group_size=ROW_GROUP)
            self.spilled.setdefault(name, []).append((first, path))

    def _shifted(self, key: tuple[int, int, int], frame: pl.DataFrame | pl.LazyFrame, columns: list[str]):
        offsets = self.shifts.get(key[:2])
        if not offsets:
            return frame
        return frame.with_columns(pl.col(c) + off for c, off in offsets.items() if c in columns and off)

    def write(self, name: str, dest: Path) -> None:
        """The whole table, in key order: straight from memory, or streamed from the part files."""
        columns = list(schemas.TABLES.get(name, ()))
        if name in self.spilled:
            self._spill(name)
            parts = sorted(self.spilled.pop(name))
            if any(k[:2] in self.shifts for k, _ in parts):
                scan = pl.concat([self._shifted(k, pl.scan_parquet(p), columns) for k, p in parts])
            else:
                scan = pl.scan_parquet([p for _, p in parts])
            schemas.conform(scan, name).sink_parquet(dest, row_group_size=ROW_GROUP)
            return
        items = sorted(self.frames.pop(name, []), key=lambda kv: kv[0])
        if not items:
            schemas.empty(name).write_parquet(dest)
            return
        frames = [self._shifted(k, df, columns) for k, df in items]
        pl.concat(frames, rechunk=False).write_parquet(dest, row_group_size=ROW_GROUP)


def _files_table(states: list[FileState], out: Path) -> pl.DataFrame:
    spans = _time_spans(out)
    rows = []
    for st in states:
        first, last = spans.get(st.f.rel, (None, None))
        unrec = max(st.lines_total - st.lines_parsed, 0)
        rows.append(
            {
                "path": st.f.rel,
                "stream": st.f.stream_key,
                "format": st.format,
                "kind": st.kind,
                "confidence": round(st.confidence, 3),
                "replica": st.replica or None,
                "lines_total": st.lines_total,
                "lines_parsed": st.lines_total - unrec,
                "lines_unrecognized": unrec,
                "bytes": st.f.size,
                "first_ts": first,
                "last_ts": last,
                "assumptions": st.assumptions,
                "messages": st.f.messages,
            }
        )
    df = pl.DataFrame(rows, schema=schemas.schema("files")) if rows else schemas.empty("files")
    return df.sort("path")


def _time_spans(out: Path) -> dict[str, tuple]:
    frames = []
    for name in PARSED_TABLES:
        ts_cols = schemas.time_columns(name)
        if not ts_cols or "source" not in schemas.schema(name):
            continue
        lf = pl.scan_parquet(out / f"{name}.parquet")
        frames.append(
            lf.select(
                "source",
                pl.min_horizontal([pl.col(c) for c in ts_cols]).alias("lo"),
                pl.max_horizontal([pl.col(c) for c in ts_cols]).alias("hi"),
            )
        )
    if not frames:
        return {}
    agg = pl.concat(frames).group_by("source").agg(pl.col("lo").min(), pl.col("hi").max()).collect()
    return {r["source"]: (r["lo"], r["hi"]) for r in agg.iter_rows(named=True)}


def _unrec_table(states: list[FileState]) -> pl.DataFrame:
    frames = [st.shapes.frame(st.f.rel) for st in states]
    frames = [f for f in frames if f.height]
    if not frames:
        return schemas.empty("unrecognized")
    return schemas.conform(pl.concat(frames), "unrecognized").sort(["path", "count"], descending=[False, True])
