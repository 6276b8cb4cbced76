"""Correlation stage: one request from client to gateway to vLLM.

Reads the ingest tables of an output folder, estimates each source's clock offset from requests
matched by id, joins the layers (ids first, time second, never counting a time match as exact),
and writes ``requests.parquet``, ``windows.parquet``, ``clock_offsets.parquet`` and
``correlation.json`` (retry multiplication, orphaned work, match statistics, notes).

``correlate_tables`` does the work on in-memory tables, for the benchmark and for notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import polars as pl

from .. import jsontext, schemas
from ..resources import time_range
from ..scalars import float_value
from . import assemble, clock, exprs, frames, ingest_tables, link, run_columns, span_sources, summary, windows
from .exprs import to_ts
from .frames import Frames


@dataclass
class Result:
    requests: pl.DataFrame
    windows: pl.DataFrame
    clock_offsets: pl.DataFrame
    summary: dict


class CorrelateOptions(time_range.RangeOptions, Protocol):
    """What the correlation reads of its options (``AnalyzeOptions`` has them): the range, the window width,
    slices of about ``slice_rows`` request rows (None or 0: the whole at once) and a cluster to run them on."""

    window: str | None
    slice_rows: int | None
    cluster: str | None


def run(out: Path, options: CorrelateOptions) -> dict:
    """Correlate the tables in ``out`` and write the correlation outputs there: at once, or in time slices of
    about ``options.slice_rows`` request rows (``slices.py``)."""
    out = Path(out)
    rng = time_range.of(options)
    window, rows = options.window, options.slice_rows
    if rows:
        from . import slices  # imports this module's stages

        each: slices.Each | None = None
        if options.cluster:  # one slice a task (logscope.cluster)
            from ..cluster import correlate as on_cluster

            each = on_cluster.each
        result = slices.correlate(out, rng, rows, window, each)  # writes requests.parquet itself
    elif rng:
        result = correlate_range(out, rng, window)
        result.requests.write_parquet(out / "requests.parquet")
    else:
        tabs = ingest_tables.read_tables(out, rng)
        filled = span_sources.fill(out, tabs, rng)  # the spans as the client's or vLLM's records no log gave
        hook = None
        if any(n.startswith(span_sources.ENGINE_NOTE) for n in filled):  # vLLM's spans are its records
            hook = lambda r: span_sources.engine_latencies(out, r, rng)  # noqa: E731
        result = correlate_tables(tabs, window=window, requests_hook=hook)
        result.summary.setdefault("notes", []).extend(filled)
        result.requests.write_parquet(out / "requests.parquet")
    if rng:
        result.summary["range"] = rng.doc()
    from . import traces  # spans joined to the requests (request_spans.parquet), when the folder has spans

    tr = traces.run(out, rng)
    if tr is not None:
        result.summary["traces"] = tr
    result.windows.write_parquet(out / "windows.parquet")
    result.clock_offsets.write_parquet(out / "clock_offsets.parquet")
    jsontext.write(out / "correlation.json", result.summary, jsontext.CORRELATION)
    return result.summary


def dumps(d: dict) -> str:
    return jsontext.CORRELATION.dumps(d)


def correlate_tables(tabs: dict[str, pl.DataFrame], window: str | None = None, requests_hook=None) -> Result:
    """The whole stage on in-memory tables (keys as in ``ingest_tables.INPUTS``; absent ones are empty);
    ``requests_hook`` completes the assembled requests before the windows are built from them."""
    linked = link_tables(tabs)
    if requests_hook is not None:
        linked.assembled.requests = requests_hook(linked.assembled.requests)
    req = requests_table(linked.assembled.requests)
    win, summ = finish(
        run_columns.of(linked.frames, linked.links, linked.assembled),
        linked.other,
        linked.offsets,
        linked.shift,
        linked.stamp_resolution,
        window,
    )
    return Result(req, win, linked.off_df, summ)


def correlate_range(out: Path, rng: time_range.Range, window: str | None = None) -> Result:
    """The correlation of the logical requests that overlap ``rng``, each whole: the tables are read over the
    range widened by the longest request's span (and the join tolerances), linked as a whole correlation links
    them, then cut to those requests with every attempt and execution of theirs (``run_columns.within``), so a
    request crossing the range's edge keeps its vLLM execution, and its counts are the whole run's. The
    server's stats and events are the range's own."""
    from .slices import widened  # slices imports this module

    linked = link_tables(ingest_tables.read_tables(out, widened(out, rng)))
    lo, hi = (None if t is None else t.timestamp() for t in (rng.since, rng.until))
    n = run_columns.within(run_columns.of(linked.frames, linked.links, linked.assembled), lo, hi)
    req = requests_table(
        linked.assembled.requests.filter(pl.col("lr").is_in(n.assembled.requests["lr"].implode()))
    )
    # on the reference clock: a server's stats of the range, once its clock is corrected
    other = {k: time_range.cut(k, v, rng) if k != "gateway_errors" else v for k, v in linked.other.items()}
    win, summ = finish(n, other, linked.offsets, linked.shift, linked.stamp_resolution, window)
    return Result(req, win, linked.off_df, summ)


@dataclass
class Whole:
    """What the correlation of a time slice takes from the whole input, not from its own rows (slices.py)."""

    stamp_resolution: dict[str, float]  # sources whose stamps are whole seconds: 1.0
    offsets: list[dict]  # clock offsets
    spans: dict[
        str, list[tuple[float, float]]
    ]  # "client" / "gateway": each log's span, on the reference clock
    ids_as_sent: dict[
        str, str
    ]  # client sources whose logical ids are the X-Request-Ids sent: the note of each
    stream_marks: pl.DataFrame | None = None  # ingest_tables.STREAM_MARKS of the whole input


@dataclass
class Linked:
    """One correlation's frames, links and requests, on the reference clock."""

    frames: Frames
    links: link.Links
    assembled: assemble.Assembled
    other: dict[str, pl.DataFrame]  # server_stats, server_events, gateway_errors, shifted
    offsets: list[dict]
    shift: dict[str, float]
    stamp_resolution: dict[str, float]  # sources whose stamps are whole seconds: 1.0

    @property
    def off_df(self) -> pl.DataFrame:
        return offsets_table(self.offsets)


