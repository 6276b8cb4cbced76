"""Figures over a time range: server state, request latencies, arrivals, token lengths.

Shared by episodes (during vs before), ladder steps and the cold-start window, so every part of
the diagnosis measures a range the same way.
"""

from __future__ import annotations

import bisect
import weakref
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Literal

import polars as pl

from .tables import OUTCOME_OK, SERVER_STATE_AGGS, TS

Closed = Literal["left", "right", "both", "none"]  # which ends of a range hold (polars' ``is_between``)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def epoch_us(t: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (the physical value of a TS column)."""
    return (t - _EPOCH) // _US


def outside(col: str, ranges: list[tuple]) -> pl.Expr:
    """True where ``col`` (a TS column) lies in none of the closed ranges, null where it is null. The ranges
    are merged into disjoint ones and each time finds its one candidate by binary search (a crash loop's
    thousands of cold windows as one is_between each made an expression of thousands of terms)."""
    merged: list[list[int]] = []
    for a, b in sorted((epoch_us(a), epoch_us(b)) for a, b in ranges):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        elif a <= b:
            merged.append([a, b])
    ts = pl.col(col).to_physical()
    if not merged:
        return pl.when(ts.is_not_null()).then(True)
    los, his = (pl.Series([m[i] for m in merged], dtype=pl.Int64) for i in (0, 1))
    i = pl.lit(los).search_sorted(ts, side="right").cast(pl.Int64) - 1  # the last range starting at or before
    return pl.when(ts.is_not_null()).then((i < 0) | (ts > pl.lit(his).gather(i.clip(0))))


def between(
    df: pl.DataFrame, col: str, lo: datetime | None, hi: datetime | None, closed: Closed = "both"
) -> pl.DataFrame:
    """Rows of ``df`` with ``col`` in [lo, hi] (``closed`` as in ``is_between``), in their order.

    Episodes, steps and windows ask this hundreds of times of the same frames: a datetime literal costs
    ~100 µs to build, so times are compared as epoch microseconds, and a column sorted without nulls is
    sliced at two binary searches (the rows and order a filter would give)."""
    if lo is None or hi is None or df.height == 0:
        return df.clear()
    s = df[col]
    if s.dtype != TS or lo.tzinfo is None or hi.tzinfo is None:
        return df.filter(pl.col(col).is_between(lo, hi, closed=closed))
    a, b = epoch_us(lo), epoch_us(hi)
    times = _sorted_times(df, col)
    if times is not None:
        # integers: the first row > t is the first row >= t + 1, so both bounds are one left-side search
        i = bisect.bisect_left(times, a if closed in ("both", "left") else a + 1)
        j = bisect.bisect_left(times, b + 1 if closed in ("both", "right") else b)
        return df.slice(i, max(0, j - i))
    return df.filter(pl.col(col).to_physical().is_between(a, b, closed=closed))


# the sorted times of the frames asked, by (id(frame), column); an entry goes when its frame goes (a
# weakref finalizer), so a frame's id is never reused while its entry lives and no entry outlives its frame
_TIMES: dict[tuple[int, str], array | None] = {}


def _sorted_times(df: pl.DataFrame, col: str) -> array | None:
    """The epoch-µs times of a column sorted without nulls (an int64 array: a bisect on it takes a
    microsecond, a polars search_sorted ~60 µs of call overhead, and a day's episodes and deaths ask
    thousands of ranges); None when the column is not sorted or has nulls. Computed once per frame."""
    key = (id(df), col)
    if key in _TIMES:
        return _TIMES[key]
    s = df[col]
    times = None
    if s.null_count() == 0 and s.is_sorted():
        times = array("q", s.to_physical().to_list())
    _TIMES[key] = times
    weakref.finalize(df, _TIMES.pop, key, None)
    return times


_STATE_EMPTY = {
    "running_max": None,
    "running_mean": None,
    "waiting_max": None,
    "waiting_mean": None,
    "kv_max": None,
    "kv_mean": None,
    "gen_tps_mean": None,
    "samples": 0,
    "engines_max": None,
}
_STATE_AGGS = (
    *SERVER_STATE_AGGS,
    pl.col("gen_tps").mean().alias("gen_tps_mean"),
    pl.len().alias("samples"),
)


