"""Correlation stage: one request from client to gateway to vLLM.

Reads the ingest tables of an output folder, estimates each source's clock offset from requests
matched by id, joins the layers (ids first, time second, never counting a time match as exact),
and writes ``requests.parquet``, ``windows.parquet``, ``clock_offsets.parquet`` and
``correlation.json`` (retry multiplication, orphaned work, match statistics, notes).

``correlate_tables`` does the work on in-memory tables, for the benchmark and for notebooks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .. import schemas, scope
from . import assemble, clock, frames, link, summary, windows
from .frames import Frames, to_ts


@dataclass
class Result:
    requests: pl.DataFrame
    windows: pl.DataFrame
    clock_offsets: pl.DataFrame
    summary: dict


def run(out: Path, options) -> dict:
    """Correlate the tables in ``out`` and write the correlation outputs there."""
    out = Path(out)
    rng = scope.of(options)
    res = correlate_tables(frames.read_tables(out, rng), window=getattr(options, "window", None))
    if rng:
        res.summary["range"] = rng.doc()
    res.requests.write_parquet(out / "requests.parquet")
    res.windows.write_parquet(out / "windows.parquet")
    res.clock_offsets.write_parquet(out / "clock_offsets.parquet")
    (out / "correlation.json").write_text(dumps(res.summary))
    return res.summary


def dumps(d: dict) -> str:
    return json.dumps(d, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def correlate_tables(tabs: dict[str, pl.DataFrame], window: str | None = None) -> Result:
    """The whole stage on in-memory tables (keys as in ``frames.INPUTS``; absent ones are empty)."""
    pick = tabs.get(frames.CLIENT_PICK)  # read_tables' choice of client sources, when it made one
    tabs = {n: tabs.get(n, schemas.empty(n)) for n in frames.INPUTS}
    if pick is not None:
        tabs[frames.CLIENT_PICK] = pick
    F = frames.build(tabs)  # takes the raw request tables out of tabs, releasing each once its frame is made
    res = frames.whole_seconds(F.sr, "t0")
    offsets = estimate_offsets(F, res)
    shift = {o["source"]: clock.applied(o, res.get(o["source"], 0.0)) for o in offsets}
    shift = {k: v for k, v in shift.items() if v}
    F = shift_frames(F, shift)
    other = {n: shift_table(tabs[n], shift) for n in ("server_stats", "server_events", "gateway_errors")}
    F = frames.fill_timeouts(F)
    L = link.final(F, res)
    A = assemble.build(F, L, res, other["gateway_errors"])

    width, grid = _grid(A, other, window)
    events = other["server_events"].with_columns(frames.secs("ts").alias("t"))
    win, wnotes = windows.build(grid, A.requests, F.ca, F.gr, A.execs, other["server_stats"], events)
    off_df = pl.DataFrame(offsets, schema=schemas.schema("clock_offsets")) if offsets else schemas.empty(
        "clock_offsets")
    summ = summary.build(F, L, A, offsets, shift, width, wnotes, res)
    return Result(_requests_table(A.requests), win, off_df, summ)


def estimate_offsets(F: Frames, res: dict[str, float]) -> list[dict]:
    """One row per source: the offset to add to its stamps to put them on the reference clock."""
    gw_sources = _by_size(F.gr, "source")
    sr_sources = _by_size(F.sr, "source")
    ca_sources = _by_size(F.ca, "source") or _by_size(F.cr, "source")
    rows: list[dict] = []
    if gw_sources:
        ref = gw_sources[0]
        rows.append(clock.row(ref, ref, {"offset_s": 0.0, "spread_s": 0.0, "n_matches": 0,
                                         "method": "reference clock (the gateway sees both sides)"}))
        for g in gw_sources[1:]:
            rows.append(clock.row(g, ref, None, f"another gateway log: assumed on the clock of {ref}"))
        sg = link.server_gateway_candidates(F).join(F.sr.select("sr", "source", pl.col("t0").alias("s")), on="sr")
        sg = sg.join(F.ga.select("ga", "a0", "a1", pl.col("source").alias("g_src")), on="ga").filter(
            pl.col("g_src") == ref)
        for s in sr_sources:
            est = clock.receive_offset(sg.filter(pl.col("source") == s), res.get(s, 0.0))
            rows.append(clock.row(s, ref, est))
        cg = link.client_gateway_candidates(F).join(F.ca.select("ca", "source", pl.col("t0").alias("c0")), on="ca")
        cg = cg.join(F.gr.select("gr", pl.col("t0").alias("g0"), pl.col("source").alias("g_src")), on="gr").filter(
            pl.col("g_src") == ref)
        for c in ca_sources:
            rows.append(clock.row(c, ref, clock.send_offset(cg.filter(pl.col("source") == c))))
    elif sr_sources:
        ref = sr_sources[0]
        rows.append(clock.row(ref, ref, {"offset_s": 0.0, "spread_s": 0.0, "n_matches": 0,
                                         "method": "reference clock (no gateway log)"}))
        for s in sr_sources[1:]:
            rows.append(clock.row(s, ref, None, f"another server log: assumed on the clock of {ref}"))
        cs = link.client_server_candidates(F, pl.Series([], dtype=pl.Int64))
        cs = cs.join(F.sr.select("sr", pl.col("source").alias("s_src"), pl.col("t0").alias("s")), on="sr").filter(
            pl.col("s_src") == ref)
        cs = cs.join(F.ca.select("ca", "source", pl.col("t0").alias("a0"), pl.coalesce("t1", "t0").alias("a1")),
                     on="ca")
        for c in ca_sources:
            est = clock.receive_offset(cs.filter(pl.col("source") == c), res.get(ref, 0.0))
            if est is not None:  # that is the server's offset seen from the client: the client's is its opposite
                est = {**est, "offset_s": -est["offset_s"],
                       "method": est["method"].replace("the sender's attempt", "the client's attempt (negated)")}
            rows.append(clock.row(c, ref, est))
    elif ca_sources:
        ref = ca_sources[0]
        rows.append(clock.row(ref, ref, {"offset_s": 0.0, "spread_s": 0.0, "n_matches": 0,
                                         "method": "reference clock (client log only)"}))
        for c in ca_sources[1:]:
            rows.append(clock.row(c, ref, None, f"another client log: assumed on the clock of {ref}"))
    for r in rows:
        for k in ("offset_s", "spread_s"):
            if r[k] is not None:
                r[k] = round(float(r[k]), 3)
    return rows


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


def shift_table(df: pl.DataFrame, shift: dict[str, float]) -> pl.DataFrame:
    if not shift or df.height == 0:
        return df
    us = (pl.col("source").replace_strict(shift, default=0.0, return_dtype=pl.Float64) * 1e6).round(0).cast(pl.Int64)
    ts_cols = [c for c, t in df.schema.items() if t == schemas.TS]
    return df.with_columns([pl.col(c) + pl.duration(microseconds=us) for c in ts_cols])


def _grid(A: assemble.Assembled, other: dict[str, pl.DataFrame], window: str | None):
    ts = [A.requests["t0"], A.requests["t1"], A.execs["start"], A.execs["end"]]
    st = other["server_stats"]
    if st.height:
        ts.append(st.select(frames.secs("ts"))["ts"])
    allt = pl.concat([s.cast(pl.Float64) for s in ts]).drop_nulls()
    lo, hi = (float(allt.min()), float(allt.max())) if allt.len() else (0.0, 0.0)
    width = windows.parse_width(window) or windows.choose_width(hi - lo)
    return width, windows.Grid(lo, hi, width)


def _requests_table(req: pl.DataFrame) -> pl.DataFrame:
    df = req.with_columns(to_ts("t0").alias("ts_start"), to_ts("t1").alias("ts_end"))
    return schemas.conform(df, "requests")


__all__ = ["Result", "correlate_tables", "run", "estimate_offsets"]
