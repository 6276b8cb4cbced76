"""vLLM's stamps carry no year: ingest takes it from full times in the folder's files, else their modification time.

A ten-digit run inside a hash is no epoch time: vLLM 0.32's compile cache path ('.../torch_aot_compile/66da45cb80dc25
ef914b818a1821178711dbe.../rank_0_0/model', 'inductor-...1661492806d192c...') was read as one, and three lab logs read
alone took its year (traced-ladder-kill 2027, calm-b 2022, oom-cgroup 2019) for every one of their records.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import polars as pl
import pytest

from conftest import LAB, need
from logscope.ingest import IngestOptions, ingest

RUNS = ("traced-ladder-kill", "calm-b", "oom-cgroup")


@pytest.mark.parametrize("run", RUNS)
def test_a_hash_s_digits_give_no_year(run, tmp_path):
    log = need(LAB / run / "vllm-server.log")
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(log, src / log.name)  # its modification time too (the lab's, 2026, in this checkout)
    year = datetime.fromtimestamp((src / log.name).stat().st_mtime, UTC).year
    ingest(src, tmp_path / "out", IngestOptions(workers=1))
    said = json.loads((tmp_path / "out" / "ingest.json").read_text())
    assert (said["year"], said["year_source"]) == (
        year,
        f"year {year} from the files' modification time (no full timestamp in the folder)",
    )
    ts = pl.read_parquet(tmp_path / "out" / "server_stats.parquet")["ts"].drop_nulls()
    assert ts.len() > 0 and set(ts.dt.year()) == {year}
