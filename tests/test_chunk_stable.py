"""The same input read in chunks of any size says the same: every table, and each file's stated assumptions.

Read in 16 KiB chunks, the lab's nginx access logs said "52 of the first lines match" (200 whole): the layout was
inferred from the first chunk's head, 52 lines there. And openai_client gave the assumptions of each chunk's state so
far: public-2's INDEX.md listed them in another order, and a log whose first chunk held no DEBUG line kept "no DEBUG
'Sending HTTP Request' lines" after its DEBUG lines came.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from openai_helpers import CTX, frame
from polars.testing import assert_frame_equal

from conftest import LAB, PUBLIC2, ingest_files, need
from logscope.api import AnalyzeOptions, ingest
from logscope.parsers import openai_client

SMALL = 16 * 1024
NO_DEBUG = "no DEBUG 'Sending HTTP Request' lines"
ATTEMPTS = {"spike": 66, "retry-storm": 71}  # of the cut's 400 lines


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    """Each table's rows in one order: a client's requests are written when they close, which in chunks is at
    another chunk's end (the same rows, in another order)."""
    out_ = {}
    for p in sorted(out.glob("*.parquet")):
        df = pl.read_parquet(p)
        flat = [c for c, t in df.schema.items() if not isinstance(t, pl.List | pl.Struct | pl.Array)]
        out_[p.stem] = df.sort(flat, nulls_last=True)
    return out_


@pytest.mark.parametrize("folder", [LAB / "spike", LAB / "retry-storm", PUBLIC2], ids=lambda p: p.name)
def test_every_table_is_the_same_in_16k_chunks(tmp_path: Path, folder: Path) -> None:
    whole = ingest(need(folder), tmp_path / "whole", AnalyzeOptions())
    small = ingest(folder, tmp_path / "small", AnalyzeOptions(chunk_bytes=SMALL))
    said = whole.files.select("path", "format", "assumptions").sort("path")
    assert_frame_equal(small.files.select(said.columns).sort("path"), said)
    a, b = _tables(whole.out_dir), _tables(small.out_dir)
    assert sorted(a) == sorted(b)
    for name in a:
        assert_frame_equal(b[name], a[name]), name
    if folder.name == "public-2":  # an openai_client read whose requests' retries were announced, unlogged
        index = said.filter(pl.col("path") == "INDEX.md").row(0, named=True)
        assert index["format"] == "openai_client"
        assert [x[:25] for x in index["assumptions"][3:]] == [
            "lines without a timestamp",
            "no DEBUG 'Sending HTTP Re",
            "N 'Retrying request ... i",
        ]
    else:  # the layout from the log's first 200 lines, at any chunk size
        (nginx,) = said.filter(pl.col("format") == "nginx_access")["assumptions"]
        assert "(200 of the first lines match: '$time_iso8601 msec=$msec" in nginx[0]


def _cut(run: str) -> list[str]:
    """A real openai-python DEBUG log cut where a request's httpx line begins it (as an excerpt or a rotated file
    starts): 400 lines, the first two an INFO 'HTTP Request' and a DEBUG 'HTTP Response', no 'Sending HTTP Request'."""
    (log,) = need(LAB / run).glob("client-*.log")
    lines = log.read_text().splitlines(keepends=True)
    k = next(i for i, x in enumerate(lines) if " INFO httpx " in x)
    head = "".join(lines[k : k + 2])
    assert len(head) <= 256 and "Sending HTTP Request" not in head and "Building HTTP" not in head
    return lines[k : k + 400]


@pytest.mark.parametrize("run", ["spike", "retry-storm"])
def test_openai_assumptions_are_the_whole_logs(run: str) -> None:
    """The parser itself, given the cut in chunks of 2 lines (its first chunk without DEBUG lines) or whole, states
    the same assumptions: none of them "no DEBUG lines"."""
    lines = [x.rstrip("\n") for x in _cut(run)]
    said = []
    for size in (len(lines), 2):
        state: dict = {}
        got: list[str] = []
        for at in range(0, len(lines), size):
            chunk = frame(lines[at : at + size]).with_columns(pl.col("line_no") + at)
            got += [a for a in openai_client.parse_chunk(chunk, CTX, state).assumptions if a not in got]
        end = openai_client.finish(CTX, state)
        assert end is not None
        said.append(got + [a for a in end.assumptions if a not in got])
    assert said[0] == said[1]
    assert len(said[0]) == 3 and not any(NO_DEBUG in a for a in said[0])


@pytest.mark.parametrize("run", ["spike", "retry-storm"])
def test_debug_lines_after_the_first_chunk_are_seen(tmp_path: Path, run: str) -> None:
    """The cut read by ingest in 256-byte chunks: the same assumptions and rows as whole (the client's first chunk is
    joined up to 200 lines: its DEBUG lines decide how attempts are grouped from the first)."""
    cut = tmp_path / "client-cut.log"
    cut.write_text("".join(_cut(run)))
    whole = ingest_files(tmp_path / "whole", cut)
    small = ingest_files(tmp_path / "small", cut, chunk_bytes=256)
    (said,) = whole.files["assumptions"].to_list()
    assert not any(NO_DEBUG in x for x in said)
    assert len(said) == 3  # timed lines, no announced retry, no other records: what every reading assumes
    assert small.files["assumptions"].to_list() == [said]
    assert whole.table("client_attempts").height == ATTEMPTS[run]
    a, b = _tables(whole.out_dir), _tables(small.out_dir)
    for name in ("client_attempts", "client_requests"):
        assert_frame_equal(b[name], a[name]), name
