"""Correlation in time slices: the whole input in bounded memory.

A whole correlation holds every request of every layer at once (~3 KB a logical request: 3.5 GB for
the 5 GB bench folder). Sliced, it holds one slice's requests, plus the few numeric columns of every
request that the run-level outputs read (``run_columns.py``, ~0.3 KB a request):

1. What a slice cannot tell from its own rows is taken from the whole input first (``Whole``), on
   narrow lazy scans: which client views are kept, which sources stamp whole seconds, each log's span,
   and the clock offsets. Offsets come from a probe: the requests of one id in k of the reference log
   (the gateway's, else vLLM's) and of the first ids of every client and vLLM log, with the other
   layers' rows read by those ids, so the probe pairs them whatever the skew and holds every log (the
   whole input when it holds at most PROBE_ROWS request rows).
2. Slices hold about ``rows`` request-level rows each, cut on the reference clock. A slice reads every
   row whose span overlaps it widened by a margin (the longest span of any request row, plus
   CHAIN_SLACK_S for retries of one id), and links them as a whole correlation does. A logical request
   is the slice's own when it starts inside it: its attempts, gateway requests and executions follow it,
   and rows of no logical request follow their own start (``run_columns.owned``).
3. The slices' own requests are written to requests.parquet in time order; windows.parquet and
   correlation.json are computed once from the narrow columns of them all, by the code a whole
   correlation uses. On the lab runs cut into 15-80 slices, every output equals the whole's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from .. import schemas
from ..resources import time_range
from ..resources.time_range import Range
from . import (
    Result,
    Whole,
    applied_shifts,
    client_sources,
    clock,
    estimate_offsets,
    exprs,
    finish,
    frames,
    ingest_tables,
    link,
    link_tables,
    offsets_table,
    requests_table,
    run_columns,
    shift_duration,
    shift_table,
    stream_failures,
)

PROBE_ROWS = 500_000  # request-level rows of the clock probe (a slice's worth)
PER_SOURCE = 2_000  # ids of every client and vLLM log in the probe, whatever its size
STEP = "1m"  # slice edges fall on whole minutes
NOTE = "correlated in"  # how correlation.json's note on slicing begins
CHAIN_SLACK_S = 120.0  # retries of one id logged by no client (no row spans the chain): the gaps between them
REQUEST_TABLES = ("client_attempts", "gateway_attempts", "server_requests")
PER_SLICE = ("client_attempts", "client_requests", "gateway_attempts", "gateway_errors", "server_requests")


@dataclass(frozen=True)
class SliceTask:
    """One time slice to correlate (``one_slice``): ``rng`` is what is read, the slice's own requests are those
    that start in [``lo``, ``hi``) (None: open), written to ``tmp``; ``keep`` is the range analysed."""

    out: Path
    rng: Range
    k: int
    lo: float | None
    hi: float | None
    tmp: Path
    keep: Range = time_range.ALL


@dataclass(frozen=True)
class SliceContext:
    """What every slice takes from the whole input, the same for all (a cluster sends it to each worker once):
    the margin read beyond a slice's edges, the clock shifts, the client pick and the whole input's answers."""

    margin: float
    shift: dict[str, float]
    pick: pl.DataFrame
    whole: Whole


SliceFn = Callable[[SliceTask, SliceContext], run_columns.RunColumns]
Each = Callable[[SliceFn, list[SliceTask], SliceContext], Iterator[run_columns.RunColumns]]


def correlate(
    out: Path, rng: Range, rows: int, window: str | None = None, each: Each | None = None
) -> Result:
    """The correlation of ``out``'s tables, ``rows`` request-level rows a slice; requests.parquet is written
    here (the Result's ``requests`` is empty). ``each`` runs the slices elsewhere (a cluster's tasks,
    ``logscope.cluster.correlate``): given ``one_slice``, the slices' tasks and their shared context, it yields
    their results in order; by default they run here, one at a time."""
    keep, rng = rng, widened(out, rng)  # a range's requests are kept whole: read beyond it (correlate_range)
    pick = _pick(out, rng)
    whole, notes = context(out, rng, pick)
    shift = applied_shifts(whole.offsets, whole.stamp_resolution)
    margin = max_span(out, rng) + link.EXACT_TOL_S + CHAIN_SLACK_S
    cuts = bounds(out, rng, shift, rows)
    edges = [None, *cuts, None]
    parts: list[run_columns.RunColumns] = []
    base: dict[str, int] = {}
    tmp = Path(tempfile.mkdtemp(prefix="requests-", dir=out))
    try:
        tasks = [SliceTask(out, rng, k, edges[k], edges[k + 1], tmp, keep) for k in range(len(edges) - 1)]
        shared = SliceContext(margin, shift, pick, whole)
        for own in (each or _here)(one_slice, tasks, shared):
            own, base = run_columns.rekey(own, base)
            parts.append(own)
        schemas.conform(pl.scan_parquet(sorted(tmp.glob("*.parquet"))), "requests").sink_parquet(
            out / "requests.parquet"
        )
        joined = run_columns.concat(parts)
        del parts
        other = {
            n: time_range.cut(n, _shifted(out, n, rng, shift), keep)
            for n in ("server_stats", "server_events")
        }
        other["gateway_errors"] = schemas.empty("gateway_errors")
        win, summ = finish(joined, other, whole.offsets, shift, whole.stamp_resolution, window)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = len(edges) - 1
    notes.insert(
        0,
        f"{NOTE} {n} time slice{'s' if n != 1 else ''} of about {rows:,} request rows each, to bound "
        f"memory: every request is analysed, and each slice also reads the {margin:.0f} s beyond its edges "
        "so that long requests and retry chains stay whole",
    )
    summ["notes"] = notes + summ["notes"]
    summ["slices"] = {
        "count": n,
        "rows_per_slice": rows,
        "margin_s": round(margin, 3),
        "edges": [time_range.iso(_dt(t)) for t in cuts],
    }
    return Result(schemas.empty("requests"), win, offsets_table(whole.offsets), summ)


# ------------------------------------------------------------------ the whole input, on narrow scans


def widened(out: Path, rng: Range) -> Range:
    """``rng`` widened on each side by the margin a slice reads beyond its edges: every row of a request that
    overlaps ``rng`` lies inside it (``correlate.correlate_range``)."""
    if not rng:
        return rng
    pad = timedelta(seconds=max_span(out, rng) + link.EXACT_TOL_S + CHAIN_SLACK_S)
    return Range(
        None if rng.since is None else rng.since - pad, None if rng.until is None else rng.until + pad
    )


def _pick(out: Path, rng: Range) -> pl.DataFrame:
    from ..resources.budget import (
        PICK_SAMPLE,  # the estimate's sample: deciding on every row holds every client id
    )

    return ingest_tables.pick_table(*client_sources.kept_client_sources(out, rng, sample=PICK_SAMPLE))


def context(out: Path, rng: Range, pick: pl.DataFrame) -> tuple[Whole, list[str]]:
    """The whole input's answers a slice needs (``Whole``), and notes on how they were found."""
    res = whole_seconds(out, rng)
    files = (
        pl.read_parquet(out / "files.parquet") if (out / "files.parquet").exists() else schemas.empty("files")
    )
    logs = dict(zip(files["path"], files["stream"], strict=True)) if "stream" in files.columns else {}
    tabs, note = probe(out, rng, pick)
    F = frames.build(tabs)
    offsets = complete(estimate_offsets(F, res, logs), out, rng, pick, logs)
    covered = spans(out, rng, pick, applied_shifts(offsets, res))
    marks = stream_failures.marks(out)  # decided on whole files, not on a slice's rows
    return Whole(res, offsets, covered, F.ids_as_sent, marks), [note] if note else []


