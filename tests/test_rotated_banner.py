"""A rotated vLLM log whose current file begins with a new server's start: both starts are read from their banners.

tests/metamorphic.py's ``calm_hour_after`` lays the lab's calm run ten minutes after a real run, the run's server log
rotated to ``vllm-server.log.1`` and the calm one as ``vllm-server.log``. Its copy read and wrote the calm log in text
mode, whose universal newlines dropped the CR vLLM ends each line of a multi-line record with (and turned the lone CRs
of its progress bars into new lines): the stream's reader, which had seen CRs in ``.1``, then cut the calm server's
CR-less banner into one-line records, none of them its version. The second start was timed at 'Starting vLLM server'
(44 s after its banner on traced-ladder-kill) and the restarted server's version, model and limits read null. The
copy now keeps every byte but the times; these read both banners, whole and in small chunks and pieces.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.ingest import IngestOptions, ingest
from metamorphic import YEAR, calm_hour_after

RUNS = (
    "traced-ladder-kill",
    "crash",
)  # a SIGKILLed server then the calm one; a crash's two servers then the calm one
LOGS = ("vllm-server.log.1", "vllm-server.log")  # the rotated set, oldest first
_BANNER = re.compile(
    r"^\(APIServer pid=(\d+)\) INFO (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[[^\]]+\].*█\s+version (\S+)"
)


def _banners(folder: Path) -> list[tuple[str, int, datetime, str]]:
    """Each start's banner in the raw set: (file, pid, its header's time, the version it prints)."""
    got = []
    for name in LOGS:
        for line in (folder / name).read_text(encoding="utf-8", errors="replace").splitlines():
            if m := _BANNER.match(line):
                month, day, h, mi, s = map(int, m.groups()[1:6])
                got.append((name, int(m[1]), datetime(YEAR, month, day, h, mi, s, tzinfo=UTC), m[7]))
    return got


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    done: dict[str, tuple[Path, Path, dict]] = {}

    def get(run: str) -> tuple[Path, Path, dict]:
        if run not in done:
            root = tmp_path_factory.mktemp(run)
            calm_hour_after(need(LAB / run), need(LAB / "calm"), root / "in")
            analyze(root / "in", root / "out", AnalyzeOptions())
            done[run] = (root / "in", root / "out", json.loads((root / "out" / "summary.json").read_text()))
        return done[run]

    return get


def _versions(out: Path) -> list[tuple[str, datetime, str]]:
    ev = pl.read_parquet(out / "server_events.parquet").filter(pl.col("kind") == "version").sort("seq")
    return [(r["source"], r["ts"], r["version"]) for r in ev.iter_rows(named=True)]


@pytest.mark.parametrize("run", RUNS)
def test_the_calm_copy_keeps_vllm_s_bytes(pairs, run):
    """The current file is the calm log byte for byte but its times: its CRs and line count are the recording's."""
    src, _, _ = pairs(run)
    calm = need(LAB / "calm" / "vllm-server.log").read_bytes()
    copy = (src / "vllm-server.log").read_bytes()
    assert calm.count(b"\r") == copy.count(b"\r") == 18
    assert calm.count(b"\n") == copy.count(b"\n")
    assert (src / "vllm-server.log.1").read_bytes() == (LAB / run / "vllm-server.log").read_bytes()


@pytest.mark.parametrize("run", RUNS)
def test_each_start_s_banner_gives_its_version(pairs, run):
    src, out, s = pairs(run)
    banners = _banners(src)
    # traced-ladder-kill: pid 10934, then the calm run's 17282; crash: 7682, 8600, then 17282
    assert [b[1] for b in banners] == {"traced-ladder-kill": [10934, 17282], "crash": [7682, 8600, 17282]}[
        run
    ]
    assert banners[-1][0] == "vllm-server.log"
    assert _versions(out) == [(name, ts, version) for name, _, ts, version in banners]
    # each start is timed at its banner, not at 'Starting vLLM server' (44 s later for the calm run)
    starts = s["cold_start"]["server_starts"]
    assert [(st["pid"], st["ts"], st["version"]) for st in starts] == [
        (pid, ts.strftime("%Y-%m-%dT%H:%M:%S.000Z"), version) for _, pid, ts, version in banners
    ]


def test_the_restarted_server_s_facts_are_read(pairs, rendered):
    """traced-ladder-kill's server killed at 11:15:58, the calm server started at 11:25:05: the restart is the
    banner's time, and the new server's version, model and limits are read from its start, as the old one's."""
    src, out, s = pairs("traced-ladder-kill")
    calm = (src / "vllm-server.log").read_text(encoding="utf-8")
    assert (
        "'max_num_seqs': 64" in calm
        and "'max_model_len': 1024" in calm
        and "model   /models/tiny-llama" in calm
    )
    [d] = s["server_lifecycle"]["deaths"]
    assert (d["pid"], d["new_pid"], d["restart"]) == (10934, 17282, "2026-12-07T11:25:05.000Z")
    same = d["same_server"]
    facts = {
        "address": "http://127.0.0.1:8001",
        "max_model_len": 1024,
        "max_num_seqs": 64,
        "model": "/models/tiny-llama",
        "version": "0.32.0",
    }
    assert same["before"] == same["after"] == facts
    assert same["state"] == "one server restarted" and same["differs"] == same["missing"] == []
    said = (
        "one server restarted: the same log stream (vllm-server), address http://127.0.0.1:8001, version 0.32.0, "
        "model /models/tiny-llama, max_num_seqs 64, max_model_len 1024 before and after"
    )
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert said in seen[name], name


@pytest.mark.parametrize("run", RUNS)
def test_small_chunks_and_pieces_read_the_same_banners(pairs, run, tmp_path):
    """The set read in 4 KiB chunks, whole and in pieces on two workers (each file cut in two): the same starts."""
    full, _, _ = pairs(run)
    # the time as the header wrote it (no year): two vLLM logs alone take theirs from elsewhere (the reference year)
    want = [(name, f"{ts:%m-%d %H:%M:%S}", version) for name, _, ts, version in _banners(full)]
    src = tmp_path / "in"
    src.mkdir()
    for name in LOGS:
        (src / name).write_bytes((full / name).read_bytes())
    for name, opts in (
        ("chunks", IngestOptions(workers=1, chunk_bytes=4096)),
        ("pieces", IngestOptions(workers=2, chunk_bytes=4096, segments=2)),
    ):
        ingest(src, tmp_path / name, opts)
        got = [
            (source, f"{ts:%m-%d %H:%M:%S}", version) for source, ts, version in _versions(tmp_path / name)
        ]
        assert got == want, name
