"""An installed wheel (not only the editable checkout) works from any directory: parsers and
report templates are inside it, in logscope's namespace, beside another project's package named `parsers`, with the
compiled scanner (logscope._scan); and so does a wheel built from the source distribution."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # builds and installs a wheel

# the builds share the checkout's cargo target folder: only the crate itself compiles again (a clean release build of
# its dependencies takes minutes on two cores)
CARGO = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "scan" / "target"))


def _wheel(source: Path, dist: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
        ],
        check=True,
        capture_output=True,
        env=CARGO,
    )
    return next(dist.glob("logscope-*.whl"))


def _packages() -> set[str]:
    """Every package of the source tree, by the name it is installed under."""
    installed = {"parsers": "logscope/parsers", "report_templates": "logscope/report_templates"}
    return {
        "/".join((installed.get(p.parts[0], p.parts[0]), *p.parts[1:]))
        for top in ("logscope", "parsers", "report_templates")
        for p in (q.parent.relative_to(ROOT) for q in (ROOT / top).rglob("__init__.py"))
    }


def test_wheel_holds_every_package_and_the_scanner(tmp_path):
    wheel = _wheel(ROOT, tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    have = {n.rpartition("/")[0] for n in names if n.endswith("/__init__.py")}
    assert _packages() - have == set()
    # nothing installed at the top of site-packages but logscope: another project's `parsers` would collide
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"logscope"}
    assert any(n.startswith("logscope/_scan.") and n.endswith(".so") for n in names)
    for data in (
        "logscope/report_templates/report.html.j2",
        "logscope/summary.schema.json",
        "logscope/py.typed",
    ):
        assert data in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_sdist_builds_a_wheel_that_runs(tmp_path):
    sdist = tmp_path / "sdist"
    subprocess.run(
        [sys.executable, "-m", "maturin", "sdist", "-o", str(sdist)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    _runs_from_elsewhere(_wheel(next(sdist.glob("logscope-*.tar.gz")), tmp_path / "dist"), tmp_path)


def test_wheel_runs_from_elsewhere(tmp_path):
    _runs_from_elsewhere(_wheel(ROOT, tmp_path / "dist"), tmp_path)


def _runs_from_elsewhere(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    # nothing but logscope at the top of the install: another project's `parsers` (here beside it) is its own
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) == [
        "bin",
        "logscope",
    ]
    other = tmp_path / "other"
    (other / "parsers").mkdir(parents=True)
    (other / "parsers" / "__init__.py").write_text("WHO = 'another project'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(other), str(target)]))
    probe = (
        "import logscope, parsers, importlib.resources as r; import logscope.parsers as lp; import logscope._scan;"
        "print(logscope.__file__); print(len(lp.FORMATS)); print(parsers.WHO);"
        "print(sorted(p.name for p in r.files('logscope.report_templates').iterdir() if p.name.endswith('.j2')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    lines = out.stdout.splitlines()
    assert Path(lines[0]).is_relative_to(target)
    assert int(lines[1]) >= 10
    assert lines[2] == "another project"
    assert lines[3] != "[]", "templates missing from the wheel"
    # the whole pipeline from the wheel, run outside the repo
    sample = ROOT / "samples" / "spike"
    r = subprocess.run(
        [sys.executable, "-m", "logscope", "analyze", str(sample), "-o", str(tmp_path / "out"), "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<html" in html and len(html) > 10_000
