"""A large file, or a rotated set, of a format with SEGMENT_COUNTERS (vLLM) is read in pieces on every core,
and the tables are exactly those of a whole read, whether each piece's guessed state held or it was read
again (logscope.ingest.pieces)."""

from __future__ import annotations

import gzip
import re
import shutil
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

import logscope.parsers as parsers
from conftest import LAB, PUBLIC, ROOT, need
from logscope.ingest import IngestOptions, ingest, pieces, sources, streams

pytestmark = pytest.mark.slow  # segment reads of every lab log and public excerpt, several chunk sizes

SAMPLES = ROOT / "samples"


def _folder(tmp_path: Path, src: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir(parents=True)
    shutil.copy2(src, d / src.name)
    return d


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in sorted(out.glob("*.parquet"))}


def _same_as_whole_read(tmp_path: Path, log: Path, chunk: int, segments: int, **opts) -> None:
    src = _folder(tmp_path, log)
    whole = ingest(src, tmp_path / "whole", IngestOptions(workers=1, chunk_bytes=chunk))
    cut = ingest(
        src, tmp_path / "cut", IngestOptions(workers=2, chunk_bytes=chunk, segments=segments, **opts)
    )
    assert whole.files["format"].to_list() == ["vllm_server"]
    a, b = _tables(tmp_path / "whole"), _tables(tmp_path / "cut")
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].equals(b[name]), (log.name, name)
    cols = ["path", "format", "lines_total", "lines_parsed", "assumptions", "messages"]
    assert whole.files.select(cols).equals(cut.files.select(cols))


@pytest.mark.parametrize("run", ["retry-storm", "spike"])
def test_segments_give_the_rows_of_a_whole_read(tmp_path, held, run):
    log = SAMPLES / run / "vllm-server.log"
    _same_as_whole_read(tmp_path, log, chunk=8192, segments=6)
    # the file was cut, and the state guessed for each later segment (its first chunk and the MiB before
    # the cut replayed) was the true one: no segment was read twice
    assert held == {"kept": 5, "again": 0}
    rows = pl.read_parquet(tmp_path / "cut" / "server_request_events.parquet")
    assert rows.height > 500 and rows["seq"].is_sorted() and rows["seq"].n_unique() == rows.height


def test_a_wrong_guess_reads_the_segment_again(tmp_path, held, monkeypatch):
    """With no lines replayed before a cut, a record open across it is not guessed: those segments are
    read again in turn, and the rows are still those of a whole read."""
    monkeypatch.setattr(pieces, "SEGMENT_WINDOW", 0)
    _same_as_whole_read(tmp_path, SAMPLES / "retry-storm" / "vllm-server.log", chunk=8192, segments=8)
    assert held == {
        "kept": 0,
        "again": 7,
    }  # without the lines before a cut, its time and open record are unknown


def test_segments_spilled_to_parts(tmp_path, held):
    """Rows past the memory budget go to part files per segment; shifted and ordered all the same."""
    _same_as_whole_read(
        tmp_path, SAMPLES / "spike" / "vllm-server.log", chunk=8192, segments=4, memory_bytes=1
    )
    assert held["kept"] == 3


def test_every_lab_log(tmp_path, held):
    for log in sorted(need(LAB).glob("*/vllm-server.log")):
        _same_as_whole_read(tmp_path / log.parent.name, log, chunk=32768, segments=5)
    assert held["kept"] >= 20


@pytest.mark.parametrize(
    ("window", "chunk"), [(150, 256), (pieces.SEGMENT_WINDOW, 256), (pieces.SEGMENT_WINDOW, 48)]
)
def test_every_public_excerpt(tmp_path, held, monkeypatch, window, chunk):
    """The messy ones (glued records, wrapped lines, container stamps, tracebacks) cut every 256 bytes; at
    48-byte chunks a whole read emits every line over 192 bytes in two (its guard against endless lines),
    and so must the pieces, numbered alike."""
    monkeypatch.setattr(pieces, "SEGMENT_WINDOW", window)
    n = 0
    for log in sorted(need(PUBLIC).glob("*.log")):
        if parsers.detect(sources.head(sources.discover(log)[0])[0])[0] is not parsers.BY_NAME["vllm_server"]:
            continue
        _same_as_whole_read(tmp_path / log.stem, log, chunk=chunk, segments=8)
        n += 1
    assert n >= 20
    # a window of 150 bytes holds a short line or two: some guesses hold, others are read again
    assert held["kept"] > 0 and (window > 1000 or held["again"] > 0), held


