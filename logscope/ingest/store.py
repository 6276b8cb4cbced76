"""Parsed rows of every table while a folder is read: in memory up to a budget, then spilled to Parquet part
files, and written out in stream order at the end (``logscope.ingest``)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import polars as pl

from .. import outdir, schemas

# rows per Parquet row group: a streaming scan decodes a few groups at once, so smaller groups keep
# every later scan (derive, correlate) light (64k: 314 MB vs 574 MB scanning 3M request events)
ROW_GROUP = 64_000
Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)  # what ``shifted`` is given, it gives back


def shifted(frame: Frame, offsets: dict[str, int], columns) -> Frame:
    """``frame`` with ``offsets`` added to those of its ``columns`` they name (counters of rows read from a
    guessed state, ``logscope.ingest.pieces``)."""
    return frame.with_columns(pl.col(c) + off for c, off in offsets.items() if c in columns and off)


def compact(df: pl.DataFrame) -> pl.DataFrame:
    """Copy out the bytes the string columns use: a column sliced or filtered from a chunk shares the
    chunk's whole buffer, so a few kept rows would otherwise hold every chunk read so far in memory."""
    return df.with_columns(pl.col(pl.String) + pl.lit(""))


class Store:
    """Parsed rows of every table, in memory up to ``budget`` bytes, then spilled to part files.

    Rows are keyed (stream index, segment, chunk number), so every table comes out in stream order (by
    path) and, within a stream, file order, whichever worker finished first. A spill writes one part file
    per table, stream and segment, so a large folder makes a few large parts rather than one per chunk.
    A piece read ahead of its turn (``logscope.ingest.pieces``) may be dropped, or have its counters shifted.
    """

    def __init__(self, parts: Path, budget: int, frame_bytes: int = 0) -> None:
        # ``frame_bytes``: what each frame held costs beyond its columns, counted when memory is tight (a fleet's
        # thousands of small frames: ``resources.shape.FRAME_BYTES``); not otherwise, as spilling them costs time
        self.parts, self.budget, self.frame_bytes = parts, budget, frame_bytes
        self.frames: dict[str, list[tuple[tuple[int, int, int], pl.DataFrame]]] = {}
        self.spilled: dict[str, list[tuple[tuple[int, int, int], Path]]] = {}
        self.shifts: dict[tuple[int, int], dict[str, int]] = {}  # (stream, segment) -> counter offsets
        self.size = 0
        self.lock = threading.Lock()

    def add(self, name: str, key: tuple[int, int, int], df: pl.DataFrame, compacted: bool = False) -> None:
        """``df``'s rows of table ``name`` under ``key``; ``compacted``: its strings were copied out already."""
        df = df if compacted else compact(df)
        with self.lock:
            self.frames.setdefault(name, []).append((key, df))
            self.size += int(df.estimated_size()) + self.frame_bytes  # in bytes (its default unit): an int
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

    def flush(self) -> dict[str, list[tuple[tuple[int, int, int], Path]]]:
        """Every table's rows held in memory to part files: all the rows, as part files by key (what a cluster's
        task hands back, ``logscope.cluster.ingest``)."""
        with self.lock:
            for table in list(self.frames):
                self._spill(table)
            self.size = 0
            return self.spilled

    def _spill(self, name: str) -> None:
        by_seg: dict[tuple[int, int], list[tuple[tuple[int, int, int], pl.DataFrame]]] = {}
        for key, df in self.frames.pop(name, []):
            by_seg.setdefault(key[:2], []).append((key, df))
        d = self.parts / name
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise outdir.write_failed(self.parts, e) from e
        for items in by_seg.values():
            items.sort(key=lambda kv: kv[0])
            first = items[0][0]
            path = d / f"{first[0]:05d}-{first[1]:03d}-{first[2]:06d}.parquet"
            try:
                pl.concat([df for _, df in items], rechunk=False).write_parquet(
                    path, compression="lz4", row_group_size=ROW_GROUP
                )
            except Exception as e:  # the output's disk, never the parser's file: the run stops (exit 5)
                raise outdir.write_failed(self.parts, e) from e
            self.spilled.setdefault(name, []).append((first, path))

    def _shifted(self, key: tuple[int, int, int], frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
        offsets = self.shifts.get(key[:2])
        return shifted(frame, offsets, columns) if offsets else frame

    def take_parts(self, name: str) -> list[tuple[tuple[int, int, int], Path]]:
        """A table's rows as part files only (those in memory spilled), handed over: ``write_parts`` writes them
        (a cluster's task, ``logscope.cluster.ingest``)."""
        self._spill(name)
        return sorted(self.spilled.pop(name, []))

    def write_all(self, names: Sequence[str], out: Path, workers: int = 1) -> None:
        """Every table of ``names`` into ``out/NAME.parquet``, on ``workers`` threads at once, the largest first: one
        table's encoding uses about one core (polars releases the GIL), and the writes were most of what ingest did
        on one core after its parse (306 MB bench folder: 0.5 of 9 CPU s)."""
        if workers <= 1:
            for name in names:
                self.write(name, out / f"{name}.parquet")
            return

        def size(name: str) -> int:
            held = sum(int(df.estimated_size()) for _, df in self.frames.get(name, []))
            return held + sum(p.stat().st_size * 4 for _, p in self.spilled.get(name, []))  # lz4: ~4x

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="write") as ex:
            jobs = [
                ex.submit(self.write, n, out / f"{n}.parquet") for n in sorted(names, key=size, reverse=True)
            ]
            for job in jobs:  # the first failure (the output's disk) is raised, as a serial write raises it
                job.result()

    def write(self, name: str, dest: Path) -> None:
        """The whole table, in key order: straight from memory, or streamed from the part files."""
        columns = list(schemas.TABLES.get(name, ()))
        if (
            name in self.spilled
        ):  # the rows still held go in beside the parts, not through a part file of their own
            write_parts(name, sorted(self.spilled.pop(name)), self.shifts, dest, self.frames.pop(name, []))
            return
        items = sorted(self.frames.pop(name, []), key=lambda kv: kv[0])
        if not items:
            schemas.empty(name).write_parquet(dest)
            return
        frames = [self._shifted(k, df, columns) for k, df in items]
        pl.concat(frames, rechunk=False).write_parquet(dest, row_group_size=ROW_GROUP)


def write_parts(
    name: str,
    parts: list[tuple[tuple[int, int, int], Path]],
    shifts: dict[tuple[int, int], dict[str, int]],
    dest: Path,
    held: list[tuple[tuple[int, int, int], pl.DataFrame]] | None = None,
) -> None:
    """One table streamed from its part files and the rows ``held`` in memory, in key order, each segment's counters
    shifted (``Store.shift``). Held rows written to a part first cost an encoding and a decoding more (306 MB bench
    folder: ~0.1 CPU s)."""
    columns = list(schemas.TABLES.get(name, ()))
    items = sorted(
        [*((k, pl.scan_parquet(p)) for k, p in parts), *((k, df.lazy()) for k, df in held or ())], key=_key
    )
    if not items:
        schemas.empty(name).write_parquet(dest)
        return
    if held or any(k[:2] in shifts for k, _ in items):
        scan = pl.concat([shifted(f, shifts[k[:2]], columns) if k[:2] in shifts else f for k, f in items])
    else:
        scan = pl.scan_parquet([p for _, p in sorted(parts)])
    schemas.conform(scan, name).sink_parquet(dest, row_group_size=ROW_GROUP)


def _key(item: tuple) -> tuple[int, int, int]:
    return item[0]
