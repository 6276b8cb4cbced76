"""The lab client's records are grouped into attempts and requests on two integer keys (parsers/client_jsonl.py
``_lab_flush``, issue #42) and their times converted on the column as a whole (``ts_expr``): the very same tables,
chunk state and times as the code they replaced (kept as the oracle in tests/client_jsonl_before.py), on every real
lab client JSONL of the fixtures in several chunkings, files read together, and records mutated from them."""

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

from conftest import DATA, LAB
from logscope.parsers import client_jsonl
from logscope.parsers.base import ParseContext

CTX = ParseContext(source="x", replica="r", year=2026)


@functools.cache
def _logs() -> dict[str, list[str]]:
    """Every lab client's records: the storm, ladder and calm clients, the traced ones (attempt_span records), the
    killed ones (requests in flight when the log ended)."""
    files = sorted(LAB.glob("*/client*.jsonl"))
    return {f"{p.parent.name}/{p.name}": p.read_text(encoding="utf-8").splitlines() for p in files}


@contextmanager
def _before():
    with (
        mock.patch.object(client_jsonl, "_lab_flush", before._lab_flush),
        mock.patch.object(client_jsonl, "ts_expr", before.ts_expr),
    ):
        yield


def _frame(lines: list[str], files: list[int] | None = None) -> pl.DataFrame:
    df = pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String}
    )
    return df if files is None else df.with_columns(pl.Series(client_jsonl.FILE, files, dtype=pl.Int64))


def _parse(frame: pl.DataFrame, chunk: int) -> tuple[dict[str, pl.DataFrame], dict, list[pl.Series]]:
    state: dict = {}
    out: dict[str, list[pl.DataFrame]] = {}
    oks = []
    for i in range(0, frame.height, chunk or max(frame.height, 1)):
        res = client_jsonl.parse_chunk(frame.slice(i, chunk or frame.height), CTX, state)
        oks.append(res.recognized)
        for k, v in res.tables.items():
            out.setdefault(k, []).append(v)
    end = client_jsonl.finish(CTX, state)
    for k, v in (end.tables if end else {}).items():
        out.setdefault(k, []).append(v)
    return {k: pl.concat(v, how="diagonal_relaxed") for k, v in out.items()}, state, oks


def _same(frame: pl.DataFrame, chunk: int = 0) -> dict[str, pl.DataFrame]:
    """The tables of these lines, read in chunks of ``chunk`` lines (0: one), as the code before read them."""
    with _before():
        want, s1, ok1 = _parse(frame, chunk)
    got, s2, ok2 = _parse(frame, chunk)
    assert got.keys() == want.keys()
    for k in want:
        if (
            k == "client_requests"
        ):  # before, the requests whose sends came before the log's start were in any order
            sent = pl.col("attempts").is_not_null()
            assert_frame_equal(got[k].filter(sent), want[k].filter(sent))
            got[k], want[k] = got[k].sort(pl.all(), nulls_last=True), want[k].sort(pl.all(), nulls_last=True)
        # floats to the last bit, as the goldens see them
        assert_frame_equal(got[k], want[k], check_exact=True)
    assert s1.keys() == s2.keys() and s1.get("lab_timeouts") == s2.get("lab_timeouts")
    for key in ("lab_pending", "lab_phases"):
        if s1.get(key) is not None:
            assert_frame_equal(s2[key], s1[key], check_exact=True)
    assert all(a.equals(b) for a, b in zip(ok1, ok2, strict=True))
    return got


@pytest.mark.parametrize("chunk", [0, 4_000, 333])
def test_lab_records_grouped_as_before(chunk):
    """Every lab client's records, whole and in chunks (requests waiting across chunks for their 'request' record),
    with every run's figures read off the tables: its clients' attempts, logical requests and timeouts together are
    its truth.json's (its raw files read by the lab's scripts)."""
    runs: dict[str, list[int]] = {}
    for name, lines in _logs().items():
        got = _same(_frame(lines), chunk)
        req = got["client_requests"]
        run = runs.setdefault(name.split("/")[0], [0, 0, 0])
        for i, n in enumerate((got["client_attempts"].height, req.height, req["timed_out"].sum())):
            run[i] += int(n)
    assert runs  # the lab's runs are in the fixtures
    for run, got in runs.items():
        truth = json.loads((LAB / run / "truth.json").read_text())["client"]
        assert got == [truth["attempts"], truth["logical_requests"], truth["timeouts_logical"]], run
    # the storm's retries multiplied by the gateway's 502s and its timeouts, the killed run's 35 timeouts after a
    # 200's headers
    assert runs["retry-storm"] == [1245, 653, 80] and runs["traced-2r-kill"][2] == 35


