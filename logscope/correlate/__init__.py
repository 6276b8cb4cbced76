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
from . import assemble, clock, frames, link, run_columns, span_sources, summary, windows
from .frames import Frames, to_ts


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
        res = slices.correlate(out, rng, rows, window, each)  # writes requests.parquet itself
    elif rng:
        res = correlate_range(out, rng, window)
        res.requests.write_parquet(out / "requests.parquet")
    else:
        tabs = frames.read_tables(out, rng)
        filled = span_sources.fill(out, tabs, rng)  # the spans as the client's or vLLM's records no log gave
        hook = None
        if any(n.startswith(span_sources.ENGINE_NOTE) for n in filled):  # vLLM's spans are its records
            hook = lambda r: span_sources.engine_latencies(out, r, rng)  # noqa: E731
        res = correlate_tables(tabs, window=window, requests_hook=hook)
        res.summary.setdefault("notes", []).extend(filled)
        res.requests.write_parquet(out / "requests.parquet")
    if rng:
        res.summary["range"] = rng.doc()
    from . import traces  # spans joined to the requests (request_spans.parquet), when the folder has spans

    tr = traces.run(out, rng)
    if tr is not None:
        res.summary["traces"] = tr
    res.windows.write_parquet(out / "windows.parquet")
    res.clock_offsets.write_parquet(out / "clock_offsets.parquet")
    jsontext.write(out / "correlation.json", res.summary, jsontext.CORRELATION)
    return res.summary


def dumps(d: dict) -> str:
    return jsontext.CORRELATION.dumps(d)


def correlate_tables(tabs: dict[str, pl.DataFrame], window: str | None = None, requests_hook=None) -> Result:
    """The whole stage on in-memory tables (keys as in ``frames.INPUTS``; absent ones are empty);
    ``requests_hook`` completes the assembled requests before the windows are built from them."""
    L = link_tables(tabs)
    if requests_hook is not None:
        L.A.requests = requests_hook(L.A.requests)
    req = _requests_table(L.A.requests)
    win, summ = finish(run_columns.of(L.F, L.L, L.A), L.other, L.offsets, L.shift, L.res, window)
    return Result(req, win, L.off_df, summ)


def correlate_range(out: Path, rng: time_range.Range, window: str | None = None) -> Result:
    """The correlation of the logical requests that overlap ``rng``, each whole: the tables are read over the
    range widened by the longest request's span (and the join tolerances), linked as a whole correlation links
    them, then cut to those requests with every attempt and execution of theirs (``run_columns.within``), so a
    request crossing the range's edge keeps its vLLM execution, and its counts are the whole run's. The
    server's stats and events are the range's own."""
    from .slices import widened  # slices imports this module

    L = link_tables(frames.read_tables(out, widened(out, rng)))
    lo, hi = (None if t is None else t.timestamp() for t in (rng.since, rng.until))
    n = run_columns.within(run_columns.of(L.F, L.L, L.A), lo, hi)
    req = _requests_table(L.A.requests.filter(pl.col("lr").is_in(n.A.requests["lr"].implode())))
    # on the reference clock: a server's stats of the range, once its clock is corrected
    other = {k: time_range.cut(k, v, rng) if k != "gateway_errors" else v for k, v in L.other.items()}
    win, summ = finish(n, other, L.offsets, L.shift, L.res, window)
    return Result(req, win, L.off_df, summ)


@dataclass
class Whole:
    """What the correlation of a time slice takes from the whole input, not from its own rows (slices.py)."""

    res: dict[str, float]  # sources whose stamps are whole seconds
    offsets: list[dict]  # clock offsets
    spans: dict[
        str, list[tuple[float, float]]
    ]  # "client" / "gateway": each log's span, on the reference clock
    ids_as_sent: dict[
        str, str
    ]  # client sources whose logical ids are the X-Request-Ids sent: the note of each


