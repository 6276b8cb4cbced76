"""The ingest with its streams parsed as tasks on a Dask cluster, into the same tables as in-process.

Detection, the reference year and the streams are found here as in-process (``logscope.ingest.ingest``, reading
the files' heads); then each unit of work becomes a task (``tasks.py``): a stream read whole, or each piece of a
long stream of a format that allows it, cut by the same ``pieces.plan`` for the cluster's workers, at least
``SLOTS`` of them, so that no task is more than about 1 % of a large folder's work. A task that fails comes back
as its exception, with its traceback; a worker that dies has its tasks run again by the scheduler. The tables
are then written from the part files the tasks name, in stream order, as the in-process store writes them when
it has spilled, by a task a table: this process handles the parts' names, not their rows; and the derived
tables' passes (``derive.request_pass``) are tasks too.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from ..ingest import PARSED_TABLES, pieces, stream_module
from ..ingest import ingest as ingest_here
from ..ingest.options import IngestOptions, IngestResult, Progress
from ..ingest.store import Store, write_parts
from ..ingest.streams import FileState, Job, cost
from . import current, tasks

# pieces are cut as for this many workers at least: 128 workers on 100 GB get tasks of < 1 % of the work each
# (a vLLM log longer than that share is cut; other formats' streams stay whole: see docs/performance.md)
SLOTS = 128


def ingest(
    root: str | Path,
    out_dir: str | Path,
    options: IngestOptions,
    progress: Progress | None = None,
    stats: list | None = None,
) -> IngestResult:
    """``logscope.ingest.ingest`` with the streams parsed on the current session's cluster. ``stats``, when given,
    receives a dict per task submitted: its key, kind, file, format and bytes (the benchmark's task sizes)."""

    # the session is asked for when the first task is: it may still be opening while the files are detected
    def parse(stream_files: list[list[FileState]], job: Job) -> None:
        s = current()
        _parse(s.client, max(s.threads, SLOTS), stream_files, job, stats)

    def write(store: Store, out: Path) -> None:
        _write(current().client, store, out, stats)

    def run(fn, args: list[tuple]) -> list:
        return _run(current().client, fn, args, stats)

    return ingest_here(
        Path(root).resolve(), Path(out_dir).resolve(), options, progress, parse=parse, write=write, passes=run
    )


def _run(client, fn, args: list[tuple], stats: list | None) -> list:
    """``fn`` on each argument tuple as a task (derive's passes), the results in order; a task's exception is
    raised here, with its traceback."""
    token = uuid.uuid4().hex[:8]
    futs = [client.submit(fn, *a, key=f"derive-{token}-{i}", pure=False) for i, a in enumerate(args)]
    if stats is not None:
        stats += [
            {"key": f.key, "kind": "derive", "file": fn.__name__, "format": "", "bytes": 0} for f in futs
        ]
    return client.gather(futs)


def _write(client, store: Store, out: Path, stats: list | None) -> None:
    """Each parsed table written from its part files by a task of its own (the tables are independent): this
    process hands over only the parts' names and the counters' shifts, never their rows."""
    from distributed import wait

    futs = []
    for name in PARSED_TABLES:
        parts = store.take_parts(name)
        fut = client.submit(
            write_parts,
            name,
            parts,
            dict(store.shifts),
            out / f"{name}.parquet",
            key=f"table-{uuid.uuid4().hex[:8]}-{name}",
            priority=-1,
            pure=False,
        )
        futs.append(fut)
        if stats is not None:
            stats.append(
                {
                    "key": fut.key,
                    "kind": "table",
                    "file": name,
                    "format": "",
                    "bytes": sum(p.stat().st_size for _, p in parts),
                }
            )
    wait(futs)
    for fut in futs:
        fut.result()  # a task's exception, with its traceback


class _Meter:
    """Progress from the tasks' states: the bytes of the units done over all, as each task finishes."""

    def __init__(self, job: Job) -> None:
        self.meter, self.lock, self.done = job.meter, threading.Lock(), 0

    def watch(self, fut, label: str, n: int) -> None:
        progress = self.meter.progress
        if progress is None or n <= 0:
            return

        def finished(f) -> None:
            if f.status != "finished":
                return
            with self.lock:
                self.done += n
                progress(f"parsed {label}", min(self.done / self.meter.total, 1.0))

        fut.add_done_callback(finished)


def _parse(client, slots: int, stream_files: list[list[FileState]], job: Job, stats: list | None) -> None:
    from distributed import as_completed

    job.share = sum(cost(m) for m in stream_files) / slots  # the cluster's share of the work, for pieces.plan
    opts, when, parts = job.opts, job.when, job.store.parts
    meter = _Meter(job)
    token = uuid.uuid4().hex[:8]  # task keys name their stream (and piece): the dashboard tells them apart
    streams = {}
    # a stream's index orders the tables' rows (by path); the slowest streams start first
    for idx, members in sorted(enumerate(stream_files), key=lambda item: -cost(item[1])):
        mod = stream_module(members)  # notes a rotated set on the client's states, which the tasks get
        rank = int(cost(members) * 1000)
        plan = pieces.plan(members, mod, job, slots)
        if plan is None:
            size = sum(max(m.f.size, 0) for m in members)
            fut = client.submit(
                tasks.whole, idx, members, opts, when, parts, key=f"whole-{token}-{idx}", priority=rank
            )
            meter.watch(fut, members[-1].f.rel, size)
            _note(stats, fut, members[-1], size)
        else:
            fut = _pieces(client, f"{token}-{idx}", idx, members, plan, opts, when, parts, rank, meter, stats)
        streams[fut] = members
    for fut in as_completed(list(streams)):
        take(job, streams.pop(fut), fut.result())  # a task's exception is raised here, with its traceback
        fut.release()


def take(job: Job, members: list[FileState], done: tasks.Done) -> None:
    """A stream read by tasks, taken into this ingest: its files' tallies, its rows' part files, their shifts."""
    for mine, theirs in zip(members, done.members, strict=True):
        mine.__dict__.update(theirs.__dict__)
    for name, items in done.parts.items():
        job.store.spilled.setdefault(name, []).extend(items)
    job.store.shifts.update(done.shifts)


def _pieces(
    client,
    name: str,
    idx: int,
    members: list[FileState],
    plan: list[pieces.Piece],
    opts: IngestOptions,
    when: tuple,
    parts: Path,
    rank: int,
    meter: _Meter,
    stats: list | None,
):
    """The tasks of a stream in pieces: the lines of each (but the last of each file), the state after the
    stream's first chunk, each piece, then the settling of them all; the future of the last."""
    head = client.submit(tasks.head, members, opts, when, key=f"head-{name}", priority=rank + 1)
    counts = [
        client.submit(
            tasks.count,
            members[pc.member].f,
            pc.span,
            opts.chunk_bytes,
            key=f"count-{name}-{p}",
            priority=rank + 1,
        )
        if pc.span.stop is not None
        else None
        for p, pc in enumerate(plan)
    ]
    read = []
    for p, pc in enumerate(plan):
        before = [counts[q] if plan[q].member == pc.member else None for q in range(p)]
        fut = client.submit(
            tasks.piece,
            idx,
            members,
            plan,
            p,
            before,
            head,
            opts,
            when,
            parts,
            key=f"piece-{name}-{p}",
            priority=rank,
        )
        f = members[pc.member].f
        size = (pc.span.stop if pc.span.stop is not None else max(f.size, 0)) - pc.span.start
        meter.watch(fut, f.rel, size)
        _note(stats, fut, members[pc.member], size)
        read.append(fut)
    fut = client.submit(
        tasks.settle,
        idx,
        members,
        plan,
        counts,
        read,
        head,
        opts,
        when,
        parts,
        key=f"settle-{name}",
        priority=rank,
    )
    _note(stats, fut, members[-1], 0)
    return fut


def _note(stats: list | None, fut, st: FileState, size: int) -> None:
    if stats is not None:
        stats.append(
            {
                "key": fut.key,
                "kind": fut.key.split("-")[0],
                "file": st.f.rel,
                "format": st.format,
                "bytes": size,
            }
        )
