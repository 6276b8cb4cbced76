"""Shared test helpers. Real inputs only: the recordings and public excerpts of ../shared/fixtures, carried
in tests/data/fixtures (tests/fixtures.py), and the lab recordings copied into samples/ and tests/data/."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import fixtures
import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a CI run must not turn red by the luck of a seed); a run
# with HYPOTHESIS_PROFILE=explore draws new ones, and what it finds becomes a named test (test_scan_vllm_requests).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = fixtures.root()  # laid out as ../shared/fixtures
LAB = FIXTURES / "lab"
PUBLIC = FIXTURES / "vllm-public"
PUBLIC2 = FIXTURES / "public-2"
DATA = ROOT / "tests" / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/goldens/<format>/*.txt from this code's output (tests/test_goldens.py)",
    )


def need(path: Path) -> Path:
    """A fixture the repository carries: its absence is a failure, never a skip."""
    if not path.exists():
        pytest.fail(
            f"{path} is not here: tests/data/fixtures should carry it (python tests/fixtures.py bundle)"
        )
    return path


@pytest.fixture
def lab() -> Path:
    return need(LAB)


@pytest.fixture
def public() -> Path:
    return need(PUBLIC)


def ingest_files(tmp_path: Path, *files: Path, **opts):
    """Copy the given files into a fresh folder (inputs are never modified) and ingest them."""
    from logscope.api import AnalyzeOptions, ingest

    src = tmp_path / "in"
    src.mkdir(parents=True, exist_ok=True)
    for f in files:
        need(f)
        shutil.copy2(f, src / f.name)
    return ingest(src, tmp_path / "out", AnalyzeOptions(**opts))


@pytest.fixture
def held(monkeypatch) -> dict[str, int]:
    """How many segments kept their rows (the guessed state held) and how many were read again."""
    seen = {"kept": 0, "again": 0}
    from logscope.ingest import pieces

    real = pieces._rebase

    def spy(*args):
        res = real(*args)
        seen["kept" if res is not None else "again"] += 1
        return res

    monkeypatch.setattr(pieces, "_rebase", spy)
    return seen


@pytest.fixture(scope="session")
def analyzed(tmp_path_factory):
    """``analyzed(src, **opts)``: analyze of one file or folder alone (as its reporter's folder would hold it),
    once per session for each (src, opts): (out, summary.json, diagnosis.json)."""
    import json

    from logscope.api import AnalyzeOptions, analyze

    done: dict = {}

    def get(src: Path, **opts):
        key = (src, tuple(sorted(opts.items())))
        if key not in done:
            root = tmp_path_factory.mktemp(src.stem[:20])
            inp = root / "in"
            if src.is_file():
                inp.mkdir()
                shutil.copy2(need(src), inp / src.name)
            else:
                shutil.copytree(need(src), inp)
            out = root / "out"
            analyze(inp, out, AnalyzeOptions(**opts))
            done[key] = (
                out,
                json.loads((out / "summary.json").read_text()),
                json.loads((out / "diagnosis.json").read_text()),
            )
        return done[key]

    return get


@pytest.fixture(scope="session")
def lab_out(analyzed):
    """``lab_out(run)``: the analysis folder of the lab run named ``run`` (``analyzed``'s, once a session)."""
    return lambda run: analyzed(need(LAB / run))[0]


@pytest.fixture(scope="session")
def lab_diagnosed(tmp_path_factory) -> dict[str, dict]:
    """The diagnosis of a lab run (by name), made once a session when first asked for: each metamorphic test
    (tests/test_metamorphic*.py) compares a transformed copy with it."""
    from test_metamorphic import _diagnosed

    root = tmp_path_factory.mktemp("base")
    return _Made(lambda run: _diagnosed(need(LAB / run), root / run))


class _Made(dict):
    """A dict whose missing key's value is made (and kept) when first asked for."""

    def __init__(self, make) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key):
        self[key] = value = self._make(key)
        return value


@pytest.fixture
def rendered(capsys):
    """``rendered(out, summary)``: what a reader sees of one analysis besides summary.json (one object rendered
    everywhere): summary.md without Markdown's escapes, report.html unescaped, and the terminal's verdict on one line."""
    import html

    from logscope import terminal

    def get(out: Path, summary: dict) -> dict[str, str]:
        capsys.readouterr()  # what was printed before is not this analysis' verdict
        terminal.print_verdict(summary, {"report_html": out / "report.html"}, verbose=False)
        return {
            "summary.md": (out / "summary.md").read_text().replace("\\", ""),
            "report.html": html.unescape((out / "report.html").read_text()),
            "terminal": " ".join(capsys.readouterr().out.split()),
        }

    return get


@functools.cache
def real_vllm_lines(*more: str) -> tuple[str, ...]:
    """Every line of every real vLLM log the repository carries (the lab's server logs, the public excerpts and
    tests/data's vllm-404, vllm-deaths and vllm-pastes folders, plus the ``more`` tests/data folders named), in one
    order: the oracle tests of the compiled scanner read them all."""
    files = (
        sorted(LAB.glob("*/vllm-server*.log"))
        + sorted(PUBLIC.glob("*.log"))
        + sorted(PUBLIC2.rglob("*vllm*"))
    )
    folders = ("vllm-404", "vllm-deaths", "vllm-pastes", *more)
    files += sorted(p for d in folders for p in (DATA / d).rglob("*"))
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files if p.is_file())
    return tuple(text.split("\n"))


def vllm_rows(lines: list[str] | tuple[str, ...]):
    """vLLM's parser rows of these lines (header, time, kinds) as its line-kind steps get them: what the compiled
    scanner's oracle tests feed the old code and the new."""
    import polars as pl

    from logscope.parsers import _vllm_lines, _vllm_records
    from logscope.parsers.base import ParseContext

    frame = pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": list(lines)},
        schema={"line_no": pl.Int64, "line": pl.String},
    )
    df = _vllm_lines._parse(frame, {})
    df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("seq"))
    state: dict = {}
    df, _, _ = _vllm_lines._times(df, ParseContext(source="x", replica="r", year=2026), state)
    return _vllm_records._classify(df, state)
