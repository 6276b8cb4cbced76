"""Exit codes in one place (logscope/errors.py): every raise and exit names an ``ExitCode`` member, docs/usage.md's
table is the enum's, and the CLI's one error boundary turns what a stage raises into that code."""

from __future__ import annotations

import ast
import functools
import re
import shutil

import pytest
from typer.testing import CliRunner

from conftest import LAB, ROOT, need
from logscope.cli import app
from logscope.errors import MEANINGS, ExitCode, LogscopeError, table

SOURCES = sorted([*(ROOT / "logscope").rglob("*.py"), *(ROOT / "parsers").glob("*.py")])
EXITS = {"Exit", "exit", "_exit", "SystemExit", "LogscopeError"}  # what takes an exit code


def _name(f: ast.expr) -> str | None:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _raw(v: ast.expr) -> bool:
    """An exit code written as a number, or as a module constant that holds one (``USAGE = 2``)."""
    if isinstance(v, ast.Constant):
        return isinstance(v.value, int) and not isinstance(v.value, bool)
    if isinstance(v, ast.IfExp):
        return _raw(v.body) or _raw(v.orelse)
    if isinstance(v, ast.Attribute):  # outdir.OUTPUT_CODE, cluster.EXIT; ExitCode.X is the one allowed
        return v.attr.isupper() and _name(v.value) != "ExitCode"
    return isinstance(v, ast.Name) and v.id.isupper()


def raw_codes(source: str) -> list[int]:
    """The lines where an exit or a LogscopeError is given a code that is no ``ExitCode`` member."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        codes = [k.value for k in node.keywords if k.arg in ("code", "exit_code")]
        if _name(node.func) in EXITS and _name(node.func) != "LogscopeError":
            codes += node.args[:1]
        bad += [node.lineno for v in codes if _raw(v)]
    return bad


def test_no_raise_or_exit_gives_a_raw_number():
    found = {str(p.relative_to(ROOT)): raw_codes(p.read_text(encoding="utf-8")) for p in SOURCES}
    assert len(SOURCES) > 150
    assert {p: lines for p, lines in found.items() if lines} == {}


def test_the_check_sees_each_form_of_a_raw_code():
    """The scan above would see what the old definitions and the raw ``code=`` numbers were."""
    bad = "USAGE = 2\nraise LogscopeError('x', code=3)\nraise LogscopeError('x', code=USAGE)\n"
    bad += "raise typer.Exit(3)\nsys.exit(130)\nsys.exit(c if c else 0)\nLogscopeError('x', code=outdir.OUTPUT_CODE)\n"
    good = "raise LogscopeError('x', code=ExitCode.USAGE)\nraise typer.Exit(e.code)\nsys.exit(ExitCode.OK)\n"
    good += "raise typer.Exit(errors.ExitCode.FAIL_ON)\n"
    assert raw_codes(bad) == [2, 3, 4, 5, 6, 7] and raw_codes(good) == []


def test_an_error_takes_only_a_member():
    assert LogscopeError("x").code is ExitCode.USAGE
    assert LogscopeError("x", code=3).code is ExitCode.NO_INPUT  # a pickled code comes back as the member
    with pytest.raises(ValueError):
        LogscopeError("x", code=42)


def _readme_table() -> str:
    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")  # the usage reference, out of the README
    section = usage.split("### Exit codes\n", 1)[1].split("\n#", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|")) + "\n"


def test_readme_table_is_the_enum():
    """docs/usage.md's table is ``python -m logscope.errors``'s output: one row per member, in order, no other code."""
    assert _readme_table() == table()
    codes = [int(m) for m in re.findall(r"^\| (\d+) \|", _readme_table(), re.M)]
    assert codes == [0, 1, 2, 3, 4, 5, 6, 7, 70, 130] == [int(c) for c in ExitCode]
    assert set(MEANINGS) == set(ExitCode)


runner = CliRunner()


@pytest.mark.slow  # a child process
def test_a_killed_ingest_is_not_a_finding(tmp_path, monkeypatch):
    """The ingest run apart (memory tight) killed by SIGKILL, as the OOM killer does: exit 7 and the signal said,
    never 1 (`--fail-on` matched) nor 70 (a bug)."""
    from logscope.ingest import child_process
    from logscope.resources import memory

    if not child_process.POSSIBLE:
        pytest.skip("the ingest runs apart on POSIX only")
    monkeypatch.setattr(memory, "tight", lambda root, budget: True)
    monkeypatch.setattr(
        child_process,
        "ingest",
        functools.partial(child_process.ingest, target="test_child_process:is_killed"),
    )
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), d)
    r = runner.invoke(app, ["analyze", str(d), "-o", str(tmp_path / "out"), "--fail-on", "crash", "-q"])
    assert r.exit_code == ExitCode.STAGE_DIED == 7, r.stderr
    assert "killed by signal 9 (SIGKILL" in r.stderr and "internal error" not in r.stderr


def test_the_boundary_says_a_library_error_and_a_bug(tmp_path, monkeypatch):
    """One boundary per command: a LogscopeError raised deep in a stage is its message, hint and code; anything
    else is exit 70 in one line, no traceback without --debug."""
    from logscope import api

    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), d)

    def refuses(*a, **k):
        raise LogscopeError("the stage refused", hint="do this instead", code=ExitCode.NOTHING_PARSED)

    monkeypatch.setattr(api, "ingest", refuses)
    r = runner.invoke(app, ["ingest", str(d), "-o", str(tmp_path / "o1")])
    assert r.exit_code == ExitCode.NOTHING_PARSED
    assert "logscope: error: the stage refused" in r.stderr and "help: do this instead" in r.stderr

    def bug(*a, **k):
        raise KeyError("a bug")

    monkeypatch.setattr(api, "ingest", bug)
    r = runner.invoke(app, ["ingest", str(d), "-o", str(tmp_path / "o2")])
    assert r.exit_code == ExitCode.INTERNAL and "internal error: KeyError" in r.stderr
    assert "Traceback" not in r.stderr and "re-run with --debug" in r.stderr
    r = runner.invoke(app, ["ingest", str(d), "-o", str(tmp_path / "o3"), "--debug"])
    assert r.exit_code == ExitCode.INTERNAL and "Traceback" in r.stderr
    assert "KeyError: 'a bug'" in (tmp_path / "o3" / "logscope-debug.txt").read_text()


def test_export_traces_without_an_analysis(tmp_path):
    r = runner.invoke(app, ["export-traces", str(tmp_path)])
    assert r.exit_code == ExitCode.NO_INPUT and "no analyze output here" in r.stderr


def test_the_old_definitions_are_gone():
    """cli.ExitCode is the one enum (kept importable there); the four other definitions do not come back."""
    from logscope import cli, cliargs, cluster, outdir, slo

    assert cli.ExitCode is ExitCode
    gone = [(cliargs, "USAGE"), (outdir, "OUTPUT_CODE"), (cluster, "EXIT"), (slo, "USAGE")]
    assert [f"{m.__name__}.{n}" for m, n in gone if hasattr(m, n)] == []
