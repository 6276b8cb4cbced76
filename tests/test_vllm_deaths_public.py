"""MQLLMEngine deaths as users pasted them (tests/data/vllm-deaths/README.md): read as engine deaths."""

from __future__ import annotations

import polars as pl

from conftest import DATA, ingest_files

D = DATA / "vllm-deaths"


def _deaths(tmp_path, name):
    out = ingest_files(tmp_path, D / name).out_dir
    ev = pl.read_parquet(out / "server_events.parquet")
    return ev.filter(pl.col("kind") == "engine_dead"), pl.read_parquet(out / "files.parquet")


def test_engine_loop_died_then_already_dead(tmp_path):
    dead, files = _deaths(tmp_path, "10024-mqllmengine-loop-died.log")
    assert dead["level"].to_list() == ["ERROR", "CRITICAL"]
    assert dead["line_count"].to_list() == [7, 1]
    assert "MQLLMEngine is already dead" in dead["message"][1]
    assert files["lines_unrecognized"][0] == 0


def test_mqenginedeaderror_mid_traceback(tmp_path):
    dead, _ = _deaths(tmp_path, "411-mqenginedeaderror-stream.log")
    assert dead.height == 1 and "MQEngineDeadError: Engine loop is not running" in dead["detail"][0]
