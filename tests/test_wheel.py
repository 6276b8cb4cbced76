"""An installed wheel (not only the editable checkout) works from any directory: parsers and
report templates are inside it, in logscope's namespace, beside another project's package named `parsers`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # builds and installs a wheel


def test_wheel_runs_from_elsewhere(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("logscope-*.whl"))
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
        "import logscope, parsers, importlib.resources as r; import logscope.parsers as lp;"
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
