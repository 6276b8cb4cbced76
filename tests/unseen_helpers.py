"""What the tests of single real excerpts share (tests/test_unseen_samples.py, tests/test_tgi_router.py): a time in
UTC, one file ingested alone and its tables, and an excerpt of one quiet request checked in every rendering."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from conftest import ingest_files


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def ingest_one(tmp_path: Path, src: Path) -> tuple[Path, dict]:
    """``src`` ingested alone: the output folder and its row of files.parquet."""
    out = ingest_files(tmp_path, src).out_dir
    return out, pl.read_parquet(out / "files.parquet").row(0, named=True)


def table(out: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / f"{name}.parquet")


def quiet_request(analyzed, rendered, src: Path, span: str) -> dict:
    """``src`` analysed alone holds one request and nothing alarming: the range the verdict speaks of, ``span``, is
    the request's in summary.json and every rendering (the server is not said to be idle). Its row of requests."""
    out, s, _ = analyzed(src)
    assert s["verdict"][0] == f"Nothing alarming in {span}: no preemption, crash, queue or error episode."
    for name, text in rendered(out, s).items():
        assert span in text, name
        assert "nothing shows the server serving" not in text, name
    return table(out, "requests").row(0, named=True)
