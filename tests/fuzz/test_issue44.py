"""Issue #44's failures as seeds of the fuzz suite: each case is built and analysed by the fuzz harness
(``run_case``: a documented exit, every line accounted for, no input changed, the outputs whole), from the real
file the second fuzzing pass found it in."""

from __future__ import annotations

import polars as pl
import pytest
from harness import run_case
from mutations import Case, FileSpec, build

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest

SPIKE = "fixtures/lab/spike"


def _case(*files: FileSpec) -> Case:
    for f in files:
        need(LAB.parent.parent / f.source)
    return Case(list(files))


@pytest.mark.parametrize("value", ["1e19", "-1e19", "1e308"])
def test_a_prometheus_sample_past_int64(tmp_path, value):
    # item 2: a running gauge, a dump and num_preemptions_total with every fifth number past the int64 range
    # (exit 70 at ingest/metric_stats.py before)
    case = _case(
        FileSpec(f"{SPIKE}/vllm-server.log", 200_000),
        FileSpec(
            f"{SPIKE}/prometheus/query_range-num_requests_running.json",
            1_000_000,
            [("bad_numbers", {"value": value, "every": 5})],
        ),
        FileSpec(
            "fixtures/lab/calm/prometheus/query_range-vllm_num_preemptions_total.json",
            1_000_000,
            [("bad_numbers", {"value": value, "every": 5})],
        ),
        FileSpec(
            f"{SPIKE}/prometheus/tsdb-dump.txt", 400_000, [("bad_numbers", {"value": value, "every": 5})]
        ),
    )
    o = run_case(case, work=tmp_path)
    assert o.ok and o.exit == 0, (o.failures, o.stderr_tail)


@pytest.mark.parametrize("kind", ["hidden", "image"])
def test_a_server_log_named_to_be_skipped(tmp_path, kind):
    # item 5: '.vllm-server.log' or 'vllm-server.png' was no row and no note, and 'Nothing to diagnose'
    case = _case(FileSpec(f"{SPIKE}/vllm-server.log", 300_000, name_kind=kind))
    o = run_case(case, work=tmp_path)
    assert o.ok and o.exit == 0, (o.failures, o.stderr_tail)
    build(case, tmp_path / "in", tmp_path / "outside")
    files = ingest(tmp_path / "in", tmp_path / "out", AnalyzeOptions()).files
    (row,) = files.iter_rows(named=True)
    assert row["format"] == "vllm_server" and row["lines_parsed"] > 1000
    assert row["path"] == (".vllm-server.log" if kind == "hidden" else "vllm-server.png")
    assert pl.read_parquet(tmp_path / "out" / "server_stats.parquet").height > 10
