"""A panel whose axis is cut says where, in figures with the panel's unit and their significant digits (#37): the
e2e panel of kv-blip (the lab's one-stats-line KV blip, calm streaming at 12-14 requests/s) read 'axis cut at 1: 1
at 09:53:48' for a cut below 0.6 s and a window whose e2e p99 was 0.876 s (``{:,.0f}`` on seconds)."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import polars as pl

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.report import fmt


def test_the_e2e_cut_note_gives_its_figures_in_their_unit(tmp_path: Path) -> None:
    shutil.copytree(need(LAB / "kv-blip"), tmp_path / "in")
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    page = html.unescape((tmp_path / "out" / "report.html").read_text())
    [note] = re.findall(r'"End-to-end latency","subtitle":"(axis cut at [^"]*)"', page)
    # the window drawn at the top is the one of the highest e2e figure the panel shows (its p99), from the table
    w = pl.read_parquet(tmp_path / "out" / "windows.parquet")
    top = w.sort("e2e_p99", descending=True, nulls_last=True).row(0, named=True)
    assert (fmt.seconds(top["e2e_p99"]), f"{top['ts']:%H:%M:%S}") == ("876 ms", "09:53:48")
    m = re.fullmatch(r"axis cut at (\d+) ms: 876 ms at 09:53:48 \(drawn at the top\)", note)
    assert m is not None, note
    assert 0 < int(m[1]) < 876
    assert "axis cut at 1: 1 " not in page