def offsets_table(offsets: list[dict]) -> pl.DataFrame:
    """clock_offsets.parquet's rows."""
    return (
        pl.DataFrame(offsets, schema=schemas.schema("clock_offsets"))
        if offsets
        else schemas.empty("clock_offsets")
    )


def link_tables(tabs: dict[str, pl.DataFrame], whole: Whole | None = None) -> Linked:
    """Frames, clock offsets (``whole``'s when given: a slice takes those of the whole input), links and
    assembled requests of ingest tables."""
    pick = tabs.get(ingest_tables.CLIENT_PICK)  # read_tables' choice of client sources, when it made one
    marks = whole.stream_marks if whole is not None else tabs.get(ingest_tables.STREAM_MARKS)
    tabs = {n: tabs.get(n, schemas.empty(n)) for n in ingest_tables.INPUTS}
    if pick is not None:
        tabs[ingest_tables.CLIENT_PICK] = pick
    # takes the raw request tables out of tabs, releasing each once its frame is made
    layers = frames.build(tabs, whole.ids_as_sent if whole else None)
    if whole is None:
        stamp_resolution = frames.whole_seconds(layers.server_requests, "t0")
        files = tabs["files"]
        logs = dict(zip(files["path"], files["stream"], strict=True)) if "stream" in files.columns else {}
        offsets = estimate_offsets(layers, stamp_resolution, logs)
    else:
        stamp_resolution, offsets = whole.stamp_resolution, whole.offsets
    shift = applied_shifts(offsets, stamp_resolution)
    layers = shift_frames(layers, shift)
    other = {n: shift_table(tabs[n], shift) for n in ("server_stats", "server_events", "gateway_errors")}
    layers = frames.fill_timeouts(layers)
    links = link.final(layers, stamp_resolution)
    assembled = assemble.build(
        layers, links, stamp_resolution, other["gateway_errors"], whole.spans if whole else None, marks
    )
    return Linked(layers, links, assembled, other, offsets, shift, stamp_resolution)


def finish(
    n: run_columns.RunColumns,
    other: dict[str, pl.DataFrame],
    offsets: list[dict],
    shift: dict[str, float],
    stamp_resolution: dict[str, float],
    window: str | None,
) -> tuple[pl.DataFrame, dict]:
    """windows.parquet and correlation.json from the run-level columns of every request. The summary comes
    first: what only it reads (the links, the server frame) is let go of ``n`` before the windows are built."""
    width, grid, wide = _grid(n.assembled, other, window)
    summ = summary.build(n.frames, n.links, n.assembled, offsets, shift, width, [], stamp_resolution)
    # let go of on purpose (memory at scale): None, not an empty frame, so that a later read fails loudly
    n.links = n.frames.server_requests = n.frames.client_requests = n.assembled.gr_lr = None  # type: ignore[assignment]
    if grid is None:  # no request and no stats line has a time: no window to place anything in
        return schemas.empty("windows"), summ
    events = other["server_events"].with_columns(exprs.secs("ts").alias("t"))
    win, wnotes = windows.build(
        grid,
        n.assembled.requests,
        n.frames.client_attempts,
        n.frames.gateway_requests,
        n.assembled.execs,
        other["server_stats"],
        events,
    )
    summ["notes"] += wnotes + (
        [wide] if wide else []
    )  # the summary's last notes, as summary.build places them
    return win, summ


