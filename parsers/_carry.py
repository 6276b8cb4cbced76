"""A chunk's last record carried to the next chunk (its lines may go on there), named by the file it began in.

logrotate cuts a log at a line, not at a record: the record open at the end of ``server.log.1`` (a traceback) may end
in ``server.log``. Its rows keep their own line numbers, so its event must keep their file's name too, not take the
name of the file whose chunk completed it (it then pointed at a line of ``server.log`` that is something else).
Used by the formats that hold back a chunk's last record this way (SGLang's server log, TGI's router); vLLM's does
the same in vllm_server._named_events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import polars as pl

from .base import ParseContext


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


def hold(r: Resumed, ctx: ParseContext, state: dict) -> Resumed:
    """``r`` without its last record, which waits in ``state`` for the next chunk with its file's name (the carried
    record's, when it is still open)."""
    frame = r.frame
    if frame.height == 0:
        return r
    last = int(frame["rec"][-1])
    state["carry"] = frame.filter(pl.col("rec") == last)
    state["carry_src"] = (r.named.source, r.named.replica) if last == r.carried else (ctx.source, ctx.replica)
    return replace(r, frame=frame.filter(pl.col("rec") != last))


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
