"""vLLM's event kinds and the fields read off them are matched by the compiled scanner (scan/src/regexes.rs through
parsers/_vllm_events.py, issue #42), each pattern compiled once: the same server_events rows as the polars expressions
they replaced (kept as the oracle in tests/vllm_events_before.py), on every real vLLM log of the fixtures cut into
chunks as ingest cuts them, and on lines mutated from them."""

from __future__ import annotations

import copy

import polars as pl
import pytest
import vllm_events_before as before
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LAB, real_vllm_lines, vllm_rows
from logscope import _scan
from logscope.parsers import _carry, _vllm_events
from logscope.parsers.base import ParseContext

_CTX = ParseContext(source="x", replica="r", year=2026)


def _equal(df: pl.DataFrame, size: int) -> pl.DataFrame:
    """``df``'s rows cut into chunks of ``size`` rows, each chunk's complete records and its open record's preview
    given to the old code and the new, the state carried: the same events and the same state. The new events."""
    carried: dict = {}
    old_state: dict = {}
    new_state: dict = {}
    got = []
    chunks = [df.slice(a, size) for a in range(0, df.height, size)]
    for i, chunk in enumerate([*chunks, None]):
        final = chunk is None
        if final:  # the stream's end: the record still carried
            rows = _carry.finished(_CTX, carried)[0]
        else:  # the chunk's complete records, its last one carried (parsers/_carry.py, as vllm_server holds it)
            resumed = _carry.resume(chunk.select(_vllm_events._REC_COLS), _CTX, carried)
            rows = _carry.hold(resumed, _CTX, carried, _carry.MAX_RECORD_ROWS).frame
        for frame, keep in ((rows, True), (carried.get("carry"), False)):
            if frame is None or frame.height == 0 or (final and not keep):
                continue
            want, want_notes = before._events(frame, _CTX, old_state if keep else copy.deepcopy(old_state))
            new, notes = _vllm_events._events(frame, _CTX, new_state if keep else copy.deepcopy(new_state))
            assert new.columns == want.columns, (i, set(new.columns) ^ set(want.columns))
            assert new.equals(want), (i, size)
            assert (notes, new_state) == (want_notes, old_state)
            if keep:
                got.append(new)
    return pl.concat(got, how="diagonal_relaxed")


@pytest.fixture(scope="module")
def rows() -> pl.DataFrame:
    return vllm_rows(real_vllm_lines())


def test_events_of_real_logs_as_polars_read_them(rows):
    # the chunk sizes ingest uses on a large log (4 MiB: ~12,000 lines) and smaller, cut anywhere in a record
    for size in (12_000, 2_000, 997):
        got = _equal(rows, size)
    kinds = dict(got.group_by("kind").len().iter_rows())
    # every kind of event the fixtures hold, and the fields read off them (436 events: 74 capacity, 56 server_stop, 53
    # shutdown_error, 31 server_start, 30 config, 30 version, 29 engine_dead, 19 error, 8 kv_insufficient, 7
    # preemption, 3 engine_timeout, 2 oom, 2 input_too_long, ...; 38 max_model_len, 34 kv_tokens, 32 kv_memory_gib,
    # 30 versions, 29 gpu_memory_utilization, 6 cumulative preemption counts, 4 V0 block counts, 3 weight sizes)
    assert got.height >= 400, got.height
    for kind, n in (
        ("capacity", 70),
        ("config", 30),
        ("engine_dead", 25),
        ("shutdown_error", 50),
        ("error", 15),
    ):
        assert kinds.get(kind, 0) >= n, (kind, kinds)
    for kind in ("kv_insufficient", "preemption", "engine_timeout", "oom", "input_too_long", "version"):
        assert kinds.get(kind, 0) >= 2, (kind, kinds)
    filled = {c: got[c].drop_nulls().len() for c in got.columns}
    assert filled["max_model_len"] >= 35 and filled["kv_tokens"] >= 30 and filled["kv_memory_gib"] >= 30
    assert filled["version"] >= 30 and filled["gpu_memory_utilization"] >= 25 and filled["max_num_seqs"] >= 25
    assert filled["cumulative_preemptions"] >= 5 and filled["gpu_blocks"] >= 4 and filled["weights_gib"] >= 3


def test_events_of_each_lab_log_as_polars_read_them():
    """Each lab server log its own stream, vLLM 0.32's CRs kept (a multi-line record's lines joined by them)."""
    logs = sorted(LAB.glob("*/vllm-server*.log"))
    assert len(logs) >= 10
    n = 0
    for log in logs:
        lines = log.read_bytes().decode("utf-8", errors="replace").split("\n")
        n += _equal(vllm_rows(lines), 2_000).height
    assert n >= 300


# what a real log's event lines hold (digits of other scripts, thousands separators, units, keys, quotes, the version
# banner's block character, tracebacks' words): mutations put them anywhere
_BITS = st.sampled_from(
    [" ", ",", ".", "x", "٣", "²", "é", "GiB", " GB", "█", "'", "=", "(", ")", "[", "]", "\\", "\n", "1,024", "0.9",
     "max_model_len", "'max_model_len': ", "block_size=", " tokens", "blocks: ", "version ", "Traceback"]
)  # fmt: skip


@pytest.fixture(scope="module")
def event_lines() -> list[str]:
    """The real lines that give events (their records' first lines), each at most once."""
    lines = real_vllm_lines()
    got = _equal(vllm_rows(lines), 12_000)
    return sorted({lines[i - 1] for i in got["line_no"].to_list()})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_events_of_mutated_lines_as_polars_read_them(event_lines, data):
    picked = data.draw(st.lists(st.sampled_from(event_lines), min_size=1, max_size=6))
    out = []
    for line in picked:
        for _ in range(data.draw(st.integers(0, 3))):
            at = data.draw(st.integers(0, len(line)))
            line = line[:at] + data.draw(_BITS) + line[at + data.draw(st.integers(0, 2)) :]
        out.extend(line.split("\n"))
    df = vllm_rows(out)
    _equal(df, data.draw(st.integers(1, max(1, df.height))))


def test_a_pattern_that_does_not_compile_is_named():
    with pytest.raises(ValueError, match=r"blocks: \(\["):
        _scan.Fields([("x", 0, ["capacity"], r"blocks: (["), ("y", 0, [], "a")])
    with pytest.raises(ValueError, match="not given"):
        _scan.Rules([(2, "a", ["a"])]).first([pl.Series(["a"]), pl.Series(["b"])])
