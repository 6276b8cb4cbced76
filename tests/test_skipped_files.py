"""What is not read is said (issue #44, item 5): every file or folder found under the input that is not read is a
row of files.parquet (format 'skipped', read of nothing) with why, and a note of ``analyze``; files are told by
their bytes, not their names. A hidden log (``.vllm-server.log``) was left out unsaid ("Nothing to diagnose" when
it was the only one) and a log named ``*.png`` was never read: a hidden file is now read like any other, a
hidden folder (``.git``, caches) is a row that says how to read it, and an image is known by its first bytes.
Inputs are the real lab recordings and real pictures (the report's screenshot, vl-convert's drawings)."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from clirun import ROOT, cli
from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from logscope.ingest import sources

PICTURE = ROOT / "docs" / "report-1024.png"  # a real PNG


def _rows(out) -> dict[str, dict]:
    return {r["path"]: r for r in pl.read_parquet(out / "files.parquet").iter_rows(named=True)}


@pytest.mark.parametrize("run", ["spike", "v0-ladder"])
def test_a_hidden_log_is_read(tmp_path, run):
    """A folder whose only vLLM log is hidden: diagnosed as the same log unhidden is."""
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / run / "vllm-server.log"), d / ".vllm-server.log")
    r = cli("analyze", d, "-o", tmp_path / "out", "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    row = _rows(tmp_path / "out")[".vllm-server.log"]
    assert row["format"] == "vllm_server" and row["lines_parsed"] == row["lines_total"] > 1000
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(LAB / run / "vllm-server.log", plain / "vllm-server.log")
    base = ingest(plain, tmp_path / "base", AnalyzeOptions())
    for t in ("server_stats", "server_requests"):
        a = pl.read_parquet(tmp_path / "out" / f"{t}.parquet").drop("source", "replica")
        b = pl.read_parquet(base.out_dir / f"{t}.parquet").drop("source", "replica")
        assert a.height > 0 and a.equals(b), t


@pytest.mark.parametrize(
    ("src", "name", "fmt"),
    [
        ("spike/nginx-access.log", "dashboard.png", "nginx_access"),
        ("crash/vllm-server.log", "screenshot.jpg", "vllm_server"),
        ("spike/client-spike.jsonl", "export.pdf", "client_jsonl"),
    ],
)
def test_a_log_named_as_an_image_is_read(tmp_path, src, name, fmt):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / src), d / name)
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    (row,) = res.files.iter_rows(named=True)
    assert row["format"] == fmt and row["lines_parsed"] > 0 and not row["messages"]


def test_an_image_is_a_row_and_a_note(tmp_path):
    """A real picture, whatever its name, is a row (read of nothing: no 'lines' counted in it) and a note."""
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(LAB / "spike" / "vllm-server.log"), d)
    shutil.copy(PICTURE, d / "dashboard.png")
    shutil.copy(PICTURE, d / "dashboard.log")  # a picture named as a log is no log either
    r = cli("analyze", d, "-o", tmp_path / "out", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _rows(tmp_path / "out")
    for name in ("dashboard.png", "dashboard.log"):
        assert rows[name]["format"] == "skipped" and rows[name]["lines_total"] == 0
        assert rows[name]["messages"] == ["a PNG image (its first bytes say so): not a log, not read"]
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("logscope: note: not read:")]
    assert notes == [
        "logscope: note: not read: dashboard.log, dashboard.png: a PNG image (its first bytes say so): not a "
        "log, not read"
    ]


def test_a_hidden_folder_is_a_row_that_says_how_to_read_it(tmp_path):
    d = tmp_path / "in"
    (d / ".cache").mkdir(parents=True)
    shutil.copy(need(LAB / "spike" / "nginx-access.log"), d)
    shutil.copy(LAB / "crash" / "nginx-access.log", d / ".cache" / "nginx-access.log")
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    rows = {r["path"]: r for r in res.files.iter_rows(named=True)}
    assert set(rows) == {"nginx-access.log", ".cache/"}
    assert rows[".cache/"]["format"] == "skipped" and rows[".cache/"]["messages"] == [sources.HIDDEN_FOLDER]
    assert "give it as the input folder" in sources.HIDDEN_FOLDER
    inner = ingest(d / ".cache", tmp_path / "inner", AnalyzeOptions())  # as its message says
    assert inner.files.row(0, named=True)["format"] == "nginx_access"


def test_detect_and_analyze_say_the_same(tmp_path):
    """detect lists each file not read with why, as analyze's files.parquet does; a folder of pictures only
    names them in its exit-4 error."""
    d = tmp_path / "in"
    (d / ".git").mkdir(parents=True)
    (d / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    shutil.copy(PICTURE, d / "grafana.png")
    r = cli("detect", d)
    assert r.returncode == 0, r.stderr
    assert f".git/: {sources.HIDDEN_FOLDER}" in r.stdout.splitlines()
    assert "grafana.png: a PNG image (its first bytes say so): not a log, not read" in r.stdout.splitlines()
    r = cli("analyze", d, "-o", tmp_path / "out")
    assert (
        r.returncode == 4
        and "grafana.png (skipped): a PNG image" in r.stderr
        and ".git/ (skipped)" in r.stderr
    )
