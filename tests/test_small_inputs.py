"""Small inputs cost little (issue #44, item 7): a decompression bomb of empty lines stops at its cap in about a
second (a 1 MB gzip of 1 GiB of newlines took 51 s of CPU: 200 M empty lines, each a row, before the 200x byte
cap). docs/performance.md, item 43, has the per-file figures of ``bench/smallfiles.py`` before and after."""

from __future__ import annotations

import gzip
import shutil

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from logscope.ingest import sources


def test_a_bomb_of_empty_lines_stops_at_its_line_cap(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    member = gzip.compress(b"\n" * (1 << 20), compresslevel=9)  # 1 MiB of newlines in ~1 KB
    (d / "server.log.gz").write_bytes(member * 1024)  # 1 GiB once expanded (gzip reads member after member)
    size = (d / "server.log.gz").stat().st_size
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    (row,) = res.files.iter_rows(named=True)
    cap = max(sources.MAX_RATIO * size, sources.MIN_CAP) // sources.MIN_LINE_BYTES
    assert row["lines_total"] == cap < 10_000_000  # not the 200 M lines under the byte cap
    (said,) = [m for m in row["messages"] if "expands to more than" in m]
    assert said.startswith(f"gzip stream expands to more than {cap:,} lines")


def test_a_real_compressed_log_is_read_whole(tmp_path):
    """The line cap leaves real logs alone: the spike vLLM log and access log, gzipped, read to their last line."""
    d = tmp_path / "in"
    d.mkdir()
    for name in ("vllm-server.log", "nginx-access.log"):
        (d / f"{name}.gz").write_bytes(gzip.compress(need(LAB / "spike" / name).read_bytes()))
    shutil.copy(LAB / "spike" / "nginx.conf", d)
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    rows = {r["path"]: r for r in res.files.iter_rows(named=True)}
    for name in ("vllm-server.log", "nginx-access.log"):
        want = need(LAB / "spike" / name).read_bytes().count(b"\n")
        r = rows[f"{name}.gz"]
        assert r["lines_total"] == r["lines_parsed"] == want and not r["messages"], r
