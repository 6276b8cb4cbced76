"""The CLI is thin: options in, one library call, errors to exit codes."""

from __future__ import annotations

import shutil
import subprocess
import sys

import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import LAB, need
from logscope.cli import ExitCode, app

runner = CliRunner()


def test_formats_lists_every_registered_parser():
    import logscope.parsers as parsers

    r = runner.invoke(app, ["formats"], terminal_width=200)
    assert r.exit_code == 0
    for m in parsers.FORMATS:
        assert m.NAME in r.stdout


def test_missing_and_empty_input(tmp_path):
    r = runner.invoke(app, ["analyze", str(tmp_path / "nope")])
    assert r.exit_code == ExitCode.NO_INPUT and "does not exist" in r.stderr
    (tmp_path / "empty").mkdir()
    r = runner.invoke(app, ["analyze", str(tmp_path / "empty")])
    assert r.exit_code == ExitCode.NO_INPUT and "holds no files" in r.stderr


def test_output_inside_input_is_refused(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), d)
    r = runner.invoke(app, ["ingest", str(d), "-o", str(d / "out")])
    assert r.exit_code == ExitCode.OUTPUT and "inside the input" in r.stderr
    assert not (d / "out").exists()


def test_bad_fail_on_value(tmp_path):
    r = runner.invoke(app, ["analyze", str(tmp_path), "--fail-on", "meltdown"])
    assert r.exit_code == ExitCode.USAGE


def test_ingest_then_detect(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), d)
    shutil.copy(LAB / "spike" / "nginx-access.log", d)
    r = runner.invoke(app, ["ingest", str(d), "-o", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 0, r.stderr
    files = pl.read_parquet(tmp_path / "out" / "files.parquet")
    assert dict(zip(files["path"], files["format"], strict=True)) == {
        "nginx-access.log": "nginx_access",
        "vllm-server.log": "vllm_server",
    }
    r = runner.invoke(app, ["detect", str(d), "--scores"], terminal_width=250)
    assert r.exit_code == 0
    assert "vllm_server" in r.stdout and "nginx_access" in r.stdout and "100.0%" in r.stdout


@pytest.mark.slow  # a child process
def test_module_entry_point_version():
    r = subprocess.run([sys.executable, "-m", "logscope", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("logscope ")


def test_analyze_json_and_fail_on(tmp_path):
    """--json prints summary.json; --fail-on exits 1 only when an episode of that class exists
    (samples/spike holds one spike episode and no crash)."""
    import json

    from conftest import ROOT

    sample = ROOT / "samples" / "spike"
    r = runner.invoke(app, ["analyze", str(sample), "-o", str(tmp_path / "a"), "--json"])
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [e["class"] for e in summary["episodes"]] == ["spike"]
    r = runner.invoke(app, ["analyze", str(sample), "-o", str(tmp_path / "b"), "-q", "--fail-on", "crash"])
    assert r.exit_code == 0
    r = runner.invoke(app, ["analyze", str(sample), "-o", str(tmp_path / "c"), "-q", "--fail-on", "spike"])
    assert r.exit_code == ExitCode.FAIL_ON
    # re-render from the tables without re-parsing
    r = runner.invoke(app, ["report", str(tmp_path / "c"), "-q"])
    assert r.exit_code == 0
    assert (tmp_path / "c" / "report.html").stat().st_size > 10_000


def test_analyze_prints_the_verdict_and_finding_titles(tmp_path):
    """The terminal shows the verdict and each finding's title (what, which class, when), as summary.json
    has them (samples/spike: one spike of 136 preemptions)."""
    import json

    from conftest import ROOT

    r = runner.invoke(
        app, ["analyze", str(ROOT / "samples" / "spike"), "-o", str(tmp_path / "a")], terminal_width=400
    )
    assert r.exit_code == 0, r.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["verdict"][0].startswith("136 preemptions")
    shown = " ".join(r.stdout.split())  # the console wraps long lines
    for line in summary["verdict"]:
        assert " ".join(line.split()) in shown
    for f in summary["findings"][:3]:
        assert f"[{f['severity']}] {f['title']}" in shown
    assert summary["findings"][0]["title"].startswith("Spike")


def test_report_on_a_folder_without_tables(tmp_path):
    r = runner.invoke(app, ["report", str(tmp_path)])
    assert r.exit_code == ExitCode.NO_INPUT and "files.parquet" in r.stderr


def test_nothing_in_a_known_format(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "calm" / "prometheus" / "prometheus.yml"), d)
    r = runner.invoke(app, ["analyze", str(d), "-o", str(tmp_path / "out")])
    assert r.exit_code == ExitCode.NOTHING_PARSED
    assert "no file in a known format" in r.stderr and "prometheus.yml (unknown)" in r.stderr


def test_ingest_prints_each_message_whole(tmp_path):
    """A file's messages follow the table on lines of their own, whole even at 80 columns (a column of
    messages folded them into a strip): here the second copy of a log, whose rows are not added."""
    d = tmp_path / "in"
    (d / "again").mkdir(parents=True)
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), d)
    shutil.copy(LAB / "spike" / "vllm-server.log", d / "again")
    r = runner.invoke(app, ["ingest", str(d), "-o", str(tmp_path / "out")], terminal_width=80)
    assert r.exit_code == 0, r.stderr
    files = pl.read_parquet(tmp_path / "out" / "files.parquet").explode("messages").drop_nulls("messages")
    assert files.height == 1  # the copy's note, longer than 80 columns
    path, msg = files.row(0)[files.columns.index("path")], files["messages"].item()
    assert msg.startswith("every line of it is in ") and len(f"{path}: {msg}") > 80
    assert f"{path}: {msg}" in r.stdout.splitlines()


def test_full_disk_is_named_not_called_a_bug(tmp_path, monkeypatch):
    """A write to a full disk (the incident itself may be one) is an output error with a way out, not an
    'internal error' to report: whether Python raised it or polars did (as text, 'os error 28')."""
    import errno

    import polars.exceptions as ple

    from logscope import api

    (tmp_path / "in").mkdir()
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), tmp_path / "in")
    for exc in (
        OSError(errno.ENOSPC, "No space left on device"),
        ple.ComputeError("failed to write: No space left on device (os error 28)"),
    ):

        def full(*a, exc=exc, **k):
            raise exc

        monkeypatch.setattr(api, "ingest", full)
        r = runner.invoke(app, ["ingest", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "-q"])
        assert r.exit_code == ExitCode.OUTPUT, r.stderr
        assert "no space left on the output folder's device" in r.stderr and "internal error" not in r.stderr


@pytest.mark.slow  # a child process
def test_full_disk_for_real(tmp_path):
    """The same on a real 1 MB tmpfs (needs root to mount one; skipped elsewhere): the page alone is ~1.1 MB."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount permission)")
    try:
        r = runner.invoke(app, ["analyze", str(need(LAB / "spike")), "-o", str(mnt / "out"), "-q"])
        assert r.exit_code == ExitCode.OUTPUT, r.stderr
        assert "no space left on the output folder's device" in r.stderr
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
