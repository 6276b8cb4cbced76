"""Bad input never stops the folder: each bad file gets a clear message, lines are accounted,
and the good files beside it are still parsed."""

from __future__ import annotations

import gzip
import shutil

import polars as pl
import pytest
import zstandard

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from logscope.ingest import sources

SPIKE_LOG = LAB / "spike" / "vllm-server.log"


def _files(res) -> dict[str, dict]:
    return {r["path"]: r for r in res.files.iter_rows(named=True)}


@pytest.fixture
def garbage(tmp_path):
    src = need(SPIKE_LOG).read_bytes()
    d = tmp_path / "in"
    d.mkdir()
    (d / "vllm-server.log").write_bytes(src)  # the good file
    (d / "empty.log").write_bytes(b"")
    (d / "core.bin").write_bytes(bytes(range(256)) * 64)
    full = gzip.compress(src)
    (d / "old-vllm.log.gz").write_bytes(full[: len(full) // 2])  # truncated archive
    bad = src.replace(b"Received request", b"Received request\xff\xfe", 3)
    (d / "latin.log").write_bytes(bad)  # invalid UTF-8 in a real log
    line = next(ln for ln in src.split(b"\n") if b"Received request" in ln)
    (d / "huge.log").write_bytes(line.replace(b"params: ", b"params: " + b"x" * 10_000_000))  # one 10 MB line
    (d / "zst-vllm.log.zst").write_bytes(zstandard.ZstdCompressor().compress(src))
    shutil.copy(LAB / "calm" / "prometheus" / "prometheus.yml", d / "prometheus.yml")  # not a log
    return d


def test_bad_files_are_explained_and_accounted(garbage, tmp_path):
    res = ingest(garbage, tmp_path / "out", AnalyzeOptions())
    f = _files(res)
    for row in f.values():
        assert row["lines_parsed"] + row["lines_unrecognized"] == row["lines_total"], row["path"]
    assert f["empty.log"]["format"] == "empty" and f["empty.log"]["lines_total"] == 0
    assert f["core.bin"]["format"] == "binary" and "binary" in f["core.bin"]["messages"][0]
    assert f["core.bin"]["lines_parsed"] == 0
    assert any("truncated" in m for m in f["old-vllm.log.gz"]["messages"])
    assert f["old-vllm.log.gz"]["format"] == "vllm_server"
    assert 0 < f["old-vllm.log.gz"]["lines_total"] < f["vllm-server.log"]["lines_total"]
    assert any("UTF-8" in m for m in f["latin.log"]["messages"])
    assert f["latin.log"]["lines_total"] == f["vllm-server.log"]["lines_total"]
    assert f["huge.log"]["lines_total"] == 1
    assert f["zst-vllm.log.zst"]["lines_total"] == f["vllm-server.log"]["lines_total"]
    assert f["zst-vllm.log.zst"]["lines_parsed"] == f["vllm-server.log"]["lines_parsed"]
    assert f["prometheus.yml"]["format"] == "unknown"
    assert f["prometheus.yml"]["lines_unrecognized"] == f["prometheus.yml"]["lines_total"] == 10
    # the good file is parsed in full despite its neighbours
    stats = pl.read_parquet(tmp_path / "out" / "server_stats.parquet")
    assert stats.filter(pl.col("source") == "vllm-server.log").height == 86  # truth.json vllm.stats_lines


def test_inputs_are_never_modified(garbage, tmp_path):
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in garbage.iterdir()}
    ingest(garbage, tmp_path / "out", AnalyzeOptions())
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in garbage.iterdir()}
    assert before == after


