"""A logical request whose retries a rotation cut is one request, named by the file and line where it began.

logrotate's copytruncate cuts a client log at a line: the first attempts of a request stay in ``client.log.1``, the
rest go to ``client.log``. The rotated set is read as one stream, so the request was one, but it was named by the file
whose chunk closed it with the line of its first attempt in the other file ('client.log:35' for line 35 of
client.log.1; a request of client.log may begin at its own line 35), and its first attempt's row said so too.
Each real log is cut at the line before the second attempt of its first retried request, and every request and
attempt must be those of the whole file, each at its place in the set. Samples: two openai 3.57 DEBUG logs without
any request id (tests/data/clients: the SDK's OPENAI_LOG format and a plain one), openai 1.54's threaded log, and
two lab runs' clients (their requests named by the lab client's 'done' lines: the attempts' files and lines).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA, LAB, need
from logscope.ingest import IngestOptions, ingest

NO_ID = {  # a real log: its first retried request, named by the line it began at in the whole file, its attempts
    "clients/openai-sdk-format.log": ("client.log:9", 2),
    "clients/openai-plain-format.log": ("client.log:35", 2),
    "clients/openai-v1-threads.log": ("client.log:10", 3),  # two threads: its 2nd attempt 26 lines on
}
LAB_RUNS = ["retry-storm/client-storm.log", "oom-cgroup/client-oom.log"]
ATT = ["logical_request_id", "attempt", "status", "error", "timed_out", "ts_start", "ts_end", "thread"]
REQ = ["logical_request_id", "status", "error", "attempts", "ts_start", "ts_end", "e2e_s", "unfinished"]


def _read(folder: Path, out: Path) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    got = ingest(folder, out, IngestOptions(workers=1))
    assert set(got.files["format"]) == {"openai_client"}
    phases = got.table("client_phases") if (out / "client_phases.parquet").exists() else pl.DataFrame()
    return got.table("client_requests"), got.table("client_attempts"), phases


def _cut(log: Path, tmp: Path) -> tuple[dict, dict, int]:
    """The tables of ``log`` read whole (as client.log) and as a rotated pair cut between the first two attempts of its
    first retried request (the line before the second); and the cut (client.log.1's number of lines)."""
    whole, pair = tmp / "whole", tmp / "pair"
    for d in (whole, pair):
        d.mkdir()
    shutil.copyfile(log, whole / "client.log")
    req, att, ph = _read(whole, tmp / "whole-out")
    retried = req.filter(pl.col("attempts") > 1)["logical_request_id"][0]
    second = att.filter((pl.col("logical_request_id") == retried) & (pl.col("attempt") == 2))[
        "line_no"
    ].item()
    lines = log.read_bytes().splitlines(keepends=True)
    cut = second - 1
    (pair / "client.log.1").write_bytes(b"".join(lines[:cut]))
    (pair / "client.log").write_bytes(b"".join(lines[cut:]))
    req2, att2, ph2 = _read(pair, tmp / "pair-out")
    return {"req": req, "att": att, "ph": ph}, {"req": req2, "att": att2, "ph": ph2}, cut


def _placed(cut: int):
    """Where a line of the whole file is in the pair: (file, line)."""

    def at(line: int) -> tuple[str, int]:
        return ("client.log.1", line) if line <= cut else ("client.log", line - cut)

    return at


def _same_as_whole(whole: dict, pair: dict, cut: int) -> None:
    """Every request and attempt of the pair is the whole file's, each named by its place in the set."""
    at = _placed(cut)

    def moved(lid: str) -> str:  # an id made of the whole file's name and line, placed in the set
        if not lid.startswith("client.log:"):
            return lid
        f, n = at(int(lid.split(":")[1]))
        return f"{f}:{n}"

    a = whole["att"].with_columns(pl.col("logical_request_id").map_elements(moved, return_dtype=pl.String))
    b = pair["att"]
    assert a.height == b.height
    key = ["logical_request_id", "attempt"]
    assert a.sort(key).select(ATT).equals(b.sort(key).select(ATT))
    placed = (
        a.sort(key).select(pl.col("line_no").map_elements(at, return_dtype=pl.Object)).to_series().to_list()
    )
    assert placed == list(zip(*b.sort(key).select("source", "line_no"), strict=True))
    r = whole["req"].with_columns(pl.col("logical_request_id").map_elements(moved, return_dtype=pl.String))
    assert r.sort("logical_request_id").select(REQ).equals(pair["req"].sort("logical_request_id").select(REQ))
    # a request's file is that of its first attempt
    first = b.filter(pl.col("attempt") == 1).select("logical_request_id", "source")
    assert (
        pair["req"]
        .select("logical_request_id", "source")
        .sort("logical_request_id")
        .equals(first.sort("logical_request_id"))
    )


@pytest.mark.parametrize("name", sorted(NO_ID))
def test_retries_cut_by_a_rotation_stay_one_request(name, tmp_path):
    whole, pair, cut = _cut(need(DATA / name), tmp_path)
    lid, n = NO_ID[name]
    line = int(lid.split(":")[1])
    assert whole["req"].filter(pl.col("attempts") > 1).row(0)[:1] == (lid,)
    assert line <= cut  # it began in client.log.1, its second attempt is client.log's first line
    got = pair["req"].filter(pl.col("logical_request_id") == f"client.log.1:{line}")
    assert got.select("source", "attempts").rows() == [("client.log.1", n)]
    att = pair["att"].filter(pl.col("logical_request_id") == f"client.log.1:{line}").sort("attempt")
    assert att.select("attempt", "source", "line_no").rows()[:2] == [
        (1, "client.log.1", line),
        (2, "client.log", 1),
    ]
    assert pair["req"].height == whole["req"].height and pair["att"].height == whole["att"].height
    _same_as_whole(whole, pair, cut)


@pytest.mark.parametrize("run", LAB_RUNS)
def test_a_lab_request_cut_by_a_rotation_keeps_its_attempts_files(run, tmp_path):
    """A lab client's request is named by its 'done' line (its id): one request, its attempts once, each attempt at its
    own file and line (the first in client.log.1); its phases at their files too."""
    whole, pair, cut = _cut(need(LAB / run), tmp_path)
    retried = whole["req"].filter(pl.col("attempts") > 1).row(0, named=True)
    lid = retried["logical_request_id"]
    assert not lid.startswith("client.log")  # the lab client's id
    got = pair["req"].filter(pl.col("logical_request_id") == lid)
    assert got.select("source", "attempts").rows() == [("client.log.1", retried["attempts"])]
    att = pair["att"].filter(pl.col("logical_request_id") == lid).sort("attempt")
    assert att["source"].to_list() == ["client.log.1"] + ["client.log"] * (retried["attempts"] - 1)
    assert att["line_no"][1] == 1
    _same_as_whole(whole, pair, cut)
    # the lab client's phase lines ('phase N start mode=.. value=..'), each named by the file it is in
    assert pair["ph"].select("phase", "ts_start").equals(whole["ph"].select("phase", "ts_start"))
    files = {f: (tmp_path / "pair" / f).read_text().splitlines() for f in ("client.log.1", "client.log")}
    said = [f for f, lines in files.items() for x in lines if " labclient " in x and " start mode=" in x]
    assert pair["ph"].sort("ts_start")["source"].to_list() == said


@pytest.mark.parametrize(
    "log", [*(DATA / n for n in sorted(NO_ID)), *(LAB / r for r in LAB_RUNS)], ids=lambda p: p.stem
)
def test_each_file_of_a_rotated_set_states_what_the_set_showed(log, tmp_path):
    """What a client log's reading assumed is said of the whole log at its end (stable1: a chunk's state so far said
    'no DEBUG lines' of a log whose DEBUG lines came later); of a rotated set, each file states it, not the newest
    alone: client.log.1 of a set cut from a log without DEBUG lines said nothing of them (stable1 left)."""
    lines = need(log).read_bytes().splitlines(keepends=True)
    whole, pair = tmp_path / "whole", tmp_path / "pair"
    whole.mkdir()
    pair.mkdir()
    shutil.copyfile(log, whole / "client.log")
    half = len(lines) // 2
    (pair / "client.log.1").write_bytes(b"".join(lines[:half]))
    (pair / "client.log").write_bytes(b"".join(lines[half:]))
    said = ingest(whole, tmp_path / "w-out", IngestOptions(workers=1)).files.row(0, named=True)["assumptions"]
    got = ingest(pair, tmp_path / "p-out", IngestOptions(workers=1)).files
    assert sorted(got["path"]) == ["client.log", "client.log.1"]
    for path, assumed in got.select("path", "assumptions").iter_rows():
        assert assumed[0] == "read as one stream with client.log.1, client.log (oldest first)"
        assert assumed[1:] == said, path
