"""Small files of one format and folder parsed together: one chunk of their lines, one parser call.

A parser call costs a few milliseconds whatever its lines (polars' fixed cost per step), and the rows of every
file then went through the store table by table: a folder of 10,000 one-record access logs took ~25 ms a file.
Files of a format whose chunks are independent (``INDEPENDENT_CHUNKS``, parsers/base.py: nginx access and error,
Envoy, HAProxy, Traefik) that share a folder and a replica are read as one chunk, their lines numbered on; the
rows are given back to their files by line number (``source``, ``line_no``), and so are the line tallies.
A parser that sets a stream state from the first lines (nginx access: the layouts) sets it from the batch's,
as for the files of a rotated set; a file of such a batch with a line left unrecognised is read again alone, from
its own lines, and so is every file of a batch whose counts cannot be told apart per file (times that are no time,
values out of range, outliers) or whose parse failed. docs/performance.md (item 36) has the figures.

A format that keys its stream state by file (``FILE_KEYED``, parsers/base.py: client JSONL, whose attempts wait for
their request record) is batched too, though it carries state and has a ``finish``: each line of the chunk names its
file in a ``_file`` column, the parser keeps every carried row and join per file and gives ``_file`` on each row, and
``finish`` runs once for the batch (item 45: a one-request client file cost ~45 ms alone).
"""

from __future__ import annotations

import polars as pl

import logscope.parsers as parsers
from logscope.parsers.base import ChunkResult

from .. import numbers, schemas
from . import outliers, sources
from .streams import FileState, Job, context, failed, finish, once, read

BATCH_BYTES = sources.CHUNK_BYTES  # a batch's lines are one chunk of a whole read's size
FILE = "_file"  # a batch table's column: the place in the batch of the file a row is from


def plan(streams: list[list[FileState]], small: int) -> list[list[FileState]]:
    """``streams`` with the small files (at most ``small`` bytes) of one format, folder and replica gathered into batches (lists of
    more than one file, in path order, each marked by ``batch``); every other stream as it was."""
    groups: dict[tuple, list[FileState]] = {}
    out: list[list[FileState]] = []
    for members in streams:
        st = members[0]
        mod = parsers.BY_NAME.get(st.format)
        f = st.f
        if (
            len(members) == 1
            and mod is not None
            and mod.MODE == "lines"
            and ((getattr(mod, "INDEPENDENT_CHUNKS", False) and not hasattr(mod, "finish")) or keyed(mod))
            and st.also is None
            and f.envelope is None
            and f.compression is None
            and 0 < f.size <= small
        ):
            # by replica too: the files of one gateway share its layout (another gateway's logs beside them may
            # not, and a batch's assumptions would then be every layout's)
            groups.setdefault((st.format, str(f.path.parent), st.replica), []).append(st)
        else:
            out.append(members)
    for files in groups.values():
        if len(files) == 1:
            out.append(files)
            continue
        files.sort(key=lambda s: s.f.rel)
        batch: list[FileState] = []
        size = 0
        for st in files:
            if batch and size + st.f.size > BATCH_BYTES:
                out.append(_marked(batch))
                batch, size = [], 0
            batch.append(st)
            size += st.f.size
        out.append(_marked(batch) if len(batch) > 1 else batch)
    return sorted(out, key=lambda ms: ms[0].f.rel if batched(ms) else ms[-1].f.rel)


def _marked(files: list[FileState]) -> list[FileState]:
    for st in files:
        st.batch = len(files)
    return files


def batched(members: list[FileState]) -> bool:
    return len(members) > 1 and members[0].batch > 1


def keyed(mod) -> bool:
    """The format keeps its state per file of a batch (``FILE_KEYED``): its chunk carries a ``_file`` column."""
    return bool(getattr(mod, "FILE_KEYED", False))


def parse(idx: int, members: list[FileState], mod, job: Job) -> None:
    """Parse a batch of small files into the store under index ``idx``: their rows under (idx, 0, 0), those of
    a file read again alone under (idx, 1 + its place in the batch, n)."""
    frames, starts = [], []
    line = 0
    for st in members:
        got = list(sources.iter_line_chunks(st.f, job.opts.chunk_bytes, meter=job.meter.reader(st.f)))
        df = pl.concat(got) if got else pl.DataFrame(schema={"line_no": pl.Int64, "line": pl.String})
        st.lines_total = df.height
        starts.append(line)
        frames.append(df.with_columns(pl.col("line_no") + line))
        line += df.height
    chunk = pl.concat(frames)
    file_of = _file_of(chunk.get_column("line_no"), starts)
    state: dict = {}
    try:
        if keyed(mod):
            res = _keyed(mod, chunk.with_columns(file_of.alias(FILE)), context(members[0], job), state)
        else:
            res = mod.parse_chunk(chunk, context(members[0], job), state)
    except Exception:  # noqa: BLE001 - each file alone says what failed where
        return _alone(idx, members, range(len(members)), mod, job)
    tables: dict[str, pl.DataFrame] = {}
    for name, df in res.tables.items():
        if df is not None and df.height:
            if "line_no" not in df.columns and FILE not in df.columns:  # rows that name no file
                return _alone(idx, members, range(len(members)), mod, job)
            if numbers.clear(df, name, schemas.schema(name))[1]:  # values no field holds: counted per file
                return _alone(idx, members, range(len(members)), mod, job)
            tables[name] = _own(df, starts, members).pipe(_conformed, name)
    if res.recognized is None or res.bad_times or res.bad_values:
        return _alone(idx, members, range(len(members)), mod, job)  # counts that name no file
    ok = res.recognized.fill_null(False)
    # a state set from the batch's lines: a file with a line it leaves unrecognised is read from its own
    again = set(file_of.filter(~ok).unique().to_list()) if state else set()
    again |= _outliers(tables, members)  # counted and said per file
    kept = [k for k in range(len(members)) if k not in again]
    _tally(res, members, kept, file_of, ok, chunk)
    # a copy's lines are counted, its rows not added (``ingest._mark_copies``), as when it is read alone
    drop = again | {k for k, st in enumerate(members) if st.copy_of}
    keep = pl.Series([k not in drop for k in range(len(members))])
    for name, df in tables.items():
        rows = df.filter(keep.gather(df.get_column(FILE))).drop(FILE) if drop else df.drop(FILE)
        if rows.height:
            job.store.add(name, (idx, 0, 0), rows)
    _alone(idx, members, sorted(again), mod, job)


