"""A disk that fills while logscope writes is exit 5, whatever words the failed write used (issue #44, item 3).

polars said a part cut short by ENOSPC as 'parquet: File out of specification: Invalid thrift: transport error',
which no check took for a full disk: exit 70, an empty OUT left behind, and ``--debug`` naming a file it could not
write. Now a write that fails while the output's disk is (nearly) full is exit 5 with the usual help; the run leaves
nothing of its own; ``--debug`` writes its file where it can (OUT, else the temporary folder) and says where.
Real tmpfs mounts (root can mount them here; elsewhere the tests are skipped), real lab recordings."""

from __future__ import annotations

import errno
import subprocess
import tempfile
from pathlib import Path

import polars as pl
import polars.exceptions as ple
import pytest
from typer.testing import CliRunner

from conftest import LAB, need
from logscope import outdir
from logscope.cli import ExitCode, app

runner = CliRunner()
THRIFT = "parquet: File out of specification: Invalid thrift: transport error"


@pytest.fixture
def tmpfs(tmp_path):
    """A mount of a tmpfs of a given size, unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        mnt = tmp_path / f"disk-{len(mounted)}"
        mnt.mkdir()
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True
        )
        if r.returncode:
            pytest.skip("cannot mount a tmpfs here (not root, or no mount permission)")
        mounted.append(mnt)
        return mnt

    yield mount
    for mnt in mounted:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int) -> None:
    """Fill the disk but ``leave`` bytes."""
    with open(mnt / "filler", "wb") as fh:
        try:
            fh.write(b"\0" * (outdir.room(mnt) - leave))
        except OSError as e:  # tmpfs rounds to pages
            assert e.errno == errno.ENOSPC


@pytest.mark.parametrize("debug", [False, True])
def test_a_full_disk_in_other_words_is_exit_5(tmpfs, monkeypatch, debug):
    """The issue's failure, made certain: the disk really full, and polars' write failing with the words it used
    there (no 'No space left' in them)."""
    mnt = tmpfs("4M")
    _fill(mnt, 64 * 1024)
    real = pl.DataFrame.write_parquet

    def cut_short(self, file, *a, **k):
        if str(file).startswith(str(mnt)):
            raise ple.ComputeError(THRIFT)
        return real(self, file, *a, **k)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", cut_short)
    args = ["analyze", str(need(LAB / "spike")), "-o", str(mnt / "out"), "-q"]
    r = runner.invoke(app, args + (["--debug"] if debug else []))
    assert r.exit_code == ExitCode.OUTPUT, r.stderr[-3000:]
    assert "no space left on the output folder's device" in r.stderr and "internal error" not in r.stderr
    assert THRIFT in r.stderr and f"{mnt / 'out'}:" in r.stderr  # names OUT (not its staging) and the write
    if not debug:  # nothing of this run left: no empty OUT
        assert sorted(p.name for p in mnt.iterdir()) == ["filler"]
        return
    # --debug: the run's files gone, its traceback written whole where it says (the run's space is free again)
    assert sorted(p.name for p in (mnt / "out").iterdir()) == [outdir.DEBUG_FILE]
    debug_file = mnt / "out" / outdir.DEBUG_FILE
    assert f"are in {debug_file}" in r.stderr and THRIFT in debug_file.read_text()


def test_debug_writes_where_it_can(tmpfs):
    """A disk full to the last byte: exit 5, and --debug's file, which OUT's disk cannot hold, in the temporary
    folder, both said."""
    mnt = tmpfs("1M")
    _fill(mnt, 0)
    before = set(Path(tempfile.gettempdir()).glob("logscope-debug-*.txt"))
    r = runner.invoke(app, ["analyze", str(need(LAB / "spike")), "-o", str(mnt / "out"), "-q", "--debug"])
    assert r.exit_code == ExitCode.OUTPUT, r.stderr[-3000:]
    assert sorted(p.name for p in mnt.iterdir()) == ["filler"]
    assert f"{mnt / 'out' / outdir.DEBUG_FILE} could not be written: No space left on device" in r.stderr
    (debug,) = set(Path(tempfile.gettempdir()).glob("logscope-debug-*.txt")) - before
    try:
        assert f"are in {debug}" in r.stderr and "No space left on device" in debug.read_text()
    finally:
        debug.unlink()


@pytest.mark.parametrize("size", ["64k", "512k", "1M"])
def test_a_real_full_disk_leaves_nothing(tmpfs, size):
    """The spike run onto disks too small for its tables (~1.5 MB), failing at whichever write meets the end."""
    mnt = tmpfs(size)
    r = runner.invoke(app, ["analyze", str(need(LAB / "spike")), "-o", str(mnt / "out"), "-q"])
    assert r.exit_code == ExitCode.OUTPUT, r.stderr[-3000:]
    assert "no space left on the output folder's device" in r.stderr
    assert list(mnt.iterdir()) == []


def test_a_full_disk_keeps_the_outputs_before(tmpfs, tmp_path):
    """OUT holding a complete earlier run keeps it whole when the next run meets a full disk."""
    mnt = tmpfs("8M")
    out = mnt / "out"
    r = runner.invoke(app, ["analyze", str(need(LAB / "calm")), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.stderr[-2000:]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _fill(mnt, 256 * 1024)
    r = runner.invoke(app, ["analyze", str(LAB / "spike"), "-o", str(out), "-q", "--force"])
    assert r.exit_code == ExitCode.OUTPUT, r.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != outdir.LOCK} == {
        k: v for k, v in before.items() if k != outdir.LOCK
    }
