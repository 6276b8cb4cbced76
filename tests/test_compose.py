"""``docker compose logs`` output (logscope/ingest/envelopes.py, kind 'compose'): the '<service>-<n>  | ' prefix is
cut before detection and parsing, and the service names the replica. Real text: tests/data/compose/README.md."""

from __future__ import annotations

import polars as pl

from conftest import DATA, ingest_files
from logscope.ingest import envelopes

LOG = DATA / "compose" / "vllm-rocm-startup.log"


def test_detect_and_services():
    head = LOG.read_text().splitlines()
    assert envelopes.detect(head) == "compose"
    assert envelopes.services(head) == ["vllm-1"]
    inner = envelopes.head_lines("compose", head)
    assert inner[0].startswith("(EngineCore_DP0 pid=278) INFO 09-25 13:38:36 [gpu_model_runner.py:2547]")
    assert inner[4] == head[4]  # a tqdm bar the container wrote unprefixed passes as it is


def test_read_as_vllm_of_the_service(tmp_path):
    out = ingest_files(tmp_path, LOG).out_dir
    files = pl.read_parquet(out / "files.parquet")
    assert files["format"][0] == "vllm_server" and files["replica"][0] == "vllm-1"
    assert files["lines_unrecognized"][0] == 0
    ev = pl.read_parquet(out / "server_events.parquet")
    assert ev["replica"].unique().to_list() == ["vllm-1"]
    cap = ev.filter(pl.col("kind") == "capacity")
    assert cap["kv_tokens"].drop_nulls().to_list() == [205696]
    assert cap["max_concurrency"].drop_nulls().to_list() == [50.05]
    assert ev.filter(pl.col("kind") == "http_access")["http_status"].to_list() == [200]
    assert ev.filter(pl.col("kind") == "server_start")["pid"].to_list() == [8]
