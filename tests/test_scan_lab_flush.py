"""The lab client's records are grouped into attempts and requests by the compiled scanner (scan/src/lab.rs, issue #42):
the very same tables and chunk state as the polars flush it replaced (kept as the oracle in
tests/client_jsonl_before.py), on every lab client file of the fixtures, all of them read as one batch, and records
whose values are changed to what a client could write or a log could lose."""

from __future__ import annotations

import json
from collections import Counter
from unittest import mock

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_client_jsonl_flush import _frame, _logs, _parse, _same

from conftest import LAB
from logscope import _scan
from logscope.parsers import client_jsonl


def test_the_flush_runs_in_the_core():
    """Two real runs' clients through the parser: each flush is one call of the core, no polars flush is left, and
    the tables give each run's truth.json figures (attempts, logical requests, timeouts)."""
    assert not hasattr(client_jsonl, "_lab_attempt_outcome")  # the polars outcome lives in the oracle alone
    for name in ("retry-storm/client-storm.jsonl", "traced-2r-kill/client-traced2r.jsonl"):
        with mock.patch.object(_scan, "lab_flush", wraps=_scan.lab_flush) as core:
            got, _, _ = _parse(_frame(_logs()[name]), 500)
        assert core.call_count >= 2  # one per chunk, and the log's end
        truth = json.loads((LAB / name.split("/")[0] / "truth.json").read_text())["client"]
        req = got["client_requests"]
        assert (got["client_attempts"].height, req.height, req["timed_out"].sum()) == (
            truth["attempts"],
            truth["logical_requests"],
            truth["timeouts_logical"],
        )


def test_every_lab_client_read_as_one_batch():
    """Every lab client's records as one batch of files (a folder's small files parsed together: the same rids in
    several files, each file's phases and timeout settings its own), whole and in chunks of 5,000 lines, as the polars
    flush grouped them; each file's requests as when it is read alone."""
    logs = list(_logs().values())
    lines = [x for v in logs for x in v]
    files = [k for k, v in enumerate(logs) for _ in v]
    for chunk in (0, 5_000):
        got = _same(_frame(lines, files), chunk)
    per_file = got["client_requests"].group_by(client_jsonl.FILE).len().sort(client_jsonl.FILE)
    alone = [_same(_frame(v))["client_requests"].height for v in logs]
    assert per_file["len"].to_list() == alone
    # the files' `attempt_send` and `request` records (json's own reading, 20,957 and 17,861 this round): one
    # attempt, one request each
    kinds = Counter(json.loads(x).get("kind") for x in lines if x.strip())
    assert (got["client_attempts"].height, sum(alone)) == (kinds["attempt_send"], kinds["request"])
    assert kinds["attempt_send"] > kinds["request"] > 0


# values a request or an attempt record could hold instead of its own, as the JSON decoder gives them
_VALUES = [
    None,
    "",
    "0",
    "-1",
    "1e300",
    "-0.0",
    "NaN",
    "inf",
    "-inf",
    "30",
    "0.5",
    "200",
    "502",
    "x",
    "true",
    "False",
    "APITimeoutError: Request timed out.",
    "ReadTimeout",
    " ConnectError : refused",
    "1795940955.1313837",
    "1795940955131",
    "2026-11-29T08:30:27.389Z",
    "9007199254740993",
]
_FIELDS = [
    "client_timeout_s",
    "status",
    "error",
    "completion_tokens",
    "ttft_s",
    "latency_s",
    "max_tokens",
    "stream",
    "max_retries",
    "phase",
    "send",
    "end",
    "client",
    "trace_id",
    "span_id",
    "url",
    "rid",
    "retry_count",
    "t",
    "mode",
    "value",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_changed_values_grouped_as_before(data):
    """Slices of real clients' records (two files in a batch at times) with values changed to numbers polars reads
    one way or another, nulls, other statuses, errors and timeouts, times as text: the same tables and carried rows,
    in chunks."""
    logs = _logs()
    out, files = [], []
    for k in range(data.draw(st.integers(1, 2))):
        lines = logs[data.draw(st.sampled_from(sorted(logs)))]
        start = data.draw(st.integers(0, max(0, len(lines) - 50)))
        for text in lines[start : start + 50]:
            rec = json.loads(text)
            if data.draw(st.integers(0, 3)) == 0:
                for _ in range(data.draw(st.integers(1, 3))):
                    key, value = data.draw(st.sampled_from(_FIELDS)), data.draw(st.sampled_from(_VALUES))
                    if value is None and data.draw(st.booleans()):
                        rec.pop(key, None)
                    else:
                        rec[key] = value
            out.append(json.dumps(rec))
            files.append(k)
    chunk = data.draw(st.sampled_from([0, 9, 40]))
    _same(_frame(out, files if files[-1] else None), chunk)


def test_core_columns_keep_the_tables_types():
    """The core's tables have the polars flush's column names and types, empty or not (a batch of requests without
    sends gives an empty attempts table)."""
    calm = _logs()["calm/client-calm.jsonl"]
    requests_only = [x for x in calm if '"kind": "request"' in x][:5]
    for lines in (calm[:400], requests_only):
        got = _same(_frame(lines))
        assert got["client_requests"].schema["attempts"] == pl.UInt32
    assert got["client_attempts"].height == 0 and got["client_requests"].height == 5
