"""openai_client counts a thread's logical requests on its run of rows (issue #42; in the compiled scanner since:
scan/src/attempts/requests.rs): the very same tables and carried rows as the windows over the thread that counted them
before (kept below as the oracle, in tests/openai_attempts_before.py's grouping), on every real openai-python log of
the fixtures in several chunkings, and on lines of them with threads, order and lines changed."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from unittest import mock

import openai_attempts_before
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from conftest import DATA, LAB, PUBLIC2
from logscope.parsers import openai_client
from logscope.parsers.base import ParseContext

CTX = ParseContext(source="x", replica="r", year=2026)


def _counted_before(att: pl.DataFrame) -> pl.DataFrame:
    """The code before: windows over the thread."""
    new = pl.when(pl.col("rt").is_not_null()).then(pl.col("rt") == 0).otherwise(
        ~pl.col("retried").shift(1).over("tid").fill_null(False)
    ) | pl.col("has_done").shift(1).over("tid").fill_null(False)
    return att.with_columns(new.cast(pl.Int64).cum_sum().over("tid").alias("lg"))


@functools.cache
def _logs() -> dict[str, list[str]]:
    """Every real openai-python log of the fixtures: the lab's DEBUG clients (threads, retries, 'done' lines), public-2's
    INFO excerpts (no thread names: requests told apart by route) and tests/data's clients (the SDK's own format, plain
    formats, INFO without times, bare messages)."""
    files = (
        sorted(LAB.glob("*/client*.log"))
        + sorted(PUBLIC2.glob("c0[125]-*.log"))
        + sorted((DATA / "clients").glob("*.log"))
        + sorted((DATA / "clients-public").glob("*.log"))
    )
    return {p.name: p.read_text(encoding="utf-8", errors="replace").split("\n") for p in files}


@contextmanager
def _before():
    with (
        mock.patch.object(openai_client, "_assemble", openai_attempts_before._assemble),
        mock.patch.object(openai_attempts_before, "_counted", _counted_before),
    ):
        yield


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String}
    )


def _parse(frame: pl.DataFrame, chunk: int) -> tuple[dict[str, pl.DataFrame], list[pl.DataFrame]]:
    state: dict = {}
    out: dict[str, list[pl.DataFrame]] = {}
    carried = []
    size = chunk or max(frame.height, 1)
    for i in range(0, frame.height, size):
        res = openai_client.parse_chunk(frame.slice(i, size), CTX, state)
        carried.append(state["events"])
        for k, v in res.tables.items():
            out.setdefault(k, []).append(v)
    end = openai_client.finish(CTX, state)
    for k, v in (end.tables if end else {}).items():
        out.setdefault(k, []).append(v)
    return {k: pl.concat(v) for k, v in out.items()}, carried


def _same(lines: list[str], chunk: int = 0, before=None) -> dict[str, pl.DataFrame]:
    """The tables and carried rows of ``lines`` in chunks of ``chunk``, asserted equal to those of the code before
    (``before``: the context that swaps it in; this file's own by default)."""
    frame = _frame(lines)
    with (before or _before)():
        want, want_carried = _parse(frame, chunk)
    got, carried = _parse(frame, chunk)
    assert got.keys() == want.keys()
    for k in want:
        assert_frame_equal(got[k], want[k])
    for a, b in zip(carried, want_carried, strict=True):
        assert_frame_equal(a, b)
    return got


@pytest.mark.parametrize("chunk", [0, 5_000, 777])
def test_requests_counted_as_before(chunk):
    """Every real openai-python log whole and in chunks (requests carried open across them), with the retry storm's
    figures read off its truth.json."""
    rows = {}
    for name, lines in _logs().items():
        got = _same(lines, chunk)
        rows[name] = (got["client_attempts"].height, got["client_requests"].height) if got else (0, 0)
    assert len(rows) == 32
    # the lab's storm client logs the same requests as its JSONL records: truth.json's 1,245 attempts, 653 requests
    assert rows["client-storm.log"] == (1245, 653)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_requests_counted_as_before_on_changed_lines(data):
    """A slice of a real log with lines moved to another thread's name, dropped, repeated or moved, in chunks."""
    logs = _logs()
    lines = list(logs[data.draw(st.sampled_from(sorted(logs)))])
    start = data.draw(st.integers(0, max(0, len(lines) - 80)))
    lines = lines[start : start + 80]
    threads = ["[Thread-1 (one_request)]", "[Thread-2 (one_request)]", "[w00]"]
    for _ in range(data.draw(st.integers(0, 12))):
        i = data.draw(st.integers(0, max(0, len(lines) - 1)))
        if not lines:
            break
        op = data.draw(st.sampled_from(["thread", "drop", "repeat", "move"]))
        if op == "thread" and "[" in lines[i]:
            a = lines[i].index("[")
            b = lines[i].find("]", a)
            if b > a:
                lines[i] = lines[i][:a] + data.draw(st.sampled_from(threads)) + lines[i][b + 1 :]
        elif op == "drop":
            lines.pop(i)
        elif op == "repeat":
            lines.insert(data.draw(st.integers(0, len(lines))), lines[i])
        elif op == "move":
            lines.insert(data.draw(st.integers(0, len(lines) - 1)), lines.pop(i))
    _same(lines, data.draw(st.sampled_from([0, 9, 31])))
