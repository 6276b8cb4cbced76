"""Smoke run of the benchmark: generate a small folder from the lab recordings, run the runner in
--quick mode, and check that logscope counted what the naive Python loop counted. No timing
assertions: the figures live in docs/performance.md."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta

import polars as pl
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import naive  # noqa: E402
import run  # noqa: E402

pytestmark = pytest.mark.slow  # the benchmarks' smoke runs

# Counted independently over the generated folder (5 MB asked: one copy of each lab template,
# 7.4 MB) with grep:
#   stats:    cat */vllm-server.log | grep -cE "(Engine [0-9]+: |Avg prompt throughput: |Throughput: ).*Running: [0-9]+ reqs"
#   received: cat */vllm-server.log | grep -c "Received request "
#   aborted:  ids named on 'Aborted request(s) ...' lines: grep -oE "Aborted request(\(s\))? .*" | split on ','
#   nginx:    cat */nginx-access.log | grep -cE "^\S+ msec=[0-9]+\.[0-9]+ rid=\w+ .* status=[0-9]+ rt="
#   client:   cat */*.jsonl | grep -c '"kind": "attempt_send"'
EXPECTED = {
    "stats_lines": 205,
    "received": 1799,
    "aborted_ids": 457,
    "gateway_requests": 2945,
    "client_attempts": 2945,
}


def test_bench_quick_counts_agree(tmp_path, lab):
    data = tmp_path / "incident"
    out = tmp_path / "bench.json"
    # a budget below what even one minute needs: analyze still runs, on the worst minute, and says so
    summary = run.main(
        [
            "--size-mb",
            "5",
            "--dir",
            str(data),
            "--quick",
            "--json",
            str(out),
            "--max-memory",
            "1M",
            "--one-file",
        ]
    )
    assert summary["counts"]["logscope"] == EXPECTED
    naive_counts = naive.count(data)
    assert {k: naive_counts[k] for k in run.COUNT_KEYS} == EXPECTED
    assert summary["counts_agree"] is True
    rows = summary["results"]
    assert rows[run.INGEST]["ok"] and rows["naive Python line loop"]["ok"]
    assert rows[run.INGEST]["mb"] == round(summary["bytes"] / 1e6, 1)
    assert (
        "lnav (vLLM files only)" not in rows and run.ANALYZE not in rows and run.ANALYZE_AGAIN not in rows
    )  # --quick
    assert json.loads(out.read_text())["counts"]["logscope"] == EXPECTED
    # the stages of analyze, timed one by one (bench/phases.py): all four ran, each took some time
    stages = summary["analyze_stages"]
    assert [p["stage"] for p in stages] == ["ingest", "correlate", "diagnose", "render"]
    assert all(p["seconds"] > 0 and p["peak_rss_mb"] > 0 for p in stages)
    assert rows["logscope analyze --max-memory 1M"]["ok"]
    # one large file alone: the access logs of the folder's replicas, one after the other
    access_mb = sum(p.stat().st_size for p in data.rglob("nginx-access.log")) / 1e6
    assert rows[run.ONE_FILE]["ok"] and rows[run.ONE_FILE_ONE_THREAD]["ok"]
    assert rows[run.ONE_FILE]["mb"] == rows[run.ONE_FILE_ONE_THREAD]["mb"] == round(access_mb, 1) > 0
    # and the largest vLLM log alone, in segments and whole: the same rows either way
    vllm_mb = max(p.stat().st_size for p in data.rglob("vllm-server.log")) / 1e6
    assert rows[run.ONE_VLLM]["ok"] and rows[run.ONE_VLLM_WHOLE]["ok"]
    assert rows[run.ONE_VLLM]["mb"] == rows[run.ONE_VLLM_WHOLE]["mb"] == round(vllm_mb, 1) > 0
    br = summary["budget_range"]
    assert br["chosen"]["budget_bytes"] == 2**20 and "that minute alone" in br["chosen"]["reason"]
    since, until = (datetime.fromisoformat(br[k]) for k in ("since", "until"))
    assert timedelta(0) < until - since < timedelta(minutes=1)
    assert br["inputs_start"] <= br["since"] <= br["inputs_end"]


def test_bench_against_another_revision(tmp_path, lab):
    """--against REV: the ingest of a worktree of REV, alternating with this code's; the worktree is removed."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: --against needs the project's history")
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()

    def worktrees() -> set[str]:
        # paths only: other worktrees of the repository may move their HEADs meanwhile
        out = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "list", "--porcelain"], capture_output=True, text=True
        ).stdout
        return {line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")}

    before = worktrees()
    summary = run.main(
        ["--size-mb", "5", "--dir", str(tmp_path / "incident"), "--quick", "--against", "HEAD"]
    )
    rows = summary["results"]
    new, old = "ingest: this code, alternating", f"ingest: @{sha}, alternating"
    assert summary["against"] == {"rev": "HEAD", "sha": sha, "rows": [(new, old)]}
    assert (
        rows[new]["ok"] and rows[old]["ok"] and rows[new]["mb"] == rows[old]["mb"] == rows[run.INGEST]["mb"]
    )
    assert summary["counts"]["logscope"] == EXPECTED  # the ordinary rows still ran
    assert worktrees() == before  # the REV worktree was removed, whatever others did meanwhile


def test_derive_scale_runs_each_copy_as_its_own_sources(tmp_path, lab):
    """bench/derive_scale.py: the request events and stats rows three times over derive three times the
    server requests (each copy its own sources), every step in a child process."""
    import derive_scale

    from logscope.api import ingest

    ingest(lab / "spike", tmp_path / "out")
    once = {
        t: pl.read_parquet(tmp_path / "out" / f"{t}.parquet").height
        for t in ("server_request_events", "server_stats", "server_requests")
    }
    got = derive_scale.main([str(tmp_path / "out"), "--times", "3", "--work", str(tmp_path / "x3")])
    assert got["rows"] == {t: 3 * n for t, n in once.items()} and once["server_requests"] > 0
    assert all(s["ok"] and s["peak_rss_mb"] > 0 for s in got["steps"].values())
    stats = pl.read_parquet(tmp_path / "x3" / "server_stats.parquet")
    assert stats["interval_s"].null_count() == stats.select("replica", "origin").n_unique()


def test_bench_cluster_runs_side_by_side(tmp_path, lab):
    """bench/cluster.py on a small fleet, once: the four runs, every parsed byte in a unit task, the task stream
    recorded from the first task on (the session opened while the files were detected), the projection, and
    Dask's performance report from a run of its own."""
    pytest.importorskip("distributed")
    import cluster as bench_cluster

    report = tmp_path / "perf.html"
    s = bench_cluster.main(
        [
            "--dir",
            str(tmp_path / "fleet"),
            "--size-mb",
            "4",
            "--replicas",
            "4",
            "--gateways",
            "1",
            "--json",
            str(tmp_path / "c.json"),
            "--report",
            str(report),
        ]
    )
    assert list(s["runs"]) == [name for name, _, _ in bench_cluster.RUNS]
    fleet = sum(p.stat().st_size for p in (tmp_path / "fleet").rglob("*") if p.is_file())
    for name in ("--cluster local:1", "--cluster local:2"):
        r = s["runs"][name]
        assert r["units"] >= 9 and 0 <= r["session_s"] < r["ingest_s"]  # 4 replicas' logs and a gateway's
        assert r["compute_s"]["whole"]["n"] >= 9 and r["compute_s"]["table"]["n"] >= 8
    assert s["bytes"] == fleet and set(s["projection"]["by_workers"]) == {8, 32, 128}
    assert report.exists() and "Dask Performance Report" in report.read_text()[:100_000]
    assert json.loads((tmp_path / "c.json").read_text())["bytes"] == fleet


@pytest.mark.parametrize("run_name", ["retry-storm", "v0-ladder"])
def test_bench_chunks_same_rows_at_every_size(tmp_path, lab, run_name):
    """bench/chunks.py on two real lab runs, read in 128 KiB chunks (their larger files are cut 2-8 times) and in the default
    4 MiB (each file one chunk): a figure for each size, and the same rows whatever the size (a client table's rows
    may come in another order: a request is emitted once its attempts are all in, which a chunk's end decides)."""
    import chunks

    got = chunks.main([str(lab / run_name), "--mib", "4,0.125", "--repeat", "1"])
    assert set(got) == {"4.0", "0.125"}
    for r in got.values():
        assert r["cpu_s"] > 0 and r["rss_mb"][0] > 0
    assert all(t.endswith(" (order)") for t in got["0.125"]["tables_differ"]), got["0.125"]["tables_differ"]
