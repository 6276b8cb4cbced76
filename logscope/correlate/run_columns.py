"""The few columns of the frames, links and assembled requests that the run-level outputs read.

``windows.parquet`` and ``correlation.json`` are counts, sums, medians and percentiles over every
request of the input; they read numbers and flags, not the ids, URLs and messages that make most of a
frame's memory. Correlation in time slices (``slices.py``) keeps these columns of each slice's own rows
and computes both outputs once, over all of them, with the same code as a whole correlation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from . import abandon
from .assemble import Assembled
from .frames import Frames
from .link import Links

FRAMES = {  # the Frames field -> its run-level columns
    "client_attempts": (
        "ca",
        "lr",
        "attempt",
        "timed_out",
        "t0",
        "t1",
        "retry_delay_s",
        "reach",
        "reach_why",
    ),
    "client_requests": ("lr",),
    "gateway_attempts": ("ga",),
    "gateway_requests": (
        "gr",
        "source",
        "inference",
        "other_call",
        "n_attempts",
        "status",
        "t0",
        "t1",
        "reach",
        "retries_reached",
        "retries_not_reached",
        "retries_unknown",
    ),
    "server_requests": ("sr", "source", "replica"),
}
LINKS = {"gr_lr": ("gr", "ca", "match"), "sr_ga": ("sr", "match"), "sr_ca": ("sr", "match")}
ASSEMBLED = {
    "requests": (
        "lr",
        "t0",
        "t1",
        "match",
        "origin",
        "outcome",
        "mid_stream",  # windows.gateway_cuts
        "server_requests",
        "client_attempts",
        "duplicate_concurrent",
        "ttft_s",
        "e2e_s",
        "latency_clock",
        "prompt_tokens",
        "max_tokens",
        "output_tokens",
    ),
    "execs": (
        "sr",
        "lr",
        "match",
        "t0",
        "start",
        "end",
        "end_source",
        "aborted",
        "finished",
        "preempted",
        "left",
        "left_by",
        "orphaned",
        "orphan_s",
        "gen_s",
        "duplicate",
    ),
    "gr_lr": ("gr", "lr"),
    "abandoned": tuple(abandon.COLUMNS),
}
KEYS = ("ca", "lr", "ga", "gr", "sr")  # integer keys, unique within one correlation (or slice)


@dataclass
class RunColumns:
    frames: Frames
    links: Links
    assembled: Assembled


def _cols(df: pl.DataFrame, cols: tuple[str, ...]) -> pl.DataFrame:
    return df.select([c for c in cols if c in df.columns])


def _frames(like: Frames, frame: Callable[[str], pl.DataFrame], notes: list[str]) -> Frames:
    """``like`` with each frame of FRAMES made by ``frame`` from its field's name, and these notes."""
    return replace(
        like,
        client_attempts=frame("client_attempts"),
        client_requests=frame("client_requests"),
        gateway_attempts=frame("gateway_attempts"),
        gateway_requests=frame("gateway_requests"),
        server_requests=frame("server_requests"),
        notes=notes,
    )


def _assembled(
    like: Assembled, frame: Callable[[str], pl.DataFrame], unmatched: dict[str, pl.Series]
) -> Assembled:
    """``like`` with each frame of ASSEMBLED made by ``frame`` from its field's name, and these unmatched keys."""
    return replace(
        like,
        requests=frame("requests"),
        execs=frame("execs"),
        gr_lr=frame("gr_lr"),
        abandoned=frame("abandoned"),
        unmatched_keys=unmatched,
    )


def of(frames: Frames, links: Links, assembled: Assembled, compact: bool = False) -> RunColumns:
    """The run-level columns (a selection: no copy); ``compact``: their strings as categories (a copy, in which
    a file name repeated a million times takes 4 bytes a row: the gateway frame's 130 -> 87 MB at 5 GB).
    The links are built in the field order of LINKS."""

    def cols(df: pl.DataFrame, names: tuple[str, ...]) -> pl.DataFrame:
        df = _cols(df, names)
        return df.with_columns(pl.col(pl.String).cast(pl.Categorical)) if compact else df

    f = _frames(frames, lambda n: cols(getattr(frames, n), FRAMES[n]), list(frames.notes))
    lk = Links(*(cols(getattr(links, n), c) for n, c in LINKS.items()))
    a = _assembled(
        assembled, lambda n: cols(getattr(assembled, n), ASSEMBLED[n]), dict(assembled.unmatched_keys)
    )
    return RunColumns(f, lk, a)


def owned(n: RunColumns, lo: float | None, hi: float | None, timeless: bool) -> RunColumns:
    """The rows of a slice's correlation that are the slice's own.

    A logical request is the slice's when it starts in [lo, hi) (``None``: unbounded), or has no time
    and ``timeless`` (the first slice: timeless rows are read by every slice). Attempts, gateway requests
    and executions follow their logical request; those of none follow their own start. ``hi`` excludes
    so that adjacent slices never both keep a row."""

    def mine(df: pl.DataFrame) -> pl.Expr:
        t = pl.col("t0")
        e = pl.lit(True)
        if lo is not None:
            e = e & (t >= lo)
        if hi is not None:
            e = e & (t < hi)
        return pl.when(t.is_null()).then(pl.lit(timeless)).otherwise(e)

    return restrict(n, mine)


# the times of a row of each narrow frame that place it in a range
_TIMES = ("t0", "t1", "start", "end")


