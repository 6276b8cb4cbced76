"""A trace file read in chunks of any size gives the spans (rows and values) and the coverage a whole read gives.

Read in 16 KiB chunks, traced-ladder's spans fell from 3,730 to 2,794 (traced-ladder-kill: 1,449 -> 951): the reader
cut a line longer than four chunks (its 65-79 KB OTLP export lines), unsaid, and the cut line then held every line
after it as one unclosed JSON value. With that mended, 64 KiB chunks still gave other values: a client span's role
('request': the parent of its attempts) came from the spans of its own chunk, and an exporter writes a parent after
its children; and a chunk of one span gave its duration another last digit than a chunk of many.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from conftest import DATA, LAB, ingest_files, need
from logscope.api import AnalyzeOptions, ingest
from parsers.base import MAX_LINE_CHARS

KEY = ["source", "line_no", "trace_id", "span_id"]
COVERAGE = ["path", "format", "lines_total", "lines_parsed", "lines_unrecognized", "messages"]
# each traced lab run's OTLP files: their spans and client requests whole (one 4 MiB chunk holds each file)
RUNS = {
    "traced-ladder": (3730, 1239),
    "traced-ladder-kill": (1449, 552),
    "traced-1r": (931, 303),
    "traced-2r-kill": (1897, 637),
}


def _read(tmp: Path, files: list[Path], chunk: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    res = ingest_files(tmp, *files, **({"chunk_bytes": chunk} if chunk else {}))
    spans = (
        res.table("spans").sort(KEY, nulls_last=True) if (res.out_dir / "spans.parquet").exists() else None
    )
    return spans, res.files.select(COVERAGE).sort("path")


@pytest.mark.parametrize("run", sorted(RUNS))
def test_lab_spans_are_the_same_at_any_chunk_size(tmp_path: Path, run: str) -> None:
    files = sorted(need(LAB / run).glob("otlp-*.jsonl"))
    whole, cov = _read(tmp_path / "whole", files, None)
    rows, requests = RUNS[run]
    assert whole.height == rows
    assert whole.filter((pl.col("layer") == "client") & (pl.col("role") == "request")).height == requests
    assert cov["lines_unrecognized"].sum() == 0 and cov["lines_parsed"].sum() == cov["lines_total"].sum()
    for chunk in (16 * 1024, 64 * 1024):
        spans, got = _read(tmp_path / f"at-{chunk}", files, chunk)
        assert_frame_equal(spans, whole)
        assert_frame_equal(got, cov)


# the other trace formats' real samples (each file alone), read in chunks far smaller than they are
SAMPLES = sorted(p for p in (DATA / "traces").glob("*/*") if p.suffix not in (".md", ".py"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sample_spans_are_the_same_in_small_chunks(tmp_path: Path, path: Path) -> None:
    whole, cov = _read(tmp_path / "whole", [path], None)
    assert whole is not None and whole.height > 0
    for chunk in (256, 1024):
        spans, got = _read(tmp_path / f"at-{chunk}", [path], chunk)
        assert_frame_equal(spans, whole)
        assert_frame_equal(got, cov)


@pytest.mark.parametrize("name", ["otlp-vllm-a.jsonl", "otlp-lab-client.jsonl"])
def test_a_cut_export_line_holds_no_line_after_it(tmp_path: Path, name: str) -> None:
    """An export line past MAX_LINE_CHARS (a Collector batch of thousands of spans; here the run's first exports
    joined into one, as the exporter writes a larger batch) is cut by the reader: it is counted unrecognized, and
    the exports after it are read. Before, the cut line opened a JSON value that never closed: every line after it
    was held in it and unrecognized, their spans lost."""
    lines = need(LAB / "traced-ladder" / name).read_text().splitlines()
    k, size = 0, 0
    while size <= MAX_LINE_CHARS:  # the fewest first lines whose export is longer than the cut
        size += len(lines[k])
        k += 1
    joined = {"resourceSpans": [rs for ln in lines[:k] for rs in json.loads(ln)["resourceSpans"]]}
    src = tmp_path / "in"
    src.mkdir()
    (src / name).write_text("\n".join([json.dumps(joined, separators=(",", ":")), *lines[k:]]) + "\n")
    res = ingest(src, tmp_path / "out", AnalyzeOptions())
    f = res.files.row(0, named=True)
    assert (f["lines_total"], f["lines_parsed"], f["lines_unrecognized"]) == (
        len(lines) - k + 1,
        len(lines) - k,
        1,
    )
    assert any(m.startswith("1 line(s) longer than 1,000,000 characters were cut") for m in f["messages"])
    whole, _ = _read(tmp_path / "whole", [LAB / "traced-ladder" / name], None)
    after = whole.filter(pl.col("line_no") > k)
    spans = res.table("spans")
    assert spans.height == after.height > 0
    assert (
        spans.select("trace_id", "span_id")
        .sort("span_id")
        .equals(after.select("trace_id", "span_id").sort("span_id"))
    )
    assert spans["line_no"].min() == 2