@dataclass
class Linked:
    """One correlation's frames, links and requests, on the reference clock."""

    F: Frames
    L: link.Links
    A: assemble.Assembled
    other: dict[str, pl.DataFrame]  # server_stats, server_events, gateway_errors, shifted
    offsets: list[dict]
    shift: dict[str, float]
    res: dict[str, float]

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
    pick = tabs.get(frames.CLIENT_PICK)  # read_tables' choice of client sources, when it made one
    tabs = {n: tabs.get(n, schemas.empty(n)) for n in frames.INPUTS}
    if pick is not None:
        tabs[frames.CLIENT_PICK] = pick
    # takes the raw request tables out of tabs, releasing each once its frame is made
    F = frames.build(tabs, whole.ids_as_sent if whole else None)
    if whole is None:
        res = frames.whole_seconds(F.sr, "t0")
        files = tabs["files"]
        logs = dict(zip(files["path"], files["stream"], strict=True)) if "stream" in files.columns else {}
        offsets = estimate_offsets(F, res, logs)
    else:
        res, offsets = whole.res, whole.offsets
    shift = applied_shifts(offsets, res)
    F = shift_frames(F, shift)
    other = {n: shift_table(tabs[n], shift) for n in ("server_stats", "server_events", "gateway_errors")}
    F = frames.fill_timeouts(F)
    L = link.final(F, res)
    A = assemble.build(F, L, res, other["gateway_errors"], whole.spans if whole else None)
    return Linked(F, L, A, other, offsets, shift, res)


def finish(
    n: run_columns.RunColumns,
    other: dict[str, pl.DataFrame],
    offsets: list[dict],
    shift: dict[str, float],
    res: dict[str, float],
    window: str | None,
) -> tuple[pl.DataFrame, dict]:
    """windows.parquet and correlation.json from the run-level columns of every request. The summary comes
    first: what only it reads (the links, the server frame) is let go of ``n`` before the windows are built."""
    width, grid, wide = _grid(n.A, other, window)
    summ = summary.build(n.F, n.L, n.A, offsets, shift, width, [], res)
    n.L = n.F.sr = n.F.cr = n.A.gr_lr = None
    if grid is None:  # no request and no stats line has a time: no window to place anything in
        return schemas.empty("windows"), summ
    events = other["server_events"].with_columns(frames.secs("ts").alias("t"))
    win, wnotes = windows.build(grid, n.A.requests, n.F.ca, n.F.gr, n.A.execs, other["server_stats"], events)
    summ["notes"] += wnotes + (
        [wide] if wide else []
    )  # the summary's last notes, as summary.build places them
    return win, summ


def estimate_offsets(F: Frames, res: dict[str, float], logs: dict[str, str] | None = None) -> list[dict]:
    """One row per source: the offset to add to its stamps to put them on the reference clock.

    ``logs`` names the log each source file is part of (``files.parquet``'s stream): the files of a rotated set
    were written by one machine, so they share one estimate, made from the requests of them all, against all
    the files of the reference log (the older file of a rotated vLLM log otherwise matched nothing in the
    gateway's newest file, and was left as logged)."""
    E = _Logs(F, res, logs or {})
    if E.gw:
        _against_gateway(E, F)
    elif E.srv:
        _against_server(E, F)
    elif E.cli:
        ref = E.reference(E.cli[0], "reference clock (client log only)")
        for c in E.cli[1:]:
            E.each(c, ref, None, f"another client log: assumed on the clock of {ref}")
    for r in E.rows:
        for k in ("offset_s", "spread_s"):
            if r[k] is not None:
                r[k] = round(float(r[k]), 3)
    return E.rows


