"""Nothing in the input makes the run fail (exit 70): an impossible date, a year past 9999, a symlink loop,
a file name that is not UTF-8, a path past PATH_MAX, a folder that cannot be entered. Each input is a real
file (lab fixture) copied to tmp_path with the damage applied; the rest of the folder is still analysed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from logscope.cli import ExitCode, app

runner = CliRunner()
SPIKE = LAB / "spike"


def _files(out: Path) -> dict[str, dict]:
    return {r["path"]: r for r in pl.read_parquet(out / "files.parquet").iter_rows(named=True)}


def _analyze(src: Path, out: Path, *extra: str):
    return runner.invoke(app, ["analyze", str(src), "-o", str(out), "-q", *extra])


def _damaged_error_log(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    lines = need(SPIKE / "nginx-error.log").read_text().split("\n")
    lines[2] = "2026/02/29" + lines[2][10:]  # a common year
    lines[3] = "2026/13/40" + lines[3][10:]
    (d / "nginx-error.log").write_text("\n".join(lines))
    shutil.copy(SPIKE / "nginx-access.log", d)
    return d


def test_impossible_dates_in_nginx_error_log_cost_only_their_time(tmp_path):
    d = _damaged_error_log(tmp_path)
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    f = _files(tmp_path / "out")["nginx-error.log"]
    assert f["lines_parsed"] == f["lines_total"] == (d / "nginx-error.log").read_text().count("\n")
    errs = pl.read_parquet(tmp_path / "out" / "gateway_errors.parquet")
    assert errs.filter(pl.col("ts").is_null())["line_no"].to_list() == [3, 4]
    said = [m for m in f["messages"] if "no time" in m]
    assert said and said[0].startswith("2 record(s)") and "line 3: 2026/02/29" in said[0]


def test_impossible_date_in_an_unknown_file_head(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(SPIKE / "nginx-access.log"), d)
    text = (SPIKE / "commands.log").read_text()
    (d / "notes.txt").write_text("2026-02-30 10:00 " + text)
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert _files(tmp_path / "out")["nginx-access.log"]["lines_parsed"] > 0


def test_query_range_year_past_9999_is_an_outlier(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    name = "query_range-num_requests_running.json"
    text = need(SPIKE / "prometheus" / name).read_text()
    first = text.index('"values":[[') + len('"values":[[')
    stamp = text[first : text.index(",", first)]
    (d / name).write_text(text[:first] + "253402300802.998" + text[first + len(stamp) :])  # year 10000
    shutil.copy(SPIKE / "nginx-access.log", d)
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    f = _files(tmp_path / "out")[name]
    assert f["last_ts"].year == 2026
    assert any("+10000-01-01" in m and m.startswith("1 record(s)") for m in f["messages"])
    m = pl.read_parquet(tmp_path / "out" / "server_metrics.parquet")
    assert m["ts"].null_count() == 1 and m["ts"].dt.year().max() == 2026


def test_symlink_loops_and_a_name_not_utf8_are_named_the_rest_read(tmp_path):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    shutil.copy(need(SPIKE / "nginx-access.log"), d)
    os.symlink("loop2", d / "loop1")
    os.symlink("loop1", d / "loop2")
    os.symlink(".", d / "sub" / "self")  # a link to a folder is not followed
    shutil.copy(SPIKE / "nginx-error.log", os.fsencode(d) + b"/err\xff\xfe.log")
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    f = _files(tmp_path / "out")
    assert f["loop1"]["format"] == "unreadable" and "symbolic links" in f["loop1"]["messages"][0]
    bad = f["err\\xff\\xfe.log"]
    assert (
        bad["format"] == "nginx_error"
        and bad["lines_parsed"] == len((SPIKE / "nginx-error.log").read_text().split("\n")) - 1
    )
    assert any("not valid UTF-8" in m for m in bad["messages"])
    assert f["nginx-access.log"]["lines_parsed"] > 0


def test_a_folder_deeper_than_path_max_is_named_the_rest_read(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(SPIKE / "nginx-access.log"), d)
    deep = os.open(d, os.O_RDONLY)
    try:  # made relative to an open folder: a path past PATH_MAX cannot be given whole
        for _ in range(25):
            os.mkdir("d" * 200, dir_fd=deep)
            nxt = os.open("d" * 200, os.O_RDONLY, dir_fd=deep)
            os.close(deep)
            deep = nxt
        fd = os.open("deep.log", os.O_WRONLY | os.O_CREAT, dir_fd=deep)
        os.write(fd, (SPIKE / "nginx-access.log").read_bytes())
        os.close(fd)
    finally:
        os.close(deep)
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    f = _files(tmp_path / "out")
    skipped = [row for p, row in f.items() if p.startswith("ddd")]
    assert len(skipped) == 1 and skipped[0]["messages"] == ["folder not read: File name too long"]
    assert f["nginx-access.log"]["lines_parsed"] > 0


def test_a_folder_that_cannot_be_entered_is_named(tmp_path, monkeypatch):
    # tests run as root, where chmod does not stop a read: the refusal is os.scandir's
    d = tmp_path / "in"
    (d / "locked").mkdir(parents=True)
    shutil.copy(need(SPIKE / "nginx-access.log"), d)
    shutil.copy(SPIKE / "nginx-error.log", d / "locked")
    real = os.scandir

    def scandir(path="."):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    f = {r["path"]: r for r in res.files.iter_rows(named=True)}
    assert f["locked/"]["format"] == "unreadable" and f["locked/"]["messages"] == [
        "folder not read: Permission denied"
    ]
    assert f["nginx-access.log"]["lines_parsed"] > 0


def test_a_folder_whose_only_file_is_unreadable_exits_3(tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    log = d / "nginx-access.log"
    shutil.copy(need(SPIKE / "nginx-access.log"), log)
    real = open

    def refuse(file, *args, **kw):  # root reads whatever chmod says: the refusal is open's
        if isinstance(file, (str, os.PathLike)) and Path(file) == log:
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real(file, *args, **kw)

    monkeypatch.setattr("builtins.open", refuse)
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == ExitCode.NO_INPUT, (r.exit_code, r.stderr)
    assert "nothing in the input could be read: nginx-access.log (unreadable)" in r.stderr
    os.symlink("a.log", d / "b.log")  # links in a loop are unreadable too
    os.symlink("b.log", d / "a.log")
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == ExitCode.NO_INPUT, (r.exit_code, r.stderr)
    # a failed run leaves no tables (the output folder's contract): the message names each file and why
    assert "a.log (unreadable): unreadable: Too many levels of symbolic links" in r.stderr


def test_an_unreadable_input_folder_exits_3(tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(SPIKE / "nginx-access.log"), d)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == d else real(p, mode, **kw))
    r = _analyze(d, tmp_path / "out")
    assert r.exit_code == ExitCode.NO_INPUT, (r.exit_code, r.stderr)
    assert "cannot be read" in r.stderr
