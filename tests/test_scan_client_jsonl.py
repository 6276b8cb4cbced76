"""The client records' JSON lines are decoded by the compiled scanner (scan/src/jsonl.rs, issue #42): the very same
records, recognised lines and tables as polars' `str.json_decode` gave (kept as the oracle in
tests/client_jsonl_before.py), on every JSON lines file of the fixtures and on real records with values, keys, escapes,
numbers and text changed."""

from __future__ import annotations

import functools
import json
from contextlib import contextmanager
from unittest import mock

import client_jsonl_before as before
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from test_client_jsonl_flush import _frame, _logs, _same
from test_client_jsonl_flush import _parse as parse

from conftest import DATA, FIXTURES, LAB
from logscope.parsers import client_jsonl


@functools.cache
def _jsonl() -> dict[str, list[str]]:
    """Every JSON lines file of the fixtures and tests/data: the lab clients' records and the generic schema's, and
    for the decoder alone the lab's events and OTLP exports, aiperf's records (nested objects where a key's string
    belongs, other kinds)."""
    files = sorted({*FIXTURES.rglob("*.jsonl"), *DATA.rglob("*.jsonl")})
    return {str(p): p.read_text(encoding="utf-8", errors="replace").splitlines() for p in files}


def _decoded_before(frame: pl.DataFrame) -> pl.DataFrame:
    line = pl.col("line")
    obj = frame.filter(
        line.str.contains(before._OBJECT_OPEN)
        & line.str.contains(before._OBJECT_CLOSE)
        & ~line.str.contains("\n", literal=True)
    )
    return before._decoded(obj)


def _decoded_now(frame: pl.DataFrame) -> pl.DataFrame:
    dec = pl.DataFrame(client_jsonl._DECODER.decode(frame["line"]))
    return dec.select(frame["line_no"].gather(dec["row"]), *client_jsonl.KEYS)


def _same_records(frame: pl.DataFrame) -> pl.DataFrame:
    """Every key of every line that decodes, and the records and recognised lines the parser keeps, as before."""
    got = _decoded_now(frame)
    assert_frame_equal(got, _decoded_before(frame))
    (recs, ok), (recs0, ok0) = client_jsonl._json_records(frame), before._json_records(frame)
    assert_frame_equal(recs, recs0)
    assert ok.equals(ok0)
    return got


def _objects(lines: list[str]) -> int:
    """The lines json itself reads as an object with no object or array under a key the parser reads: those give a
    row (aiperf's records whose `error` is an object give none)."""
    n = 0
    for text in lines:
        try:
            rec = json.loads(text)
        except ValueError:
            continue
        n += isinstance(rec, dict) and not any(isinstance(rec.get(k), dict | list) for k in client_jsonl.KEYS)
    return n


def test_every_jsonl_file_decoded_as_before():
    """Every JSON lines file of the fixtures (the lab's clients, its events and OTLP exports, tests/data's, the pairs'),
    each key's value as before, and a row for each line json reads as an object (83 files, 62,165 lines, 62,157 rows
    this round); aiperf's 8 records whose `error` is an object give no row, as before; the storm's 1,245 sends
    (`grep -c attempt_send`)."""
    logs = _jsonl()
    got = {name: _same_records(_frame(lines)) for name, lines in logs.items()}
    assert {n: d.height for n, d in got.items()} == {n: _objects(lines) for n, lines in logs.items()}
    assert sum(map(len, logs.values())) > sum(d.height for d in got.values()) > 0
    # every lab client's records are among them (26 this round)
    assert {str(p) for p in LAB.glob("*/client*.jsonl")} <= got.keys()
    assert got[str(DATA / "clients" / "aiperf-profile_export.jsonl")].height == 12
    storm = got[next(n for n in got if n.endswith("retry-storm/client-storm.jsonl"))]
    assert storm.filter(pl.col("kind") == "attempt_send").height == 1245


@contextmanager
def _before():
    with mock.patch.object(client_jsonl, "_json_records", before._json_records):
        yield


@pytest.mark.parametrize("chunk", [0, 3_000])
def test_client_tables_as_before(chunk):
    """Every lab client's and the generic schema's tables through the whole parser, whole and in chunks, and the lines
    it recognised, as with polars' decoding."""
    for lines in [*_logs().values(), (DATA / "clients" / "generic-attempts.jsonl").read_text().splitlines()]:
        frame = _frame(lines)
        with _before():
            want = _parse(frame, chunk)
        assert_tables(_parse(frame, chunk), want)


def _parse(frame: pl.DataFrame, chunk: int) -> dict[str, pl.DataFrame]:
    tables, _, oks = parse(frame, chunk)
    return tables | {"_ok": pl.DataFrame({"ok": pl.concat(oks) if oks else pl.Series([], dtype=pl.Boolean)})}


