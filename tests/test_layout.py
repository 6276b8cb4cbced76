"""The layout shows the pipeline: logscope/ holds the CLI, the library entry, the four stage packages, the
resources package and the shared modules; no module imports another that imports it back (at import time);
no module holds more than 320 statements."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGES = ("logscope", "parsers", "report_templates")
# the source folders installed inside logscope's namespace (pyproject's package-dir)
INSTALLED_AS = {"parsers": "logscope.parsers", "report_templates": "logscope.report_templates"}
# statements, not lines: `ruff format` spreads a call over as many lines as it likes, and a cap in lines
# squeezed code onto fewer. 320 statements is what the largest module held at the 500-line cap before
# formatting (ingest/__init__.py: 471 lines, 312 statements).
MAX_STATEMENTS = 320


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            parts[0] = INSTALLED_AS.get(parts[0], parts[0])
            out[".".join(parts)] = p
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules ``name`` imports when it is imported (top level only: a function's import runs later)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
    return {m for m in out if m in known and m != name}


def test_logscope_lists_the_stages_and_the_shared_modules():
    top = sorted(
        p.name
        for p in (ROOT / "logscope").iterdir()
        if not p.name.startswith(("_", ".")) or p.name in ("__init__.py", "__main__.py")
    )
    for stage in ("ingest", "correlate", "diagnose", "report"):
        assert (ROOT / "logscope" / stage / "__init__.py").exists(), stage
    assert (ROOT / "logscope" / "resources").is_dir() and "api.py" in top and "cli.py" in top
    # what ingest's modules were before the move is no longer beside the stages
    for moved in (
        "sources.py",
        "streams.py",
        "pieces.py",
        "envelopes.py",
        "store.py",
        "derive.py",
        "metric_stats.py",
        "unrecognized.py",
        "child_process.py",
        "budget.py",
        "memory.py",
        "time_range.py",
    ):
        assert moved not in top, moved


def test_no_import_circle():
    mods = _modules()
    known = set(mods)
    graph = {m: _imports(m, p, known) for m, p in mods.items()}
    # a package's entry imported by its own modules is the one allowed edge back (``from . import X`` of a
    # sibling passes through it); any other way back is a circle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if m.startswith(n + "."):  # a module importing its parent package (Python loads the parent first)
                continue
            if state.get(n) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(n) :] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_no_module_above_320_statements():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules().values()
        if (n := sum(isinstance(x, ast.stmt) for x in ast.walk(ast.parse(p.read_text(encoding="utf-8")))))
        > MAX_STATEMENTS
    }
    assert long == {}


def test_top_folders_are_linked_into_logscope():
    """parsers/ and report_templates/ sit at the top of the source tree and are installed inside logscope's namespace
    through the links logscope/parsers and logscope/report_templates (pyproject's [tool.maturin]; the wheel's
    contents: tests/test_wheel.py)."""
    for top, installed in INSTALLED_AS.items():
        link = ROOT / installed.replace(".", "/")
        assert link.is_symlink() and link.resolve() == (ROOT / top).resolve(), link