def test_files_read_together_keep_their_requests_apart():
    """A client's records and a copy of them (the same rids) and another client's, in one chunk (a folder's small files
    parsed together): each file's requests grouped apart, as before."""
    a, b = _logs()["calm/client-calm.jsonl"], _logs()["kv-blip/client-calm.jsonl"]
    got = _same(_frame(a + a + b, [0] * len(a) + [1] * len(a) + [2] * len(b)))
    per_file = got["client_requests"].group_by(client_jsonl.FILE).len().sort(client_jsonl.FILE)
    alone = [_same(_frame(x))["client_requests"].height for x in (a, a, b)]
    assert per_file["len"].to_list() == alone and alone[0] > 100


def test_generic_records_read_as_before():
    """The generic per-attempt schema (the records of tests/data/clients' docs example, epoch times), whole and in
    chunks of 2 lines (a second chunk's requests failed to merge with the first's before): the same attempts and
    requests, times converted as before."""
    lines = (DATA / "clients" / "generic-attempts.jsonl").read_text(encoding="utf-8").splitlines()
    whole, chunked = _same(_frame(lines)), _same(_frame(lines), 2)
    assert whole["client_attempts"].height == len(lines) == 11
    assert whole["client_attempts"]["ts_start"].null_count() == 0
    for k in whole:
        assert_frame_equal(chunked[k], whole[k])


def _mutate(rec: dict, op: str, value: str) -> dict:
    rec = dict(rec)
    if op == "drop":
        rec.pop(value, None)
    elif op == "t-ms" and isinstance(rec.get("t"), float):
        rec["t"] = round(rec["t"] * 1000)
    elif op == "t-iso":
        rec["t"] = value
    else:
        rec[op] = value
    return rec


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_records_grouped_as_before(data):
    """A real client's records with lines dropped, repeated, moved, keys removed or changed (a rid reused, a retry
    count missing or odd, a kind changed, times as milliseconds or ISO text), in chunks."""
    logs = _logs()
    name = data.draw(st.sampled_from(sorted(logs)))
    lines = logs[name]
    start = data.draw(st.integers(0, max(0, len(lines) - 60)))
    recs = [json.loads(x) for x in lines[start : start + 60]]
    for _ in range(data.draw(st.integers(0, 12))):
        i = data.draw(st.integers(0, len(recs) - 1))
        op = data.draw(
            st.sampled_from(
                ["drop-line", "repeat", "move", "drop", "rid", "retry_count", "kind", "t-ms", "t-iso"]
            )
        )
        if op == "drop-line" and len(recs) > 1:
            recs.pop(i)
        elif op == "repeat":
            recs.insert(data.draw(st.integers(0, len(recs))), recs[i])
        elif op == "move":
            recs.insert(data.draw(st.integers(0, len(recs))), recs.pop(i))
        elif op == "drop":
            recs[i] = _mutate(
                recs[i], op, data.draw(st.sampled_from(["rid", "retry_count", "t", "kind", "end"]))
            )
        elif op in ("rid", "retry_count", "kind", "t-iso"):
            pick = {
                "rid": st.sampled_from([str(r.get("rid")) for r in recs]),
                "retry_count": st.sampled_from(["0", "1", "2", "x", ""]),
                "kind": st.sampled_from(["request", "attempt_send", "attempt_response", "attempt_span"]),
                "t-iso": st.sampled_from(["2026-11-29T08:30:27.389Z", "2026-11-29 08:30:27", "soon"]),
            }[op]
            recs[i] = _mutate(recs[i], op, data.draw(pick))
        elif op == "t-ms":
            recs[i] = _mutate(recs[i], op, "")
    chunk = data.draw(st.sampled_from([0, 7, 25]))
    _same(_frame([json.dumps(r) for r in recs]), chunk)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.floats(allow_nan=True, allow_infinity=True).map(str),
            st.integers(-(10**20), 10**20).map(str),
            st.sampled_from(
                ["2026-11-29T08:30:27.389Z", " 2026-11-29 08:30:27+02:00 ", "1795940955.13", "x"]
            ),
            st.text(" 0123456789.-+eE:TZ", max_size=12),
        ),
        max_size=30,
    ),
    st.sampled_from(["UTC", "Europe/Paris"]),
)
def test_times_converted_as_before(texts, tz):
    """Epochs by magnitude, ISO text with or without a zone, any other text, on the column as a whole as the
    expression before read them value by value."""
    df = pl.DataFrame({"t": pl.Series(texts, dtype=pl.String)})
    assert_frame_equal(df.select(client_jsonl.ts_expr("t", tz)), df.select(before.ts_expr("t", tz)))


def test_real_times_converted_as_before():
    """Every time of every lab client record: epoch seconds, the same instants as before."""
    values = [str(json.loads(x).get("t")) for lines in _logs().values() for x in lines]
    df = pl.DataFrame({"t": values})
    got = df.select(client_jsonl.ts_expr("t", "UTC"))
    assert_frame_equal(got, df.select(before.ts_expr("t", "UTC")))
    assert got["t"].null_count() == values.count("None") and got["t"].min().year == 2026
