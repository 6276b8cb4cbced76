"""Every runtime dependency pyproject.toml declares earns its place: some module of logscope or parsers imports
it (issue #27: `regex` was declared and imported by none), and the typer pinned renders help as its users know."""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT

IMPORT_NAME = {"vl-convert-python": "vl_convert"}


def test_every_declared_dependency_is_imported():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    sources = "\n".join(p.read_text() for d in ("logscope", "parsers") for p in (ROOT / d).rglob("*.py"))
    for dep in deps:
        dist = re.match(r"[A-Za-z0-9_.-]+", dep).group(0)
        mod = IMPORT_NAME.get(dist, dist.replace("-", "_"))
        assert re.search(rf"^\s*(import|from) {re.escape(mod)}\b", sources, re.M), (
            f"{dist} is declared, never imported"
        )


def test_typer_is_pinned_below_the_help_change():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [typer] = [d for d in deps if d.startswith("typer")]
    assert "<0.27" in typer  # 0.27 shows `{input}`, `<bool>`, `<list[str]>` (tests/test_cli_contract.py)
