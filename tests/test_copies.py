"""A log collected twice (a copy in another folder, a compressed copy, or the same log taken earlier: a prefix
of the later one) is parsed for the coverage but adds no rows: no request is counted twice."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl

from conftest import LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze
from logscope.ingest import COPY_NOTE, sources

STORM = ROOT / "samples" / "retry-storm"


def _lines(path: Path) -> list[bytes]:
    """The file's lines with their '\\n' (a vLLM log holds '\\r' inside some lines: not a line break here)."""
    return [ln + b"\n" for ln in path.read_bytes().split(b"\n")[:-1]]


def test_copies_add_no_rows(tmp_path):
    one, many = tmp_path / "one", tmp_path / "many"
    shutil.copytree(STORM, one / "a")
    shutil.copytree(STORM, many / "a")
    (many / "b").mkdir()
    (many / "c").mkdir()
    shutil.copy2(STORM / "vllm-server.log", many / "b")  # the same file in two folders
    shutil.copy2(STORM / "nginx-access.log", many / "b")
    (many / "c" / "vllm-server.log").write_bytes(
        b"".join(_lines(STORM / "vllm-server.log")[:2000])
    )  # taken earlier
    (many / "c" / "client-storm.jsonl.gz").write_bytes(
        gzip.compress((STORM / "client-storm.jsonl").read_bytes())
    )
    analyze(one, tmp_path / "out1", AnalyzeOptions())
    analyze(many, tmp_path / "out", AnalyzeOptions())
    # the same correlation and diagnosis as one copy: 1.40 executions per logical request, not 3.67
    for doc in ("correlation.json", "diagnosis.json"):
        assert (tmp_path / "out1" / doc).read_text() == (tmp_path / "out" / doc).read_text(), doc
    corr = json.loads((tmp_path / "out" / "correlation.json").read_text())
    assert corr["retry_multiplication"]["amplification"] == 1.4
    files = {r["path"]: r for r in pl.read_parquet(tmp_path / "out" / "files.parquet").iter_rows(named=True)}
    copies = {
        "b/vllm-server.log": "a/vllm-server.log",
        "b/nginx-access.log": "a/nginx-access.log",
        "c/vllm-server.log": "a/vllm-server.log",
        "c/client-storm.jsonl.gz": "a/client-storm.jsonl",
    }
    for path, kept in copies.items():
        r = files[path]
        assert any(m.startswith(f"{COPY_NOTE}{kept} ") for m in r["messages"]), (path, r["messages"])
        assert r["lines_total"] == r["lines_parsed"] > 0  # still read and counted: the coverage is whole
        if path != "c/vllm-server.log":
            assert r["lines_total"] == files[kept]["lines_total"]
    assert files["c/vllm-server.log"]["lines_total"] == 2000
    assert not any(COPY_NOTE in m for p, r in files.items() if p.startswith("a/") for m in r["messages"])
    # no row of a copy in any table
    for name in ("server_request_events", "server_events", "gateway_attempts", "client_attempts"):
        srcs = set(pl.read_parquet(tmp_path / "out" / f"{name}.parquet")["source"].unique().to_list())
        assert not srcs & copies.keys(), name


def test_a_log_that_goes_on_differently_is_not_a_copy(tmp_path):
    """The storm's first 2,000 vLLM lines followed by the spike run's last 500: the same first lines, another
    file."""
    head = _lines(STORM / "vllm-server.log")[:2000]
    tail = _lines(need(LAB / "spike" / "vllm-server.log"))[-500:]
    assert tail
    src = tmp_path / "in"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    shutil.copy2(STORM / "vllm-server.log", src / "a")
    (src / "b" / "vllm-server.log").write_bytes(b"".join(head + tail))
    a, b = sources.discover(src / "a")[0], sources.discover(src / "b")[0]
    assert sources.prefix_relation(a, b) is None
    assert sources.prefix_relation(a, a) == "same"
    analyze(src, tmp_path / "out", AnalyzeOptions())
    files = pl.read_parquet(tmp_path / "out" / "files.parquet")
    assert not any(COPY_NOTE in m for ms in files["messages"] for m in ms)
    srcs = (
        pl.read_parquet(tmp_path / "out" / "server_request_events.parquet")["source"]
        .unique()
        .sort()
        .to_list()
    )
    assert srcs == ["a/vllm-server.log", "b/vllm-server.log"]


def test_cli_names_the_copies(tmp_path):
    from typer.testing import CliRunner

    from logscope.cli import app

    src = tmp_path / "in"
    shutil.copytree(STORM, src / "a")
    (src / "b").mkdir()
    shutil.copy2(STORM / "vllm-server.log", src / "b")
    r = CliRunner().invoke(app, ["analyze", str(src), "-o", str(tmp_path / "out")], terminal_width=400)
    assert r.exit_code == 0, r.output
    shown = " ".join(r.output.split())
    assert (
        "1 file(s) hold only lines another input holds" in shown
        and "b/vllm-server.log (a/vllm-server.log)" in shown
    )


def test_summary_md_says_what_reading_met(tmp_path):
    """summary.md (for the ticket) lists each file's messages: here the copy, at most MAX_READ_NOTES_MD of them."""
    from logscope.report import MAX_READ_NOTES_MD, views

    src = tmp_path / "in"
    shutil.copytree(STORM, src / "a")
    (src / "b").mkdir()
    shutil.copy2(STORM / "vllm-server.log", src / "b")
    analyze(src, tmp_path / "out", AnalyzeOptions())
    md = (tmp_path / "out" / "summary.md").read_text()
    assert (
        "What reading them met:\n- b/vllm-server.log: every line of it is in a/vllm-server.log (a copy" in md
    )
    inputs = json.loads((tmp_path / "out" / "summary.json").read_text())["inputs"]
    many = {
        "files": [{"path": f"f{i}.log", "messages": ["empty file"]} for i in range(MAX_READ_NOTES_MD + 3)]
    }
    assert views.read_notes(inputs, 5) == ([("b/vllm-server.log", inputs["files"][-1]["messages"][0])], 0)
    shown, more = views.read_notes(many, MAX_READ_NOTES_MD)
    assert len(shown) == MAX_READ_NOTES_MD and more == 3


def test_a_log_collected_three_times_keeps_the_longest(tmp_path):
    """The same vLLM log taken at three times (1,000, 2,000 lines, and whole): both earlier ones name the
    whole one, which alone adds rows."""
    lines = _lines(STORM / "vllm-server.log")
    src = tmp_path / "in"
    for name, n in (("a", 1000), ("b", 2000), ("c", len(lines))):
        (src / name).mkdir(parents=True)
        (src / name / "vllm-server.log").write_bytes(b"".join(lines[:n]))
    analyze(src, tmp_path / "out", AnalyzeOptions())
    files = {
        r["path"]: r["messages"]
        for r in pl.read_parquet(tmp_path / "out" / "files.parquet").iter_rows(named=True)
    }
    assert files["a/vllm-server.log"][0].startswith(f"{COPY_NOTE}c/vllm-server.log ")
    assert files["b/vllm-server.log"][0].startswith(f"{COPY_NOTE}c/vllm-server.log ")
    assert files["c/vllm-server.log"] == []
    srcs = pl.read_parquet(tmp_path / "out" / "server_request_events.parquet")["source"].unique().to_list()
    assert srcs == ["c/vllm-server.log"]
