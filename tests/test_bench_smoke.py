"""Smoke run of the benchmark: generate a small folder from the lab recordings, run the runner in
--quick mode, and check that logscope counted what the naive Python loop counted. No timing
assertions: the figures live in docs/performance.md."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import naive  # noqa: E402
import run  # noqa: E402

# Counted independently over the generated folder (5 MB asked: one copy of each lab template,
# 7.4 MB) with grep:
#   stats:    cat */vllm-server.log | grep -cE "(Engine [0-9]+: |Avg prompt throughput: |Throughput: ).*Running: [0-9]+ reqs"
#   received: cat */vllm-server.log | grep -c "Received request "
#   aborted:  ids named on 'Aborted request(s) ...' lines: grep -oE "Aborted request(\(s\))? .*" | split on ','
#   nginx:    cat */nginx-access.log | grep -cE "^\S+ msec=[0-9]+\.[0-9]+ rid=\w+ .* status=[0-9]+ rt="
#   client:   cat */*.jsonl | grep -c '"kind": "attempt_send"'
EXPECTED = {"stats_lines": 205, "received": 1799, "aborted_ids": 457, "gateway_requests": 2945, "client_attempts": 2945}


def test_bench_quick_counts_agree(tmp_path, lab):
    data = tmp_path / "incident"
    out = tmp_path / "bench.json"
    # a budget below what even one minute needs: analyze still runs, on the worst minute, and says so
    summary = run.main(["--size-mb", "5", "--dir", str(data), "--quick", "--json", str(out), "--max-memory", "1M",
                        "--one-file"])
    assert summary["counts"]["logscope"] == EXPECTED
    naive_counts = naive.count(data)
    assert {k: naive_counts[k] for k in run.COUNT_KEYS} == EXPECTED
    assert summary["counts_agree"] is True
    rows = summary["results"]
    assert rows[run.INGEST]["ok"] and rows["naive Python line loop"]["ok"]
    assert rows[run.INGEST]["mb"] == round(summary["bytes"] / 1e6, 1)
    assert "lnav (vLLM files only)" not in rows and run.ANALYZE not in rows and run.ANALYZE_AGAIN not in rows  # --quick
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
    br = summary["budget_range"]
    assert br["chosen"]["budget_bytes"] == 2**20 and "that minute alone" in br["chosen"]["reason"]
    since, until = (datetime.fromisoformat(br[k]) for k in ("since", "until"))
    assert timedelta(0) < until - since < timedelta(minutes=1)
    assert br["inputs_start"] <= br["since"] <= br["inputs_end"]
