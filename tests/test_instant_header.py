"""A finding at an instant is headed by one time, not 'T → T' (public-2 n19's KV-load failure read
'01:40:17 → 01:40:17 UTC'); a finding over a stretch keeps its two (n19's sustained KV pressure 01:40:18–01:41:08).
n03's engine death (its one OOM line) is the second instant."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import PUBLIC2, need
from logscope.api import AnalyzeOptions, analyze

N19 = "n19-v1-lmcache-kv-load-failure-215-rescheduled-kv100-waiting-47-to-233.log"
N03 = "n03-v0-0.8-lora-runtime-oom-mqenginedeaderror.log"
HEADER = re.compile(r'<p class="when small muted">([^<·]*?) UTC')


@pytest.mark.parametrize(
    ("name", "instant", "stretch"),
    [(N19, "01:40:17", "01:40:18 → 01:41:08"), (N03, "10:55:18", None)],
    ids=["n19", "n03"],
)
def test_an_instant_is_headed_by_one_time(name, instant, stretch, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(need(PUBLIC2 / name), src / name)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    f1 = s["findings"][0]
    assert f1["start"] == f1["end"] and f1["start"][11:19] == instant  # the object: one moment
    heads = HEADER.findall(html.unescape((tmp_path / "out" / "report.html").read_text()))
    assert heads[0] == instant, heads
    assert not any(h == f"{instant} → {instant}" for h in heads)
    if stretch is not None:
        assert stretch in heads
