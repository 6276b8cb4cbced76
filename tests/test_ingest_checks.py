"""The per-chunk checks before the store (``logscope.ingest.checks``, issue #42) give what the four steps they replace
gave (``numbers.clear``, ``schemas.conform``, ``outliers.clear``, ``store.compact``, kept here as the oracle): on
every table chunk of real lab logs, whole and with the numbers of their lines swept through absurd values (the fuzz
suite's mutation of the same files)."""

from __future__ import annotations

import sys

import polars as pl
import pytest

from conftest import LAB, ROOT, need
from logscope import numbers, schemas
from logscope.ingest import IngestOptions, checks, ingest, outliers
from logscope.ingest.store import compact

sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
import mutations  # noqa: E402  (the fuzz suite's mutations of real files)


def _oracle(df: pl.DataFrame, table: str, bounds: outliers.Bounds | None):
    df, n, example = numbers.clear(df, table, schemas.schema(table))
    df = schemas.conform(df, table)
    far = (0, None)
    if bounds is not None:
        df, m, far_example = outliers.clear(df, table, bounds)
        far = (m, far_example)
    return compact(df), (n, example), far


@pytest.fixture
def compared(monkeypatch):
    """Every call of ``checks.checked`` during an ingest, compared with the oracle: (table, suspect, values set
    null, rows whose time was set unknown)."""
    seen: list[tuple[str, bool, int, int]] = []
    real = checks.checked

    def both(df, table, bounds):
        got = real(df, table, bounds)
        want = _oracle(df, table, bounds)
        assert got[0].equals(want[0], null_equal=True), table
        assert got[0].schema == want[0].schema
        assert got[1:] == want[1:], table
        seen.append((table, checks.suspect(df, table, bounds), got[1][0], got[2][0]))
        return got

    monkeypatch.setattr(checks, "checked", both)
    return seen


def _folder(tmp_path, files: dict[str, bytes]):
    d = tmp_path / "in"
    d.mkdir()
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def test_checks_on_real_lab_logs_take_the_clean_path(tmp_path, compared):
    spike = LAB / "spike"
    names = [
        "vllm-server.log",
        "nginx-access.log",
        "nginx-error.log",
        "client-spike.jsonl",
        "client-spike.log",
    ]
    files = {n: need(spike / n).read_bytes() for n in names}
    files["nginx.conf"] = need(spike / "nginx.conf").read_bytes()
    res = ingest(_folder(tmp_path, files), tmp_path / "out", IngestOptions(chunk_bytes=64 * 1024))
    tables = {t for t, *_ in compared}
    assert {"gateway_attempts", "server_stats", "server_request_events", "client_attempts"} <= tables
    assert len(compared) >= 20  # 64 KiB chunks: several of each file
    # real logs hold no value no field can, and no time outside the folder's: every chunk took the clean path
    assert not any(s for _, s, _, _ in compared)
    assert res.files["lines_parsed"].sum() > 0
    nginx = pl.read_parquet(tmp_path / "out" / "gateway_attempts.parquet")
    lines = need(spike / "nginx-access.log").read_text().count("\n")
    assert nginx["line_no"].n_unique() == lines  # every access line gave its attempts


def test_checks_on_swept_numbers_and_bad_dates_count_as_before(tmp_path, compared):
    spike = LAB / "spike"
    server = mutations.sweep_numbers(need(spike / "vllm-server.log").read_bytes(), lines=25)
    access = mutations.sweep_numbers(need(spike / "nginx-access.log").read_bytes(), lines=3)
    client = mutations.sweep_numbers(need(spike / "client-spike.jsonl").read_bytes(), lines=3)
    files = {
        "vllm-server.log": server,
        "nginx-access.log": access,
        "nginx.conf": need(spike / "nginx.conf").read_bytes(),
        "client-spike.jsonl": client,
    }
    opts = IngestOptions(chunk_bytes=64 * 1024)
    res = ingest(_folder(tmp_path, files), tmp_path / "out", opts)
    by_table: dict[str, list[int]] = {}
    for table, suspect, n, far in compared:
        assert suspect or (n == 0 and far == 0)  # a chunk with a value to clear is never taken for clean
        t = by_table.setdefault(table, [0, 0, 0])
        t[0] += suspect
        t[1] += n
        t[2] += far
    # (chunks suspect, values set null, rows whose time was set unknown): the sweeps reach 84 of the gateway's
    # numbers in 2 chunks and one of the server's events; a client's epoch swept to 1e19 is no time of the folder's
    assert by_table["gateway_attempts"] == [2, 84, 0]
    assert by_table["server_events"] == [1, 1, 0]
    assert by_table["client_attempts"] == [1, 0, 1]
    assert by_table["server_stats"] == [0, 0, 0]  # the vLLM parser clears its own stats' numbers
    # and each file says how many it had, as before
    said = " ".join(m for ms in res.files["messages"].to_list() for m in (ms or []))
    assert "value(s) out of range" in said and "record(s) with a time outside" in said
