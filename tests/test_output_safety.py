"""The output folder is safe (issue #27): a user's folder is never overwritten without --force, outputs appear
whole or not at all, two runs take turns, a killed run leaves the previous outputs, and nothing is written
beside the input. Every run is ``python -m logscope`` in a subprocess; the outputs are checked on disk."""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest

from clirun import SAMPLE, cli, error_lines, start
from logscope import outdir

OUTPUTS = ("report.html", "summary.json", "summary.md", "files.parquet", "requests.parquet", "ingest.json")


def _snapshot(out):
    return {n: (out / n).read_bytes() for n in OUTPUTS}


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """samples/spike analysed once into a folder of its own."""
    out = tmp_path_factory.mktemp("safety") / "out"
    r = cli("analyze", SAMPLE, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    return out


def _users_folder(d):
    d.mkdir()
    (d / "summary.md").write_text("my notes on the incident\n")
    (d / "report.html").write_text("<html>the report I wrote for my manager</html>\n")
    (d / "_parts").mkdir()
    (d / "_parts" / "keep.txt").write_text("mine\n")
    return {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def test_a_users_folder_is_refused_without_force(tmp_path):
    d = tmp_path / "mine"
    before = _users_folder(d)
    r = cli("analyze", SAMPLE, "-o", d)
    assert r.returncode == 5, r.stderr
    [line] = error_lines(r.stderr)
    assert "holds files logscope did not write (_parts, report.html, summary.md)" in line
    assert "--force" in r.stderr
    assert {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()} == before


def test_force_replaces_only_logscopes_names(tmp_path):
    d = tmp_path / "mine"
    _users_folder(d)
    (d / "notes.txt").write_text("keep me\n")
    r = cli("ingest", SAMPLE, "-o", d, "-q", "--force")
    assert r.returncode == 0, r.stderr
    assert (d / "_parts" / "keep.txt").read_text() == "mine\n"  # ingest's spill folder is its own, elsewhere
    assert (d / "notes.txt").read_text() == "keep me\n"
    assert (d / "summary.md").read_text() == "my notes on the incident\n"  # ingest writes no summary.md
    assert (d / "files.parquet").is_file()
    marked = json.loads((d / outdir.MARKER).read_text())["files"]
    assert "files.parquet" in marked and "notes.txt" not in marked and "summary.md" not in marked


def test_a_failed_run_leaves_the_previous_outputs(done, tmp_path):
    """A run that fails (no file in a known format: exit 4) into a folder holding a good analysis leaves it
    as it was, and into a new folder leaves no folder at all."""
    out = tmp_path / "out"
    shutil.copytree(done, out)
    before = _snapshot(out)
    (tmp_path / "conf").mkdir()
    shutil.copy(SAMPLE / "prometheus" / "tsdb-dump.txt.gz", tmp_path / "conf" / "dump.bin")  # not text
    for target in (out, tmp_path / "new"):
        r = cli("ingest", tmp_path / "conf", "-o", target)
        assert r.returncode == 4, r.stderr
    assert _snapshot(out) == before
    assert not (tmp_path / "new").exists()
    assert not list(out.glob(f"{outdir.STAGING}*"))


def test_two_runs_on_one_folder_take_turns(done, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(done, out)
    runs = [start("analyze", SAMPLE, "-o", out, "--reparse", "-q") for _ in range(2)]
    results = [(p.wait(timeout=900), p.stderr.read()) for p in runs]
    for p in runs:
        p.stdout.close()
        p.stderr.close()
    assert [rc for rc, _ in results] == [0, 0], results
    assert any(
        "is being written by another logscope" in e and "waiting for it to finish" in e for _, e in results
    )
    assert json.loads((out / "summary.json").read_text())["verdict"]
    assert (out / "report.html").read_text().rstrip().endswith("</html>")


def _kill_when_staging(p, out, what: str, timeout: float = 300) -> None:
    """SIGKILL ``p`` once its staging folder holds ``what``: half-way through its run."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and p.poll() is None:
        if any((s / what).exists() for s in out.glob(f"{outdir.STAGING}*")):
            break
        time.sleep(0.02)
    assert p.poll() is None, "the run ended before it could be killed half-way"
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    p.stderr.close()


def test_a_killed_run_leaves_the_previous_outputs(done, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(done, out)
    before = _snapshot(out)
    _kill_when_staging(start("analyze", SAMPLE, "-o", out, "--reparse", "-q"), out, "files.parquet")
    assert _snapshot(out) == before  # the previous complete outputs, not a mix
    assert list(out.glob(f"{outdir.STAGING}*"))  # what the killed run left, cleared by the next
    r = cli("analyze", SAMPLE, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "were not parsed again" in r.stderr  # its tables are reused: no --reparse needed
    assert not list(out.glob(f"{outdir.STAGING}*"))
    assert (
        json.loads((out / "summary.json").read_text())["verdict"]
        == json.loads(before["summary.json"])["verdict"]
    )


def test_a_killed_first_run_leaves_no_outputs(tmp_path):
    out = tmp_path / "out"
    _kill_when_staging(start("analyze", SAMPLE, "-o", out, "-q"), out, "files.parquet")
    assert not [p for p in out.iterdir() if not p.name.startswith(".")]  # none of its outputs
    r = cli("analyze", SAMPLE, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    assert (out / "report.html").is_file() and not list(out.glob(f"{outdir.STAGING}*"))


def test_a_log_file_as_input_is_never_written_beside(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SAMPLE / "vllm-server.log", logs)
    shutil.copy(SAMPLE / "nginx-access.log", logs)
    before = sorted(p.name for p in logs.iterdir())
    r = cli("ingest", "vllm-server.log", cwd=logs)
    assert r.returncode == 5, r.stderr
    assert "beside the input log" in error_lines(r.stderr)[0]
    assert sorted(p.name for p in logs.iterdir()) == before
    r = cli("ingest", logs / "vllm-server.log", "-o", tmp_path / "out", "-q", cwd=tmp_path)  # -o says where
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in logs.iterdir()) == before


def test_an_input_that_once_was_an_output_is_read(done, tmp_path):
    """Logs copied into a folder that once received outputs (its marker is there) are data: read; the old
    outputs are not."""
    d = tmp_path / "was-out"
    shutil.copytree(done, d)
    shutil.copy(SAMPLE / "vllm-server.log", d)
    shutil.copy(SAMPLE / "nginx-access.log", d)
    r = cli("ingest", d, "-o", tmp_path / "out", "-q")
    assert r.returncode == 0, r.stderr
    import polars as pl

    files = pl.read_parquet(tmp_path / "out" / "files.parquet")
    read = files.filter(pl.col("format") != "skipped")
    assert dict(zip(read["path"], read["format"], strict=True)) == {
        "nginx-access.log": "nginx_access",
        "vllm-server.log": "vllm_server",
    }
    # the old outputs: each a row read of nothing, saying why (issue #44)
    old = files.filter(pl.col("format") == "skipped")
    assert "report.html" in old["path"].to_list() and (old["lines_total"] == 0).all()
    assert all(m[0].startswith("an output logscope wrote") for m in old["messages"])


def test_no_lock_file_is_left_when_a_run_ends(done, tmp_path):
    """The lock is for the time a run writes: a finished run, a failed one and an interrupted one (below) leave no
    .logscope-lock behind (it was left in every output folder)."""
    assert not (done / outdir.LOCK).exists()  # analysed by the module's fixture: a run that succeeded
    out = tmp_path / "out"
    shutil.copytree(done, out)
    (tmp_path / "conf").mkdir()
    shutil.copy(SAMPLE / "prometheus" / "tsdb-dump.txt.gz", tmp_path / "conf" / "dump.bin")  # not text
    r = cli("ingest", tmp_path / "conf", "-o", out)
    assert r.returncode == 4, r.stderr
    assert not (out / outdir.LOCK).exists()


def test_ctrl_c_exits_130_and_leaves_the_previous_outputs(done, tmp_path):
    """Ctrl-C (SIGINT) half-way through a run: exit 130 (README's exit codes), 'interrupted' said, the previous
    complete outputs as they were, no staging folder and no lock left."""
    out = tmp_path / "out"
    shutil.copytree(done, out)
    before = _snapshot(out)
    p = start("analyze", SAMPLE, "-o", out, "--reparse", "-q")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300 and p.poll() is None:
        if any((s / "files.parquet").exists() for s in out.glob(f"{outdir.STAGING}*")):
            break
        time.sleep(0.02)
    assert p.poll() is None, "the run ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=120)
    stderr = p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    assert rc == 130, stderr
    assert "logscope: interrupted" in stderr and "Traceback" not in stderr
    assert _snapshot(out) == before
    assert not list(out.glob(f"{outdir.STAGING}*")) and not (out / outdir.LOCK).exists()
