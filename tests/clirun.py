"""Run the logscope CLI as a user does: ``python -m logscope`` in a subprocess, this checkout first on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "spike"
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 70, 130}  # README, exit codes


def env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def cli(
    *args: object, cwd: Path | None = None, timeout: float = 600, **extra: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logscope", *map(str, args)],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def start(*args: object, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "logscope", *map(str, args)],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("logscope: error:")]
