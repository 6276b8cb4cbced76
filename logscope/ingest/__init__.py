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
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

import logscope.parsers as parsers
from logscope.parsers import _lexicon as lexicon
from logscope.parsers import _mixed as mixed

from .. import __version__, _scan, jsontext, schemas
from ..resources import shape
from . import batches, derive, envelopes, inputs, outliers, pieces, probe, replicas, rotated, sources, streams
from .options import IngestOptions, IngestResult, Progress, cores, default_workers
from .store import Store
from .streams import FileState, Job, Meter, cost

__all__ = [
    "COPY_NOTE",
    "PARSED_TABLES",
    "IngestOptions",
    "IngestResult",
    "Progress",
    "default_workers",
    "fingerprint",
    "ingest",
    "reuse",
]

PARSED_TABLES = (
    "server_stats",
    "server_spec_decode",
    "server_events",
    "server_request_events",
    "server_metrics",
    "gateway_attempts",
    "gateway_errors",
    "client_attempts",
    "client_requests",
    "client_phases",
    "spans",
    "platform_events",  # the kernel's and Kubernetes' lines (parsers/kernel_log.py, parsers/k8s_kubectl.py)
    "platform_pods",
    "load_tests",
)
# a file whose first lines are another file's first lines may be a copy of it (or the same log collected
# earlier): only such files are compared byte by byte; a copy shorter than this is not looked for
COPY_KEY_LINES = 50
_WHOLE = "whole file"  # in the key of a file shorter than COPY_KEY_LINES
COPY_NOTE = "every line of it is in "  # how a copy's message starts (files.parquet, the CLI's note)
_YEAR = re.compile(r"(?<![\d.])(20\d\d)[-/](0[1-9]|1[0-2])[-/](0[1-9]|[12]\d|3[01])[T ]\d\d:\d\d")
# a whole token: the digits inside a hash are no time (vLLM 0.32's compile cache path, '...ef914b818a1821178711dbe...',
# read alone as 2027-09-17: traced-ladder-kill's log took the year 2027)
_EPOCH = re.compile(r"(?<![\w.])(1[5-9]\d{8})(?:\.\d+|\d{3})?(?![\dA-Fa-f])")
# ctime with its year ('[Fri Aug 30 11:43:09 2024]': dmesg -T): a line holding one has its time, so a number after
# it (a GPU's 'Board Serial Number: 1650423013443') is never taken for an epoch
_CTIME_YEAR = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                         r"([ \d]\d) \d\d:\d\d:\d\d (20\d\d)\b")  # fmt: skip
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def ingest(
    root: str | Path,
    out_dir: str | Path,
    options: IngestOptions | None = None,
    progress: Progress | None = None,
    parse: Callable[[list[list[FileState]], Job], None] | None = None,
    write: Callable[[Store, Path], None] | None = None,
    passes: derive.Map = derive.serially,
) -> IngestResult:
    """Parse every log under ``root`` into Parquet tables in ``out_dir``. ``parse`` reads the streams elsewhere
    (a cluster's tasks, ``logscope.cluster.ingest``): it fills the job's store with their part files and the
    streams' FileStates with their tallies, as the threads here do; ``write`` then writes the parsed tables
    from the store into ``out_dir`` (there too); ``passes`` runs the derived tables' passes (there too)."""
    t0 = time.perf_counter()
    opts = options or IngestOptions()
    root, out = Path(root), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / sources.OUTPUT_MARKER).write_text("logscope output folder: ingest skips it\n")
    # written last: a folder whose ingest stopped half-way holds none, so it is never reused
    (out / "ingest.json").unlink(missing_ok=True)
    parts = out / "_parts"  # created only when rows spill out of memory
    shutil.rmtree(parts, ignore_errors=True)

    found = _found(root, out, opts.follow_links)
    # batches sized from the budget: a fleet's thousands of small files cost by their number (resources.shape)
    limits = shape.ingest_limits(opts.memory_budget, len(found), sum(map(sources.head_size, found)))
    # chunks of formats whose chunks are independent (parsers/base.py) run here, a file on every core
    chunk_pool = (
        ThreadPoolExecutor(max_workers=cores(), thread_name_prefix="chunk")
        if opts.workers > 1 and parse is None
        else None
    )
    with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as ex:
        states = _detect(found, opts, root, ex, min(DETECT_BYTES, limits.detect_bytes))
        year, year_source, ref_ts = _reference_year(states, found)
        plausible = outliers.bounds(ref_ts or datetime(year, 7, 1, tzinfo=UTC))
        for st in states:
            st.plausible = plausible
        stream_files = _streams(states)
        store = Store(
            parts, min(opts.memory_bytes, limits.store_bytes), shape.FRAME_BYTES if limits.note else 0
        )
        job = Job(
            opts,
            (year, year_source, ref_ts),
            store,
            chunk_pool,
            sum(cost(m) for m in stream_files) / cores(),
            Meter(sum(max(s.f.size, 0) for s in states if not s.f.skipped), progress),
            limits.ahead_bytes,
        )

        def run(item):
            idx, members = item
            if batches.batched(members):  # small files of one format and folder: one parse
                batches.parse(idx, members, stream_parser(members), job)
                job.meter.done(members)
                return
            mod = stream_module(members)
            # a long stream of a format that allows it on every core, in pieces; any other read whole, in order
            if plan := pieces.plan(members, mod, job):
                pieces.parse(idx, members, mod, plan, job)
            else:
                streams.parse(idx, members, mod, job)
            job.meter.done(members)

        # streams in parallel: polars releases the GIL, and most of a parser's kernels use one core
        try:
            if parse is not None:
                parse(stream_files, job)
            else:  # a stream's index orders the tables' rows (by path); the slowest streams start first
                units = batches.plan(stream_files, opts.small_bytes) if opts.small_bytes else stream_files
                list(ex.map(run, sorted(enumerate(units), key=lambda item: -cost(item[1]))))
        finally:
            if chunk_pool is not None:
                chunk_pool.shutdown()

    if write is not None:
        write(store, out)
    else:
        # one table at a time under --max-memory: each write holds its table's encoding at once
        store.write_all(PARSED_TABLES, out, 1 if opts.memory_budget else cores())
    far = outliers.per_file(
        out, list(PARSED_TABLES)
    )  # before derive: the derived tables take the cleared times
    notes = derive.finalize(
        out,
        {m.f.rel: members[0].f.rel for members in stream_files for m in members},
        passes,
        limits.pass_rows,
    )
    for st in states:
        if st.bad_times:
            st.f.messages.append(outliers.bad_message(st.bad_times, st.bad_time_example))
        if st.bad_values:
            st.f.messages.append(
                f"{st.bad_values:,} value(s) out of range (NaN, an infinity, a number past 2**53, a share "
                f"outside [0, 1]; e.g. {st.bad_value_example}): set null, the rest of the line kept"
            )
        if st.outliers and st.plausible is not None:
            st.f.messages.append(outliers.message(st.outliers, st.outlier_example, st.plausible))
        st.f.messages += streams.repair_messages(st.repairs)
        if st.f.rel in far:
            st.f.messages.append(outliers.far_message(*far[st.f.rel]))
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
        **({"memory": limits.note} if limits.note else {}),
    }
    jsontext.write(out / "ingest.json", meta, jsontext.RECORD)
    return IngestResult(out, files, time.perf_counter() - t0, sum(max(s.f.size, 0) for s in states))


