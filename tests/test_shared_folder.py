"""Server logs that share a sub-folder (ingest/replicas.py): two servers stay two, one server stays one.

A file in a sub-folder takes the folder's name as its replica; two servers' logs collected into one folder were
read as one server (traced-2r-kill one level deeper: 10 -> 6 findings, its deaths, KV pressure and preemptions
merged). The files' start-up banners name the address each server listens on: different addresses are different
servers, one address (a restart, a rotated set, a pod's ``kubectl logs --previous`` beside its log) one server."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from logscope.parsers import vllm_server
from metamorphic import copy_shifted, rotate, span

FOLDER = "incident"


def _replicas(d: Path, tmp: Path) -> tuple[dict[str, str], set[str]]:
    """Each server file's replica (files.parquet), and the replicas of the server rows (server_events)."""
    res = ingest(d, tmp / "out", AnalyzeOptions())
    files = res.files.filter(pl.col("format") == "vllm_server")
    events = pl.read_parquet(res.out_dir / "server_events.parquet")
    return dict(zip(files["path"], files["replica"], strict=True)), set(events["replica"].drop_nulls())


def _put(d: Path, *srcs: tuple[Path, str]) -> Path:
    inner = d / FOLDER
    inner.mkdir(parents=True)
    for src, name in srcs:
        shutil.copy(src, inner / name)
    return d


def _restart_pair(src: Path, inner: Path, stem: str) -> None:
    """``src`` (one server's log holding a restart) as ``kubectl logs --previous`` and ``kubectl logs`` save it:
    STEM-previous.log up to the restarted process's first line (vLLM's 'Triton is installed' before its second
    banner), STEM.log from there."""
    lines = src.read_bytes().splitlines(keepends=True)
    banners = [i for i, ln in enumerate(lines) if b"non-default args:" in ln]
    cut = max(i for i in range(banners[1]) if lines[i].startswith(b"Triton is installed"))
    (inner / f"{stem}-previous.log").write_bytes(b"".join(lines[:cut]))
    (inner / f"{stem}.log").write_bytes(b"".join(lines[cut:]))


def test_two_servers_in_one_folder_stay_two(tmp_path):
    """traced-2r-kill's two servers (127.0.0.1:8001 and :8002) one level deeper: two replicas named by folder and
    file; before, both were 'incident' (one server)."""
    run = need(LAB / "traced-2r-kill")
    d = tmp_path / "in"
    shutil.copytree(run, d / FOLDER)
    files, rows = _replicas(d, tmp_path)
    assert files == {
        f"{FOLDER}/vllm-server-a.log": f"{FOLDER}/vllm-server-a",
        f"{FOLDER}/vllm-server-b.log": f"{FOLDER}/vllm-server-b",
    }
    assert rows == {f"{FOLDER}/vllm-server-a", f"{FOLDER}/vllm-server-b"}


def test_two_runs_servers_in_one_folder_stay_two(tmp_path):
    """A second sample: crash's server (127.0.0.1:8001) and traced-2r-kill's b (:8002) collected into one folder."""
    d = _put(
        tmp_path / "in",
        (need(LAB / "crash" / "vllm-server.log"), "vllm-server.log"),
        (need(LAB / "traced-2r-kill" / "vllm-server-b.log"), "vllm-server-b.log"),
    )
    files, rows = _replicas(d, tmp_path)
    assert files == {
        f"{FOLDER}/vllm-server.log": f"{FOLDER}/vllm-server",
        f"{FOLDER}/vllm-server-b.log": f"{FOLDER}/vllm-server-b",
    }
    assert rows == set(files.values())


@pytest.mark.parametrize("run", ["crash", "enginecore-kill"])
def test_one_servers_log_holding_a_restart_stays_one(run, tmp_path):
    """crash's log holds its server's restart (two banners, both :8001); enginecore-kill's its engine core's death:
    each alone in a folder is the folder's one replica."""
    d = _put(tmp_path / "in", (need(LAB / run / "vllm-server.log"), "vllm-server.log"))
    files, rows = _replicas(d, tmp_path)
    assert files == {f"{FOLDER}/vllm-server.log": FOLDER} and rows == {FOLDER}


@pytest.mark.parametrize(
    ("run", "name"), [("crash", "vllm-server.log"), ("traced-2r-kill", "vllm-server-b.log")]
)
def test_a_restart_pair_stays_one_server(run, name, tmp_path):
    """A server's log before and after its restart, saved as two files (--previous and the live log, both banners
    naming one address): one replica alone in a folder, and one replica beside traced-2r-kill's server a (:8001
    there; the pair of crash also :8001, so that folder is one server; the pair of b :8002, two servers)."""
    d = tmp_path / "in"
    (d / FOLDER).mkdir(parents=True)
    _restart_pair(need(LAB / run / name), d / FOLDER, "vllm-server")
    files, rows = _replicas(d, tmp_path / "alone")
    assert set(files.values()) == {FOLDER} and rows == {FOLDER}
    shutil.copy(need(LAB / "traced-2r-kill" / "vllm-server-a.log"), d / FOLDER / "vllm-server-a.log")
    files, rows = _replicas(d, tmp_path / "beside")
    pair = {f"{FOLDER}/vllm-server-previous.log", f"{FOLDER}/vllm-server.log"}
    if run == "crash":  # both listen on 127.0.0.1:8001: nothing tells them apart
        assert set(files.values()) == {FOLDER}
    else:
        assert {files[p] for p in pair} == {f"{FOLDER}/vllm-server"}  # the live log's name, not -previous's
        assert files[f"{FOLDER}/vllm-server-a.log"] == f"{FOLDER}/vllm-server-a"
        assert rows == {f"{FOLDER}/vllm-server", f"{FOLDER}/vllm-server-a"}


