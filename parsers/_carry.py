"""A chunk's last record carried to the next chunk (its lines may go on there), named by the file it began in.

logrotate cuts a log at a line, not at a record: the record open at the end of ``server.log.1`` (a traceback) may end
in ``server.log``. Its rows keep their own line numbers, so its event must keep their file's name too, not take the
name of the file whose chunk completed it (it then pointed at a line of ``server.log`` that is something else).
Used by the formats that hold back a chunk's last record this way (vLLM's and SGLang's server logs, TGI's router).
What a record is stays the parser's: its rows come with their record id (``rec``), numbered on across chunks, and a
row that goes on with the carried record has its id (vLLM's record pass decides it from the row before: a CR-ended
line of a multi-line record, a traceback; rows glued on one line share its ``line_no``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from .base import ParseContext

# the rows of an open record carried to the next chunk, at most (``hold``'s ``cap``): a traceback or a config dump is
# hundreds of lines. A record of millions (blank lines after a log's last record: a decompression bomb) grew the carry
# with every chunk, quadratic in time, 2.9 GB for 6.5 M lines. Past it, a record's lines are counted (``uncarried``:
# recognised, in its line_count), not joined to its text (its detail keeps 4,000 characters anyway)
MAX_RECORD_ROWS = 10_000


@dataclass(frozen=True)
class Resumed:
    """The rows to group into records: the record carried from the chunk before, then this chunk's rows."""

    frame: pl.DataFrame
    carried: int | None  # the carried record's id; None when none was carried
    named: ParseContext  # the context naming the carried record: the file (and replica) of its first line


def resume(df: pl.DataFrame, ctx: ParseContext, state: dict) -> Resumed:
    carry = state.pop("carry", None)
    origin = state.pop("carry_src", None)
    if carry is None or carry.height == 0:
        return Resumed(df, None, ctx)
    named = (
        ctx
        if origin in (None, (ctx.source, ctx.replica))
        else replace(ctx, source=origin[0], replica=origin[1])
    )
    return Resumed(pl.concat([carry, df], how="vertical_relaxed"), int(carry["rec"][0]), named)


def hold(r: Resumed, ctx: ParseContext, state: dict, cap: int | None = None) -> Resumed:
    """``r`` without its last record, which waits in ``state`` for the next chunk with its file's name (the carried
    record's, when it is still open); at most its first ``cap`` rows, its lines past them counted in ``uncarried``."""
    frame = r.frame
    if frame.height == 0:
        return r
    last = int(frame["rec"][-1])
    held = frame.filter(pl.col("rec") == last)
    if cap is not None and held.height > cap:
        kept = held.head(cap)
        more = held.filter(pl.col("line_no") > kept["line_no"].max())["line_no"].n_unique()
        cut = state.setdefault("record_cut", {})
        cut[last] = cut.get(last, 0) + more
        held = kept
    state["carry"] = held
    state["carry_src"] = (r.named.source, r.named.replica) if last == r.carried else (ctx.source, ctx.replica)
    return replace(r, frame=frame.filter(pl.col("rec") != last))


def held(state: dict) -> pl.DataFrame | None:
    """The record carried to the next chunk (still open), if any."""
    carry = state.get("carry")
    return None if carry is None or carry.height == 0 else carry


def uncarried(state: dict) -> dict[int, int]:
    """The lines of each record too long to carry (record id -> its lines past ``hold``'s cap): counted, not kept."""
    return state.get("record_cut") or {}


def grouped(frame: pl.DataFrame, *own: pl.Expr) -> pl.DataFrame:
    """One row a record (``rec``): its first line's number, seq and stamp, its first line's text (``message``) and
    every line's (``detail``), its line count, with the format's own columns ``own`` (after ``detail``)."""
    m = pl.col("msg")
    return frame.group_by("rec", maintain_order=True).agg(
        pl.col("line_no").first(),
        pl.len().cast(pl.Int64).alias("line_count"),
        pl.col("seq").first(),
        m.first().alias("message"),
        m.str.join("\n").alias("detail"),
        *own,
        pl.col("ts").first(),
        pl.col("ts_inferred").first(),
    )


def named_events(
    events: Callable[[pl.DataFrame, ParseContext], pl.DataFrame], r: Resumed, ctx: ParseContext
) -> pl.DataFrame:
    """``events`` of the complete records of ``r``: the carried one named by its own file, the others by ``ctx``'s."""
    if r.carried is None or r.named is ctx:
        return events(r.frame, ctx)
    first = pl.col("rec") == r.carried
    got = [
        e for e in (events(r.frame.filter(first), r.named), events(r.frame.filter(~first), ctx)) if e.height
    ]
    return pl.concat(got, how="diagonal_relaxed") if got else pl.DataFrame()


def finished(ctx: ParseContext, state: dict) -> tuple[pl.DataFrame | None, ParseContext]:
    """The record still carried at the end of the stream, and the context naming it."""
    carry = state.pop("carry", None)
    origin = state.pop("carry_src", None)
    if carry is None or carry.height == 0:
        return None, ctx
    return carry, ctx if origin is None else replace(ctx, source=origin[0], replica=origin[1])
