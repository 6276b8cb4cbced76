"""One bad value costs at most its own line or field, and nothing vanishes unsaid. Each input is a real file
(lab fixture) copied to tmp_path with the damage applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest

SPIKE = LAB / "spike"


def _files(res) -> dict[str, dict]:
    return {r["path"]: r for r in res.files.iter_rows(named=True)}


def _vllm_lines() -> list[bytes]:
    return need(SPIKE / "vllm-server.log").read_bytes().split(b"\n")


def _stats_rows(lines: list[bytes]) -> list[int]:
    return [i for i, ln in enumerate(lines) if b"Running: " in ln and b"KV cache usage" in ln]


def test_an_overflowing_count_and_an_impossible_share_cost_their_field(tmp_path):
    lines = _vllm_lines()
    rows = _stats_rows(lines)
    run, kv = rows[0], rows[4]
    lines[run] = lines[run].replace(b"Running: 2 reqs", b"Running: 9223372036854775807 reqs")
    assert b"9223372036854775807" in lines[run]
    head, _, _ = lines[kv].partition(b"KV cache usage: ")
    lines[kv] = (
        lines[kv][: len(head)]
        + b"KV cache usage: 95000.0%"
        + lines[kv][lines[kv].index(b"%", len(head)) + 1 :]
    )
    d = tmp_path / "in"
    d.mkdir()
    (d / "vllm-server.log").write_bytes(b"\n".join(lines))
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    f = _files(res)["vllm-server.log"]
    assert f["lines_parsed"] == f["lines_total"] == len(lines) - 1  # the file ends with a newline
    stats = pl.read_parquet(tmp_path / "out" / "server_stats.parquet")
    assert stats.height == len(rows)
    assert stats.filter(pl.col("line_no") == run + 1)["running"].item() is None
    assert stats.filter(pl.col("line_no") == kv + 1)["kv_usage"].item() is None
    assert stats["kv_usage"].max() <= 1.0 and stats["running"].null_count() == 1
    said = [m for m in f["messages"] if "out of range" in m]
    assert (
        said
        and said[0].startswith("2 value(s)")
        and f"line {run + 1}: Running: 9223372036854775807" in said[0]
    )


def test_a_40_mb_line_is_one_line(tmp_path):
    lines = _vllm_lines()
    at = _stats_rows(lines)[0] + 1
    lines.insert(at, b"x" * 40_000_000)
    d = tmp_path / "in"
    d.mkdir()
    (d / "vllm-server.log").write_bytes(b"\n".join(lines))
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    f = _files(res)["vllm-server.log"]
    assert f["lines_total"] == (d / "vllm-server.log").read_bytes().count(b"\n")  # wc -l
    assert f["lines_unrecognized"] == 1
    assert any(m.startswith("1 line(s) longer than") for m in f["messages"])
    stats = pl.read_parquet(tmp_path / "out" / "server_stats.parquet")
    assert stats.height == len(_stats_rows(lines))
    assert stats["line_no"].max() == max(_stats_rows(lines)) + 1  # numbering after the long line holds


def test_a_stamp_that_is_no_time_is_counted(tmp_path):
    """02-29 in a common year, and a local time in the DST gap of --tz: the line takes the previous time, said."""
    lines = _vllm_lines()
    req = [i for i, ln in enumerate(lines) if b"Received request" in ln]
    a, b = req[10], req[20]
    lines[a] = lines[a].replace(b"INFO 11-29 ", b"INFO 02-29 ", 1)
    stamp = lines[b][lines[b].index(b"INFO ") + 5 :][:14]
    lines[b] = lines[b].replace(
        stamp, b"03-08 02:30:00", 1
    )  # 2026-03-08: clocks go 02:00 -> 03:00 in New York
    d = tmp_path / "in"
    d.mkdir()
    (d / "vllm-server.log").write_bytes(b"\n".join(lines))
    res = ingest(d, tmp_path / "out", AnalyzeOptions(tz="America/New_York"))
    f = _files(res)["vllm-server.log"]
    said = [m for m in f["messages"] if "no time" in m]
    assert said and said[0].startswith("2 record(s)") and f"line {a + 1}: 02-29" in said[0]
    assert f["first_ts"].year == f["last_ts"].year == 2026  # one bad month does not move the rest a year on
    ev = pl.read_parquet(tmp_path / "out" / "server_request_events.parquet")
    shifted = ev.filter(pl.col("line_no").is_in([a + 1, b + 1]))["ts"]  # the previous line's time
    assert shifted.len() == 2 and shifted.dt.date().cast(pl.String).to_list() == ["2026-11-29"] * 2


def test_nuls_bom_and_a_plain_gz_are_read(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    access = need(SPIKE / "nginx-access.log").read_bytes().split(b"\n")
    (d / "nginx-access.log").write_bytes(
        b"\n".join(access[:5]) + b"\n" + b"\0" * 3000 + b"\n".join(access[5:])
    )
    err = (SPIKE / "nginx-error.log").read_bytes().split(b"\n")
    (d / "nginx-error.log").write_bytes(
        b"\n".join(err[:150]) + b"\n" + b"\0" * 200_000 + b"\n".join(err[150:])
    )
    shutil.copy(SPIKE / "client-spike.log", d / "client-spike.log.gz")  # not compressed
    name = "query_range-num_requests_running.json"
    (d / name).write_bytes(b"\xef\xbb\xbf" + (SPIKE / "prometheus" / name).read_bytes())
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    f = _files(res)
    for p, src in (
        ("nginx-access.log", "nginx-access.log"),
        ("nginx-error.log", "nginx-error.log"),
        ("client-spike.log.gz", "client-spike.log"),
    ):
        want = (SPIKE / src).read_bytes().count(b"\n")
        assert f[p]["lines_parsed"] == f[p]["lines_total"] == want, p
    assert any("NUL bytes" in m for m in f["nginx-error.log"]["messages"])
    assert any("not gzip-compressed" in m for m in f["client-spike.log.gz"]["messages"])
    m = pl.read_parquet(tmp_path / "out" / "server_metrics.parquet")
    assert m.height == (SPIKE / "prometheus" / name).read_text().count("],[") + 1


def test_a_tsdb_dump_with_crlf_and_trailing_blanks_is_recognised(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    lines = need(SPIKE / "prometheus" / "tsdb-dump.txt").read_bytes().split(b"\n")[:2000]
    (d / "tsdb-dump.txt").write_bytes(b"".join(ln + b" \r\n" for ln in lines if ln))
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    f = _files(res)["tsdb-dump.txt"]
    assert f["format"] == "prometheus_tsdb_dump" and f["lines_parsed"] == f["lines_total"] == 2000
    assert pl.read_parquet(tmp_path / "out" / "server_metrics.parquet").height == 2000


def test_the_same_query_range_answer_twice_adds_no_rows(tmp_path):
    name = "query_range-num_requests_running.json"
    src = need(SPIKE / "prometheus" / name)
    for sub in ("a", "b"):
        (tmp_path / "in" / sub).mkdir(parents=True)
        shutil.copy(src, tmp_path / "in" / sub / name)
    res = ingest(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    f = _files(res)
    assert any(m.startswith("every line of it is in a/") for m in f[f"b/{name}"]["messages"])
    m = pl.read_parquet(tmp_path / "out" / "server_metrics.parquet")
    assert m.height == src.read_text().count("],[") + 1


def test_a_short_file_is_never_taken_for_an_earlier_collection(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    text = need(SPIKE / "nginx-error.log").read_text().split("\n")
    (d / "a-error.log").write_text("\n".join(text[:10]) + "\n")
    (d / "b-error.log").write_text("\n".join(text[:20]) + "\n")
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    assert pl.read_parquet(Path(res.out_dir) / "gateway_errors.parquet").height == 30
