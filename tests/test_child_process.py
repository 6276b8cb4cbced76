"""Ingest in a process of its own (logscope/ingest/child_process.py): the same tables as in-process, progress forwarded,
and whatever ends the child (an error of logscope's, a bug, the OOM killer's signal) said by the parent."""

from __future__ import annotations

import json
import os
import signal

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.errors import ExitCode, LogscopeError
from logscope.ingest import IngestOptions, child_process

pytestmark = pytest.mark.slow  # an ingest in a child process


def test_the_same_tables_and_progress_as_in_process(tmp_path):
    src = need(LAB / "crash")
    analyze(src, tmp_path / "in", AnalyzeOptions(ingest_apart=False))
    seen: list[tuple[str, float]] = []
    analyze(
        src, tmp_path / "apart", AnalyzeOptions(ingest_apart=True), lambda msg, frac: seen.append((msg, frac))
    )
    tables = sorted(p.name for p in (tmp_path / "in").glob("*.parquet"))
    assert len(tables) > 15 and tables == sorted(p.name for p in (tmp_path / "apart").glob("*.parquet"))
    for name in tables:
        a, b = pl.read_parquet(tmp_path / "in" / name), pl.read_parquet(tmp_path / "apart" / name)
        assert a.equals(b), name
    meta = [json.loads((tmp_path / d / "ingest.json").read_text()) for d in ("in", "apart")]
    assert meta[0]["fingerprint"] == meta[1]["fingerprint"]
    # the child's progress reached the caller, scaled into ingest's share of analyze, before the later stages'
    ingest_steps = [f for m, f in seen if f <= 0.75]
    assert len(ingest_steps) >= 2 and ingest_steps == sorted(ingest_steps)
    assert [m for m, _ in seen][-3:] == ["correlating", "diagnosing", "rendering"]
    # a second analyze of the same files reuses the tables the child wrote
    again: list[str] = []
    analyze(src, tmp_path / "apart", AnalyzeOptions(ingest_apart=True), lambda msg, frac: again.append(msg))
    assert again[0] == "reusing the tables of the same files"


def raises_logscope_error(root, out_dir, options, send):
    raise LogscopeError("no such thing", hint="look elsewhere", code=ExitCode.NO_INPUT)


def raises_a_bug(root, out_dir, options, send):
    send(("progress", "half-way", 0.5))
    raise ValueError("a bug in the child")


def is_killed(root, out_dir, options, send):
    os.kill(os.getpid(), signal.SIGKILL)


def test_what_ends_the_child_is_said(tmp_path):
    opts = IngestOptions()
    with pytest.raises(LogscopeError) as e:
        child_process.ingest(tmp_path, tmp_path / "o", opts, target=f"{__name__}:raises_logscope_error")
    assert (e.value.what, e.value.hint, e.value.code) == (
        "no such thing",
        "look elsewhere",
        ExitCode.NO_INPUT,
    )
    seen = []
    with pytest.raises(RuntimeError, match="ValueError: a bug in the child") as e:
        child_process.ingest(
            tmp_path,
            tmp_path / "o",
            opts,
            lambda m, f: seen.append((m, f)),
            target=f"{__name__}:raises_a_bug",
        )
    assert "Traceback" in str(e.value) and seen == [("half-way", 0.5)]
    with pytest.raises(LogscopeError, match=r"exit code -9\): killed by signal 9 \(SIGKILL") as e:
        child_process.ingest(tmp_path, tmp_path / "o", opts, target=f"{__name__}:is_killed")
    # its own code: 1 says "--fail-on matched", and a pipeline must not read a killed ingest as a finding
    assert e.value.code == ExitCode.STAGE_DIED == 7