def stream_parser(members: list[FileState]):
    """The parser of a stream (None: a format logscope does not read), each line to its own format's when two
    are interleaved; a server log's lines its parser left unread, and a log of no known format, read with the
    event lexicon (``parsers/_lexicon.py``: an engine's death or OOM is never lost to a new wrapper)."""
    own = parsers.BY_NAME.get(members[0].format)
    if own is None:
        unknown = members[0].format == "unknown" and lexicon.may_hold_log(members[0].f.path)
        return lexicon.Fallback(None) if unknown else None
    # two formats interleaved: each line to its own
    mod = mixed.Mixed(own, parsers.BY_NAME[members[0].also]) if members[0].also else own
    return lexicon.Fallback(mod, events=mod.KIND == "server") if mod.MODE == "lines" else mod


def stream_module(members: list[FileState]):
    """``stream_parser``, with the files of a rotated set noted as read as one stream."""
    mod = stream_parser(members)
    if len(members) > 1 and mod is not None:
        names = ", ".join(m.f.rel for m in members)
        for m in members:
            m.assumptions.append(f"read as one stream with {names} (oldest first)")
    return mod


def reuse(root: str | Path, out_dir: str | Path, options: IngestOptions | None = None) -> IngestResult | None:
    """The result of the ingest ``out_dir`` already holds when it read the same files (path, size,
    modification time) with the same options and the same code; None when anything differs, so a
    second ``analyze`` of a folder (another SLO, another range) skips the parse."""
    root, out = Path(root), Path(out_dir)
    try:
        meta = json.loads((out / "ingest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    opts = options or IngestOptions()
    found = _found(root, out, opts.follow_links)
    if meta.get("fingerprint") != fingerprint(root, found, opts):
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
    options = {
        "tz": opts.tz,
        "include_prompts": opts.include_prompts,
        "replica": opts.replica,
        "nginx_log_format": opts.nginx_log_format,
        "follow_links": opts.follow_links,
    }
    return {"root": str(Path(root).resolve()), "files": files, "options": options, "code": _code_digest()}


@functools.cache
def _code_digest() -> str:
    h = hashlib.sha256(f"{__version__} polars {pl.__version__}".encode())
    for pkg in (Path(__file__).parent, Path(parsers.__file__).parent):
        # the parsers' modules and their formats' line kinds (parsers/*.toml)
        for p in sorted([*pkg.rglob("*.py"), *pkg.rglob("*.toml")]):
            h.update(p.relative_to(pkg).as_posix().encode() + b"\0" + p.read_bytes())
    h.update(Path(_scan.__file__).read_bytes())  # the compiled scanner
    return h.hexdigest()[:16]


def _found(root: Path, out: Path, follow_links: bool = False) -> list[sources.InputFile]:
    return [f for f in sources.discover(root, follow_links) if not _inside(f.path, out)]


def _inside(p: Path, d: Path) -> bool:
    try:
        return p.resolve().is_relative_to(inputs.resolved(d))
    except (OSError, RuntimeError):  # a symlink loop / too long a path: not the output
        return False


# the head lines detected at a time (up to sources.HEAD_BYTES a file): a fleet's 3,000 heads held at once, and
# the detectors' frame of them, took 713 MB; a batch holds ~5x its bytes while it is scored
DETECT_BYTES = 16 * 1024 * 1024


def _detect(
    found: list[sources.InputFile],
    opts: IngestOptions,
    root: Path,
    ex: ThreadPoolExecutor,
    batch_bytes: int,
) -> list[FileState]:
    """Every file's format, a batch of heads at a time (``batch_bytes``); then which files are copies of others."""
    states: list[FileState] = []
    batch: list[sources.InputFile] = []
    size = 0
    for f in found:
        if batch and size + sources.head_size(f) > batch_bytes:
            states += _detect_batch(batch, opts, root, ex)
            batch, size = [], 0
        batch.append(f)
        size += sources.head_size(f)
    if batch:
        states += _detect_batch(batch, opts, root, ex)
    rotated.adopt(states)  # before the copies: a piece read in its set's format may be a copy of another
    _mark_copies(states)
    replicas.split_shared(states, root, opts.replica)
    return states


def _detect_batch(
    found: list[sources.InputFile], opts: IngestOptions, root: Path, ex: ThreadPoolExecutor
) -> list[FileState]:
    """The formats of a batch of files. The heads are read on the pool (reading, decompressing); the detectors
    then run format by format over all heads (``parsers.detect_many``; 420 small files: 3.0 -> 1.2 s)."""
    probes = list(ex.map(probe.first_look, found))
    read = [(f, p) for f, p in zip(found, probes, strict=True) if not isinstance(p, FileState)]
    for (f, _), kind in zip(read, envelopes.detect_many([lines for _, lines in read]), strict=True):
        f.envelope = kind
    inner = [p if isinstance(p, FileState) else _inner(f, p) for f, p in zip(found, probes, strict=True)]
    heads = [p[0] for p in inner if isinstance(p, tuple)]
    detections = iter(parsers.detect_many(heads, ex, opts.workers))
    return [
        p if isinstance(p, FileState) else _detected(f, *p, next(detections), opts, root)
        for f, p in zip(found, inner, strict=True)
    ]


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
            for b in members[i + 1 :]:
                if a.copy_of or b.copy_of:
                    continue
                rel = sources.prefix_relation(a.f, b.f)
                if rel != "same" and a.short_key:  # a short file: only an identical copy
                    continue
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
                st.f.messages.append(
                    f"{COPY_NOTE}{st.copy_of} (a copy, or the same log collected earlier): parsed "
                    "for the coverage, its rows not added, so nothing counts twice"
                )


def _inner(f: sources.InputFile, lines: list[str]) -> tuple[list[str], list[str]]:
    """A file's head lines to detect its format in, and those to find its full timestamps in (for a wrapped log:
    the lines inside its records, and the records with their times)."""
    return (envelopes.head_lines(f.envelope, lines), lines) if f.envelope is not None else (lines, lines)


def _detected(
    f: sources.InputFile,
    lines: list[str],
    stamp_lines: list[str],
    detection: tuple,
    opts: IngestOptions,
    root: Path,
) -> FileState:
    mod, score, scores = detection
    stamps = _full_stamps(stamp_lines)
    if f.envelope is not None:
        f.envelope_time = bool(getattr(mod, "CONTAINER_TIME", False))
        f.messages.append(
            f"{envelopes.NAMES[f.envelope]}: the lines inside its records were read"
            + (f", each with {envelopes.TIME_WORDS[f.envelope]}" if f.envelope_time else "")
        )
    if mod is None:
        if any(ln.strip() for ln in lines):
            f.messages.append(
                f"unknown format (best detection score {score:.2f}): lines counted as unrecognized"
            )
        else:
            f.messages.append("no text lines")
        return FileState(f, "unknown", "other", score, "")
    replica = opts.replica if (opts.replica and mod.KIND == "server") else _replica(f, root)
    if f.envelope == "compose" and not (opts.replica and mod.KIND == "server"):
        replica = _compose_replica(f, stamp_lines, replica)
    text = [ln for ln in lines if ln.strip()]
    # a shorter file (a one-line query_range answer) is keyed by all of its head: only an identical copy counts
    # as its copy (``_mark_copies``), never the earlier collection of a longer log
    key = (
        hash("\n".join(text[:COPY_KEY_LINES]))
        if len(text) >= COPY_KEY_LINES
        else hash((_WHOLE, "\n".join(text)))
        if text
        else None
    )
    also = mixed.partner(mod.NAME, scores)
    if also is not None:
        f.messages.append(
            f"{mod.NAME} and {also} lines in one file (a container's stdout and stderr merged): each "
            "line parsed by its own format"
        )
    return FileState(
        f,
        mod.NAME,
        mod.KIND,
        score,
        replica,
        stamps=stamps,
        head_key=key,
        also=also,
        listen=mod.listen_address(stamp_lines) if hasattr(mod, "listen_address") else None,
        short_key=0 < len(text) < COPY_KEY_LINES,
    )


# kubelet's log paths (pkg/kubelet/kuberuntime): /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restarts>.log,
# and its links /var/log/containers/<pod>_<namespace>_<container>-<container id>.log
_POD_DIR = re.compile(
    r"^[a-z0-9.-]+_(?P<pod>[a-z0-9.-]+)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
_POD_LINK = re.compile(r"^(?P<pod>[a-z0-9.-]+)_[a-z0-9.-]+_[a-z0-9.-]+-[0-9a-f]{64}\.log$")


def _replica(f: sources.InputFile, root: Path) -> str:
    """The file's folder name when it sits in a sub-folder, else its stem: that of its rotated set, whichever
    file of the set it is (``vllm.log.1`` and ``vllm.log`` are one server, ``vllm``). A log kubelet keeps is
    its pod's (the folder is the container's, the same in every pod of a deployment)."""
    parent = f.path.parent
    name = Path(f.stream_key).name  # without compression and rotation suffixes
    for m in (_POD_LINK.match(name), _POD_DIR.match(parent.parent.name)):
        if m:
            return m.group("pod")
    if root.is_dir() and inputs.resolved(parent) != inputs.resolved(root):
        return inputs.path_text(
            parent.name
        )  # a folder name that is not UTF-8: its bytes as \xff (tables hold text)
    return re.sub(r"\.(log|txt|jsonl|json)$", "", name) or name


def _compose_replica(f: sources.InputFile, lines: list[str], default: str) -> str:
    """The service a ``docker compose logs`` file names (its container: 'vllm-1'); of several, the file's name."""
    names = envelopes.services(lines)
    if len(names) == 1:
        return names[0]
    if names:
        f.messages.append(
            f"docker compose log of {len(names)} services ({', '.join(names[:5])}): read as one "
            f"replica, {default}; split it per service (docker compose logs SERVICE) to tell them apart"
        )
    return default


def _full_stamps(lines: list[str]) -> list[datetime]:
    """Dates of the full timestamps (with a year) in a file's head lines, one per line at most."""
    out = []
    for ln in lines[:200]:
        m = _YEAR.search(ln)
        if m:
            try:
                out.append(datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC))
            except ValueError:  # an impossible date (2026-02-30) is no evidence of a year
                pass
            continue
        m = _CTIME_YEAR.search(ln)
        if m:
            try:
                out.append(
                    datetime(int(m.group(3)), _MONTHS.index(m.group(1)) + 1, int(m.group(2)), tzinfo=UTC)
                )
            except ValueError:
                pass
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
        top = years.most_common(1)[0][0]
        return top, f"year {top} from full timestamps in {where[top]}", first[top]
    mtimes = [f.mtime_ns / 1e9 for f in found if f.size >= 0 and f.mtime_ns is not None]
    try:
        y = datetime.fromtimestamp(max(mtimes), UTC).year if mtimes else None
    except (OverflowError, OSError, ValueError):  # a modification time past year 9999
        y = None
    if y is not None and 2000 <= y <= datetime.now(UTC).year + 1:
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
    return schemas.conform(pl.concat(frames), "unrecognized").sort(
        ["path", "count"], descending=[False, True]
    )
