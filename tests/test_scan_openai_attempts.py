"""openai-python's event rows are grouped into attempts by the compiled scanner (scan/src/attempts.rs, issue #42): the
very same tables and carried rows as the polars windows and group-by it replaced (kept as the oracle in
tests/openai_attempts_before.py), on every real openai-python log of the fixtures in several chunkings, and on lines of
them with threads, statuses, order and lines changed."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from unittest import mock

import openai_attempts_before as before
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_helpers import CTX, frame, logs
from polars.testing import assert_frame_equal

from conftest import LAB
from logscope import _scan
from logscope.parsers import openai_client


@contextmanager
def _before():
    with mock.patch.object(openai_client, "_assemble", before._assemble):
        yield


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


def _same(lines: list[str], chunk: int = 0) -> dict[str, pl.DataFrame]:
    """The tables and carried rows of ``lines`` in chunks of ``chunk``, asserted equal to those of the code before."""
    df = frame(lines)
    with _before():
        want, want_carried = _parse(df, chunk)
    got, carried = _parse(df, chunk)
    assert got.keys() == want.keys()
    for k in want:
        assert_frame_equal(got[k], want[k])
    for a, b in zip(carried, want_carried, strict=True):
        assert_frame_equal(a, b)
    return got


@pytest.mark.parametrize("chunk", [0, 5_000, 777])
def test_attempts_grouped_as_before(chunk):
    """Every real openai-python log (the lab's DEBUG clients, public-2's INFO excerpts without thread names, tests/data's
    clients) whole and in chunks, with requests carried open across them; each lab run's attempts are its truth.json's
    (its clients' together)."""
    rows = {}
    for name, lines in logs().items():
        got = _same(lines, chunk)
        rows[name] = (got["client_attempts"].height, got["client_requests"].height) if got else (0, 0)
    attempts: dict[str, int] = {}
    for p in LAB.glob("*/client*.log"):
        attempts[p.parent.name] = attempts.get(p.parent.name, 0) + rows[f"{p.parent.name}/{p.name}"][0]
    assert attempts
    for run, n in attempts.items():
        assert n == json.loads((LAB / run / "truth.json").read_text())["client"]["attempts"], run
    # the lab's storm client: truth.json's 1,245 attempts of 653 requests
    assert rows["retry-storm/client-storm.log"] == (1245, 653)
    # public-2's INFO logs (no 'Sending' lines, no threads: attempts from httpx and 'Retrying' lines, by route)
    public = [n for n in rows if n.startswith("public-2/")]
    assert public and all(rows[n][0] > 0 for n in public)


_STATUS = re.compile(r'(HTTP/1\.1 )(\d{3})|(HTTP Response: \S+ (?:\S+ ")?)(\d{3})')


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_attempts_grouped_as_before_on_changed_lines(data):
    """A slice of a real log with lines moved to another thread's name (or none), statuses changed, lines dropped,
    repeated or moved, in chunks."""
    real = logs()
    lines = list(real[data.draw(st.sampled_from(sorted(real)))])
    start = data.draw(st.integers(0, max(0, len(lines) - 80)))
    lines = lines[start : start + 80]
    threads = ["[Thread-1 (one_request)]", "[Thread-2 (one_request)]", "[w00]", ""]
    for _ in range(data.draw(st.integers(0, 12))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["thread", "status", "drop", "repeat", "move"]))
        if op == "thread" and "[" in lines[i]:
            a = lines[i].index("[")
            b = lines[i].find("]", a)
            if b > a:
                lines[i] = lines[i][:a] + data.draw(st.sampled_from(threads)) + lines[i][b + 1 :]
        elif op == "status":
            code = data.draw(st.sampled_from(["200", "429", "500", "502", "399", "400"]))
            lines[i] = _STATUS.sub(lambda m, c=code: (m.group(1) or m.group(3)) + c, lines[i], count=1)
        elif op == "drop":
            lines.pop(i)
        elif op == "repeat":
            lines.insert(data.draw(st.integers(0, len(lines))), lines[i])
        elif op == "move":
            lines.insert(data.draw(st.integers(0, len(lines) - 1)), lines.pop(i))
    _same(lines, data.draw(st.sampled_from([0, 9, 31])))


def test_the_pass_refuses_columns_of_other_lengths():
    cols = {
        c: pl.Series(c, [None], dtype=pl.String)
        for c in ("kind", "key", "thread", "url", "err", "rid", "lab_err")
    }
    cols |= {
        c: pl.Series(c, [1], dtype=pl.Int64) for c in ("seq", "line_no", "ts", "rt", "status", "max_retries")
    }
    cols |= {c: pl.Series(c, [1], dtype=pl.Int64) for c in ("max_tokens", "lab_status")}
    cols |= {"latency": pl.Series([0.5]), "delay": pl.Series([0.5, 0.5])}
    with pytest.raises(ValueError, match="differ in length"):
        _scan.openai_attempts(cols, True, False, False, 0)
    with pytest.raises(ValueError, match="no column"):
        _scan.openai_attempts({"kind": cols["kind"]}, True, False, False, 0)
