"""JSON values one after another in a stream of lines, for the trace formats.

A span export comes as one JSON value per line (the Collector's file exporter, a Kafka consumer's messages),
as one pretty-printed document (a Jaeger or Zipkin download, a single OTLP export), or as several pretty-printed
objects one after another, with other program output between them (the OTel SDK's ConsoleSpanExporter on a
service's stdout). ``Values`` finds them in the chunks of a lines-mode parser: a line that holds a whole value is
decoded alone; a line that opens one (``{`` or ``[`` first) starts a value that ends where its brackets close,
counted outside strings, across chunks. Every other line is left unrecognized.

Coverage stays exact: the lines of a value still open at a chunk's end are counted recognized in their chunk; a
value that then fails to decode, or never closes (a file cut mid-value), gives those lines back at the end
(``finish``: a negative ``lines_parsed`` for the chunks already counted, with a message).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import polars as pl

from .base import MAX_LINE_CHARS

_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
# a value opens with '{' and a key (or nothing more on the line), or '[' and a value that can hold spans: not a
# log line's '[06/18/24 06:57:22] INFO'
_OPEN = re.compile(r'^\s*(?:\{\s*(?:"|\}|$)|\[\s*(?:[\[{"\]]|$))')
_WHOLE = re.compile(r"^\s*(?:\{.*\}|\[.*\])\s*$")
MAX_VALUE_LINES = 2_000_000  # a value longer than this is no span export: given up, its lines unrecognized


def depth(line: str) -> int:
    """The brackets a line opens minus those it closes, outside JSON strings."""
    s = _STRING.sub("", line) if '"' in line else line
    return s.count("{") + s.count("[") - s.count("}") - s.count("]")


@dataclass
class Pending:
    first: int  # line_no of the value's first line
    parts: list[str] = field(default_factory=list)
    depth: int = 0
    counted_before: int = 0  # its lines counted recognized in earlier chunks


@dataclass
class Found:
    values: list[tuple[int, object]]  # (first line_no, decoded value), in file order
    recognized: pl.Series
    failed: int = 0  # values that closed but did not decode
    failed_example: str | None = None
    cut: int = 0  # lines opening a value, cut by the reader at MAX_LINE_CHARS: not read


def feed(lines: pl.DataFrame, state: dict, whole_line: bool = True) -> Found:
    """The JSON values of a chunk (``line_no``, ``line``) and which lines they hold; ``state['json']`` carries a
    value still open into the next chunk. ``whole_line``: a line holding a whole value is decoded alone (one
    value per line); else such a line is fed like any other (pretty documents whose first line could look whole)."""
    pend: Pending | None = state.get("json")
    nums = lines["line_no"].to_list()
    texts = lines["line"].to_list()
    ok = [False] * len(texts)
    values: list[tuple[int, object]] = []
    failed, example, cut = 0, None, 0
    start_idx = 0
    for i, (n, t) in enumerate(zip(nums, texts, strict=True)):
        if pend is None:
            if not _OPEN.match(t):
                continue
            # cut by the reader: its brackets never close, and it would hold every line after it
            if len(t) >= MAX_LINE_CHARS:
                cut += 1
                continue
            if whole_line and _WHOLE.match(t) and depth(t) == 0:
                try:
                    values.append((n, json.loads(t)))
                    ok[i] = True
                except ValueError:
                    failed += 1
                    example = example or t[:200]
                continue
            pend, start_idx = Pending(first=n), i
        pend.parts.append(t)
        pend.depth += depth(t)
        ok[i] = True
        if pend.depth <= 0 or len(pend.parts) > MAX_VALUE_LINES:
            text = "\n".join(pend.parts)
            try:
                values.append((pend.first, json.loads(text)))
            except ValueError:
                failed += 1
                example = example or pend.parts[0][:200]
                for j in range(start_idx, i + 1):
                    ok[j] = False
                state["given_back"] = state.get("given_back", 0) + pend.counted_before
            pend = None
            start_idx = i + 1
    if pend is not None:
        pend.counted_before += len(texts) - start_idx
    state["json"] = pend
    return Found(values, pl.Series(ok, dtype=pl.Boolean), failed, example, cut)


def leftover(state: dict) -> tuple[int, list[str]]:
    """At the stream's end: the lines to give back (counted recognized, but of values that never decoded) and
    the message saying so."""
    pend: Pending | None = state.pop("json", None)
    back = state.pop("given_back", 0)
    msgs = []
    if pend is not None:
        back += pend.counted_before
        msgs.append(
            f"the JSON value opened at line {pend.first:,} never closes (a cut file?): its "
            f"{pend.counted_before:,} lines are unrecognized"
        )
    return back, msgs
