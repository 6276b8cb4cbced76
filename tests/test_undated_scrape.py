"""A scrape with no time of its own is never given one (#37: no claim without its evidence). A lone /metrics paste
places its samples at the file's modification time; the verdict read "nothing alarming in the one moment the logs
cover (11:57:47)", the minute the file was copied, while summary.json's span said no line carries a time. The
verdict now names the file as stating no time, from the same fact the span uses (diagnose/undated.py)."""

from __future__ import annotations

import html
import os
import re
import shutil

import pytest

from conftest import DATA, need

SCRAPES = [
    DATA / "prometheus" / "curl-metrics-1scrape.txt",  # prometheus_client 0.21.1, recorded here
    DATA / "prometheus" / "production-stack-318-vllm-metrics-idle-scrape.txt",  # a public paste
]
HMS = re.compile(r"\b\d{2}:\d{2}:\d{2}\b")


@pytest.mark.parametrize("src", SCRAPES, ids=lambda p: p.name[:24])
def test_a_lone_scrape_is_named_as_stating_no_time(analyzed, tmp_path, src):
    one = tmp_path / src.name
    shutil.copy2(need(src), one)
    os.utime(one, (1_796_000_000, 1_796_000_000))  # a copy's time, nothing the incident said
    out, s, _ = analyzed(one)
    head, second = s["verdict"][0], s["verdict"][1]
    assert f"{src.name}, which states no time" in head
    assert not HMS.search(head) and not HMS.search(second), s["verdict"]
    assert "Calm throughout" not in second
    assert s["span"]["start"] is None and "modification time" in s["span"]["unknown"]
    md, page = (out / "summary.md").read_text(), (out / "report.html").read_text()
    assert head.replace("_", "\\_") in md and html.escape(head, quote=False) in page