def within(n: RunColumns, since: float | None, until: float | None) -> RunColumns:
    """The logical requests whose span [first send, final outcome] overlaps [since, until] (``None``: unbounded),
    each kept whole: every attempt, gateway request and execution of it, wherever its own times lie (a request
    sent before ``since`` and answered after it keeps the vLLM execution received before ``since``). Rows of
    no logical request follow their own span; rows with no time are kept, as ``time_range.where`` keeps them."""

    def over(df: pl.DataFrame) -> pl.Expr:
        cols = [pl.col(c) for c in _TIMES if c in df.columns]
        lo, hi = pl.min_horizontal(cols), pl.max_horizontal(cols)
        e = pl.lit(True)
        if since is not None:
            e = e & (hi >= since)
        if until is not None:
            e = e & (lo <= until)
        return lo.is_null() | e

    return restrict(n, over)


def restrict(n: RunColumns, mine: Callable[[pl.DataFrame], pl.Expr]) -> RunColumns:
    """``n`` cut to the logical requests ``mine`` keeps (an expression over a frame's time columns), with all
    their rows; the rows of no logical request kept when ``mine`` keeps them."""
    F, L, A = n.frames, n.links, n.assembled
    lrs = A.requests.filter(mine(A.requests))["lr"].implode()

    def by_lr(df: pl.DataFrame) -> pl.Expr:
        return pl.when(pl.col("lr").is_not_null()).then(pl.col("lr").is_in(lrs)).otherwise(mine(df))

    ca = F.client_attempts.filter(by_lr(F.client_attempts))
    gr_lr = A.gr_lr
    gr = F.gateway_requests.join(gr_lr.select("gr", "lr").unique("gr", keep="first"), on="gr", how="left")
    gr = gr.filter(by_lr(gr)).drop("lr")
    ex = A.execs.filter(by_lr(A.execs))
    keep = {"ca": ca["ca"].implode(), "gr": gr["gr"].implode(), "sr": ex["sr"].implode()}

    def of_key(df: pl.DataFrame, key: str) -> pl.DataFrame:
        return df.filter(pl.col(key).is_in(keep[key]))

    f = Frames(
        ca,
        F.client_requests.filter(pl.col("lr").is_in(lrs)),
        F.gateway_attempts.head(0),
        gr,
        of_key(F.server_requests, "sr"),
        F.client_sources,
        F.dropped_client_sources,
        F.notes,
    )
    links = Links(of_key(L.gr_lr, "gr"), of_key(L.sr_ga, "sr"), of_key(L.sr_ca, "sr"))
    unmatched = {k: v.filter(v.is_in(keep[v.name])) for k, v in A.unmatched_keys.items()}
    ab = A.abandoned.filter(by_lr(A.abandoned))
    a = Assembled(A.requests.filter(pl.col("lr").is_in(lrs)), ex, of_key(gr_lr, "gr"), ab, unmatched)
    return RunColumns(f, links, a)


def rekey(n: RunColumns, base: dict[str, int]) -> tuple[RunColumns, dict[str, int]]:
    """``n`` with each key moved by ``base``'s (a slice's keys count from 0: moved past those of the slices
    before it), as 32-bit integers while they fit; and the bases of the next slice."""
    frames = [
        *(getattr(n.frames, k) for k in FRAMES),
        *(getattr(n.links, k) for k in LINKS),
        *(getattr(n.assembled, k) for k in ASSEMBLED),
    ]
    top = {
        k: max(
            (
                int(df[k].max())
                for df in frames
                if k in df.columns and df[k].len() and df[k].max() is not None
            ),
            default=-1,
        )
        for k in KEYS
    }
    nxt = {k: base.get(k, 0) + top[k] + 1 for k in KEYS}
    small = max(nxt.values()) < 2**32

    def move(col: pl.Expr, k: str) -> pl.Expr:
        col = col + base.get(k, 0)
        return col.cast(pl.UInt32) if small else col

    def frame(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(move(pl.col(k), k) for k in KEYS if k in df.columns)

    f = _frames(n.frames, lambda k: frame(getattr(n.frames, k)), n.frames.notes)
    links = Links(*(frame(getattr(n.links, k)) for k in LINKS))
    unmatched = {
        k: v.to_frame().select(move(pl.col(v.name), v.name)).to_series()
        for k, v in n.assembled.unmatched_keys.items()
    }
    a = _assembled(n.assembled, lambda k: frame(getattr(n.assembled, k)), unmatched)
    return RunColumns(f, links, a), nxt


def concat(parts: list[RunColumns]) -> RunColumns:
    """The slices' own rows as one correlation's."""
    first = parts[0]

    def cat(frames: list[pl.DataFrame]) -> pl.DataFrame:
        return pl.concat(frames, how="diagonal_relaxed")

    notes = list(dict.fromkeys(x for p in parts for x in p.frames.notes))
    f = _frames(first.frames, lambda k: cat([getattr(p.frames, k) for p in parts]), notes)
    links = Links(*(cat([getattr(p.links, k) for p in parts]) for k in LINKS))
    unmatched = {
        k: pl.concat([p.assembled.unmatched_keys[k] for p in parts]) for k in first.assembled.unmatched_keys
    }
    a = _assembled(first.assembled, lambda k: cat([getattr(p.assembled, k) for p in parts]), unmatched)
    return RunColumns(f, links, a)
