"""Golden outputs per format, as pygments keeps them for its lexers: a parser change is reviewed as a diff.

Each ``tests/goldens/<format>/<name>.txt`` begins with the line ``input: <path>`` naming a real input (a file
or a folder, under tests/data or, as ``LAB/<run>/<path>``, in a bundled lab recording); the rest of it is what
ingest makes of that input, written as text: the file's detected format, confidence, coverage, assumptions and
messages, then every table it filled, one row a line (a table past ``MAX_ROWS`` rows shows its first rows and the
digest of all of them, ``tests/golden.py``'s). The test ingests the input again and compares the text; a change
is refreshed with ``pytest tests/test_goldens.py --update-goldens`` (conftest.py) and read in ``git diff``
(``--word-diff`` for the long rows). Adding a case: a new file holding only its ``input:`` line, then
``--update-goldens`` (docs/formats.md).

The text is also held to the format of its folder: a golden of ``nginx_access/`` whose input is no longer detected
as nginx_access fails even after an update, so a detection change is seen as one.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

import golden
from conftest import DATA, LAB, ROOT, need
from logscope import parsers

# beside tests/data, not in it: the tests that read every file or folder of tests/data as logs must not
# read these texts as logs
GOLDENS = ROOT / "tests" / "goldens"
CASES = sorted(GOLDENS.glob("*/*.txt"))
MAX_ROWS = 40  # rows written per table; past that, the count and the digest of every row
HEAD = "input: "
# what the files table says of each file, in this order (path, bytes and times are in the row or the line counts)
FILE_FACTS = ("format", "kind", "confidence", "replica", "lines_total", "lines_parsed", "lines_unrecognized")


def _input(golden_file: Path) -> tuple[str, Path]:
    first = golden_file.read_text(encoding="utf-8").split("\n", 1)[0]
    assert first.startswith(HEAD), f"{golden_file}: its first line names its input ({HEAD}tests/data/...)"
    ref = first[len(HEAD) :].strip()
    if ref.startswith("LAB/"):
        return ref, need(LAB / ref[len("LAB/") :])
    assert ref.startswith("tests/data/"), f"{golden_file}: an input under tests/data/ or LAB/, not {ref}"
    return ref, need(DATA / ref[len("tests/data/") :])


def _value(v) -> str:
    """One value as text: strings JSON-quoted (control characters escaped), times in ISO 8601, floats exact."""
    if isinstance(v, datetime):
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v, ensure_ascii=True, default=str)


def _row(i: int, row: dict) -> str:
    return f"{i}: " + "  ".join(f"{k}={_value(v)}" for k, v in row.items() if v is not None)


def render(ref: str, src: Path, work: Path) -> str:
    """What ingest makes of ``src``, as the golden text (its first line ``input: ref``)."""
    from logscope.ingest import IngestOptions, ingest

    inp, out = work / "in", work / "out"
    shutil.rmtree(work, ignore_errors=True)
    if src.is_dir():
        shutil.copytree(src, inp)
    else:
        inp.mkdir(parents=True)
        shutil.copy(src, inp / src.name)
    for p in inp.rglob("*"):  # a scrape without timestamps sits at its file's time
        os.utime(p, (golden.MTIME, golden.MTIME))
    ingest(inp, out, IngestOptions())
    lines = [HEAD + ref]
    files = pl.read_parquet(out / "files.parquet").sort("path")
    for f in files.iter_rows(named=True):
        lines.append("")
        lines.append(f"file {_value(f['path'])}: " + "  ".join(f"{k}={_value(f[k])}" for k in FILE_FACTS))
        lines += [f"  assumes: {a}" for a in f["assumptions"] or []]
        lines += [f"  says: {m}" for m in f["messages"] or []]
    for p in sorted(out.glob("*.parquet")):
        df = pl.read_parquet(p)
        if p.stem == "files" or df.height == 0:
            continue
        lines.append("")
        lines.append(f"table {p.stem}: {df.height} rows")
        empty = [c for c in df.columns if df[c].null_count() == df.height]
        if empty:
            lines.append(f"  always null: {', '.join(empty)}")
        lines += [_row(i, r) for i, r in enumerate(df.head(MAX_ROWS).iter_rows(named=True), 1)]
        if df.height > MAX_ROWS:
            lines.append(
                f"... {df.height - MAX_ROWS} more rows; digest of all {df.height}: {golden.digest(df)}"
            )
    return "\n".join(lines).replace(str(inp), "<input>") + "\n"


@pytest.mark.parametrize("golden_file", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_the_format_gives_its_golden_text(golden_file: Path, tmp_path: Path, request) -> None:
    ref, src = _input(golden_file)
    got = render(ref, src, tmp_path / "work")
    fmt = golden_file.parent.name
    if request.config.getoption("--update-goldens"):
        golden_file.write_text(got, encoding="utf-8")
    want = golden_file.read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden", "now", n=1))
    assert got == want, f"{golden_file} differs (pytest --update-goldens rewrites it):\n{diff[:6000]}"
    detected = {
        line.split("format=", 1)[1].split()[0] for line in got.splitlines() if line.startswith("file ")
    }
    assert _value(fmt) in detected, f"{ref} is no longer detected as {fmt}: {detected}"


def test_every_registered_format_has_a_golden_of_a_real_input() -> None:
    have = {p.parent.name for p in CASES}
    assert have == set(parsers.BY_NAME), (
        f"no golden: {sorted(set(parsers.BY_NAME) - have)}; no such format: {sorted(have - set(parsers.BY_NAME))}"
    )
    for p in CASES:  # every input is there, and is real data of the repository, not text written for the test
        ref, src = _input(p)
        assert src.exists() and not str(src).startswith(str(GOLDENS)), ref


def test_the_text_escapes_what_a_log_line_can_hide() -> None:
    """Log text is attacker-controlled: a terminal escape or a bidi override in a value is written as an escape,
    so a golden's diff shows it instead of acting on the reader's terminal."""
    row = _row(1, {"path": "x\x1b]0;owned\x07\u202eexe.log", "status": 200, "t": None, "d": 0.1})
    assert row == '1: path="x\\u001b]0;owned\\u0007\\u202eexe.log"  status=200  d=0.1'
