"""The benchmarks' generators read the lab recordings where the tests do: the repository's bundle, or
``$LOGSCOPE_SHARED/fixtures`` when that variable names a shared folder (tests/fixtures.py, ``root``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # a child process per generator (each imports polars)


@pytest.mark.parametrize("module", ["generate", "smallfiles"])
def test_a_generator_honours_logscope_shared(tmp_path, module):
    code = f"import {module}; print({module}.LAB)"
    env = {k: v for k, v in os.environ.items() if k != "LOGSCOPE_SHARED"}
    run = [sys.executable, "-c", code]
    there = subprocess.run(
        run, cwd=ROOT / "bench", env={**env, "LOGSCOPE_SHARED": str(tmp_path)}, capture_output=True, text=True
    )
    assert there.returncode == 0, there.stderr
    assert there.stdout.strip() == str(tmp_path / "fixtures" / "lab")
    here = subprocess.run(run, cwd=ROOT / "bench", env=env, capture_output=True, text=True)
    assert here.returncode == 0, here.stderr
    # without it, the repository's bundle unpacked (where the tests read it when the variable is not set)
    assert here.stdout.strip().startswith(str(ROOT / "tests" / ".fixtures")) and here.stdout.strip().endswith(
        "lab"
    )