def whole_seconds(out: Path, rng: Range) -> dict[str, float]:
    """``frames.whole_seconds`` of the server frame, on a scan of two columns."""
    t0 = pl.coalesce(exprs.secs("received_ts"), exprs.secs("added_ts"))
    return frames.whole_seconds(
        time_range.scan(out, "server_requests", rng)
        .filter(~pl.col("endpoint").fill_null("").is_in(frames.NON_INFERENCE_ENDPOINTS))
        .select("source", t0.alias("t0")),
        "t0",
    )


def _kept(pick: pl.DataFrame) -> list[str]:
    return pick.filter(pl.col("kept"))["source"].to_list()


def _count(out: Path, name: str, rng: Range) -> int:
    return time_range.scan(out, name, rng).select(pl.len()).collect().item()


def probe(out: Path, rng: Range, pick: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], str | None]:
    """The tables the clock offsets are estimated from: the whole input when it is small, else the requests
    of one id in ``k`` of the reference log (the gateway's, else vLLM's: every row of a chosen id, so
    retries pair as they do whole) and of the first PER_SOURCE ids of every client and vLLM log (a small
    log may hold no id of the k-th), with the other layers' rows that carry those ids, whatever their skew."""
    n = sum(_count(out, t, rng) for t in REQUEST_TABLES)
    if n <= PROBE_ROWS:
        return _read(out, rng, None, pick), None
    ref = "gateway_attempts" if _count(out, "gateway_attempts", rng) else "server_requests"
    k = max(1, -(-_count(out, ref, rng) * len(REQUEST_TABLES) // PROBE_ROWS))
    firsts = pl.concat(
        [
            _first_ids(out, rng, "client_attempts", pl.coalesce("request_id", "logical_request_id"), pick),
            _first_ids(out, rng, "server_requests", pl.col("base_request_id"), pick),
        ]
    ).implode()
    if ref == "gateway_attempts":
        chosen = (
            (pl.coalesce("client_request_id", "request_id").hash(seed=0) % k == 0)
            | pl.col("client_request_id").is_in(firsts)
            | pl.col("request_id").is_in(firsts)
        )
    else:
        chosen = (pl.col("base_request_id").hash(seed=0) % k == 0) | pl.col("base_request_id").is_in(firsts)
    tabs = _read(out, rng, {ref: chosen}, pick, (ref, "files"))
    if ref == "gateway_attempts":
        g = tabs[ref]
        ids = pl.concat([g["request_id"], g["client_request_id"]]).drop_nulls().unique().implode()
        tabs["server_requests"] = _table(
            out, rng, "server_requests", pl.col("base_request_id").is_in(ids), pick
        )
    else:
        ids = tabs[ref]["base_request_id"].drop_nulls().unique().implode()
    ca = tabs["client_attempts"] = _table(
        out,
        rng,
        "client_attempts",
        pl.col("request_id").is_in(ids) | pl.col("logical_request_id").is_in(ids),
        pick,
    )
    logical = ca["logical_request_id"].drop_nulls().unique().implode()
    tabs["client_requests"] = _table(
        out, rng, "client_requests", pl.col("logical_request_id").is_in(logical), pick
    )
    return tabs, (
        f"clock offsets estimated from one request id in {k} of the {ref.split('_')[0]} log, the first "
        f"{PER_SOURCE:,} of each client and vLLM log, and the other layers' rows with those ids"
    )


def _first_ids(out: Path, rng: Range, table: str, key: pl.Expr, pick: pl.DataFrame) -> pl.Series:
    """The first PER_SOURCE ids of each source of ``table`` (client sources: the kept ones); each scan stops
    once it has them."""
    lf = time_range.scan(out, table, rng).select("source", key.alias("id")).filter(pl.col("id").is_not_null())
    if table in ingest_tables.CLIENT_TABLES:
        lf = lf.filter(pl.col("source").is_in(_kept(pick)))
    sources = lf.select("source").unique().collect(engine="streaming")["source"].drop_nulls().sort()
    return pl.concat(
        [
            pl.Series("id", [], pl.String),
            *(
                lf.filter(pl.col("source") == s).head(PER_SOURCE).collect(engine="streaming")["id"]
                for s in sources
            ),
        ]
    )


def complete(
    offsets: list[dict], out: Path, rng: Range, pick: pl.DataFrame, logs: dict[str, str]
) -> list[dict]:
    """The probe's offsets, with a row for every source the probe did not hold: a file of a rotated log
    whose other files it held takes their estimate; any other is left as logged, as in a whole correlation."""
    have = {o["source"] for o in offsets}
    ref = next((o["reference"] for o in offsets if o["reference"]), None)
    by_log = {logs.get(o["source"], o["source"]): o for o in offsets}
    keep = set(_kept(pick))
    rows = list(offsets)
    for name in ("gateway_attempts", "server_requests", "client_attempts", "client_requests"):
        srcs = (
            time_range.scan(out, name, rng)
            .select("source")
            .unique()
            .collect()["source"]
            .drop_nulls()
            .to_list()
        )
        for s in sorted(srcs):
            if s in have or (name.startswith("client") and s not in keep):
                continue
            twin = by_log.get(logs.get(s, s))
            rows.append({**twin, "source": s} if twin else clock.row(s, ref, None))
            have.add(s)
    return rows


def spans(
    out: Path, rng: Range, pick: pl.DataFrame, shift: dict[str, float]
) -> dict[str, list[tuple[float, float]]]:
    """``assemble.spans`` of the whole input, on scans of a few columns (on the reference clock)."""
    keep = _kept(pick)
    ca = time_range.scan(out, "client_attempts", rng).filter(pl.col("source").is_in(keep))
    timeout = (
        time_range.scan(out, "client_requests", rng)
        .filter(pl.col("source").is_in(keep))
        .group_by("source")
        .agg(pl.col("timeout_s").max().alias("_to"))
    )
    t0, t1 = exprs.secs("ts_start"), exprs.secs("ts_end")
    # a timed-out attempt logged with no end ended at its send plus the client's timeout (frames.fill_timeouts)
    end = pl.coalesce(t1, pl.when(pl.col("timed_out").fill_null(False)).then(t0 + pl.col("_to")), t0)
    client = _span_rows(
        ca.join(timeout, on="source", how="left").select("source", t0.alias("lo"), end.alias("hi"))
    )
    if not client:
        cr = time_range.scan(out, "client_requests", rng).filter(pl.col("source").is_in(keep))
        client = _span_rows(cr.select("source", t0.alias("lo"), pl.coalesce(t1, t0).alias("hi")))
    inference = ~(
        pl.col("path").fill_null("").str.contains(frames.NON_INFERENCE_PATH)
        | (pl.col("method").fill_null("POST") == "GET")
    )
    ga = time_range.scan(out, "gateway_attempts", rng).filter(inference)
    gateway = _span_rows(ga.select("source", t0.alias("lo"), pl.coalesce(t1, t0).alias("hi")))
    return {
        "client": [(lo + shift.get(s, 0.0), hi + shift.get(s, 0.0)) for s, lo, hi in client],
        "gateway": [(lo + shift.get(s, 0.0), hi + shift.get(s, 0.0)) for s, lo, hi in gateway],
    }


def _span_rows(lf: pl.LazyFrame) -> list[tuple[str, float, float]]:
    df = (
        lf.filter(pl.col("lo").is_not_null())
        .group_by("source")
        .agg(pl.col("lo").min(), pl.col("hi").max())
        .sort("source")
        .collect(engine="streaming")
    )
    return [(s, lo, hi) for s, lo, hi in df.iter_rows() if lo is not None]


def max_span(out: Path, rng: Range) -> float:
    """The longest time any request-level row spans (a client's logical request: its whole retry chain)."""
    longest = 0.0
    for name in (*REQUEST_TABLES, "client_requests"):
        cols = schemas.time_columns(name)
        d = (pl.max_horizontal(cols) - pl.min_horizontal(cols)).dt.total_microseconds().max()
        v = time_range.scan(out, name, rng).select(d).collect(engine="streaming").item()
        longest = max(longest, (v or 0) / 1e6)
    return longest


def bounds(out: Path, rng: Range, shift: dict[str, float], rows: int) -> list[float]:
    """Slice edges on the reference clock (epoch seconds): on whole STEPs, about ``rows`` rows apart."""
    per = []
    for name in REQUEST_TABLES:
        t = (time_range.first_time(name) + shift_duration(shift)) if shift else time_range.first_time(name)
        per.append(time_range.scan(out, name, rng).select(t.dt.truncate(STEP).alias("m")).drop_nulls())
    counts = pl.concat(per).group_by("m").len().sort("m").collect(engine="streaming")
    edges, acc = [], 0
    for m, n in counts.iter_rows():
        if acc and acc + n > rows:
            edges.append(m.timestamp())
            acc = 0
        acc += n
    return edges


# ------------------------------------------------------------------ one slice


def _here(fn: SliceFn, tasks: list[SliceTask], shared: SliceContext) -> Iterator[run_columns.RunColumns]:
    return (
        fn(t, shared) for t in tasks
    )  # one at a time: a slice's tables are let go before the next is read


def one_slice(task: SliceTask, shared: SliceContext) -> run_columns.RunColumns:
    """Slice ``task.k`` correlated: its own requests written to ``task.tmp`` (by a rename, so that a slice run
    again elsewhere replaces it whole), and its own narrow rows, keyed from 0. ``task.rng`` is what is read;
    ``task.keep``, the range analysed: of the slice's own requests, those that overlap it
    (``correlate.correlate_range``)."""
    out, k, lo, hi, tmp, keep = task.out, task.k, task.lo, task.hi, task.tmp, task.keep
    tabs = read_slice(out, task.rng, lo, hi, shared.margin, shared.shift, shared.pick)
    lk = link_tables(tabs, shared.whole)
    own = run_columns.owned(run_columns.of(lk.frames, lk.links, lk.assembled, compact=True), lo, hi, k == 0)
    if keep:
        own = run_columns.within(
            own, *(None if t is None else t.timestamp() for t in (keep.since, keep.until))
        )
    req = lk.assembled.requests.filter(pl.col("lr").is_in(own.assembled.requests["lr"].implode()))
    part = tmp / f".{k:06d}-{os.getpid()}-{threading.get_ident()}.tmp"
    requests_table(req).write_parquet(part)
    os.replace(part, tmp / f"{k:06d}.parquet")
    return own


def _dt(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


def _read(
    out: Path,
    rng: Range,
    where: dict[str, pl.Expr | None] | None,
    pick: pl.DataFrame,
    names: tuple[str, ...] = ingest_tables.INPUTS,
) -> dict[str, pl.DataFrame]:
    """The ingest tables, as ``ingest_tables.read_tables`` gives them: ``names`` of them read (the rows
    ``where`` says, of the client sources ``pick`` keeps), the others empty."""
    tabs = {
        n: _table(out, rng, n, (where or {}).get(n), pick)
        if n in names
        else schemas.empty(n).select(ingest_tables.columns_read(n))
        for n in ingest_tables.INPUTS
    }
    tabs[ingest_tables.CLIENT_PICK] = pick
    return tabs


def _table(out: Path, rng: Range, name: str, where: pl.Expr | None, pick: pl.DataFrame) -> pl.DataFrame:
    return ingest_tables.read_table(out, name, rng, _kept(pick), where)


def read_slice(
    out: Path,
    rng: Range,
    lo: float | None,
    hi: float | None,
    margin: float,
    shift: dict[str, float],
    pick: pl.DataFrame,
) -> dict[str, pl.DataFrame]:
    """The request tables' rows that overlap [lo - margin, hi + margin] on the reference clock."""
    stretch = Range(_dt(None if lo is None else lo - margin), _dt(None if hi is None else hi + margin))
    where = {n: time_range.where(n, stretch, shift_duration(shift) if shift else None) for n in PER_SLICE}
    return _read(out, rng, where, pick, (*PER_SLICE, "files"))


def _shifted(out: Path, name: str, rng: Range, shift: dict[str, float]) -> pl.DataFrame:
    return shift_table(ingest_tables.read_table(out, name, rng, []), shift)
