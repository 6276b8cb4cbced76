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


def test_a_chunk_of_short_lines_is_cut_by_its_lines(tmp_path):
    """A chunk holds at most CHUNK_LINES lines whatever its bytes: 4 MiB of newlines was one chunk of 4 M rows."""
    p = tmp_path / "server.log"
    p.write_bytes(b"\n" * (3 * sources.CHUNK_LINES + 5))
    (f,) = sources.discover(tmp_path)
    heights = [c.height for c in sources.iter_line_chunks(f)]
    assert heights == [sources.CHUNK_LINES] * 3 + [5]


def _blank_tail(tmp_path, blanks: int):
    """enginecore-kill's vLLM log cut after its last traceback (line 556), then blank lines."""
    log = need(LAB / "enginecore-kill" / "vllm-server.log").read_text().splitlines(keepends=True)[:556]
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    (d / "vllm-server.log").write_text("".join(log) + "\n" * blanks)
    return d


def test_a_record_of_many_blank_lines_is_carried_bounded(tmp_path, monkeypatch):
    """The open record a parser carries to the next chunk stays bounded: blank lines after a log's last record
    (a bomb's newlines behind a vLLM log's head: 2.9 GB and 15 CPU s for 6.5 M lines) each joined it, and the
    whole record was carried and copied at every chunk. Its rows past MAX_RECORD_ROWS are counted, not carried:
    the same tables, its line_count whole."""
    from logscope.ingest import IngestOptions
    from logscope.ingest import ingest as ingest_tables
    from logscope.parsers import _carry

    src = _blank_tail(tmp_path, 200_000)
    carried: list[int] = []
    hold = _carry.hold

    def spy(r, ctx, state, cap=None):
        out = hold(r, ctx, state, cap)
        carried.append(state["carry"].height if state.get("carry") is not None else 0)
        return out

    monkeypatch.setattr(_carry, "hold", spy)
    monkeypatch.setattr(_carry, "MAX_RECORD_ROWS", 1_000)
    opts = IngestOptions(chunk_bytes=16 * 1024)  # 16,384 blank lines a chunk: the carry would grow at each
    bounded = ingest_tables(src, tmp_path / "bounded", opts)
    assert len(carried) > 12 and max(carried) <= 1_000
    monkeypatch.setattr(_carry, "MAX_RECORD_ROWS", 10**9)
    whole = ingest_tables(src, tmp_path / "whole", opts)
    for name in ("server_events", "server_stats", "server_request_events"):
        assert bounded.table(name).equals(whole.table(name)), name
    last = bounded.table("server_events").sort("line_no").tail(1).row(0, named=True)
    # the traceback's lines 515-556 (the log cut there: no shutdown after it, an error) and every blank line
    assert (last["kind"], last["line_no"], last["line_count"]) == ("error", 515, 42 + 200_000)
    (row,) = bounded.files.iter_rows(named=True)
    assert row["lines_total"] == row["lines_parsed"] == 556 + 200_000
