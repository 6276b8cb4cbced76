"""Load-test summaries are evidence: each result block a ``load_tests`` row (tool, counts, latencies, client clock).

Real blocks from public reports (tests/data/load-tests/INDEX.md) of vLLM's and SGLang's serving benchmarks,
several versions each, and public-2's c04 (a block cut after its third line).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, PUBLIC2
from logscope.api import AnalyzeOptions, analyze
from logscope.diagnose.findings.load_tests import _dur
from logscope.ingest import ingest

DATA = Path(__file__).parent / "data" / "load-tests"


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> pl.DataFrame:
    out = tmp_path_factory.mktemp("lt")
    ingest(DATA, out)
    logs = pl.read_parquet(out / "files.parquet").filter(pl.col("path").str.ends_with(".log"))
    assert logs.height == 8 and logs["lines_parsed"].to_list() == logs["lines_total"].to_list()
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


# ---------------------------------------------------------------- the summary reaches the verdict
@pytest.mark.parametrize(
    ("path", "first_line"),
    [
        # vLLM's benchmark_serving.py on TPU: a one-minute mean TTFT (pytorch/xla#9376)
        (
            DATA / "xla-9376-benchmark-serving-2025-06-cut.log",
            "mean TTFT 62.2 s (SLO: p95 2 s), client clock",
        ),
        # SGLang's bench_serving against vLLM: 25.7 s (sglang#9812)
        (
            DATA / "sglang-9812-bench-serving-vllm-chat-cut.log",
            "mean TTFT 25.7 s (SLO: p95 2 s), client clock",
        ),
        # public-2 c04: 1 of 100 successful, no latency printed (vllm#24005)
        (
            PUBLIC2 / "c04-vllm-bench-serve-successful-1-of-100-header.log",
            "1 of 100 requests successful (1.0 %), client clock",
        ),
    ],
)
def test_summary_reaches_the_verdict(tmp_path, path, first_line):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(path, src / path.name)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["verdict"][0].startswith("Load test (")
    assert first_line in s["verdict"][0]
    assert s["findings"][0]["severity"] == "high"
    md = (tmp_path / "out" / "summary.md").read_text().replace("\\_", "_")
    assert s["verdict"][0] in md
    assert s["load_tests"][0]["clock"] == "client" and "## Load tests" in md  # beside what the logs say
    assert 'id="load-tests"' in (tmp_path / "out" / "report.html").read_text()


def test_within_slo_is_read_not_alarming(tmp_path):
    """The lab's bench-c8 block (TTFT mean 86 ms, 40 of 40): an info finding says the load test was read."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(LAB / "ladder" / "bench" / "bench-c8.log", src / "bench-c8.log")
    analyze(src, tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    titles = [f["title"] for f in s["findings"]]
    assert "Load test read: vllm bench serve within the SLO" in titles
    assert all(f["severity"] == "info" for f in s["findings"])


def test_durations_as_read():
    assert [_dur(x) for x in (0.0864, 4.61, 2940.0, 13513.0)] == ["86 ms", "4.6 s", "49.0 min", "3.8 h"]


# ---------------------------------------------------------------- AIPerf's console table
def test_aiperf_table(rows):
    """TensorRT-LLM#11708: title, header, six rows (avg TTFT 1,655.27 ms ... thousands with commas)."""
    r = one(rows, "trtllm-11708-aiperf-llm-metrics-2026-cut.log")
    assert (r["tool"], r["line_no"], r["clock"]) == ("aiperf", 3, "client")
    assert (r["ttft_mean_s"], r["ttft_median_s"], r["ttft_p99_s"]) == pytest.approx(
        (1.65527, 1.77355, 3.48793)
    )
    assert (r["e2e_mean_s"], r["itl_p99_s"]) == pytest.approx((9.02855, 0.01864))
    assert r["successful"] is None  # its Request Count row was cut off


def test_aiperf_rows_without_header(rows):
    """ai-dynamo/aiperf#535: four rows pasted alone, read in AIPerf's default order (avg first); N/A is no value."""
    r = one(rows, "aiperf-535-rows-2025-12.log")
    assert (r["tool"], r["successful"], r["output_tps"], r["throughput_rps"]) == ("aiperf", 100, 5388.43, 1.8)
    assert r["ttft_mean_s"] is None
