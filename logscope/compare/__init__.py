"""``logscope compare A B [C …]``: did the one change help? Two runs of the same traffic side by side, or a sweep
of three or more that differ in one setting.

Each run is an analyze output folder (an input folder is analysed first, into ``OUT/run-<label>``). A pair
(logscope.compare.pair) says what changed between the runs (.settings, .gateway, .traffic), what moved per
matched step and over the whole runs, each figure on its clock (.moves, .sources, .engine), the trade (.trade)
and the verdict (.verdict); a sweep (.sweep) gives each run's working boundary and figures per step against the
setting. .render writes compare.json (schema: logscope/compare.schema.json), compare.md and compare.html.

Outputs are written as analyze writes its own (logscope.outdir): into a staging folder, published when the
comparison succeeds; a comparison that fails leaves nothing of its own (not even the analyses it made).
"""

from __future__ import annotations

import shutil
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import outdir
from ..errors import LogscopeError
from .runs import Run, resolve

COMPARE_FILES = ("compare.json", "compare.md", "compare.html")


@dataclass
class CompareOptions:
    command_line: str = ""
    slo: dict | None = (
        None  # {"ttft_s", "e2e_s", "success"}; None: the first run's (summary.json), else the next's
    )


def labels(n: int) -> list[str]:
    """A, B, … Z, then AA, AB, …"""
    letters = string.ascii_uppercase
    return [letters[i] if i < 26 else letters[i // 26 - 1] + letters[i % 26] for i in range(n)]


def load_runs(
    paths: list[Path], out: Path, analyse: Callable[[Path, Path], Any], made: list[Path] | None = None
) -> list[Run]:
    """The runs, labelled A, B, …: a path given twice is one analysis; an input folder is analysed into
    ``out/run-<label>`` (appended to ``made`` when this call created it)."""
    runs: list[Run] = []
    for label, p in zip(labels(len(paths)), paths, strict=True):
        same = next((r for r in runs if Path(r.given).resolve() == Path(p).resolve()), None)
        if same is not None:
            runs.append(Run(label, str(p), same.out, same.analysed_here))
            continue
        dst = Path(out) / f"run-{label.lower()}"
        existed = dst.exists()
        run = resolve(label, Path(p), Path(out), analyse)
        if run.analysed_here and not existed and made is not None:
            made.append(dst)
        runs.append(run)
    return runs


def check_count(paths: list[Path]) -> None:
    if len(paths) < 2:
        raise LogscopeError(
            "compare takes two runs (a pair) or more (a sweep)", hint="logscope compare A B [C …]", code=2
        )


def default_out(paths: list[Path]) -> str:
    """./logscope-compare-<A>-<B> for a pair, ./logscope-sweep-<A>-<last> for a sweep."""
    names = [Path(p).resolve().name for p in paths]
    kind = "compare" if len(names) == 2 else "sweep"
    return f"logscope-{kind}-{names[0]}-{names[-1]}"


def slo_given(ttft_s: float | None, e2e_s: float | None, success: float | None) -> dict | None:
    """The SLO fields given on the command line (None: the first run's)."""
    given = {k: v for k, v in (("ttft_s", ttft_s), ("e2e_s", e2e_s), ("success", success)) if v is not None}
    return given or None


def terminal_lines(doc: dict) -> list[str]:
    """The verdict the command prints (logscope.compare.render's)."""
    from .render import terminal_lines as lines

    return lines(doc)


def _check_out(out: Path) -> None:
    if (out / "summary.json").exists() or (out / "files.parquet").exists():
        raise LogscopeError(
            f"output folder {out} holds an analysis",
            hint="give compare a folder of its own (-o): its outputs would replace the analysis' marker",
            code=outdir.OUTPUT_CODE,
        )


def run(a: Path, b: Path, out: Path, options: CompareOptions, analyse: Callable[[Path, Path], Any]) -> dict:
    """Compare two runs, write the three files into ``out``, and return the document and the files' paths."""
    return _staged([Path(a), Path(b)], Path(out), options, analyse)


def run_sweep(
    paths: list[Path], out: Path, options: CompareOptions, analyse: Callable[[Path, Path], Any]
) -> dict:
    """Compare three or more runs of one traffic differing in one setting: the sweep's table and chart."""
    if len(paths) < 3:
        raise LogscopeError(
            "a sweep takes three runs or more", hint="compare two runs with compare A B", code=2
        )
    return _staged([Path(p) for p in paths], Path(out), options, analyse)


def _staged(paths: list[Path], out: Path, options: CompareOptions, analyse) -> dict:
    from . import pair, sweep
    from .render import write

    _check_out(out)
    with outdir.staged(out) as work:
        made: list[Path] = []
        try:
            runs = load_runs(paths, out, analyse, made)
            if len(runs) == 2:
                doc, extra = pair.build(runs[0], runs[1], options.command_line, options.slo)
            else:
                doc, extra = sweep.build(runs, options.command_line, options.slo)
            paths_out = write(work, doc, extra)
        except BaseException:
            for d in made:  # the analyses this comparison made: a failed one leaves nothing of its own
                shutil.rmtree(d, ignore_errors=True)
            raise
    return {"doc": doc, "paths": outdir.moved(paths_out, work, out)}