@pytest.mark.parametrize("chunk", [4096, 64])
def test_spans_start_where_a_whole_read_starts_a_chunk(chunk):
    """The chunks of the spans are a whole read's, numbered alike (at 64 bytes, with lines over four chunks
    emitted in two by both)."""
    f = sources.discover(SAMPLES / "retry-storm" / "vllm-server.log")[0]
    whole = list(sources.iter_line_chunks(f, chunk))
    spans = sources.segments(f, 7, chunk)
    assert len(spans) == 7 and spans[0].start == 0 and spans[-1].stop is None
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:], strict=False))
    parts, first = [], 0
    for sp in spans:
        chunks = list(sources.iter_line_chunks(f, chunk, replace(sp, first_line=first)))
        parts += chunks
        first += sources.span_lines(f, sp, chunk)
        assert first == chunks[-1]["line_no"][-1]
    assert len(parts) == len(whole)
    assert all(a.equals(b) for a, b in zip(parts, whole, strict=True))


def test_spans_of_files_that_cannot_be_cut(tmp_path):
    gz = tmp_path / "vllm.log.gz"
    gz.write_bytes(b"")
    one_line = tmp_path / "one.log"
    one_line.write_text("x" * 100_000)  # no newline to cut after
    for p in (gz, one_line):
        assert sources.segments(sources.discover(p)[0], 4, 4096) == [sources.Span(0, 0, None)]