def _keyed(mod, chunk: pl.DataFrame, ctx, state: dict) -> ChunkResult:
    """A file-keyed format's batch: its chunk's rows, then what ``finish`` gives, each table's rows by file (the
    order of reading each file alone: a file's rows of the chunk, then those its finish gave)."""
    res = mod.parse_chunk(chunk, ctx, state)
    end = mod.finish(ctx, state) if hasattr(mod, "finish") else None
    if end is not None:
        for name, df in end.tables.items():
            if df is None or not df.height:
                continue
            had = res.tables.get(name)
            res.tables[name] = pl.concat([had, df], how="diagonal_relaxed") if had is not None else df
        res.assumptions = [*res.assumptions, *(a for a in end.assumptions if a not in res.assumptions)]
        res.messages = [*res.messages, *(m for m in end.messages if m not in res.messages)]
        res.bad_times += end.bad_times
        res.bad_values += end.bad_values
    res.tables = {
        name: df.sort(FILE, maintain_order=True) if df is not None and FILE in df.columns else df
        for name, df in res.tables.items()
    }
    return res


def _file_of(line_no: pl.Series, starts: list[int]) -> pl.Series:
    """Each line's file: its place in the batch."""
    return (pl.Series(starts, dtype=pl.Int64).search_sorted(line_no - 1, side="right") - 1).cast(pl.Int64)


def _own(df: pl.DataFrame, starts: list[int], members: list[FileState]) -> pl.DataFrame:
    """A batch table's rows with their own file's name and line numbers, and the file's place (``_file``): the
    file a file-keyed parser gave, else the one its line number falls in."""
    k = (df.get_column(FILE) if FILE in df.columns else _file_of(df.get_column("line_no"), starts)).alias(
        FILE
    )
    names = pl.Series([st.f.rel for st in members], dtype=pl.String)
    first = pl.Series(starts, dtype=pl.Int64)
    own = [k, names.gather(k).alias("source")]
    if "line_no" in df.columns:
        own.append((df.get_column("line_no") - first.gather(k)).alias("line_no"))
    return df.with_columns(own)


def _conformed(df: pl.DataFrame, name: str) -> pl.DataFrame:
    """``df`` in its table's schema, keeping its file (``_file``)."""
    return schemas.conform(df, name).with_columns(df.get_column(FILE))


def _outliers(tables: dict[str, pl.DataFrame], members: list[FileState]) -> set[int]:
    """The files with a row whose time the folder's bounds leave out (``outliers``)."""
    b = members[0].plausible
    if b is None:
        return set()
    return {
        k
        for name, df in tables.items()
        for k in df.get_column(FILE).filter(outliers.outside(df, name, b)).unique().to_list()
    }


def _tally(
    res: ChunkResult,
    members: list[FileState],
    kept: list[int],
    file_of: pl.Series,
    ok: pl.Series,
    chunk: pl.DataFrame,
) -> None:
    """The lines parsed, shapes, notes of the files whose rows the batch keeps."""
    parsed = pl.DataFrame({"k": file_of, "ok": ok}).group_by("k").agg(pl.col("ok").sum())
    by_file = dict(zip(parsed.get_column("k").to_list(), parsed.get_column("ok").to_list(), strict=True))
    note = f"read in one batch with the other {len(members) - 1:,} small files of its format in this folder"
    for k in kept:
        st = members[k]
        st.lines_parsed = int(by_file.get(k, 0))
        if st.lines_parsed < st.lines_total:
            st.shapes.add(chunk.filter((file_of == k) & ~ok))
        once(st.assumptions, [*res.assumptions, note])
        once(st.f.messages, res.messages)


def _alone(idx: int, members: list[FileState], which, mod, job: Job) -> None:
    """Read these files of a batch each alone, as a stream of its own."""
    for k in which:
        st = members[k]
        st.lines_total = st.lines_parsed = 0
        st.shapes = type(st.shapes)()
        state: dict = {}
        ctx = context(st, job)
        try:
            n = read(
                mod, st, ctx, sources.iter_line_chunks(st.f, job.opts.chunk_bytes), state, job, (idx, 1 + k)
            )
            finish(mod, st, ctx, state, job.store, (idx, 1 + k, n or 0))
        except Exception as e:  # noqa: BLE001 - one bad file must not stop the folder
            failed(st, mod, e)
