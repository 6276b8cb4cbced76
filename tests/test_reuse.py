"""A second analyze of the same folder reuses the tables of the first (logscope.ingest.reuse), and only then."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from typer.testing import CliRunner

from conftest import ROOT
from logscope import ingest as ingest_mod
from logscope.api import AnalyzeOptions, analyze
from logscope.cli import app

SAMPLE = ROOT / "samples" / "retry-storm"


def _copy(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    shutil.copytree(SAMPLE, src)
    return src


def _parsed_at(out: Path) -> str:
    return json.loads((out / "ingest.json").read_text())["ingested_at"]


def _tables(out: Path) -> dict[str, int]:
    return {
        p.name: p.stat().st_mtime_ns
        for p in sorted(out.glob("*.parquet"))
        if p.stem in ingest_mod.PARSED_TABLES
    }


def test_same_files_are_not_parsed_again(tmp_path):
    src, out = _copy(tmp_path), tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    first = (out / "summary.json").read_text()
    stamp, tables = _parsed_at(out), _tables(out)
    res = ingest_mod.reuse(src, out)
    assert res is not None and res.reused
    assert res.files["lines_total"].sum() == json.loads(first)["inputs"]["lines_total"] > 0
    analyze(src, out, AnalyzeOptions())
    # no table was written again, and the report says the same thing
    assert _parsed_at(out) == stamp and _tables(out) == tables
    assert (out / "summary.json").read_text() == first


def test_a_changed_file_or_option_parses_again(tmp_path):
    src, out = _copy(tmp_path), tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    lines = json.loads((out / "summary.json").read_text())["inputs"]["lines_total"]
    assert ingest_mod.reuse(src, out, AnalyzeOptions(include_prompts=True).ingest_options()) is None
    assert ingest_mod.reuse(src, out, AnalyzeOptions(tz="Europe/Paris").ingest_options()) is None
    # a log that grew (a live file copied again): its size and time differ, so it is read again
    log = src / "client-storm.log"
    first_line = log.read_bytes().split(b"\n", 1)[0] + b"\n"
    with log.open("ab") as f:
        f.write(first_line)
    assert ingest_mod.reuse(src, out) is None
    analyze(src, out, AnalyzeOptions())
    assert json.loads((out / "summary.json").read_text())["inputs"]["lines_total"] == lines + 1
    # the same size, another modification time
    os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns - 10**9))
    assert ingest_mod.reuse(src, out) is None
    # a file added to the folder
    analyze(src, out, AnalyzeOptions())
    assert ingest_mod.reuse(src, out) is not None
    shutil.copy2(SAMPLE / "nginx-error.log", src / "nginx-error-2.log")
    assert ingest_mod.reuse(src, out) is None
    # the same files in another folder (the report names the folder it read)
    (src / "nginx-error-2.log").unlink()
    assert ingest_mod.reuse(src, out) is not None
    moved = src.rename(tmp_path / "moved")
    assert ingest_mod.reuse(moved, out) is None


def test_a_half_written_folder_or_other_code_is_not_reused(tmp_path, monkeypatch):
    src, out = _copy(tmp_path), tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    assert ingest_mod.reuse(src, out) is not None
    (out / "gateway_attempts.parquet").unlink()
    assert ingest_mod.reuse(src, out) is None
    analyze(src, out, AnalyzeOptions())
    assert (out / "gateway_attempts.parquet").exists()
    # another version of the parsers: the digest of the code differs
    monkeypatch.setattr(ingest_mod, "_code_digest", lambda: "0" * 16)
    assert ingest_mod.reuse(src, out) is None
    monkeypatch.undo()
    # an ingest that stopped half-way leaves no ingest.json behind (it is written last)
    real = ingest_mod.derive.finalize

    def boom(*a):
        raise RuntimeError("stopped")

    monkeypatch.setattr(ingest_mod.derive, "finalize", boom)
    try:
        ingest_mod.ingest(src, out)
    except RuntimeError:
        pass
    monkeypatch.setattr(ingest_mod.derive, "finalize", real)
    assert not (out / "ingest.json").exists() and ingest_mod.reuse(src, out) is None


def test_cli_says_so_and_reparse_parses(tmp_path):
    src, out = _copy(tmp_path), tmp_path / "out"
    runner = CliRunner()
    r = runner.invoke(app, ["analyze", str(src), "-o", str(out)], terminal_width=400)
    assert r.exit_code == 0 and "not parsed again" not in r.output
    stamp = _parsed_at(out)
    ingest_json = json.loads((out / "ingest.json").read_text())
    # the stamp has whole seconds: make the first parse visibly older than the next run
    ingest_json["ingested_at"] = "2026-01-01T00:00:00+00:00"
    (out / "ingest.json").write_text(json.dumps(ingest_json))
    r = runner.invoke(app, ["analyze", str(src), "-o", str(out)], terminal_width=400)
    assert r.exit_code == 0
    assert "the logs were not parsed again" in r.output and "same 7 files" in r.output
    assert _parsed_at(out) == "2026-01-01T00:00:00+00:00"
    r = runner.invoke(app, ["analyze", str(src), "-o", str(out), "--reparse"], terminal_width=400)
    assert r.exit_code == 0 and "not parsed again" not in r.output
    assert _parsed_at(out) >= stamp