def estimate_offsets(
    layers: Frames, stamp_resolution: dict[str, float], logs: dict[str, str] | None = None
) -> list[dict]:
    """One row per source: the offset to add to its stamps to put them on the reference clock.

    ``logs`` names the log each source file is part of (``files.parquet``'s stream): the files of a rotated set
    were written by one machine, so they share one estimate, made from the requests of them all, against all
    the files of the reference log (the older file of a rotated vLLM log otherwise matched nothing in the
    gateway's newest file, and was left as logged)."""
    by_log = _Logs(layers, stamp_resolution, logs or {})
    if by_log.gw:
        _against_gateway(by_log, layers)
    elif by_log.srv:
        _against_server(by_log, layers)
    elif by_log.cli:
        ref = by_log.reference(by_log.cli[0], "reference clock (client log only)")
        for c in by_log.cli[1:]:
            by_log.each(c, ref, None, f"another client log: assumed on the clock of {ref}")
    for r in by_log.rows:
        for k in ("offset_s", "spread_s"):
            if r[k] is not None:
                r[k] = round(float(r[k]), 3)
    return by_log.rows


class _Logs:
    """The frames with each row's log (``_log``), the logs of each layer by size, each log's files, and the rows
    being written."""

    def __init__(self, layers: Frames, stamp_resolution: dict[str, float], logs: dict[str, str]) -> None:
        self.stamp_resolution = stamp_resolution
        self.rows: list[dict] = []  # clock_offsets rows (clock.row)
        src = pl.col("source")
        log = src.replace_strict(logs, default=src, return_dtype=pl.String).alias("_log")
        self.gr, self.sr, self.ca, self.ga, self.cr = (
            df.with_columns(log)
            for df in (
                layers.gateway_requests,
                layers.server_requests,
                layers.client_attempts,
                layers.gateway_attempts,
                layers.client_requests,
            )
        )
        self.gw, self.srv = _by_size(self.gr, "_log"), _by_size(self.sr, "_log")
        self.cli = _by_size(self.ca, "_log") or _by_size(self.cr, "_log")
        # the files of each log that hold rows, the newest (shortest name: x.log before x.log.1) first
        pairs = pl.concat(
            [df.select("_log", "source").unique() for df in (self.gr, self.sr, self.ca, self.cr)]
        )
        self.members: dict[str, list[str]] = {}
        for lg, f in pairs.unique().drop_nulls().iter_rows():
            self.members.setdefault(lg, []).append(f)
        for names in self.members.values():
            names.sort(key=lambda n: (len(n), n))

    def each(self, lg: str, ref: str | None, est: dict | None, why: str = "") -> None:
        self.rows.extend(clock.row(f, ref, est, why) for f in self.members[lg])

    def reference(self, lg: str, what: str) -> str:
        name = self.members[lg][0]
        self.each(lg, name, {"offset_s": 0.0, "spread_s": 0.0, "n_matches": 0, "method": what})
        return name

    def resolution(self, lg: str) -> float:
        return self.stamp_resolution.get(self.members[lg][0], 0.0)


def _against_gateway(by_log: _Logs, layers: Frames) -> None:
    ref_log = by_log.gw[0]
    ref = by_log.reference(ref_log, "reference clock (the gateway sees both sides)")
    for g in by_log.gw[1:]:
        by_log.each(g, ref, None, f"another gateway log: assumed on the clock of {ref}")
    on_ref = pl.col("_log") == ref_log
    sg = link.server_gateway_candidates(layers).join(
        by_log.sr.select("sr", "_log", pl.col("t0").alias("s")), on="sr"
    )
    sg = sg.join(by_log.ga.filter(on_ref).select("ga", "a0", "a1"), on="ga")
    for s in by_log.srv:
        by_log.each(s, ref, clock.receive_offset(sg.filter(pl.col("_log") == s), by_log.resolution(s)))
    cg = link.client_gateway_candidates(layers).join(
        by_log.ca.select("ca", "_log", pl.col("t0").alias("c0")), on="ca"
    )
    cg = cg.join(by_log.gr.filter(on_ref).select("gr", pl.col("t0").alias("g0")), on="gr")
    for c in by_log.cli:
        by_log.each(c, ref, clock.send_offset(cg.filter(pl.col("_log") == c)))