def test_unrecognized_lines_are_grouped_by_shape(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "calm" / "prometheus" / "prometheus.yml"), d / "prometheus.yml")
    ingest(d, tmp_path / "out", AnalyzeOptions())
    u = pl.read_parquet(tmp_path / "out" / "unrecognized.parquet")
    assert u["count"].sum() == 10
    assert set(u.columns) == {"path", "shape", "count", "first_line_no", "examples"}
    row = u.filter(pl.col("shape").str.contains("scrape_interval")).row(0, named=True)
    assert row["shape"] == "scrape_interval: <N>s" and row["examples"] == ["  scrape_interval: 2s"]


def test_rotated_set_is_one_stream(tmp_path):
    src = need(SPIKE_LOG).read_bytes().split(b"\n")[:-1]
    d = tmp_path / "in"
    d.mkdir()
    # rotated right after a request was received, before vLLM added it: one request across the two files
    cut = next(i for i in range(len(src) // 2, len(src)) if b"Received request" in src[i]) + 1
    (d / "vllm.log.1").write_bytes(b"\n".join(src[:cut]) + b"\n")
    (d / "vllm.log").write_bytes(b"\n".join(src[cut:]) + b"\n")
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    f = _files(res)
    assert f["vllm.log"]["stream"] == f["vllm.log.1"]["stream"] == "vllm.log"  # relative, as the paths
    assert f["vllm.log"]["replica"] == f["vllm.log.1"]["replica"] == "vllm"
    assert any("one stream" in a for a in f["vllm.log"]["assumptions"])
    stats = pl.read_parquet(tmp_path / "out" / "server_stats.parquet")
    assert stats.filter(pl.col("origin") == "log").height == 86
    # seq keeps the older file first
    s = stats.sort("seq")
    assert s["source"][0] == "vllm.log.1" and s["ts"].is_sorted()
    # truth.json: 284 requests received; the one cut by the rotation is one request, named by its first file
    req = pl.read_parquet(tmp_path / "out" / "server_requests.parquet")
    assert req.height == req["request_id"].n_unique() == 284
    cut_id = src[cut - 1].split(b"Received request ")[1].split(b":")[0].decode()
    [row] = req.filter(pl.col("request_id") == cut_id).iter_rows(named=True)
    assert row["source"] == "vllm.log.1" and row["received_ts"] is not None and row["added_ts"] is not None


def test_output_folder_is_skipped_when_met(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(SPIKE_LOG), d / "vllm-server.log")
    ingest(d, d / "old-out", AnalyzeOptions())  # a previous run left its outputs inside
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    files = _files(res)
    read = [p for p, r in files.items() if r["format"] != "skipped"]
    assert read == ["vllm-server.log"]
    # every output of the old run is a row of its own, read of nothing, with why (issue #44)
    old = {p: r for p, r in files.items() if p.startswith("old-out/")}
    assert "old-out/files.parquet" in old and "old-out/.logscope-output" in old and len(old) == len(files) - 1
    assert all(r["messages"] == [sources.OWN_OUTPUT] and r["lines_total"] == 0 for r in old.values())


def test_the_tables_do_not_depend_on_where_the_folder_is(tmp_path):
    """The same folder reached by another path (a link; another mount point on a cluster's worker, which
    resolves it): every table equal, files.parquet's streams relative to the folder as its paths are."""
    d = tmp_path / "in" / "replica-0"
    d.mkdir(parents=True)
    (d / "vllm.log.1").write_bytes(need(SPIKE_LOG).read_bytes())
    (tmp_path / "elsewhere").symlink_to(tmp_path / "in")
    ingest(tmp_path / "in", tmp_path / "a", AnalyzeOptions())
    ingest(tmp_path / "elsewhere", tmp_path / "b", AnalyzeOptions())
    ta, tb = (
        {p.name: pl.read_parquet(p) for p in sorted(o.glob("*.parquet"))}
        for o in (tmp_path / "a", tmp_path / "b")
    )
    assert ta.keys() == tb.keys() and len(ta) >= 10
    assert [n for n in ta if not ta[n].equals(tb[n])] == []
    assert ta["files.parquet"]["stream"].to_list() == ["replica-0/vllm.log"]
