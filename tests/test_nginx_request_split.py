"""$request's method and path split by the compiled scanner (parsers/_nginx_plan.py, issue #42) give the rows the
parser's regex gave (``^(?P<method>[A-Z]+) (?P<path>\\S+)`` on the value, kept as the parser's own path for the
layouts the scan does not split, and here as the oracle): on every real nginx access log the repository carries, in
several chunkings, and on lines mutated from them."""

from __future__ import annotations

import functools

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import DATA, LAB, PUBLIC2, need
from logscope.parsers import _nginx_plan as nplan
from logscope.parsers import nginx_access
from logscope.parsers.base import ParseContext


@functools.cache
def _logs() -> dict[str, tuple[str, list[str]]]:
    """Every real nginx access log: each lab run's, Debian nginx 1.22's (combined, key=value, escape=json),
    ingress-nginx's, public-2's ingress-nginx excerpts; by name, with its path (its nginx.conf is read beside it)."""
    paths = sorted(LAB.glob("*/nginx-access.log")) + sorted((DATA / "lab2").glob("*/nginx-access.log"))
    paths += [DATA / "ingress-nginx" / "access.log"]
    paths += sorted((DATA / "nginx").glob("*access*.log")) + sorted(
        PUBLIC2.glob("g0[23]-ingress-nginx-*.log")
    )
    out = {}
    for p in paths:
        text = need(p).read_text(encoding="utf-8")
        out[f"{p.parent.name}/{p.name}"] = (str(p), text.split("\n"))
    return out


def _rows(path: str, lines: list[str], size: int, split: bool, monkeypatch) -> pl.DataFrame | None:
    monkeypatch.setattr(nplan, "_splits_request", _SPLITS if split else lambda nxt, escape: False)
    nplan._compiled.cache_clear()
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String}).with_row_index("line_no", offset=1)
    frame = frame.with_columns(pl.col("line_no").cast(pl.Int64))
    ctx = ParseContext(source="access.log", replica="r", options={"path": path})
    state: dict = {}
    got = [
        nginx_access.parse_chunk(frame.slice(at, size), ctx, state).tables.get("gateway_attempts")
        for at in range(0, frame.height, size)
    ]
    got = [g for g in got if g is not None]
    return pl.concat(got) if got else None


_SPLITS = nplan._splits_request


@pytest.fixture(autouse=True)
def _fresh_plans():
    yield
    nplan._compiled.cache_clear()


def test_the_scan_splits_the_request_as_the_regex_did_on_every_real_log(monkeypatch):
    logs = _logs()
    assert len(logs) >= 30
    split_rows = 0
    for name, (path, lines) in logs.items():
        for size, head in ((100_000, None), (37, None), (1, 40)):
            got = _rows(path, lines[:head], size, True, monkeypatch)
            want = _rows(path, lines[:head], size, False, monkeypatch)
            assert (got is None) == (want is None), name
            if got is not None:
                assert got.equals(want, null_equal=True), (name, size)
            if head is None and size == 100_000:
                whole = got
        monkeypatch.setattr(nplan, "_splits_request", _SPLITS)
        layouts = nginx_access.nf.candidates([x for x in lines if x][:200], {"path": path})
        if layouts and nplan.splits_request(layouts[0][0]) and whole is not None:
            split_rows += whole.height
    # the lab's key=value layout ("$request" status=...), combined and upstreaminfo ('"$request" $status') are split
    # by the scan; Debian's escape=json layout is split by the regex
    assert split_rows > 10_000


@functools.cache
def _real_lines() -> list[tuple[str, str]]:
    return [(path, x) for path, lines in _logs().values() for x in lines[:300] if x]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_scan_splits_mutated_requests_as_the_regex_did(data):
    real = _real_lines()
    path, line = data.draw(st.sampled_from(real))
    lines = []
    for _ in range(6):
        at = line.find('"') + 1 + data.draw(st.integers(0, 20))
        ins = data.draw(st.sampled_from([" ", "  ", "-", "get", "\u00a0", "\t", "X", '\\"', "", "GET /"]))
        cut = data.draw(st.integers(0, 3))
        lines.append(line[:at] + ins + line[at + cut :])
    with pytest.MonkeyPatch.context() as mp:
        got = _rows(path, [line, *lines], 3, True, mp)
        want = _rows(path, [line, *lines], 3, False, mp)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.equals(want, null_equal=True)