def _state_aggs(series: pl.DataFrame) -> tuple[pl.Expr, ...]:
    """The state's figures, and how many engines' lines were summed (> 1: running and waiting are their sum) where
    the series says (server_series.server_series does; a raw stats table does not)."""
    engines = pl.col("engines").max() if "engines" in series.columns else pl.lit(None, pl.UInt32)
    return (*_STATE_AGGS, engines.alias("engines_max"))


def server_state(series: pl.DataFrame, lo, hi, replica: str | None = None) -> dict:
    s = between(series, "ts", lo, hi)
    if replica is not None and s.height and (s["replica"] == replica).any():
        s = s.filter(pl.col("replica") == replica)
    if s.height == 0:
        return dict(_STATE_EMPTY)
    return s.select(_state_aggs(s)).row(0, named=True)


def server_state_many(
    series: pl.DataFrame, ranges: list[tuple], replicas: list[str | None] | None = None
) -> list[dict]:
    """``server_state`` of every range (with its replica), in a few calls however many ranges there are."""
    replicas = replicas if replicas is not None else [None] * len(ranges)
    aggs = _state_aggs(series)
    parts = gathered(series, "ts", ranges, columns=["replica", *read_by(*aggs)])
    if parts is None:
        return [server_state(series, lo, hi, r) for (lo, hi), r in zip(ranges, replicas, strict=True)]
    want = pl.DataFrame(
        {"_k": range(len(ranges)), "_want": replicas}, schema={"_k": pl.Int64, "_want": pl.String}
    )
    got = {}
    for rows in parts:
        # a range's rows narrow to its replica when that replica is among them
        rows = rows.join(want, on="_k", how="left").with_columns(
            (pl.col("replica") == pl.col("_want")).fill_null(False).alias("_mine")
        )
        rows = rows.filter(~pl.col("_mine").any().over("_k") | pl.col("_mine"))
        got.update({r.pop("_k"): r for r in rows.group_by("_k").agg(aggs).to_dicts()})
    return [got.get(k) or dict(_STATE_EMPTY) for k in range(len(ranges))]


def _requests_empty(dur: float, known: bool = True) -> dict:
    """No request in the range; with ``known`` False the folder holds no request record at all, so the arrival
    rate is unknown, not 0/s (public-2 n15: a stats excerpt alone read 'arrivals ... 0/s during')."""
    return {
        "requests": 0,
        "arrival_rate": 0.0 if dur > 0 and known else None,
        "ttft_p50": None,
        "ttft_p95": None,
        "e2e_p50": None,
        "e2e_p95": None,
        "success_share": None,
        "prompt_tokens_mean": None,
        "max_tokens_mean": None,
        "output_tokens_mean": None,
        "output_tokens_sum": None,
        "errors": 0,
        "timeouts": 0,
        "known_outcomes": 0,
    }


_REQUEST_AGGS = (
    pl.len().alias("requests"),
    pl.col("ttft_s").quantile(0.5, "linear").alias("ttft_p50"),
    pl.col("ttft_s").quantile(0.95, "linear").alias("ttft_p95"),
    pl.col("e2e_s").quantile(0.5, "linear").alias("e2e_p50"),
    pl.col("e2e_s").quantile(0.95, "linear").alias("e2e_p95"),
    pl.col("prompt_tokens").mean().alias("prompt_tokens_mean"),
    pl.col("max_tokens").mean().alias("max_tokens_mean"),
    pl.col("output_tokens").mean().alias("output_tokens_mean"),
    pl.col("output_tokens").sum().alias("output_tokens_sum"),
    (pl.col("outcome") == "error").sum().alias("errors"),
    (pl.col("outcome") == "timeout").sum().alias("timeouts"),
    # a request its client never saw end (its log stopped with it in flight) has no outcome to judge
    (~pl.col("outcome").is_in(["unknown", "unfinished"])).sum().alias("known_outcomes"),
    (pl.col("outcome") == OUTCOME_OK).sum().alias("_ok"),
    pl.col("output_tokens").count().alias("_outputs"),
)


def _request_row(row: dict, dur: float) -> dict:
    """The aggregates of _REQUEST_AGGS as ``requests`` reports them."""
    ok, outputs = row.pop("_ok"), row.pop("_outputs")
    row["arrival_rate"] = row["requests"] / dur if dur > 0 else None
    row["success_share"] = ok / row["known_outcomes"] if row["known_outcomes"] else None
    if not outputs:
        row["output_tokens_sum"] = None
    return row


