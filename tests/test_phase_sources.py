"""A client's phase described by two of its files (its log and its JSON lines) is taken from the one that records
its end, whatever the files are called. openai-python's log states a phase's duration, and its last phase ends there
by arithmetic; the lab client's JSON lines record ``phase_end``. traced-2r-kill's client extended its phase until
replica b was back (``phase_extended``, 03:29:15) and oom-cgroup's stopped when its server was killed (03:55:45):
their logs' stated ends are 3 and 4 minutes off. Renamed as a collection names them, the log sorted first and the
phase ended there: traced-2r-kill's load clock gap went from 'censored' (35 of 636 callers gave up) to 'small gap'
over 3 minutes of the phase."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from metamorphic import copy, rename_all, renamed


def _phase_end(run: Path) -> datetime:
    """The JSON lines' own record of the phase's end (phase_end; its extension's new end when extended)."""
    [jsonl] = [p for p in run.glob("client-*.jsonl")]
    recs = [json.loads(line) for line in jsonl.read_text().splitlines() if '"phase_' in line]
    ends = [r for r in recs if r["kind"] == "phase_end"]
    assert len(ends) == 1
    return datetime.fromtimestamp(ends[0]["t"]).astimezone()


def _load_gaps(out: Path) -> dict[str, tuple[str, str, str]]:
    claims = json.loads((out / "summary.json").read_text())["claims"]
    facts = {c["id"]: {f["name"]: f.get("value") for f in c["facts"]} for c in claims}
    return {
        i: (c["state"], facts[i]["start"], facts[i]["end"])
        for c in claims
        if (i := c["id"]).startswith("clock_gap.phase.0.")
    }


@pytest.mark.parametrize("run", ["traced-2r-kill", "oom-cgroup"])
def test_a_phase_ends_where_a_file_records_it_whatever_the_names(run: str, tmp_path: Path) -> None:
    src = need(LAB / run)
    log = next(src.glob("client-*.log")).name
    jsonl = next(src.glob("client-*.jsonl")).name
    assert renamed(log) < renamed(jsonl) and jsonl < log  # renamed, the log sorts first; as recorded, last
    copy(src, tmp_path / "in")
    rename_all(tmp_path / "in")
    analyze(tmp_path / "in", tmp_path / "renamed", AnalyzeOptions())
    analyze(src, tmp_path / "as-is", AnalyzeOptions())
    gaps = _load_gaps(tmp_path / "as-is")
    assert gaps and _load_gaps(tmp_path / "renamed") == gaps
    end = _phase_end(src)
    for _, _, at in gaps.values():
        assert abs((datetime.fromisoformat(at.replace("Z", "+00:00")) - end).total_seconds()) < 1, (at, end)
