"""Load-test summaries are evidence: each result block a ``load_tests`` row (tool, counts, latencies, client clock).

Real blocks from public reports (tests/data/load-tests/INDEX.md) of vLLM's and SGLang's serving benchmarks,
several versions each, and public-2's c04 (a block cut after its third line).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from conftest import PUBLIC2
from logscope.ingest import ingest

DATA = Path(__file__).parent / "data" / "load-tests"


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> pl.DataFrame:
    out = tmp_path_factory.mktemp("lt")
    ingest(DATA, out)
    logs = pl.read_parquet(out / "files.parquet").filter(pl.col("path").str.ends_with(".log"))
    assert logs.height == 6 and logs["lines_parsed"].to_list() == logs["lines_total"].to_list()
    return pl.read_parquet(out / "load_tests.parquet").with_columns(
        pl.col("source").str.extract(r"([^/]+)$").alias("file")
    )


def one(rows: pl.DataFrame, name: str) -> dict:
    got = rows.filter(pl.col("file") == name).to_dicts()
    assert len(got) == 1, got
    return got[0]


@pytest.mark.parametrize(
    ("name", "tool", "successful", "failed", "ttft_mean", "ttft_p99", "e2e_mean"),
    [
        ("vllm-33743-bench-serve-2026.log", "vllm bench serve", 16, 0, 2.63355, 4.61048, None),
        (
            "vllm-25135-benchmark-serving-2025-09.log",
            "vllm bench serve",
            320,
            None,
            5.24027,
            13.54202,
            82.55895,
        ),
        ("vllm-18566-bench-serve-2025-05-cut.log", "vllm bench serve", 1000, None, 9.62613, 12.66673, None),
        (
            "xla-9376-benchmark-serving-2025-06-cut.log",
            "vllm bench serve",
            1000,
            None,
            62.23451,
            122.67307,
            None,
        ),
        ("sglang-8285-bench-serving-cut.log", "sglang bench_serving", 660, None, 2.53344, 6.00216, 26.53012),
        (
            "sglang-9812-bench-serving-vllm-chat-cut.log",
            "sglang bench_serving",
            768,
            None,
            25.74735,
            42.16454,
            25.74735,
        ),
    ],
)
def test_block(rows, name, tool, successful, failed, ttft_mean, ttft_p99, e2e_mean):
    r = one(rows, name)
    assert (r["tool"], r["successful"], r["failed"]) == (tool, successful, failed)
    assert r["ttft_mean_s"] == pytest.approx(ttft_mean)
    assert r["ttft_p99_s"] == pytest.approx(ttft_p99)
    assert r["e2e_mean_s"] == (None if e2e_mean is None else pytest.approx(e2e_mean))
    assert (r["clock"], r["latency_source"], r["line_no"]) == ("client", "load_test", 1)


def test_settings_and_rates(rows):
    s = one(rows, "sglang-8285-bench-serving-cut.log")
    assert (s["request_rate"], s["concurrency"], s["concurrency_mean"]) == (330.0, 330.0, 315.98)
    assert s["throughput_rps"] == pytest.approx(11.91)
    v = one(rows, "sglang-9812-bench-serving-vllm-chat-cut.log")
    assert (v["request_rate"], v["concurrency"]) == (None, None)  # 'inf', 'not set': no figure
    m = one(rows, "vllm-25135-benchmark-serving-2025-09.log")
    # no 'Failed requests' line and no progress bar: how many were sent is not said
    assert (m["concurrency"], m["requests"], m["duration_s"]) == (64.0, None, 413.07)
    assert one(rows, "vllm-33743-bench-serve-2026.log")["requests"] == 16  # 16 successful + 0 failed
    assert m["itl_p99_s"] == pytest.approx(0.07304)


def test_cut_block_before_its_numbers(tmp_path):
    """c04: 100 sent (its progress bar), 1 successful, and the block cut before any latency."""
    ingest(PUBLIC2 / "c04-vllm-bench-serve-successful-1-of-100-header.log", tmp_path)
    r = pl.read_parquet(tmp_path / "load_tests.parquet").to_dicts()
    assert len(r) == 1
    assert (r[0]["requests"], r[0]["successful"], r[0]["concurrency"], r[0]["duration_s"]) == (
        100,
        1,
        2.0,
        2.87,
    )
    assert r[0]["ttft_mean_s"] is None and r[0]["request_rate"] is None
