"""Each command imports what it uses: ``logscope ingest`` of a real lab run loads none of the later stages'
packages (correlate, diagnose, report, compare), whose import was 0.05 CPU s of its start-up with bytecode cached
and 0.2 without (docs/performance.md, item 42). Read from ``sys.modules`` when the command has run."""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl

from conftest import LAB, need

LATER = ("logscope.correlate", "logscope.diagnose", "logscope.report", "logscope.compare", "logscope.cluster")


def _imported(code: str, cwd) -> set[str]:
    """The modules loaded once ``code`` has run (``python -X importtime`` misses those imported by
    ``importlib.import_module``, as the parsers' registry loads them)."""
    env = {**os.environ, "POLARS_MAX_THREADS": "1"}
    script = f"import sys\ntry:\n    {code}\nfinally:\n    print('\\n'.join(sorted(sys.modules)))"
    p = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=cwd, check=True
    )
    return set(p.stdout.split())


def test_ingest_loads_no_later_stage(tmp_path):
    src = need(LAB / "calm")
    out = tmp_path / "out"
    argv = ["logscope", "ingest", str(src), "-o", str(out), "-q"]
    mods = _imported(
        f"sys.argv = {argv!r}; import runpy; runpy.run_module('logscope', run_name='__main__')", tmp_path
    )
    assert "logscope.ingest" in mods and "logscope.parsers.vllm_server" in mods
    assert sorted(m for m in mods if m.startswith(LATER)) == []
    files = pl.read_parquet(out / "files.parquet")
    assert files.height == sum(1 for p in src.rglob("*") if p.is_file())
    assert pl.read_parquet(out / "server_stats.parquet").height > 0


def test_the_library_api_loads_no_later_stage_until_asked(tmp_path):
    mods = _imported("from logscope import api; api.AnalyzeOptions()", tmp_path)
    assert sorted(m for m in mods if m.startswith(LATER)) == []
    mods = _imported("from logscope import api; api.diagnose", tmp_path)
    assert "logscope.diagnose" not in mods
