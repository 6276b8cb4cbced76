"""What the fuzzer found whose fix belongs to another branch of issue #30, pinned as exact reproducers.

Each was marked xfail until its fix landed; every fix has landed, so they are plain regression tests now. The fuzz cases are the specs the runner printed (``bench/fuzz.py --spec``),
cut down to the one file and mutation that fails; the converter cases are the values hypothesis found."""

from __future__ import annotations

import math

import polars as pl
import pytest
from harness import run_case
from mutations import Case, FileSpec, build

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from logscope.parsers import _common, _prom, client_jsonl

pytestmark = pytest.mark.slow  # fuzzing: every saved reproducer through the whole CLI


def _converted(values: list, expr: pl.Expr, dtype: pl.DataType) -> list:
    return pl.DataFrame({"v": pl.Series(values, dtype=dtype)}).select(expr.alias("o"))["o"].to_list()


@pytest.mark.parametrize("x", [math.nan, math.inf, -math.inf, 1e20, -1e20, 1e13])
def test_absurd_epoch_seconds_are_null(x):
    assert _converted([x, 1_764_404_705.5], _common.epoch_to_utc(pl.col("v")), pl.Float64)[0] is None
    assert _converted([x], _prom.epoch_s_to_ts(pl.col("v")), pl.Float64) == [None]


@pytest.mark.parametrize("text", ["NaN", "inf", "1e400", "-1e13", "99999999999999999999999"])
def test_absurd_client_times_are_null(text):
    got = (
        pl.DataFrame({"t": [text, "2026-11-29T08:25:05Z"]})
        .select(client_jsonl.ts_expr("t", "UTC"))
        .to_series()
    )
    assert got.to_list()[0] is None and got.to_list()[1] is not None


def _case(*files: FileSpec) -> Case:
    for f in files:
        need(LAB.parent.parent / f.source)
    return Case(list(files))


def test_a_file_name_that_is_not_utf8(tmp_path):
    # seed 2026 case 1, cut down: the real calm vLLM log named with the bytes ff fe
    case = _case(FileSpec("fixtures/lab/calm/vllm-server.log", 60_000, name_kind="non-utf8"))
    o = run_case(case, work=tmp_path)
    assert o.ok, o.failures


def test_a_folder_name_that_is_not_utf8(tmp_path):
    # seed 2026 case 22 (CI's own budget): v0-ladder's vLLM log in a folder named with the bytes ff fe; the folder
    # is the replica's name, which reached files.parquet as it was (exit 70: surrogates not allowed)
    case = _case(
        FileSpec("fixtures/lab/v0-ladder/vllm-server.log", 23_592, name_kind="non-utf8", folder="clients")
    )
    o = run_case(case, work=tmp_path)
    assert o.ok, o.failures


def test_an_nginx_log_with_cr_line_ends(tmp_path):
    # seed 2026 case 10, cut down to its nginx file
    case = _case(FileSpec("fixtures/lab/spike/nginx-access.log", 88_640, [("line_ends", {"style": "cr"})]))
    o = run_case(case, work=tmp_path)
    assert o.ok, o.failures


def test_an_epoch_zero_prometheus_time(tmp_path):
    # seed 7 case 5, cut down to its Prometheus answer: every seventh number (timestamps included) 1e-400
    case = _case(
        FileSpec(
            "fixtures/lab/orphan/prometheus/query_range-vllm_kv_cache_usage_perc.json",
            2992,
            [("bad_numbers", {"value": "1e-400", "every": 7})],
        )
    )
    o = run_case(case, work=tmp_path, timeout=30)  # a 3 KB input: ~10 s on a loaded machine
    assert o.ok, o.failures


def test_an_impossible_date_in_the_head(tmp_path):
    # seed 7 case 33: the real crash client log with every date 2026-02-30
    case = _case(
        FileSpec(
            "fixtures/lab/crash/client-crash.log",
            138_914,
            [("bad_dates", {"what": "date", "value": "2026-02-30", "every": 1})],
        )
    )
    build(case, tmp_path / "in", tmp_path / "outside")
    res = ingest(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    row = res.files.row(0, named=True)
    assert row["lines_parsed"] + row["lines_unrecognized"] == row["lines_total"] > 0


def test_inf_in_a_tsdb_dump(tmp_path):
    # seed 7 case 42, cut down to its promtool dump: every seventh number 'inf'
    case = _case(
        FileSpec(
            "fixtures/lab/v0-ladder/prometheus/tsdb-dump.txt",
            72_246,
            [("bad_numbers", {"value": "inf", "every": 7})],
        )
    )
    build(case, tmp_path / "in", tmp_path / "outside")
    res = ingest(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    assert res.files.row(0, named=True)["format"] == "prometheus_tsdb_dump"