def test_the_plan(tmp_path):
    """A stream is cut when it is longer than its folder's share of a core: a file that long into segments of
    at least ``segment_bytes``, a rotated set into its files; a folder of many files keeps one stream each."""
    f = sources.discover(SAMPLES / "spike" / "vllm-server.log")[0]
    st = streams.FileState(f, "vllm_server", "server", 1.0, "r")
    mod = parsers.BY_NAME["vllm_server"]
    cost, cores = streams.cost([st]), streams.cores()
    pool = object()  # only its presence matters to the plan

    def plan(members, opts, share, pool=pool, mod=mod):
        return pieces.plan(members, mod, streams.Job(opts, (), None, pool, share, None))  # type: ignore[arg-type]

    small = IngestOptions(segment_bytes=f.size // 8, chunk_bytes=4096)
    alone = plan([st], small, cost / cores)  # the folder's only file
    assert alone is not None and len(alone) == min(cores, 8) >= 2
    assert alone[0].span.start == 0 and {pc.member for pc in alone} == {0}
    assert plan([st], small, 10 * cost / cores) is None  # a tenth of the folder
    assert plan([st], IngestOptions(), cost / cores) is None  # < 2 x 32 MiB
    assert plan([st], small, cost / cores, pool=None) is None  # one worker: no pool
    assert plan([st], small, cost / cores, mod=parsers.BY_NAME["nginx_access"]) is None
    assert plan([st], small, cost / cores, mod=None) is None  # a format logscope does not read
    # three files of a rotated set, each below the segment size: a piece each
    rotated = plan([st, st, st], IngestOptions(), 3 * cost / cores)
    assert rotated is not None and [pc.member for pc in rotated] == [0, 1, 2]


def _rotated(tmp_path: Path, log: Path, parts: int, gz: tuple[int, ...] = ()) -> Path:
    """``log`` as a RotatingFileHandler leaves it: ``name.{parts-1}`` (oldest) ... ``name``, cut before
    records (lines opening with a vLLM header), the files numbered in ``gz`` gzipped as logrotate does."""
    lines = log.read_bytes().splitlines(keepends=True)
    starts = [
        i
        for i, ln in enumerate(lines)
        if re.match(rb"(\(\w+ pid=\d+\) )?(INFO|WARNING|ERROR) \d\d-\d\d ", ln)
    ]
    cuts = [0] + [starts[len(starts) * k // parts] for k in range(1, parts)] + [len(lines)]
    d = tmp_path / "in"
    d.mkdir(parents=True)
    for k in range(parts):
        n = parts - 1 - k  # the oldest file first
        data = b"".join(lines[cuts[k] : cuts[k + 1]])
        name = log.name + (f".{n}" if n else "")
        if n in gz:
            (d / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (d / name).write_bytes(data)
    return d


@pytest.mark.parametrize("gz", [(), (1, 3)], ids=["plain", "gzipped"])
def test_a_rotated_set_gives_the_rows_of_a_whole_read(tmp_path, held, gz):
    """Each file of the set is a piece (and a plain one is cut again), guessed from the end of the file
    before it: the same rows, coverage and notes as the set read in order on one thread."""
    src = _rotated(tmp_path, SAMPLES / "retry-storm" / "vllm-server.log", 4, gz)
    whole = ingest(src, tmp_path / "whole", IngestOptions(workers=1, chunk_bytes=8192))
    cut = ingest(src, tmp_path / "cut", IngestOptions(workers=2, chunk_bytes=8192, segments=2))
    assert whole.files["format"].to_list() == ["vllm_server"] * 4
    assert sum(whole.files["lines_total"]) == 3543
    a, b = _tables(tmp_path / "whole"), _tables(tmp_path / "cut")
    for name in a:
        assert a[name].equals(b[name]), name
    cols = ["path", "format", "lines_total", "lines_parsed", "assumptions", "messages"]
    assert whole.files.select(cols).equals(cut.files.select(cols))
    # 4 files, the plain ones cut in 2: the pieces after the first were guessed right
    assert held == {"kept": 4 + 4 - len(gz) - 1, "again": 0}
    events = a["server_events"]
    assert events["source"].n_unique() >= 3  # rows of several files, the lines of each numbered from 1


def test_every_lab_log_rotated(tmp_path, held):
    for log in sorted(need(LAB).glob("*/vllm-server.log")):
        src = _rotated(tmp_path / log.parent.name, log, 3, gz=(2,))
        whole = ingest(src, tmp_path / log.parent.name / "whole", IngestOptions(workers=1, chunk_bytes=32768))
        cut = ingest(
            src, tmp_path / log.parent.name / "cut", IngestOptions(workers=2, chunk_bytes=32768, segments=2)
        )
        a, b = _tables(tmp_path / log.parent.name / "whole"), _tables(tmp_path / log.parent.name / "cut")
        for name in a:
            assert a[name].equals(b[name]), (log, name)
        assert whole.files.equals(cut.files)
    assert held["kept"] >= 20


def test_a_failing_chunk_stops_the_file_where_a_whole_read_stops(tmp_path, monkeypatch):
    """A parser failure in a segment read ahead is not believed: the segment is read again in turn and the
    file stops at the same chunk as a whole read, with the same rows kept and lines counted."""
    mod = parsers.BY_NAME["vllm_server"]
    real = mod.parse_chunk
    failed: list[int] = []

    def flaky(lines, ctx, state):
        if lines.height and lines["line_no"][0] > 2000:
            failed.append(lines["line_no"][0])
            raise ValueError("bad chunk")
        return real(lines, ctx, state)

    monkeypatch.setattr(mod, "parse_chunk", flaky)
    src = _folder(tmp_path, SAMPLES / "retry-storm" / "vllm-server.log")
    whole = ingest(src, tmp_path / "whole", IngestOptions(workers=1, chunk_bytes=8192))
    cut = ingest(src, tmp_path / "cut", IngestOptions(workers=2, chunk_bytes=8192, segments=5))
    cols = ["lines_total", "lines_parsed", "messages"]
    assert whole.files.select(cols).equals(cut.files.select(cols))
    assert "parser vllm_server failed: ValueError: bad chunk" in whole.files["messages"][0][0]
    assert 0 < whole.files["lines_parsed"][0] < whole.files["lines_total"][0] == 3543
    a, b = _tables(tmp_path / "whole"), _tables(tmp_path / "cut")
    for name in a:
        assert a[name].equals(b[name]), name
    assert (
        2000 <= a["server_request_events"]["line_no"].max() < min(failed)
    )  # up to the chunk before the failure


def test_progress_moves_while_one_file_is_read(tmp_path):
    """Progress comes by bytes read, not only when a file is done: a folder of one large log moves the bar,
    which never goes back (analyze: ingest up to 0.75, then its later stages)."""
    from logscope import api

    src = _folder(tmp_path, SAMPLES / "retry-storm" / "vllm-server.log")
    seen: list[tuple[str, float]] = []
    ingest(
        src,
        tmp_path / "out",
        IngestOptions(chunk_bytes=16 * 1024, segments=3),
        progress=lambda msg, frac: seen.append((msg, frac)),
    )
    fracs = [f for _, f in seen]
    assert len(seen) >= 10 and seen[0][0] == "reading vllm-server.log" and 0 < fracs[0] < 0.2
    assert seen[-1] == ("parsed vllm-server.log", 1.0)
    seen.clear()
    api.analyze(
        SAMPLES / "spike",
        tmp_path / "an",
        api.AnalyzeOptions(),
        progress=lambda msg, frac: seen.append((msg, frac)),
    )
    fracs = [f for _, f in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 0.95
    assert [m for m, _ in seen[-3:]] == ["correlating", "diagnosing", "rendering"]
    assert max(f for m, f in seen if m.startswith(("reading", "parsed"))) == 0.75


def test_the_lines_before_a_piece(tmp_path):
    """The replayed lines are the file's own, numbered as a whole read numbers them: before a cut, and at the
    end of a file (a gzipped one read through), whether or not the file ends with a newline."""
    raw = (SAMPLES / "spike" / "vllm-server.log").read_bytes()
    for name, data in (("nl.log", raw), ("no-nl.log", raw.rstrip(b"\n"))):
        plain = tmp_path / name
        plain.write_bytes(data)
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(data))
        whole = pl.concat(list(sources.iter_line_chunks(sources.discover(plain)[0])))
        for p in (plain, tmp_path / f"{name}.gz"):
            tail = sources.tail_lines(sources.discover(p)[0], 3000)
            assert 5 < tail.height < 100 and tail.equals(whole.tail(tail.height)), p.name
        k = 700  # the cut after line 700
        pos = sum(len(ln) + 1 for ln in data.split(b"\n")[:k])
        before = sources.lines_before(sources.discover(plain)[0], pos, 3000, k)
        assert 5 < before.height < 100 and before.equals(whole.slice(k - before.height, before.height))


def test_a_crlf_log(tmp_path, held):
    """A log whose lines end in CR LF (collected through a Windows share or some container runtimes)."""
    crlf = tmp_path / "vllm-server.log"
    crlf.write_bytes((SAMPLES / "spike" / "vllm-server.log").read_bytes().replace(b"\n", b"\r\n"))
    _same_as_whole_read(tmp_path / "run", crlf, chunk=8192, segments=5)
    assert held == {"kept": 4, "again": 0}


def test_an_access_log_in_pieces_as_a_cluster_reads_it(tmp_path, held, monkeypatch):
    """On a cluster a gateway's access log (independent chunks) is cut too: its pieces, read by the cluster's task
    functions (run here one after the other), keep the first chunk's state (none read twice) and give the rows
    of a whole read. In this process its chunks already run on every core: it is not cut here."""
    # the head a first chunk is joined up to (``streams.headed``) within the first of these forced segments of ~70
    # lines, as the 200 lines are within a real one (32 MiB at least)
    monkeypatch.setattr(streams, "HEAD_JOINED", 20)
    from logscope.cluster import ingest as on_cluster
    from logscope.cluster import tasks
    from logscope.ingest import stream_module

    src = _folder(tmp_path, SAMPLES / "spike" / "nginx-access.log")
    whole = ingest(src, tmp_path / "whole", IngestOptions(workers=1, chunk_bytes=8192))
    cut_into: list[int] = []

    def parse(stream_files, job):
        (members,) = stream_files
        mod = stream_module(members)
        assert (
            pieces.plan(members, mod, replace(job, pool=object())) is None
        )  # here: whole, chunks on every core
        plan = pieces.plan(members, mod, job, slots=128)
        cut_into.append(len(plan or []))
        counts = [
            tasks.count(members[pc.member].f, pc.span, job.opts.chunk_bytes)
            if pc.span.stop is not None
            else None
            for pc in plan
        ]
        head = tasks.head(members, job.opts, job.when)
        read = [
            tasks.piece(0, members, plan, p, counts[:p], head, job.opts, job.when, job.store.parts)
            for p in range(len(plan))
        ]
        on_cluster.take(
            job,
            members,
            tasks.settle(0, members, plan, counts, read, head, job.opts, job.when, job.store.parts),
        )

    ingest(src, tmp_path / "cut", IngestOptions(workers=1, chunk_bytes=8192, segments=4), parse=parse)
    assert cut_into == [4] and held == {"kept": 4, "again": 0}  # the first piece too: a task read it
    a, b = _tables(tmp_path / "whole"), _tables(tmp_path / "cut")
    assert whole.files["format"].to_list() == ["nginx_access"] and a.keys() == b.keys()
    assert a["gateway_attempts"].height == 297  # in its 284 lines: a retried request names two upstreams
    for name in a:
        assert a[name].equals(b[name]), name
