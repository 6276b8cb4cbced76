"""A format's line kinds as data: the TOML file beside its parser module (``prometheus_text.toml`` beside
``prometheus_text.py``), in the spirit of lnav's format files, compiled once into the plan the compiled scanner executes
(``logscope._scan.Plan``; the steps it may hold are listed in scan/src/spec.rs). A parser scans a chunk's lines with it
and gets each line's kind and fields as columns."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import polars as pl

from logscope import _scan


@functools.cache
def plan(module_file: str) -> _scan.Plan:
    """The compiled kinds of the format whose module is ``module_file`` (its ``__file__``)."""
    return _scan.Plan(spec(module_file)["kind"])


def spec(module_file: str) -> dict:
    """The file's kinds, each ``{ use = "NAME" }`` in a list of steps replaced by the steps ``[define]`` names (one
    description of a part that several places of a kind hold)."""
    got = tomllib.loads(Path(module_file).with_suffix(".toml").read_text(encoding="utf-8"))
    defined = got.pop("define", {})
    return _spliced(got, defined) if defined else got


def _spliced(obj, defined: dict):
    if isinstance(obj, dict):
        return {k: _spliced(v, defined) for k, v in obj.items()}
    if isinstance(obj, list):
        out = []
        for v in obj:
            if isinstance(v, dict) and list(v) == ["use"]:
                out.extend(_spliced(defined[v["use"]], defined))
            else:
                out.append(_spliced(v, defined))
        return out
    return obj


def index(module_file: str, name: str) -> int:
    """The index a kind's lines get in the scan's ``kind`` column."""
    return plan(module_file).kinds().index(name)


def scan(module_file: str, lines: pl.DataFrame) -> pl.DataFrame:
    """Every line's kind (its index; null: no kind matches) and fields."""
    return pl.DataFrame(plan(module_file).scan(lines.get_column("line")))


def rows(module_file: str, lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every line's kind, and a row for each line some kind matches (one per item of its list fields: ``row`` is the
    line's index), with the line's ``kind`` and fields."""
    kinds, got = plan(module_file).rows(lines.get_column("line"))
    kind = pl.DataFrame(kinds)
    out = pl.DataFrame(got)
    return kind, out.with_columns(kind["kind"].gather(out["row"]))
