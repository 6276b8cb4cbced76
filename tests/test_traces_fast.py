"""OTLP JSON lines decoded at once (parsers/_otlp_columns.py) give the rows the per-value path gives, on the real
vLLM 0.32, httpx-client and SDK exports; a chunk the fast path cannot read exactly goes to the per-value path."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from conftest import DATA, LAB, need
from parsers import _otlp_columns, _tracefile, otlp_json
from parsers.base import ParseContext

CTX = ParseContext(source="x.jsonl", replica="x")
RUN = LAB / "traced-2r-kill"


def _chunk(path: Path) -> pl.DataFrame:
    lines = need(path).read_text().splitlines()
    return pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String}
    )


@pytest.mark.parametrize(
    "path",
    [
        RUN / "otlp-vllm-a.jsonl",
        RUN / "otlp-vllm-b.jsonl",
        RUN / "otlp-lab-client.jsonl",
        DATA / "traces/sdk/otlp-vllm-a.jsonl",
        DATA / "traces/sdk/otlp-lab-client.jsonl",
    ],
)
def test_fast_rows_equal_the_per_value_rows(path: Path) -> None:
    lines = _chunk(path)
    assert _otlp_columns.usable(lines, {}) is not None
    fast = otlp_json.parse_chunk(lines, CTX, {})
    slow = _tracefile.parse_chunk(lines, CTX, {}, otlp_json.convert)
    assert fast.recognized.all() and fast.recognized.equals(slow.recognized)
    a, b = fast.tables["spans"], slow.tables["spans"]
    assert a.height == b.height > 0
    assert a.equals(b), [c for c in a.columns if not a[c].equals(b[c])]


def test_real_vllm_attribute_types_kept() -> None:
    sp = otlp_json.parse_chunk(_chunk(RUN / "otlp-vllm-a.jsonl"), CTX, {}).tables["spans"]
    eng = sp.filter(pl.col("name") == "llm_request")
    assert eng.height == 528  # truth.json: vllm-a exported 528 llm_request spans
    rest = eng.select(pl.col("attributes").explode().struct.unnest()).unique(["key", "type"]).sort("key")
    assert dict(zip(rest["key"], rest["type"], strict=True)) == {
        "gen_ai.request.n": "int",
        "gen_ai.request.temperature": "double",
        "gen_ai.request.top_p": "double",
    }
    assert eng["queue_s"].null_count() == 0 and eng["prefill_s"].null_count() == 0


def test_chunk_the_fast_path_cannot_read_goes_per_value() -> None:
    lines = _chunk(RUN / "otlp-vllm-b.jsonl")
    # the file cut inside its last line (a writer killed mid-line): that line never decodes
    cut = lines.with_columns(
        pl.when(pl.col("line_no") == lines.height)
        .then(pl.col("line").str.head(300))
        .otherwise(pl.col("line"))
    )
    assert _otlp_columns.raw_spans(cut) is None  # the schema decode refuses the whole chunk
    got = otlp_json.parse_chunk(cut, CTX, state := {})
    assert got.tables["spans"].height == 79 - 2  # the cut line held 2 spans (the restart's last batch)
    # the cut line opened a value: counted in its chunk, given back at the end with the reason
    tail = otlp_json.finish(CTX, state)
    assert tail is not None and tail.lines_parsed == -1 and any("never closes" in m for m in tail.messages)
    # a value still open from the chunk before: per value too
    assert _otlp_columns.usable(lines, {"json": object()}) is None
