"""SGLang server logs (parsers/sglang_server.py) read into the vLLM tables, on real public excerpts
(tests/data/sglang/README.md names each one's thread)."""

from __future__ import annotations

import polars as pl

import parsers
from conftest import DATA, ingest_files

SG = DATA / "sglang"


def _read(tmp_path, name):
    res = ingest_files(tmp_path, SG / name)
    out = res.out_dir
    return {t: pl.read_parquet(out / f"{t}.parquet") for t in ("files", "server_stats", "server_events")}


def test_detected_as_sglang_and_not_vllm():
    for f in sorted(SG.glob("*.log")):
        head = f.read_text().splitlines()
        best, score, sc = parsers.detect(head)
        assert best is not None and best.NAME == "sglang_server", (f.name, sc)
        assert sc["vllm_server"] < score


def test_decode_and_prefill_rows(tmp_path):
    t = _read(tmp_path, "10053-prefill-decode-access.log")
    st = t["server_stats"]
    assert st["engine_kind"].unique().to_list() == ["sglang"] and st["engine"].unique().to_list() == ["TP0"]
    assert st.height == 7  # 3 prefill + 4 decode lines
    assert st["gen_tps"].drop_nulls().to_list() == [1.06, 84.2, 3.17, 81.97]
    # the prefill batch's cache hit: #cached-token / (#new-token + #cached-token)
    assert round(st["prefix_hit"].drop_nulls()[1], 4) == round(184 / (18 + 184), 4)
    ev = t["server_events"]
    assert ev.filter(pl.col("kind") == "http_access")["http_status"].to_list() == [200, 200]
    assert t["files"]["lines_unrecognized"].sum() == 0


def test_queue_draining_without_rank(tmp_path):
    st = _read(tmp_path, "11970-prefill-queue-draining.log")["server_stats"]
    assert st["waiting"].to_list()[0] == 114 and st["waiting"].to_list()[-1] == 53
    assert st["running"].max() == 64 and st["kv_usage"].max() == 0.24
    assert st["engine"].null_count() == st.height


def test_hybrid_pool_usage_and_lost_bracket(tmp_path):
    st = _read(tmp_path, "26248-hybrid-swa-full-token-usage.log")["server_stats"]
    assert st.height == 3  # the first line lost its '[' in the paste and is still read
    assert st["kv_usage"].to_list() == [1.0, 1.0, 1.0]  # max(full 1.00, swa 0.06)
    assert st["waiting"].to_list() == [3, 3, 3]


def test_retraction_is_preemption(tmp_path):
    t = _read(tmp_path, "retract-kv-pool-full.log")
    ev = t["server_events"].filter(pl.col("kind") == "preemption")
    assert ev.height == 5 and ev["preemption_mode"].unique().to_list() == ["RETRACT"]
    st = t["server_stats"]
    # the 4 retractions logged between the 16:06:07 and 16:06:08 decode lines, then 1
    assert st["preemptions"].to_list() == [0, 0, 0, 0, 4, 1]
    assert st["kv_usage"].max() == 1.0 and st["waiting"].to_list()[-1] == 20


def test_deaths(tmp_path):
    ev = _read(tmp_path, "soft-thinking-10-watchdog-timeout.log")["server_events"]
    assert ev["kind"].to_list() == ["engine_timeout", "engine_dead"]
    t = _read(tmp_path / "b", "3713-illegal-memory-access-sigquit.log")
    ev = t["server_events"]
    assert ev["kind"].to_list() == ["engine_dead"]
    assert ev["line_count"][0] == 17 and "illegal memory access" in ev["detail"][0]
    assert t["files"]["lines_unrecognized"].sum() == 0
    ev = _read(tmp_path / "c", "8864-startup-sigquit-scheduler-exception.log")["server_events"]
    assert ev["kind"].to_list() == ["engine_dead", "engine_dead"]
