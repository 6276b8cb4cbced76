"""vLLM's line header (process prefix, then a vLLM header of any era or a uvicorn level) is read by the compiled
scanner (parsers/_vllm_lines.toml, issue #42): it gives the spans the regex it replaced gave, kept here as the oracle,
on every real vLLM log of the fixtures and on lines mutated from them."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offsets import byte_find

from conftest import real_vllm_lines
from logscope.numbers import to_int
from logscope.parsers import _kinds, _vllm_lines, vllm_server

_LVL = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
# the regex of _vllm_lines.py before #42 (its \d and \w as the ASCII classes it was built with), widened since for
# Ray's prefix: '(pid=N' with no name and ', ip=A' after the pid (parsers/_vllm_prefix.py)
_HEADER = (
    r"^(?P<hdr>(?:\((?P<pre>(?:[^)]* )?pid=[0-9]+(?:, ip=[^)]+)?)\) ?"
    r"|(?P<cut>[A-Za-z_][A-Za-z0-9_-]* pid=[0-9]+(?:, ip=[^)]+)?)\) )?"
    rf"(?:(?P<lvl>{_LVL}) (?P<stamp>[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]) \[?[^\s\]]+\] ?"
    rf"|(?P<uv>{_LVL}|TRACE): +)?)"
)
FIELDS = ["hdr", "pre", "cut", "lvl", "stamp", "uv"]


def _equal(lines: list[str]) -> pl.DataFrame:
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String})
    want = frame.select(pl.col("line").str.extract_groups(_HEADER)).unnest("line")
    got = _kinds.scan(_vllm_lines.__file__, frame)
    assert got.get_column("kind").null_count() == 0  # every part is optional: every line has a header
    assert got.select(FIELDS).equals(want.select(FIELDS))
    return got


def _real_lines() -> list[str]:
    # as _vllm_lines reads them: CR off, the first _HEAD_CHARS characters
    return [x.removesuffix("\r")[: _vllm_lines._HEAD_CHARS] for x in real_vllm_lines("vllm-router")]


def test_header_kind_reads_real_lines_as_its_regex_did():
    lines = _real_lines()
    got = _equal(lines)
    # every kind of header is there: vLLM 0.32's process prefix (20,604 lines), a paste cut inside it (1), uvicorn's
    # access lines (8,649), headers without a prefix (718: older eras, public pastes)
    assert len(lines) >= 30_000
    assert got.get_column("pre").is_not_null().sum() >= 20_000
    assert got.get_column("cut").is_not_null().sum() >= 1
    assert got.get_column("uv").is_not_null().sum() >= 8_000
    assert got.filter(pl.col("lvl").is_not_null() & pl.col("pre").is_null()).height >= 700


def test_header_kind_reads_the_samples_as_its_regex_did():
    _equal(list(vllm_server.SAMPLES))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_header_kind_reads_mutated_lines_as_its_regex_did(data):
    real = [x for x in _real_lines()[:20_000] if x]
    lines = []
    for _ in range(10):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, min(len(line), 80)))
        cut = data.draw(st.integers(0, 4))
        ins = data.draw(st.text(" ()[]:=-_0123456789pidINFO\t\u00a0é", max_size=5))
        lines.append(line[:at] + ins + line[at + cut :])
    _equal(lines)


def test_process_and_message_read_once_per_prefix_as_line_by_line():
    """``_fields`` reads each process prefix of a large chunk once and joins it back, and cuts the message by
    ``strip_prefix``: the same ``proc``, ``pid`` and ``msg`` as the per-line byte cuts it replaced (#42), on every
    real vLLM line (0.32's '(APIServer pid=N)', an engine's '(EngineCore_DP0 pid=N)', a cut prefix, none) but those
    whose header another reading takes (container stamps, python logging, JSON lines)."""
    lines = [
        x.removesuffix("\r") for x in real_vllm_lines("vllm-router") if not re.match(r'\d{4}-|\[|\{"', x)
    ]
    frame = pl.DataFrame(
        {"line_no": range(len(lines)), "body": lines}, schema={"line_no": pl.Int64, "body": pl.String}
    )
    heads = _kinds.scan(
        _vllm_lines.__file__, frame.select(pl.col("body").str.slice(0, _vllm_lines._HEAD_CHARS).alias("line"))
    )
    pre = pl.coalesce("pre", "cut")
    want = pl.concat([frame, heads], how="horizontal").select(
        pl.col("body").cast(pl.Binary).bin.slice(pl.col("hdr").str.len_bytes()).cast(pl.String).alias("msg"),
        pre.cast(pl.Binary).bin.head(byte_find(pre, " pid=", literal=True)).cast(pl.String).alias("proc"),
        pre.cast(pl.Binary)
        .bin.slice(byte_find(pre, " pid=", literal=True) + 5)
        .cast(pl.String)
        .pipe(to_int)
        .alias("pid"),
    )
    got = _vllm_lines._fields(frame.select("line_no", pl.col("body").alias("line")))
    assert got.select("msg", "proc", "pid").equals(want)
    # a small chunk reads every line's prefix (no join): the same values
    n = _vllm_lines._JOIN_ROWS - 1
    small = _vllm_lines._fields(frame.head(n).select("line_no", pl.col("body").alias("line")))
    assert small.select("msg", "proc", "pid").equals(want.head(n))
    assert small.get_column("pid").drop_nulls().len() >= 1_000
    procs = set(got.get_column("proc").drop_nulls().unique())
    assert {"APIServer", "EngineCore_DP0"} <= procs
    assert got.get_column("pid").drop_nulls().n_unique() >= 20
