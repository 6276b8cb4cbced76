"""The two runs of a comparison: each an analyze output folder (an input folder is analysed first).

Tables are read whole, without the analysis' --since/--until range: the settings a server started with
sit before any range, and per-request figures are chosen by the steps' own windows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from .. import schemas
from ..errors import LogscopeError

MARKERS = ("summary.json", "files.parquet")  # what an analyze output folder holds


@dataclass
class Run:
    label: str  # "A" or "B"
    given: str  # the path as given on the command line
    out: Path  # the analyze output folder read
    analysed_here: bool = False  # True when compare ran the analysis of an input folder
    _tables: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    _docs: dict[str, dict] = field(default_factory=dict, repr=False)
    cache: dict = field(
        default_factory=dict, repr=False
    )  # what the comparison reads once per run (histograms)

    def table(self, name: str) -> pl.DataFrame:
        """The whole table, or an empty frame of its declared schema when it is missing or unreadable."""
        if name not in self._tables:
            p = self.out / f"{name}.parquet"
            try:
                self._tables[name] = pl.read_parquet(p)
            except Exception:  # noqa: BLE001 - a missing table is an unknown, never a stop
                self._tables[name] = schemas.empty(name) if name in schemas.TABLES else pl.DataFrame()
        return self._tables[name]

    def doc(self, name: str) -> dict:
        """summary / diagnosis / correlation / ingest JSON as a dict ({} when missing: its figures are unknown)."""
        if name not in self._docs:
            try:
                d = json.loads((self.out / f"{name}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                d = {}
            self._docs[name] = d if isinstance(d, dict) else {}
        return self._docs[name]

    def input_root(self) -> Path | None:
        """The folder the logs were read from (ingest.json), when it still exists."""
        root = self.doc("ingest").get("input")
        if not isinstance(root, str):
            return None
        p = Path(root)
        return p if p.exists() else None


def is_output(p: Path) -> bool:
    return p.is_dir() and all((p / m).exists() for m in MARKERS)


def resolve(label: str, given: Path, out: Path, analyse) -> Run:
    """An analyze output as it is; an input folder analysed into ``out/run-<label>`` by ``analyse(src, dst)``."""
    if not given.exists():
        raise LogscopeError(
            f"{given} does not exist", hint="give two analyze output folders or two input folders", code=3
        )
    if is_output(given):
        return Run(label, str(given), given)
    if given.is_dir() and (given / "files.parquet").exists():
        raise LogscopeError(
            f"{given} holds an ingest but no analysis (no summary.json)",
            hint="run `logscope analyze` into it first, or give the input folder",
            code=3,
        )
    dst = out / f"run-{label.lower()}"
    analyse(given, dst)
    return Run(label, str(given), dst, analysed_here=True)
