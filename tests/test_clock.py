"""Times of day carry their date when the logs cover several days (logscope.clock): on the real public
excerpts, two engine deaths ten days apart, and a single excerpt that stays within one day."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

from conftest import PUBLIC, need
from logscope import clock
from logscope.api import AnalyzeOptions, analyze


def test_format_follows_the_span():
    day = datetime(2026, 11, 29, 8, 30, tzinfo=UTC)
    assert clock.format_for(day, day.replace(hour=23)) == "%H:%M:%S"
    assert clock.format_for(day, day.replace(day=30, hour=1)) == "%m-%d %H:%M:%S"
    assert clock.format_for(day.replace(year=2025), day) == "%Y-%m-%d %H:%M:%S"
    assert clock.format_for(None, day) == "%H:%M:%S"
    t = datetime(2026, 11, 30, 8, 41, 54, 250_000, tzinfo=UTC)
    with clock.covering(day, t):
        assert (clock.hms(t), clock.hms(t, ms=True)) == ("11-30 08:41:54", "11-30 08:41:54.250")
        assert clock.hms_range(t, t.replace(minute=42)) == "11-30 08:41:54–08:42:54"  # one date for one day
        assert clock.hms_range(day, t) == "11-29 08:30:00–11-30 08:41:54"
        assert (clock.hms_after(day, day.replace(hour=9)), clock.hms_after(day, t)) == (
            "09:30:00",
            "11-30 08:41:54",
        )
    assert clock.hms_range(day, None) == "08:30:00–?"
    assert clock.hms(t) == "08:41:54"  # outside the block: the default again


def _analyse(tmp_path, *names: str) -> tuple[dict, str, str]:
    src = tmp_path / "in"
    src.mkdir()
    for name in names:
        [f] = sorted(need(PUBLIC).glob(f"{name}-*.log"))
        shutil.copy(f, src)
    analyze(src, tmp_path / "out", AnalyzeOptions(command_line="logscope analyze in"))
    d = json.loads((tmp_path / "out" / "diagnosis.json").read_text())
    return d, (tmp_path / "out" / "summary.md").read_text(), (tmp_path / "out" / "report.html").read_text()


def test_two_deaths_ten_days_apart_are_dated(tmp_path):
    # 09: AsyncEngineDeadError at 01-24 07:01:39; 13: the engine core's RPC timeout at 02-03 22:43:35
    d, md, html = _analyse(tmp_path, "09", "13")
    # two files, two servers: the headline names the one that died first, as its finding does
    assert d["verdict"][0] == (
        "The vLLM server 09-v0-asyncenginedead-critical-500 died (its engine process is gone) at 01-24 07:01:39, "
        "with no restart in the logs."
    )
    titles = [f["title"] for f in d["findings"]]
    # two files, two servers: each finding names its own
    assert (
        "13-v1-enginecore-dp0-timeout-traceback: Engine step timed out: engine died at 02-03 22:43:35, "
        "no restart in the logs"
    ) in titles
    assert (
        d["findings"][0]["title"]
        # its excerpt: an untimed traceback, the CRITICAL line and a 500: nothing says whether it was starting (evid25)
        == "09-v0-asyncenginedead-critical-500: Engine died at 01-24 07:01:39, no restart in the logs "
        "(at start-up: unknown)"
    )
    # the episode tables too (an instant's finding is headed by its one time: tests/test_instant_header.py)
    assert "| 01-24 07:01:39 → " in md and ">01-24 07:01:39 →<" in html


def test_one_day_needs_no_date(tmp_path):
    d, md, _ = _analyse(tmp_path, "09")
    assert (
        d["verdict"][0]
        == "The vLLM server died (its engine process is gone) at 07:01:39, with no restart in the logs."
    )
    assert "| 07:01:39 → " in md
