"""A record that a rotation cut (logrotate cuts at a line, not at a record) is named by the file it began in.

SGLang's and TGI's parsers hold back each chunk's last record for the next chunk, where its lines may go on; read as
a rotated set, the record held back at the end of ``server.log.2`` was named by the file whose chunk completed it
(``server.log.1`` or ``server.log``) while keeping its first line's number in ``server.log.2``: 8864's scheduler
traceback was 'server.log line 2', a line of a file path. vLLM's parser named it by its own file already
(vllm_server._named_events); parsers/_carry.py now does so for these two, and for vLLM's (one mechanism). Each real log is cut in three at line
boundaries (tests/metamorphic.py ``rotate``, as logrotate leaves it) and must give the events of the whole file, each at
the same line of the set.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA, LAB, PUBLIC, need
from logscope.ingest import IngestOptions, ingest
from metamorphic import rotate

CASES = {  # a real log: the events whose record crosses a cut of the three-way rotation (file, line in the set)
    "sglang/8864-startup-sigquit-scheduler-exception.log": [("server.log.2", 2, "engine_dead")],
    "sglang/25887-finish-abort-headerless.log": [("server.log.2", 12, "engine_dead")],
    "unseen/tgi-1627-v1.4-launcher-shard-signal-4-cannot-start.log": [("server.log.1", 2, "engine_dead")],
    "unseen/tgi-2593-v3.0.2-v3-client-illegal-memory-access-clear-cache.log": [("server.log.1", 4, "error")],
}
FORMAT = {"sglang": "sglang_server", "unseen": "tgi_router"}
ROTATED = ("server.log.2", "server.log.1", "server.log")  # oldest first


def _events(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "server_events.parquet").sort("seq")


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_record_cut_by_a_rotation_keeps_its_file(name, tmp_path):
    log = need(DATA / name)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    for d in (whole, cut):
        d.mkdir()
        shutil.copyfile(log, d / "server.log")
    rotate(cut, "server.log", 3)
    got = ingest(cut, tmp_path / "cut-out", IngestOptions(workers=1))
    assert set(got.files["format"]) == {FORMAT[name.split("/")[0]]}
    ingest(whole, tmp_path / "whole-out", IngestOptions(workers=1))
    # where each line of the whole file is in the set: the files' first lines, oldest first
    sizes = [len((cut / f).read_bytes().splitlines()) for f in ROTATED]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]

    def placed(line: int) -> tuple[str, int]:
        k = max(i for i, s in enumerate(starts) if s < line)
        return ROTATED[k], line - starts[k]

    a, b = _events(tmp_path / "whole-out"), _events(tmp_path / "cut-out")
    same = ["kind", "ts", "message", "detail", "line_count"]
    assert a.select(same).equals(b.select(same))
    assert [placed(n) for n in a["line_no"]] == list(zip(b["source"], b["line_no"], strict=True))
    # the records the cut crossed (their first line's file is not the one whose chunk ended them)
    crossed = [
        (s, n, k)
        for s, n, k in zip(b["source"], b["line_no"], b["kind"], strict=True)
        if (s, n, k) in CASES[name]
    ]
    assert crossed == CASES[name]
    for s, n, k in crossed:  # the line named is the record's first: the one its message is read from
        [msg] = b.filter((pl.col("source") == s) & (pl.col("line_no") == n) & (pl.col("kind") == k))[
            "message"
        ]
        assert msg[:80] in (cut / s).read_text(encoding="utf-8").splitlines()[n - 1]


# a real vLLM log's traceback (its first line, its lines, its kind), which copytruncate cuts in the middle: 0.32's
# CR-joined record (the header on each line), a raw one ('Process EngineCore:'), V0's behind '[rank0]: '
VLLM = {
    "lab/enginecore-kill": (513, 44, "shutdown_error"),
    "lab/kv-short-refused": (79, 89, "kv_insufficient"),
    "vllm-public/47-v0-0.6.4-startup-0.31x-131072-maxseqlen-valueerror.log": (16, 17, "error"),
}


@pytest.mark.parametrize("name", sorted(VLLM))
@pytest.mark.parametrize(
    "opts",
    [
        IngestOptions(workers=1),
        IngestOptions(workers=1, chunk_bytes=4096),
        IngestOptions(workers=2, segments=2),
    ],
    ids=["whole", "4KiB-chunks", "pieces"],
)
def test_a_vllm_traceback_cut_by_copytruncate_keeps_its_file(name, opts, tmp_path):
    """vLLM's record carried by parsers/_carry.py as SGLang's and TGI's: a traceback that copytruncate cut (the log
    copied to ``vllm-server.log.1`` mid-traceback, the server writing the rest of it to ``vllm-server.log``) is one
    event named by the file and line where it began, its lines counted in both files; read whole, in chunks smaller
    than it, and as pieces (``vllm-server.log`` read ahead from a guessed state)."""
    run, _, log = name.partition("/")
    src = need(LAB / log / "vllm-server.log" if run == "lab" else PUBLIC / log)
    first, count, kind = VLLM[name]
    lines = io.BytesIO(src.read_bytes()).readlines()  # cut at LF only: vLLM's lone CRs stay in their line
    cut = first + count // 2  # the last line of .1: in the middle of the traceback
    whole, rotated = tmp_path / "whole", tmp_path / "rotated"
    for d in (whole, rotated):
        d.mkdir()
    (whole / "vllm-server.log").write_bytes(b"".join(lines))
    (rotated / "vllm-server.log.1").write_bytes(b"".join(lines[:cut]))
    (rotated / "vllm-server.log").write_bytes(b"".join(lines[cut:]))
    got = ingest(rotated, tmp_path / "rotated-out", opts)
    assert set(got.files["format"]) == {"vllm_server"}
    ingest(whole, tmp_path / "whole-out", IngestOptions(workers=1))
    a, b = _events(tmp_path / "whole-out"), _events(tmp_path / "rotated-out")
    same = ["kind", "ts", "message", "detail", "line_count"]
    assert a.select(same).equals(b.select(same))
    # each event at its line of the set: before the cut in .1, after it in the current file
    assert [
        ("vllm-server.log.1", n) if n <= cut else ("vllm-server.log", n - cut) for n in a["line_no"]
    ] == list(zip(b["source"], b["line_no"], strict=True))
    [tb] = b.filter((pl.col("line_no") == first) & (pl.col("source") == "vllm-server.log.1")).iter_rows(
        named=True
    )
    assert (tb["kind"], tb["line_count"]) == (kind, count)
    first_line = (rotated / "vllm-server.log.1").read_bytes().split(b"\n")[first - 1].decode()
    assert tb["message"][:60] in first_line
    assert tb["detail"].splitlines()[-1][:60] in (rotated / "vllm-server.log").read_text(encoding="utf-8")
