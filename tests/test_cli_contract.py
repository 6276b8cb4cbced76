"""The CLI keeps the README's word: each failure is a documented exit code with one clear error line, and
what it prints says what happened (issue #27). Every run is ``python -m logscope`` in a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from clirun import ROOT, SAMPLE, cli, env, error_lines

pytestmark = pytest.mark.slow  # the CLI in a child process, as a user runs it


def jpeg_folder(d):
    """A folder of real JPEG pictures (drawn by vl-convert), and nothing else."""
    import vl_convert

    d.mkdir(parents=True)
    spec = {
        "mark": "point",
        "data": {"values": [{"a": 1}]},
        "encoding": {"x": {"field": "a", "type": "quantitative"}},
    }
    (d / "dashboard.jpg").write_bytes(vl_convert.vegalite_to_jpeg(spec))
    (d / "grafana.jpeg").write_bytes(vl_convert.vegalite_to_jpeg(spec, scale=2))
    return d


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """samples/spike analysed once, its output piped (not a terminal), --fail-on spike (it holds one)."""
    out = tmp_path_factory.mktemp("contract") / "out"
    r = cli("analyze", SAMPLE, "-o", out, "--fail-on", "spike", "--fail-on", "crash")
    return r, out


def _no_traceback(r):
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("where", ["file", "proc", "sys", "dev"])
def test_unusable_output_is_exit_5(tmp_path, where):
    target = {
        "file": tmp_path / "a-file",
        "proc": "/proc/logscope-out",
        "sys": "/sys/kernel",
        "dev": "/dev/shm/x/..",
    }
    if where == "file":
        (tmp_path / "a-file").write_text("the user's\n")
    r = cli("analyze", SAMPLE, "-o", target[where])
    assert r.returncode == 5, r.stderr
    _no_traceback(r)
    assert len(error_lines(r.stderr)) == 1
    if where == "file":
        assert (tmp_path / "a-file").read_text() == "the user's\n"


def test_read_only_output_is_exit_5(tmp_path):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1M", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (not root, or no mount permission)")
    try:
        for out in (mnt, mnt / "out"):
            r = cli("ingest", SAMPLE, "-o", out)
            assert r.returncode == 5, r.stderr
            _no_traceback(r)
            assert "read-only" in error_lines(r.stderr)[0]
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("value", ["abc", "-5s", "0s", "1e9s", "1us", "2d", "100000000s", ""])
def test_bad_window_is_exit_2(tmp_path, value):
    r = cli("analyze", SAMPLE, "-o", tmp_path / "out", f"--window={value}")
    assert r.returncode == 2, r.stderr
    _no_traceback(r)
    [line] = error_lines(r.stderr)
    assert "--window" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["analyze", "ingest"])
@pytest.mark.parametrize("zone", ["Mars/Base", "Invalid/Zone", "../../etc/passwd", "localtime"])
def test_unknown_zone_is_exit_2(tmp_path, command, zone):
    r = cli(command, SAMPLE, "-o", tmp_path / "out", "--tz", zone)
    assert r.returncode == 2, r.stderr
    _no_traceback(r)
    [line] = error_lines(r.stderr)
    assert "--tz" in line and repr(zone) in line
    assert "Area/Location" in r.stderr  # the form a valid zone takes
    assert not (tmp_path / "out").exists()


def test_a_close_zone_is_named(tmp_path):
    r = cli("analyze", SAMPLE, "-o", tmp_path / "out", "--tz", "Europe/Pari")
    assert r.returncode == 2 and "Europe/Paris" in r.stderr


def test_jpeg_only_folder_names_each_file_and_why(tmp_path):
    d = jpeg_folder(tmp_path / "shots")
    r = cli("analyze", d, "-o", tmp_path / "out")
    assert r.returncode == 4, r.stderr
    [line] = error_lines(r.stderr)
    assert "dashboard.jpg (skipped): a JPEG image (its first bytes say so): not a log" in line
    assert "grafana.jpeg (skipped): a JPEG image (its first bytes say so): not a log" in line
    assert not (tmp_path / "out").exists()  # a failed run leaves no folder of empty tables
    r = cli("detect", d)
    assert r.returncode == 0, r.stderr
    assert (
        "dashboard.jpg: a JPEG image (its first bytes say so): not a log, not read" in r.stdout.splitlines()
    )
    assert "grafana.jpeg: a JPEG image (its first bytes say so): not a log, not read" in r.stdout.splitlines()


def test_fail_on_says_which_episode(analyzed):
    r, out = analyzed
    assert r.returncode == 1, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    [ep] = [e for e in summary["episodes"] if e["class"] == "spike"]
    assert "--fail-on crash,spike: 1 episode(s) matched" in r.stderr
    assert f"spike {ep['id']}: {ep['signal']} on {ep['replica']}, {ep['start']} → {ep['end']}" in r.stderr


def test_piped_output_is_not_wrapped(analyzed):
    r, out = analyzed
    summary = json.loads((out / "summary.json").read_text())
    long = [v for v in summary["verdict"] if len(v) > 80]
    assert long, "samples/spike's verdict has a line longer than 80 columns"
    for v in summary["verdict"]:
        assert v in r.stdout.splitlines()


def test_report_prints_the_new_verdict(analyzed, tmp_path):
    import shutil

    _, out = analyzed
    again = tmp_path / "again"
    shutil.copytree(out, again)
    r = cli("report", again, "--slo-ttft", "0.05")
    assert r.returncode == 0, r.stderr
    summary = json.loads((again / "summary.json").read_text())
    assert summary["slo"]["ttft_s"] == 0.05
    for v in summary["verdict"]:
        assert v in r.stdout.splitlines()
    assert f"report: {again / 'report.html'}" in r.stdout.splitlines()


def test_help_reads_as_typer_users_expect():
    r = cli("analyze", "--help", COLUMNS="200")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "Usage: logscope analyze [OPTIONS] DIR" in text
    for bad in ("{input}", "<bool>", "<list[str]>", "<str>", "<path>"):
        assert bad not in text, bad
    rows = [ln.strip("│ ") for ln in text.splitlines()]
    lines = {ln.split()[0]: ln for ln in rows if ln.startswith("--")}
    assert set(lines) >= {"--json", "--fail-on", "--tz", "--force", "--window"}
    assert "[default: UTC]" in lines["--tz"]
    assert lines["--json"].split()[1:3] == ["print", "summary.json"]  # a flag: no type shown
    assert (
        lines["--fail-on"].split()[1] == "[spike|sustained|recurring|crash]"
    )  # its choices, as typer lists them
    r = cli("report", "--help", COLUMNS="200")
    assert "Usage: logscope report [OPTIONS] OUT" in r.stdout


def test_usage_error_is_one_line(tmp_path):
    r = cli("analyze", SAMPLE, "--frobnicate")
    assert r.returncode == 2
    _no_traceback(r)
    [line] = error_lines(r.stderr)
    assert line.startswith("logscope: error: No such option: --frobnicate")
    assert "  help: logscope analyze --help" in r.stderr.splitlines()


_BOOM = (
    "import sys; import logscope.api as a\n"
    "def boom(*args, **kw): raise RuntimeError('a bug in diagnose')\n"
    "a.diagnose = boom\n"
    "from logscope.cli import run; sys.argv[0] = 'logscope'; run()\n"
)


def test_debug_writes_the_traceback_into_out(tmp_path):
    """A bug (here one put into diagnose for the test): without --debug, one line and no traceback; with it,
    the traceback and logscope's version in OUT's debug file, whose path the message gives."""
    out = tmp_path / "out"
    args = ["analyze", str(SAMPLE), "-o", str(out)]
    r = subprocess.run([sys.executable, "-c", _BOOM, *args], env=env(), capture_output=True, text=True)
    assert r.returncode == 70 and "Traceback" not in r.stderr
    assert "re-run with --debug" in r.stderr
    r = subprocess.run(
        [sys.executable, "-c", _BOOM, *args, "--debug"], env=env(), capture_output=True, text=True
    )
    assert r.returncode == 70
    dbg = out / "logscope-debug.txt"
    assert f"are in {dbg}" in r.stderr
    from logscope import __version__

    text = dbg.read_text()
    assert text.startswith(f"logscope {__version__}, Python ") and "RuntimeError: a bug in diagnose" in text
    assert "Traceback" in text and "in boom" in text
    assert not (out / "report.html").exists()  # nothing half-written beside it


def test_every_exit_code_is_in_the_usage_table():
    """One exit-code enum, one table: each code the CLI can return is a row of docs/usage.md's exit codes (130 for
    Ctrl-C was missing)."""
    from logscope.cli import ExitCode

    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    table = usage[usage.index("### Exit codes") :].split("\n## ", 1)[0]
    rows = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert rows == {int(c) for c in ExitCode}
