"""logscope.scalars on a real table: a column's scalar read as the type its dtype gives, and a column of another
dtype than the code expects raised at once, naming what came (the engine span of the SDK's OTLP export,
tests/data/traces/INDEX.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from conftest import DATA, ingest_files
from logscope import scalars


@pytest.fixture(scope="module")
def spans(tmp_path_factory) -> pl.DataFrame:
    tmp = tmp_path_factory.mktemp("scalars")
    ingest_files(tmp, DATA / "traces" / "sdk" / "otlp-vllm-a.jsonl")
    return pl.read_parquet(tmp / "out" / "spans.parquet")


def test_a_columns_scalar_is_read_as_its_dtype_gives(spans: pl.DataFrame) -> None:
    eng = spans.filter(pl.col("name") == "llm_request")
    assert eng.height == 1
    start = scalars.time_value(eng["start"].max())
    assert start.tzinfo is not None and start == eng.row(0, named=True)["start"]
    assert datetime(2026, 1, 1, tzinfo=UTC) < start
    assert scalars.float_value(eng["ttft_s"].max()) == 0.011
    assert (
        scalars.int_value(eng["prompt_tokens"].sum()) == 128
        and scalars.int_or_none(eng["output_tokens"].max()) == 64
    )
    # an empty selection has no scalar: None where it may be, raised where the code needs one
    none = eng.filter(pl.col("name") == "no such span")
    assert (
        scalars.time_or_none(none["start"].max()) is None
        and scalars.float_or_none(none["ttft_s"].min()) is None
    )
    with pytest.raises(TypeError, match="a number was expected, not None"):
        scalars.float_value(none["ttft_s"].max())


def test_a_column_of_another_dtype_is_raised_naming_what_came(spans: pl.DataFrame) -> None:
    with pytest.raises(TypeError, match="a time was expected, not str 'llm_request'"):
        scalars.time_or_none(spans.filter(pl.col("name") == "llm_request")["name"].max())
    with pytest.raises(TypeError, match="a number was expected, not datetime"):
        scalars.float_or_none(spans["start"].min())