def assert_tables(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame]) -> None:
    assert got.keys() == want.keys()
    for k in want:
        assert_frame_equal(got[k], want[k])


# values polars read one way or another: numbers printed anew, escapes, surrogates alone, containers, bad tokens
_TOKENS = [
    "1e5",
    "-0",
    "-0.0",
    "1E+02",
    "0.1000",
    "1.5e-7",
    "1e400",
    "-1e-400",
    "01",
    "1.",
    ".5",
    "-",
    "NaN",
    "true",
    "false",
    "null",
    "True",
    "123456789.123456789",
    "12345678901234567890123",
    "9007199254740993",
    "5e-324",
    '"\\ud83d"',
    '"\\ud83dx"',
    '"\\ud83d\\ude00"',
    '"\\ude00"',
    '"\\ud83d\\u0041"',
    '"\\u00e9"',
    '"\\q"',
    '"\\u12"',
    '"tab\there"',
    '"\\/\\b\\f\\n\\r\\t\\"\\\\"',
    '"é ☃ 😀"',
    '"\x7f"',
    "{}",
    "[]",
    '{"a": [1, {"b": "}"}]}',
    "[1,]",
    '"attempt\\u005fsend"',
    '"attempt_send"',
    '"attempt_response"',
    '"request"',
    '"phase_start"',
    '"\\"kind\\": \\"attempt_send\\""',
    '{"kind": "attempt_send"}',
    '"',
]
_KEYS = [*client_jsonl.KEYS, "ki\\u006ed", "r\\u0069d", "labels", "KIND"]
_TEXT = st.text(alphabet=' \t\r\x0c\xa0{}[]":,\\u0e1-+.xa\x01é', max_size=4)


def _line(items: list[tuple[str, str]], sep: str) -> str:
    return "{" + ",".join(f'"{k}":{sep}{v}' for k, v in items) + "}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_changed_records_decoded_as_before(data):
    """Slices of real records (lab clients, events, OTLP, the generic schema) with values replaced by tricky tokens,
    keys added, repeated, escaped, whitespace changed, and bytes inserted or cut anywhere."""
    logs = _jsonl()
    lines = logs[data.draw(st.sampled_from(sorted(n for n in logs if logs[n])))]
    start = data.draw(st.integers(0, max(0, len(lines) - 20)))
    out = []
    for text in lines[start : start + 20]:
        try:
            rec = json.loads(text)
        except ValueError:
            rec = None
        if not isinstance(rec, dict) or not data.draw(st.booleans()):
            out.append(text)
            continue
        items = [(json.dumps(k)[1:-1], json.dumps(v)) for k, v in rec.items()]
        for _ in range(data.draw(st.integers(0, 4))):
            key = data.draw(st.sampled_from([k for k, _ in items] + _KEYS))
            tok = data.draw(st.sampled_from(_TOKENS))
            where = data.draw(st.integers(0, len(items)))
            if data.draw(st.booleans()):
                items = [(k, tok if k == key else v) for k, v in items]
            else:
                items.insert(where, (key, tok))
        line = _line(items, data.draw(st.sampled_from(["", " ", "\t", " \r"])))
        if data.draw(st.integers(0, 3)) == 0:
            i = data.draw(st.integers(0, len(line)))
            j = data.draw(st.integers(i, min(len(line), i + 3)))
            line = line[:i] + data.draw(_TEXT) + line[j:]
        out.append(
            data.draw(st.sampled_from(["", " ", "\r", "\t"]))
            + line
            + data.draw(st.sampled_from(["", "\r", " "]))
        )
    _same_records(_frame(out))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_changed_client_records_grouped_as_before(data):
    """A real client's records with their kind's text and values changed (an attempt's kind escaped, a nested object
    under a key the attempt records do not give): the parser's tables, in chunks, as with polars' decoding."""
    logs = _logs()
    lines = list(logs[data.draw(st.sampled_from(sorted(logs)))])
    start = data.draw(st.integers(0, max(0, len(lines) - 60)))
    lines = lines[start : start + 60]
    items = [[(k, json.dumps(v)) for k, v in json.loads(x).items()] for x in lines]
    for _ in range(data.draw(st.integers(0, 8))):
        i = data.draw(st.integers(0, len(lines) - 1))
        key = data.draw(st.sampled_from(["kind", "phase", "status", "t", "error", "retry_count", "end"]))
        items[i].append((key, data.draw(st.sampled_from(_TOKENS))))
        if data.draw(st.booleans()):
            items[i].reverse()
        lines[i] = _line(items[i], " ")
    frame = _frame(lines)
    chunk = data.draw(st.sampled_from([0, 7, 25]))
    with _before():
        want = _parse(frame, chunk)
    assert_tables(_parse(frame, chunk), want)
    _same(frame, chunk)  # and the flush as its own oracle has it
