"""The chunks of one file of an INDEPENDENT_CHUNKS format are parsed on several threads at once, and the
tables are exactly those of the one-thread parse (logscope.ingest.streams.parsed). Small files are not batched
here (``small_bytes=0``): each is cut into chunks of its own."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import polars as pl
import pytest

import logscope.parsers as parsers
from conftest import DATA, ROOT
from logscope.ingest import IngestOptions, ingest, streams

STORM = ROOT / "samples" / "retry-storm"
CASES = [
    # (files, chunk size): small chunks, so that every file is cut into many
    ([STORM / "nginx-access.log", STORM / "nginx-error.log", STORM / "nginx.conf"], 16 * 1024),
    ([DATA / "envoy" / "envoy-access.log", DATA / "envoy" / "envoy-access.json"], 512),
    ([DATA / "haproxy" / "haproxy.log", DATA / "haproxy" / "haproxy-traditional.log"], 512),
    ([DATA / "traefik" / "traefik-access.json"], 512),
]


def _folder(tmp_path: Path, files: list[Path]) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    for f in files:
        shutil.copy2(f, src / f.name)
    return src


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in sorted(out.glob("*.parquet"))}


@pytest.mark.parametrize(("files", "chunk"), CASES, ids=["nginx", "envoy", "haproxy", "traefik"])
def test_parallel_chunks_give_the_same_tables(tmp_path, files, chunk, monkeypatch):
    # a file's first chunks are joined into its head (``streams.headed``): of these samples of 26 lines, 4 only
    monkeypatch.setattr(streams, "HEAD_JOINED", 4)
    src = _folder(tmp_path, files)
    seq = ingest(src, tmp_path / "seq", IngestOptions(workers=1, chunk_bytes=chunk, small_bytes=0))
    threads: dict[str, set[str]] = {}
    for mod in parsers.FORMATS:
        if getattr(mod, "INDEPENDENT_CHUNKS", False):

            def spy(lines, ctx, state, _real=mod.parse_chunk):
                threads.setdefault(ctx.source, set()).add(threading.current_thread().name)
                return _real(lines, ctx, state)

            monkeypatch.setattr(mod, "parse_chunk", spy)
    par = ingest(src, tmp_path / "par", IngestOptions(workers=2, chunk_bytes=chunk, small_bytes=0))
    a, b = _tables(tmp_path / "seq"), _tables(tmp_path / "par")
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equals(b[name]), name
    rows = seq.files.select("path", "format", "lines_total", "lines_parsed", "assumptions", "messages")
    assert rows.equals(par.files.select(rows.columns))
    # every line of these real logs is read, and the gateway rows are there
    assert (seq.files["lines_total"] == seq.files["lines_parsed"]).all()
    assert a["gateway_attempts"].height > 10
    # the files were cut into chunks, parsed by the chunk threads as well as the stream's own
    chunked = [
        r["path"]
        for r in seq.files.iter_rows(named=True)
        if getattr(parsers.BY_NAME.get(r["format"]), "INDEPENDENT_CHUNKS", False)
    ]
    assert chunked
    for path in chunked:
        assert any(t.startswith("chunk") for t in threads[path]), (path, threads[path])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_chunk_keeps_the_rows_before_it(tmp_path, monkeypatch, workers):
    """On one thread or several, the same rows are kept and every line is still counted."""
    src = _folder(tmp_path, [STORM / "nginx-access.log"])
    mod = parsers.BY_NAME["nginx_access"]
    failed: list[int] = []
    real = mod.parse_chunk

    def flaky(lines, ctx, state):
        if lines["line_no"][0] > 600:  # every chunk after the one holding line 600 fails
            failed.append(lines["line_no"][0])
            raise ValueError("bad chunk")
        return real(lines, ctx, state)

    monkeypatch.setattr(mod, "parse_chunk", flaky)
    res = ingest(src, tmp_path / "out", IngestOptions(workers=workers, chunk_bytes=16 * 1024))
    row = res.files.row(0, named=True)
    assert any("parser nginx_access failed: ValueError: bad chunk" in m for m in row["messages"])
    kept = pl.read_parquet(tmp_path / "out" / "gateway_attempts.parquet")
    # the rows of the chunks before the first failing one, in order, and no row after it
    assert failed and 600 <= kept["line_no"].max() < min(failed) and kept["line_no"].is_sorted()
    assert kept["line_no"].n_unique() == min(failed) - 1  # every line before it (a retried one: several rows)
    assert row["lines_total"] == 1245 and row["lines_parsed"] == min(failed) - 1
    assert f"the {1245 - min(failed) + 1:,} lines not parsed count as unrecognized" in " ".join(
        row["messages"]
    )


def test_other_formats_stay_on_their_stream(tmp_path, monkeypatch):
    """A format that carries rows from chunk to chunk (vLLM records) never has its chunks parsed out of order
    (a large file of it is cut into segments instead, each parsed in order: test_ingest_segments.py)."""
    src = _folder(tmp_path, [STORM / "vllm-server.log"])
    mod = parsers.BY_NAME["vllm_server"]
    assert not getattr(mod, "INDEPENDENT_CHUNKS", False)
    seen: list[str] = []
    real = mod.parse_chunk
    monkeypatch.setattr(
        mod,
        "parse_chunk",
        lambda lines, ctx, state: seen.append(threading.current_thread().name) or real(lines, ctx, state),
    )
    ingest(src, tmp_path / "out", IngestOptions(workers=2, chunk_bytes=16 * 1024))
    assert len(seen) > 3 and not any(t.startswith("chunk") for t in seen)


def test_the_analysis_does_not_hang_on_the_order_files_are_read(tmp_path, monkeypatch):
    """The tables' rows come in path order; read in the reverse order, every row is the same and the
    correlation and diagnosis are the same bytes (the retry-storm sample: six streams, four layers)."""
    from logscope import api
    from logscope import ingest as ingest_mod

    api.analyze(STORM, tmp_path / "a", api.AnalyzeOptions())
    real = ingest_mod._streams
    monkeypatch.setattr(ingest_mod, "_streams", lambda states: list(reversed(real(states))))
    api.analyze(STORM, tmp_path / "b", api.AnalyzeOptions())
    for doc in ("correlation.json", "diagnosis.json"):
        assert (tmp_path / "a" / doc).read_text() == (tmp_path / "b" / doc).read_text(), doc
    a, b = _tables(tmp_path / "a"), _tables(tmp_path / "b")
    sources = a["client_attempts"]["source"].unique(maintain_order=True).to_list()
    assert sources == sorted(sources) and len(sources) == 2  # the client's log and its JSON lines
    for name in ("client_attempts", "gateway_attempts", "server_request_events", "requests"):
        x, y = a[name], b[name].select(a[name].columns)
        assert x.sort(x.columns, nulls_last=True).equals(y.sort(y.columns, nulls_last=True)), name


def test_chunks_parsed_ahead_of_a_starved_stream_stay_within_their_bytes(tmp_path):
    """The chunks a stream hands to the pool ahead of the one it takes (``streams.parsed``) are bounded by their bytes
    (``Job.ahead_bytes``, from --max-memory), not only by their count, and stay so when the stream's own thread is
    starved of CPU (it takes each result 20 ms late, while the pool parses at once): the lab retry storm's real
    nginx access log in chunks of 16 KiB, with room for two of them, never has more in flight than
    that; with no byte bound the same starved stream holds every core's chunk and one more, past it. The rows are
    those of a parse on the stream's own thread, in order."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from logscope.ingest import options, sources, streams
    from logscope.parsers.base import ParseContext

    f = next(
        x
        for x in sources.discover(_folder(tmp_path, [STORM / "nginx-access.log"]))
        if x.rel == "nginx-access.log"
    )
    mod = parsers.BY_NAME["nginx_access"]
    ctx = ParseContext(source=f.rel, replica="r", year=2025)

    def rows(pool, ahead_bytes):
        chunks = list(sources.iter_line_chunks(f, 16 * 1024))
        size = {id(c): c.estimated_size() for c in chunks}
        held, most = [0], [0]

        class Counted:  # the pool, counting the bytes it was handed and not yet taken back
            def submit(self, fn, chunk, *a):
                held[0] += size[id(chunk)]
                most[0] = max(most[0], held[0])
                return pool.submit(fn, chunk, *a)

        out = []
        for n, (chunk, res) in enumerate(
            streams.parsed(mod, iter(chunks), ctx, {}, pool and Counted(), ahead_bytes)
        ):
            if n:  # the first chunk sets the stream's state on its own thread
                held[0] -= size[id(chunk)]
                time.sleep(0.02)
            out.append(res.tables["gateway_attempts"])
        return pl.concat(out), most[0], max(size.values()), len(chunks)

    one, _, _, _ = rows(None, None)
    with ThreadPoolExecutor(max_workers=options.cores()) as pool:
        chunk = max(c.estimated_size() for c in sources.iter_line_chunks(f, 16 * 1024))
        bound = 2 * chunk
        bounded, most, largest, n = rows(pool, bound)
        free, most_free, _, _ = rows(pool, None)
    assert n > 20 and one.height > 1_000, (n, one.height)
    assert bounded.equals(one) and free.equals(one)
    assert most <= max(bound, largest), (most, bound)
    if (
        options.cores() >= 2
    ):  # unbounded by bytes, the count lets every core's chunk and one more be in flight
        assert most_free > bound, (most_free, bound)
