"""vLLM's record logic (continuations, record ids, row kinds, the state carried between chunks) is one sequential pass
of the compiled scanner (scan/src/records.rs through parsers/_vllm_records.py, issue #42): the same columns and the same
carried state as the polars expressions it replaced (kept as the oracle in tests/vllm_classify_before.py), on every
real vLLM log of the fixtures cut into chunks, and on lines mutated from them."""

from __future__ import annotations

import copy

import polars as pl
import vllm_classify_before as before
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LAB, PUBLIC, PUBLIC2, real_vllm_lines
from logscope.parsers import _vllm_lines, _vllm_records
from logscope.parsers.base import ParseContext

COLS = ["uvr", "noise", "tbs", "other", "strong", "cont", "wrap", "ok", "stopping", "rec"]
# a record's first line without any header, not a raw traceback, as vllm_server counted it (a repair) before the pass
_BARE = (
    (pl.col("other") | (pl.col("tbs") & ~pl.col("strong")))
    & ~pl.col("cont")
    & (pl.col("msg").str.strip_chars() != "")
).alias("bare")


def _rows(lines: list[str] | tuple[str, ...]) -> pl.DataFrame:
    """The rows the record pass gets: the header scan's fields and the time (``vllm_rows`` before ``_classify``)."""
    frame = pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": list(lines)},
        schema={"line_no": pl.Int64, "line": pl.String},
    )
    df = _vllm_lines._parse(frame, {})
    df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("seq"))
    df, _, _ = _vllm_lines._times(df, ParseContext(source="x", replica="r", year=2026), {})
    return df


def _equal(df: pl.DataFrame, cuts: list[int]) -> pl.DataFrame:
    """The old code and the pass over ``df`` cut into chunks at ``cuts``, the state carried from chunk to chunk: every
    column and the state after each chunk equal. The pass's rows."""
    old_state: dict = {}
    new_state: dict = {}
    got = []
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < df.height)), df.height]
    for a, b in zip(bounds, bounds[1:], strict=False):
        chunk = df.slice(a, b - a)
        want = before.stopping(before._classify(chunk, old_state), old_state)
        new = _vllm_records._classify(chunk, new_state)
        assert new.select(COLS).equals(want.select(COLS))
        assert new_state == old_state
        assert new["bare"].equals(new.select(_BARE).to_series())
        got.append(new)
    return pl.concat(got) if got else df


def test_records_of_real_logs_as_polars_read_them():
    df = _rows(real_vllm_lines())
    # the chunk sizes ingest uses on a large log (4 MiB: ~12,000 lines) and smaller, cut anywhere in a record
    for size in (12_000, 2_000, 997):
        got = _equal(df, list(range(size, df.height, size)))
    assert got.height >= 70_000
    n = got.select(
        (~pl.col("cont")).sum().alias("records"),
        pl.col("cont").sum().alias("cont"),
        pl.col("tbs").sum().alias("tbs"),
        pl.col("strong").sum().alias("strong"),
        pl.col("wrap").sum().alias("wrap"),
        pl.col("noise").sum().alias("noise"),
        pl.col("uvr").sum().alias("uvr"),
        pl.col("stopping").sum().alias("stopping"),
        (~pl.col("ok")).sum().alias("unrecognised"),
    ).row(0, named=True)
    # every kind of row is there: multi-line records, raw tracebacks, hard-wrapped pastes, progress bars, uvicorn's
    # access lines, the lines after a shutdown began, and rows left unrecognised
    # (72,341 rows: 66,142 records, 6,199 rows continuing one, 688 traceback rows of which 75 only a traceback prints,
    # 21 wrapped, 469 noise, 22,010 uvicorn, 7,049 after a shutdown began, 117 unrecognised)
    assert n["records"] >= 60_000 and n["cont"] >= 5_000 and n["tbs"] >= 500 and n["strong"] >= 50
    assert n["wrap"] >= 15 and n["noise"] >= 400 and n["uvr"] >= 20_000 and n["stopping"] >= 5_000
    assert n["unrecognised"] >= 100
    assert got["rec"].is_sorted() and got["rec"][-1] == n["records"]


def test_records_of_each_real_log_as_polars_read_them():
    """Each log its own stream, as ingest reads it: vLLM 0.32's lab logs end all but the last line of a multi-line
    record with CR (a repeated header continues its record only after one), the public excerpts do not (an error's
    repeated header, or a traceback's line, continues it)."""
    files = (
        sorted(LAB.glob("*/vllm-server*.log"))
        + sorted(PUBLIC.glob("*.log"))
        + sorted(PUBLIC2.rglob("*vllm*"))
    )
    seen = {True: [0, 0], False: [0, 0]}  # CR or not: logs, rows continuing a record
    for path in files:
        lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")  # CRs kept
        df = _rows(lines)
        got = _equal(df, list(range(2_000, df.height, 2_000)))
        has_cr = bool(df["cr"].any())
        seen[has_cr][0] += 1
        seen[has_cr][1] += int(got["cont"].sum())
    # 28 logs with CR (5,894 rows continuing a record), 27 without (104)
    assert seen[True][0] >= 25 and seen[False][0] >= 25
    assert seen[True][1] >= 5_000 and seen[False][1] >= 100


def test_state_carried_from_a_guess_as_polars_carried_it():
    """A piece read in parallel starts from a guessed state (logscope.ingest.pieces): any state, not only one a
    previous chunk of the same rows left, is carried as the old code carried it."""
    df = _rows(real_vllm_lines())
    for prev in (
        {"plen": 200, "open": True, "cr": False, "key": None, "rec_ok": True},
        {"plen": 10, "open": False, "cr": True, "key": "ERROR 11-29 09:37:14 [core.py:12]", "rec_ok": False},
    ):
        for at in (0, 5_000, 40_000):
            chunk = df.slice(at, 600)
            old = {"prev": dict(prev), "rec": 7, "has_cr": prev["cr"], "stopping": True}
            new = copy.deepcopy(old)
            want = before.stopping(before._classify(chunk, old), old)
            got = _vllm_records._classify(chunk, new)
            assert got.select(COLS).equals(want.select(COLS)) and new == old


_REAL = None


def _real() -> list[str]:
    global _REAL
    if _REAL is None:
        _REAL = [x for x in real_vllm_lines() if x.strip()]
    return _REAL


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_records_of_mutated_lines_as_polars_read_them(data):
    real = _real()
    start = data.draw(st.integers(0, len(real) - 40))
    lines = []
    for line in real[start : start + 30]:
        if data.draw(st.integers(0, 2)) == 0:
            at = data.draw(st.integers(0, len(line)))
            cut = data.draw(st.integers(0, 8))
            ins = data.draw(
                st.lists(
                    st.sampled_from(
                        [
                            " ",
                            "\t",
                            "\u00a0",
                            "\u3000",
                            "é",
                            "Error",
                            "Traceback (most recent call last)",
                            '  File "',
                            "Exception",
                            "Exit",
                            ":",
                            "\r",
                            "^",
                            "Process x:",
                            '", line ',
                            ", in ",
                            "Capturing CUDA graph",
                            "WARNING ",
                            "ERROR ",
                            "INFO:  ",
                            "Shutting down",
                            "Starting vLLM",
                            "[shutdown]",
                            "(APIServer pid=1) ",
                        ]
                    ),
                    max_size=3,
                ).map("".join)
            )
            line = line[:at] + ins + line[at + cut :]
        lines.append(line)
    cuts = data.draw(st.lists(st.integers(1, 40), max_size=3))
    _equal(_rows(lines), cuts)