def test_rotated_sets_stay_whole(tmp_path):
    """traced-2r-kill's two server logs each rotated (``.2``, ``.1``, live; only ``.2`` holds the banner) in one
    folder: two replicas, each of its whole set; crash's rotated alone: one."""
    d = _put(
        tmp_path / "two",
        *((need(LAB / "traced-2r-kill" / n), n) for n in ("vllm-server-a.log", "vllm-server-b.log")),
    )
    rotate(d)
    files, rows = _replicas(d, tmp_path / "o2")
    assert len(files) == 6
    assert {p: r for p, r in files.items()} == {p: f"{FOLDER}/{Path(p).name.split('.')[0]}" for p in files}
    assert rows == {f"{FOLDER}/vllm-server-a", f"{FOLDER}/vllm-server-b"}
    d = _put(tmp_path / "one", (need(LAB / "crash" / "vllm-server.log"), "vllm-server.log"))
    rotate(d)
    files, rows = _replicas(d, tmp_path / "o1")
    assert len(files) == 3 and set(files.values()) == {FOLDER} and rows == {FOLDER}


def _head(p: Path, n: int = 200) -> list[str]:
    with p.open(encoding="utf-8", errors="replace") as fh:
        return [next(fh, "") for _ in range(n)]


def test_listen_address_from_real_banners():
    """vLLM 0.32's non-default args (traced-2r-kill a and b), 0.9.2's (v0-ladder), and 0.9.2's 'Starting vLLM API
    server 0 on' alone (v0-ladder's line without its args line); a client's log names none."""
    assert (
        vllm_server.listen_address(_head(need(LAB / "traced-2r-kill" / "vllm-server-a.log")))
        == "127.0.0.1:8001"
    )
    assert (
        vllm_server.listen_address(_head(need(LAB / "traced-2r-kill" / "vllm-server-b.log")))
        == "127.0.0.1:8002"
    )
    v0 = _head(need(LAB / "v0-ladder" / "vllm-server.log"))
    assert vllm_server.listen_address(v0) == "127.0.0.1:8001"
    assert vllm_server.listen_address([ln for ln in v0 if "non-default args" not in ln]) == "127.0.0.1:8001"
    assert vllm_server.listen_address(_head(need(LAB / "crash" / "client-crash.log"))) is None


def _with_calm(run: str, d: Path, after: bool) -> Path:
    """``run``'s server log and calm's (both 127.0.0.1:8001) in one folder, calm's times moved onto ``run``'s
    minutes (two servers at once: pods of one deployment) or to start after ``run``'s log ends (one server
    restarted)."""
    inner = d / FOLDER
    inner.mkdir(parents=True)
    shutil.copy(need(LAB / run / "vllm-server.log"), inner / "vllm-server.log")
    lo, hi = span(LAB / run)
    calm_lo, calm_hi = span(LAB / "calm")
    to = hi + timedelta(minutes=5) if after else lo
    delta = timedelta(seconds=int((to - calm_lo).total_seconds()))
    copy_shifted(
        need(LAB / "calm"),
        inner,
        delta,
        rename=lambda rel: "vllm-calm.log" if rel == "vllm-server.log" else None,
    )
    return d


@pytest.mark.parametrize("run", ["crash", "enginecore-kill"])
def test_two_servers_of_one_address_written_at_once_are_two(run, tmp_path):
    """Two logs naming one address, written over the same minutes, are two servers; the same two, one after the
    other, are one server restarted. Before, both were the folder's one server."""
    files, rows = _replicas(_with_calm(run, tmp_path / "at-once", after=False), tmp_path / "o1")
    assert files == {
        f"{FOLDER}/vllm-server.log": f"{FOLDER}/vllm-server",
        f"{FOLDER}/vllm-calm.log": f"{FOLDER}/vllm-calm",
    }
    assert rows == set(files.values())
    files, rows = _replicas(_with_calm(run, tmp_path / "after", after=True), tmp_path / "o2")
    assert set(files.values()) == {FOLDER} and rows == {FOLDER}


def test_a_copy_is_its_originals_server(tmp_path):
    """A copy of server a's log beside both servers' logs (collected twice) is a's, not a third server, though its
    times overlap a's: its rows are not added (ingest._mark_copies) and it is named as the file it copies."""
    run = need(LAB / "traced-2r-kill")
    d = _put(tmp_path / "in", *((run / n, n) for n in ("vllm-server-a.log", "vllm-server-b.log")))
    shutil.copy(run / "vllm-server-a.log", d / FOLDER / "vllm-server-a-again.log")
    files, rows = _replicas(d, tmp_path)
    # of two equal files the first by path is kept ('-again' sorts before '.log'): both are named by it
    a = f"{FOLDER}/vllm-server-a-again"
    assert files == {f"{FOLDER}/vllm-server-a.log": a, f"{FOLDER}/vllm-server-a-again.log": a} | {
        f"{FOLDER}/vllm-server-b.log": f"{FOLDER}/vllm-server-b"
    }
    assert rows == {a, f"{FOLDER}/vllm-server-b"}