def _duration(lo, hi) -> float:
    return (hi - lo).total_seconds() if lo is not None and hi is not None else 0.0


def requests(req: pl.DataFrame, lo, hi, exclude: list[tuple] | None = None) -> dict:
    """Request figures for requests that *started* in [lo, hi]; ``exclude`` drops cold windows."""
    r = between(req, "ts_start", lo, hi)
    if exclude:
        r = r.filter(outside("ts_start", exclude))
    if r.height == 0:
        return _requests_empty(_duration(lo, hi), known=req.height > 0)
    return _request_row(r.select(_REQUEST_AGGS).row(0, named=True), _duration(lo, hi))


def requests_many(req: pl.DataFrame, ranges: list[tuple]) -> list[dict]:
    """``requests`` of every range, in a few calls however many ranges there are (an incident of a
    day has thousands of episodes and cold windows, each asking for its figures)."""
    if not req.height:
        return [_requests_empty(_duration(lo, hi), known=False) for lo, hi in ranges]
    parts = gathered(req, "ts_start", ranges, columns=read_by(*_REQUEST_AGGS))
    if parts is None:
        return [requests(req, lo, hi) for lo, hi in ranges]
    got = {r.pop("_k"): r for rows in parts for r in rows.group_by("_k").agg(_REQUEST_AGGS).to_dicts()}
    return [
        _request_row(got[k], _duration(lo, hi)) if k in got else _requests_empty(_duration(lo, hi))
        for k, (lo, hi) in enumerate(ranges)
    ]


# bytes of rows gathered at a time for the figures of many ranges: a fleet's ranges overlap (3,000 replicas starting
# in the same minute: every cold window holds every replica's requests), and gathered at once they held 3.7 GB;
# batches of 1 M rows still held 300 MB of request rows for 240 replicas (docs/performance.md, item 43). Counted in
# bytes of the columns the figures read, not in rows of every column: 100,000 rows of all 30 request columns (20 MB,
# ~4x that while gathered and aggregated) took 400 replicas' diagnosis from 135 to 230 MiB, past what
# resources.shape.LATER_FLOOR allows for under --max-memory 250M (docs/performance.md, item 44)
GATHER_BYTES = 4 * 2**20
_INDEX_BYTES = 16  # a gathered row's own cost: its range and row index (Int64 each)


def gather(df: pl.DataFrame, col: str, ranges: list[tuple]) -> pl.DataFrame | None:
    """The rows of every range [lo, hi] of a time-sorted frame, each tagged with its range's index ``_k``
    (one binary search for all bounds); None when the frame is not sorted without nulls or a bound has no
    zone (the callers then ask range by range). ``gathered`` gives them a bounded batch at a time."""
    parts = gathered(df, col, ranges)
    return None if parts is None else pl.concat(list(parts))


