"""openai-python's event rows are built by one pass of the compiled scanner after its line scan (scan/src/events.rs, issue
#42): the same event rows, recognised lines and parser state as the polars steps it replaced (kept as the oracle in
tests/openai_events_before.py), on every real openai-python log of the fixtures in several chunkings, in a zone, and on
lines mutated from them."""

from __future__ import annotations

from unittest import mock

import openai_events_before as before
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_helpers import CTX, distinct, logs, same_events

from logscope import _scan
from logscope.parsers import _openai_lines
from logscope.parsers.base import ParseContext

STORM = "retry-storm/client-storm.log"


def _same(lines: list[str], chunk: int = 0, ctx: ParseContext = CTX) -> pl.DataFrame:
    """The event rows of ``lines`` in chunks of ``chunk`` (0: one), as the polars steps before gave them."""
    return same_events(before._events, lines, chunk, ctx)


@pytest.mark.parametrize("chunk", [0, 5_000, 777])
def test_event_rows_as_before(chunk):
    """Every real openai-python log (the lab's DEBUG clients, public-2's INFO excerpts, tests/data's clients) whole and
    in chunks; figures read off the fixtures."""
    n: dict[str, int] = {}
    for lines in logs().values():
        ev = _same(lines, chunk)
        for kind, count in ev.group_by("kind").len().iter_rows():
            n[kind] = n.get(kind, 0) + count
    # the kinds only the pass tells (no client message on the line): a request's last error as the application wrote
    # it, a traceback's exception; and the lab client's 'done' lines with their error's class
    assert n["final_conn"] >= 3 and n["exc"] >= 15 and n["done"] >= 16_000
    storm = _same(logs()[STORM], chunk)
    assert storm.filter(pl.col("kind") == "build").height == 1245  # truth.json's attempts
    # every error the pass names is a class name ('ReadTimeout', 'APIConnectionError', ...), never a message
    assert storm["err"].drop_nulls().str.contains(r"^[A-Za-z_]\w*$").all()


def test_tracebacks_cut_between_chunks_as_before():
    """A traceback open at a chunk's end continues in the next (the SDK 1.x's exc_info logs, in chunks of 7 and 3)."""
    tracebacks = [lines for lines in logs().values() if any(x.startswith("Traceback") for x in lines)]
    assert tracebacks
    for lines in tracebacks:
        for chunk in (7, 3):
            ev = _same(lines, chunk)
            assert ev.filter(pl.col("kind") == "exc").height >= 1


@pytest.mark.parametrize("tz", ["Europe/Paris", "America/New_York"])
def test_times_in_a_zone_as_before(tz):
    ctx = ParseContext(source="x", replica="r", year=2026, tz=tz)
    for lines in logs().values():
        _same(lines[:2_000], ctx=ctx)


def test_the_pass_is_the_cores():
    """The event rows come from the core's pass (it fails on the polars steps before: they had no pass to call)."""
    calls = []
    real = _openai_lines._pass()

    class Spy:
        def events(self, *a):
            calls.append(len(a[0]["line"]))
            return real.events(*a)

    lines = logs()[STORM][:2_000]
    with mock.patch.object(_openai_lines, "_pass", lambda: Spy()):
        ev = _same(lines, 500)
    assert isinstance(real, _scan.OpenaiEvents)
    assert calls == [500] * 4  # each chunk's lines
    assert ev.height > 1_500


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_lines_as_before(data):
    """Real lines with text inserted and cut (the words the pass looks for among them), in one or two chunks."""
    real = distinct()
    words = [
        "Traceback (most recent call last):",
        "openai.APITimeoutError: Request timed out.",
        "APIConnectionError",
        "Connection error.",
        "Error code: 502",
        "INFO:",
        "  ✗ [2026-06-09T18:53:31.458Z] ",
        "Encountered ",
        " - ",
        "err=None",
        "\r",
    ]
    lines = []
    for _ in range(data.draw(st.integers(1, 10))):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 6))
        ins = data.draw(
            st.one_of(
                st.sampled_from(words), st.text(" ,.:'\"[]()=_-/0123456789TZ+\t\u00a0\u2717", max_size=6)
            )
        )
        lines.append(line[:at] + ins + line[at + cut :])
    chunk = data.draw(st.sampled_from([0, 3]))
    _same(lines, chunk)
