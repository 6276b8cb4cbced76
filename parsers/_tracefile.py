"""The reading loop the JSON trace formats share: JSON values found in the lines (``_jsonstream``), each turned
into span records by its format's ``convert``, the records into ``spans`` rows (``_spans.table``).

A value that decodes but is not of the format (another JSON document in the file) gives no span: its lines are
then unrecognized, so the coverage says what was read."""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from . import _jsonstream, _spans
from .base import MAX_LINE_CHARS, ChunkResult, ParseContext

_FRACTION = re.compile(r"\.(\d+)")
Convert = Callable[[object, int], list[_spans.Span] | None]  # None: not a value of the format


def parse_chunk(
    lines: pl.DataFrame, ctx: ParseContext, state: dict, convert: Convert, whole_line: bool = True
) -> ChunkResult:
    found = _jsonstream.feed(lines, state, whole_line)
    spans: list[_spans.Span] = []
    foreign: list[int] = []  # first lines of values that are not of the format
    for first, value in found.values:
        got = convert(value, first)
        if got is None:
            foreign.append(first)
        else:
            spans.extend(got)
    ok = found.recognized
    messages = []
    if foreign:  # a value of another kind: its lines unrecognized (its first line and the ones it holds)
        ok = _unmark(lines, ok, foreign)
        messages.append(
            f"{len(foreign):,} JSON value(s) of another kind (e.g. at line {foreign[0]:,}): not read"
        )
    if found.cut:
        messages.append(
            f"{found.cut:,} line(s) opening a JSON value cut at {MAX_LINE_CHARS:,} characters (see the cut lines' "
            "message): not read"
        )
    if found.failed:
        messages.append(f"JSON value(s) that do not decode, e.g. {found.failed_example!r}")
    state["spans"] = state.get("spans", 0) + len(spans)
    tables = {"spans": _spans.table(spans, ctx.source, ctx.replica, ctx.include_prompts)} if spans else {}
    return ChunkResult(tables=tables, recognized=ok, messages=messages)


def _unmark(lines: pl.DataFrame, ok: pl.Series, firsts: list[int]) -> pl.Series:
    """``ok`` with the lines of the values starting at ``firsts`` set False: a value's lines run from its first
    to the line before the next recognized value's first line or unrecognized line."""
    df = lines.select("line_no").with_columns(ok.alias("ok"))
    start = pl.col("line_no").is_in(firsts)
    # a value's lines are the consecutive recognized lines from its first one
    run = (start | ~pl.col("ok")).cum_sum()
    marked = df.with_columns(run.alias("run"), start.alias("start"))
    bad_runs = marked.filter(pl.col("start"))["run"].unique()
    return marked.select(pl.col("ok") & ~pl.col("run").is_in(bad_runs.implode())).to_series()


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    back, msgs = _jsonstream.leftover(state)
    if not back and not msgs:
        return None
    return ChunkResult(lines_parsed=-back, messages=msgs)


def ns_of_iso(text: str | None) -> int | None:
    """'2024-06-18T13:57:22.640040Z' (or with an offset) -> Unix nanoseconds, the fraction kept to the ns."""
    if not text:
        return None
    from datetime import datetime

    t = text.strip().replace("Z", "+00:00")
    frac = 0
    m = _FRACTION.search(t)
    if m:
        frac = int((m[1] + "000000000")[:9])
        t = t[: m.start()] + t[m.end() :]
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        return None
    if dt.tzinfo is None:
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp()) * 1_000_000_000 + frac