def batch_rows(df: pl.DataFrame, max_bytes: int | None = None) -> int:
    """Rows of ``df`` gathered at a time: ``max_bytes`` (``GATHER_BYTES``) over a row's size and its index."""
    row = int(df.estimated_size()) // max(df.height, 1) + _INDEX_BYTES
    return max(1, (GATHER_BYTES if max_bytes is None else max_bytes) // row)


def gathered(
    df: pl.DataFrame, col: str, ranges: list[tuple], max_rows: int | None = None, columns=None
) -> Iterator[pl.DataFrame] | None:
    """``gather``'s rows in batches of whole ranges of about ``max_rows`` rows (``batch_rows``: ``GATHER_BYTES``; a
    range larger than that is a batch of its own): what is computed per ``_k`` is the same, its memory bounded
    whatever the ranges' overlap. ``columns``: the only ones gathered (those the figures read), when given."""
    s = df[col]
    if (
        s.dtype != TS
        or s.null_count()
        or not s.is_sorted()
        or any(b is not None and b.tzinfo is None for r in ranges for b in r)
    ):
        return None
    if columns is not None:
        df = df.select(c for c in dict.fromkeys(columns) if c in df.columns)
    ks = [k for k, (lo, hi) in enumerate(ranges) if lo is not None and hi is not None and df.height]
    if not ks:
        return iter([df.clear().with_columns(pl.lit(None, dtype=pl.Int64).alias("_k"))])
    los = pl.Series([epoch_us(ranges[k][0]) for k in ks], dtype=pl.Int64)
    his = pl.Series([epoch_us(ranges[k][1]) + 1 for k in ks], dtype=pl.Int64)
    phys = s.to_physical()
    spans = pl.DataFrame(
        {
            "_k": pl.Series(ks, dtype=pl.Int64),
            "i": phys.search_sorted(los, side="left"),
            "j": phys.search_sorted(his, side="left"),
        }
    ).with_columns(pl.max_horizontal("i", "j").alias("j"))
    size = (spans["j"] - spans["i"]).cast(pl.Int64)
    rows = batch_rows(df) if max_rows is None else max_rows
    batch = (size.cum_sum() - size) // max(rows, 1)  # a range starts its batch by the rows before it
    return _gathered(df, spans.with_columns(batch.alias("_b")))


def read_by(*exprs: pl.Expr) -> list[str]:
    """The columns ``exprs`` read (what ``gathered`` needs to gather for them)."""
    return [c for e in exprs for c in e.meta.root_names()]


def _gathered(df: pl.DataFrame, spans: pl.DataFrame) -> Iterator[pl.DataFrame]:
    for part in spans.partition_by("_b", maintain_order=True):
        idx = (
            part.select("_k", pl.int_ranges("i", "j", dtype=pl.Int64).alias("_row"))
            .explode("_row")
            .drop_nulls("_row")
        )
        yield df[idx["_row"]].with_columns(idx["_k"])


def preemptions(pre: pl.DataFrame, lo, hi, replica: str | None = None) -> int | None:
    """Preemptions counted by samples stamped in (lo, hi] (a sample reports the interval ending at it)."""
    if pre.height == 0 or lo is None or hi is None:
        return None
    p = between(pre, "ts", lo, hi, closed="right")
    if replica is not None:
        p = p.filter(pl.col("replica") == replica)
    return int(p["preemptions"].sum())


def preemptions_many(pre: pl.DataFrame, ranges: list[tuple]) -> list[int | None]:
    """``preemptions`` of every (lo, hi] range, all replicas (times are whole microseconds: (lo - 1 µs, hi]
    is [lo, hi], so each range is given as the closed one)."""
    if pre.height == 0:
        return [None] * len(ranges)
    one = timedelta(microseconds=1)
    closed = [(lo + one, hi) if lo is not None else (lo, hi) for lo, hi in ranges]
    parts = gathered(pre, "ts", closed, columns=["preemptions"])
    if parts is None:
        return [preemptions(pre, lo, hi) for lo, hi in ranges]
    got = {
        k: n for rows in parts for k, n in rows.group_by("_k").agg(pl.col("preemptions").sum()).iter_rows()
    }
    return [None if lo is None or hi is None else int(got.get(k, 0)) for k, (lo, hi) in enumerate(ranges)]


def _summable(win: pl.DataFrame, cols: list[str]) -> list[str]:
    """The window columns there are values of (absent or null everywhere: left out of the sums)."""
    return [c for c in cols if c in win.columns and win[c].null_count() < win.height]


def windows_sums_many(win: pl.DataFrame, cols: list[str], ranges: list[tuple]) -> list[dict[str, int]]:
    """``windows_sums`` of every range."""
    have = _summable(win, cols)
    if not have:
        return [{} for _ in ranges]
    parts = gathered(win, "ts", ranges, columns=have)
    if parts is None:
        return [windows_sums(win, cols, lo, hi) for lo, hi in ranges]
    got = {
        r.pop("_k"): r
        for rows in parts
        for r in rows.group_by("_k").agg(pl.col(c).fill_null(0).sum() for c in have).to_dicts()
    }
    zero = dict.fromkeys(have, 0)
    return [{c: int(v) for c, v in got.get(k, zero).items()} for k in range(len(ranges))]


def windows_sums(win: pl.DataFrame, cols: list[str], lo, hi) -> dict[str, int]:
    """Sums of the window columns over [lo, hi]; a column absent or null everywhere is left out."""
    have = _summable(win, cols)
    if not have:
        return {}
    w = between(win, "ts", lo, hi)
    row = w.select(pl.col(c).fill_null(0).sum() for c in have).row(0)
    return {c: int(v) for c, v in zip(have, row, strict=True)}