def _against_server(by_log: _Logs, layers: Frames) -> None:
    ref_log = by_log.srv[0]
    ref = by_log.reference(ref_log, "reference clock (no gateway log)")
    for s in by_log.srv[1:]:
        by_log.each(s, ref, None, f"another server log: assumed on the clock of {ref}")
    cs = link.client_server_candidates(layers, pl.Series([], dtype=pl.Int64))
    cs = cs.join(by_log.sr.filter(pl.col("_log") == ref_log).select("sr", pl.col("t0").alias("s")), on="sr")
    cs = cs.join(
        by_log.ca.select("ca", "_log", pl.col("t0").alias("a0"), pl.coalesce("t1", "t0").alias("a1")), on="ca"
    )
    for c in by_log.cli:
        est = clock.receive_offset(cs.filter(pl.col("_log") == c), by_log.resolution(ref_log))
        if est is not None:  # that is the server's offset seen from the client: the client's is its opposite
            est = {
                **est,
                "offset_s": -est["offset_s"],
                "method": est["method"].replace("the sender's attempt", "the client's attempt (negated)"),
            }
        by_log.each(c, ref, est)


def _by_size(df: pl.DataFrame, col: str) -> list[str]:
    if df.height == 0:
        return []
    c = df.group_by(col).len().sort(["len", col], descending=[True, False])
    return [s for s in c[col].to_list() if s is not None]


_FRAME_TIMES = {  # the Frames field -> its time columns
    "client_attempts": ("t0", "t1"),
    "client_requests": ("t0", "t1"),
    "gateway_attempts": ("t0", "t1", "a0", "a1", "gr_t1"),
    "gateway_requests": ("t0", "t1"),
    "server_requests": ("received", "added", "finished", "aborted", "t0"),
}


def shift_frames(layers: Frames, shift: dict[str, float]) -> Frames:
    if not shift:
        return layers
    off = pl.col("source").replace_strict(shift, default=0.0, return_dtype=pl.Float64)
    for name, cols in _FRAME_TIMES.items():
        df = getattr(layers, name)
        setattr(layers, name, df.with_columns([pl.col(c) + off for c in cols]))
    return layers


def applied_shifts(offsets: list[dict], stamp_resolution: dict[str, float]) -> dict[str, float]:
    """The seconds added to each source's stamps (the offsets applied; none for the sources left as logged)."""
    shift = {o["source"]: clock.applied(o, stamp_resolution.get(o["source"], 0.0)) for o in offsets}
    return {k: v for k, v in shift.items() if v}


def shift_duration(shift: dict[str, float]) -> pl.Expr:
    """Each row's source's shift as a duration (to add to its timestamps)."""
    us = (
        (pl.col("source").replace_strict(shift, default=0.0, return_dtype=pl.Float64) * 1e6)
        .round(0)
        .cast(pl.Int64)
    )
    return pl.duration(microseconds=us)


def shift_table(df: pl.DataFrame, shift: dict[str, float]) -> pl.DataFrame:
    if not shift or df.height == 0:
        return df
    ts_cols = [c for c, t in df.schema.items() if t == schemas.TS]
    return df.with_columns([pl.col(c) + shift_duration(shift) for c in ts_cols])


def _grid(assembled: assemble.Assembled, other: dict[str, pl.DataFrame], window: str | None):
    ts = [
        assembled.requests["t0"],
        assembled.requests["t1"],
        assembled.execs["start"],
        assembled.execs["end"],
    ]
    st = other["server_stats"]
    if st.height:
        ts.append(st.select(exprs.secs("ts"))["ts"])
    allt = pl.concat([s.cast(pl.Float64) for s in ts]).drop_nulls()
    if not allt.len():  # no time at all (kubectl's ages only): no grid, not one at the epoch's 0
        return windows.parse_width(window) or windows.choose_width(0.0), None, None
    lo, hi = float_value(allt.min()), float_value(allt.max())
    width, note = windows.capped_width(hi - lo, windows.parse_width(window) or windows.choose_width(hi - lo))
    return width, windows.Grid(lo, hi, width), note


def requests_table(req: pl.DataFrame) -> pl.DataFrame:
    df = req.with_columns(to_ts("t0").alias("ts_start"), to_ts("t1").alias("ts_end"))
    return schemas.conform(df, "requests")


__all__ = ["Result", "correlate_tables", "run", "estimate_offsets"]