class _Logs:
    """The frames with each row's log (``_log``), the logs of each layer by size, each log's files, and the rows
    being written."""

    def __init__(self, F: Frames, res: dict[str, float], logs: dict[str, str]) -> None:
        self.res, self.rows = res, []
        src = pl.col("source")
        log = src.replace_strict(logs, default=src, return_dtype=pl.String).alias("_log")
        self.gr, self.sr, self.ca, self.ga, self.cr = (
            df.with_columns(log) for df in (F.gr, F.sr, F.ca, F.ga, F.cr)
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
        return self.res.get(self.members[lg][0], 0.0)


def _against_gateway(E: _Logs, F: Frames) -> None:
    ref_log = E.gw[0]
    ref = E.reference(ref_log, "reference clock (the gateway sees both sides)")
    for g in E.gw[1:]:
        E.each(g, ref, None, f"another gateway log: assumed on the clock of {ref}")
    on_ref = pl.col("_log") == ref_log
    sg = link.server_gateway_candidates(F).join(E.sr.select("sr", "_log", pl.col("t0").alias("s")), on="sr")
    sg = sg.join(E.ga.filter(on_ref).select("ga", "a0", "a1"), on="ga")
    for s in E.srv:
        E.each(s, ref, clock.receive_offset(sg.filter(pl.col("_log") == s), E.resolution(s)))
    cg = link.client_gateway_candidates(F).join(E.ca.select("ca", "_log", pl.col("t0").alias("c0")), on="ca")
    cg = cg.join(E.gr.filter(on_ref).select("gr", pl.col("t0").alias("g0")), on="gr")
    for c in E.cli:
        E.each(c, ref, clock.send_offset(cg.filter(pl.col("_log") == c)))


def _against_server(E: _Logs, F: Frames) -> None:
    ref_log = E.srv[0]
    ref = E.reference(ref_log, "reference clock (no gateway log)")
    for s in E.srv[1:]:
        E.each(s, ref, None, f"another server log: assumed on the clock of {ref}")
    cs = link.client_server_candidates(F, pl.Series([], dtype=pl.Int64))
    cs = cs.join(E.sr.filter(pl.col("_log") == ref_log).select("sr", pl.col("t0").alias("s")), on="sr")
    cs = cs.join(
        E.ca.select("ca", "_log", pl.col("t0").alias("a0"), pl.coalesce("t1", "t0").alias("a1")), on="ca"
    )
    for c in E.cli:
        est = clock.receive_offset(cs.filter(pl.col("_log") == c), E.resolution(ref_log))
        if est is not None:  # that is the server's offset seen from the client: the client's is its opposite
            est = {
                **est,
                "offset_s": -est["offset_s"],
                "method": est["method"].replace("the sender's attempt", "the client's attempt (negated)"),
            }
        E.each(c, ref, est)


def _by_size(df: pl.DataFrame, col: str) -> list[str]:
    if df.height == 0:
        return []
    c = df.group_by(col).len().sort(["len", col], descending=[True, False])
    return [s for s in c[col].to_list() if s is not None]


_FRAME_TIMES = {
    "ca": ("t0", "t1"),
    "cr": ("t0", "t1"),
    "ga": ("t0", "t1", "a0", "a1", "gr_t1"),
    "gr": ("t0", "t1"),
    "sr": ("received", "added", "finished", "aborted", "t0"),
}


def shift_frames(F: Frames, shift: dict[str, float]) -> Frames:
    if not shift:
        return F
    off = pl.col("source").replace_strict(shift, default=0.0, return_dtype=pl.Float64)
    for name, cols in _FRAME_TIMES.items():
        df = getattr(F, name)
        setattr(F, name, df.with_columns([pl.col(c) + off for c in cols]))
    return F


def applied_shifts(offsets: list[dict], res: dict[str, float]) -> dict[str, float]:
    """The seconds added to each source's stamps (the offsets applied; none for the sources left as logged)."""
    shift = {o["source"]: clock.applied(o, res.get(o["source"], 0.0)) for o in offsets}
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


def _grid(A: assemble.Assembled, other: dict[str, pl.DataFrame], window: str | None):
    ts = [A.requests["t0"], A.requests["t1"], A.execs["start"], A.execs["end"]]
    st = other["server_stats"]
    if st.height:
        ts.append(st.select(frames.secs("ts"))["ts"])
    allt = pl.concat([s.cast(pl.Float64) for s in ts]).drop_nulls()
    if not allt.len():  # no time at all (kubectl's ages only): no grid, not one at the epoch's 0
        return windows.parse_width(window) or windows.choose_width(0.0), None, None
    lo, hi = float(allt.min()), float(allt.max())
    width, note = windows.capped_width(hi - lo, windows.parse_width(window) or windows.choose_width(hi - lo))
    return width, windows.Grid(lo, hi, width), note


def _requests_table(req: pl.DataFrame) -> pl.DataFrame:
    df = req.with_columns(to_ts("t0").alias("ts_start"), to_ts("t1").alias("ts_end"))
    return schemas.conform(df, "requests")


__all__ = ["Result", "correlate_tables", "run", "estimate_offsets"]
