"""What the oracle tests of openai-python's logs share (tests/test_scan_openai_*.py): every real openai-python log of
the fixtures, their lines as a parser's frame, and the event rows of the scanner checked against an oracle's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import polars as pl

from conftest import DATA, LAB, PUBLIC2
from logscope.parsers import _openai_lines
from logscope.parsers.base import ParseContext

CTX = ParseContext(source="x", replica="r", year=2026)


def frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String}
    )


def files() -> list[Path]:
    """Every real openai-python log of the fixtures: the lab's clients (openai 1.x DEBUG with the lab's logging format),
    public-2's excerpts (an SDK of 2023 at INFO through langbot's format; litellm's format over Groq; logging's default
    'INFO:httpx:' records among an application's own) and tests/data's clients (the SDK's OPENAI_LOG format, plain
    formats, INFO without times, ComfyUI's bare messages)."""
    return (
        sorted(LAB.glob("*/client*.log"))
        + sorted(PUBLIC2.glob("c0[125]-*.log"))
        + sorted((DATA / "clients").glob("*.log"))
        + sorted((DATA / "clients-public").glob("*.log"))
    )


@functools.cache
def logs() -> dict[str, list[str]]:
    """Each of ``files()`` by its folder and name (two lab runs' clients share a name: 'calm/client-calm.log' and
    'kv-blip/client-calm.log'), its lines split on newlines."""
    return {
        f"{p.parent.name}/{p.name}": p.read_text(encoding="utf-8", errors="replace").split("\n")
        for p in files()
    }


@functools.cache
def distinct() -> list[str]:
    """About 4,000 of the logs' distinct lines, spread over all of them."""
    lines = sorted({x for lines in logs().values() for x in lines})
    return lines[:: max(1, len(lines) // 4_000)]


def same_events(oracle: Callable, lines: list[str], chunk: int = 0, ctx: ParseContext = CTX) -> pl.DataFrame:
    """The event rows of ``lines`` read in chunks of ``chunk`` lines (0: one), asserted equal, with the recognised
    lines, their schema and the state carried, to those ``oracle`` (the code before, ``_events``) gives."""
    df = frame(lines)
    size = chunk or max(df.height, 1)
    s1: dict = {}
    s2: dict = {}
    got = []
    for i in range(0, df.height, size):
        part = df.slice(i, size)
        want, want_ok = oracle(part, ctx, s1)
        ev, ok = _openai_lines._events(part, ctx, s2)
        assert ev.equals(want) and ok.equals(want_ok), (i, size)
        assert ev.schema == want.schema and ok.dtype == want_ok.dtype
        got.append(ev)
    assert s1 == s2
    return pl.concat(got) if got else pl.DataFrame(schema=_openai_lines._EV_SCHEMA)
