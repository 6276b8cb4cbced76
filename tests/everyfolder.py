"""Every real input the tests carry, analysed once: the lab recordings (LAB, tests/data/lab2, the pairs of
tests/data/pairs), every public excerpt (PUBLIC, PUBLIC2: each file alone, as its reporter's folder would hold
it) and every other folder under tests/data. ``analysed`` runs ``logscope analyze`` in-process, renders the
terminal's verdict with the CLI's own printer, and keeps what every output said (tests/test_claims_property.py).
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from conftest import DATA, LAB, PUBLIC, PUBLIC2

# folders of tests/data that are not one incident's logs: the bundle of fixtures (unpacked as LAB, PUBLIC and
# PUBLIC2) and the folders of lab runs (each run is a folder of its own)
NOT_FOLDERS = ("fixtures", "lab2", "pairs")


def folders() -> list[Path]:
    """Every folder of logs the repository carries, in a stable order."""
    out = sorted(p for p in LAB.iterdir() if p.is_dir())
    out += sorted(p for p in (DATA / "lab2").iterdir() if p.is_dir())
    out += sorted(
        p
        for pair in sorted((DATA / "pairs").iterdir())
        if pair.is_dir()
        for p in pair.iterdir()
        if p.is_dir()
    )
    out += sorted(p for p in DATA.iterdir() if p.is_dir() and p.name not in NOT_FOLDERS)
    return out


def excerpts() -> list[Path]:
    """Every public excerpt (one incident per file)."""
    return sorted(PUBLIC.glob("*.log")) + sorted(PUBLIC2.glob("*.log"))


def name(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


@dataclass
class Run:
    path: Path
    out: Path | None
    error: str | None = None  # analyze refused the folder (no file in a known format): its message
    summary: dict | None = None
    diagnosis: dict | None = None
    terminal: str = ""
    md: str = ""
    html: str = ""


def analysed(path: Path, root: Path) -> Run:
    """``logscope analyze`` of a folder (or of one excerpt, copied alone into a folder), and its outputs."""
    import html as h

    from rich.console import Console

    from logscope import terminal
    from logscope.api import AnalyzeOptions, analyze
    from logscope.errors import LogscopeError

    src = path
    if path.is_file():
        src = root / "in" / path.stem
        src.mkdir(parents=True)
        shutil.copy2(path, src / path.name)
    out = root / "out"
    try:
        paths = analyze(src, out, AnalyzeOptions())
    except LogscopeError as e:
        return Run(path, None, str(e))
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    buf = io.StringIO()
    saved = terminal.out
    terminal.out = Console(file=buf, width=100_000, soft_wrap=True, color_system=None)
    try:
        terminal.print_verdict(summary, paths, False)
    finally:
        terminal.out = saved
    return Run(
        path,
        out,
        None,
        summary,
        json.loads((out / "diagnosis.json").read_text(encoding="utf-8")),
        buf.getvalue(),
        (out / "summary.md").read_text(encoding="utf-8").replace("\\", ""),
        h.unescape((out / "report.html").read_text(encoding="utf-8")),
    )
