"""The timeline's outcomes name each break-off by what its log says, and which log says it. Every truncated request
read "cut mid-stream" and every caller's timeout "timeout": nginx's cut stream (its error log's 'upstream
prematurely closed connection' after the access log's 200: the lab's crash, 8 streams; traced-2r-kill, 20), LiteLLM's
stream-error line tied to its 200 (tests/data/litellm: 'Exception occured' after the only 200 since the proxy's
start) and a caller that gave up (its own log's APITimeoutError: traced-2r-kill's 35) are different facts.

The page is read as a browser gets it: the timeline's spec in report.html's JSON script block."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from test_report_page import analysed
from test_stream_failed_after_200 import STREAM, STREAM_JSON

from conftest import LAB
from logscope.report import lanes, outcome_panel

CUT = "2xx, upstream closed (nginx error log)"
FAILED = "2xx, stream failed (LiteLLM log)"
TIMED_OUT = "caller timed out (client log)"


def _timeline(out: Path) -> dict:
    page = (out / "report.html").read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="spec-timeline">(.*?)</script>', page, re.S)
    assert block, "the page holds no timeline"
    return json.loads(block.group(1))


def _outcomes(spec: dict) -> tuple[dict[str, int], dict]:
    """(requests by outcome label, the outcome panel's bars layer) of a timeline spec."""
    rows = pl.DataFrame(spec["datasets"]["outcomes"])
    panel = next(
        v for v in spec["vconcat"] if "Outcomes as callers saw them" in json.dumps(v.get("title", ""))
    )
    bars = next(
        layer for layer in panel["layer"] if layer["encoding"].get("color", {}).get("field") == "outcome"
    )
    return dict(rows.group_by("outcome").agg(pl.col("n").sum()).rows()), bars


def _truth(run: str) -> dict:
    return json.loads((LAB / run / "truth.json").read_text())["client"]["outcomes"]


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        # truth.json client.outcomes: 200, 502, APIConnectionError (the cut streams), APITimeoutError
        ("crash", {"ok": "200", "HTTP 502": "502", CUT: "APIConnectionError"}),
        ("traced-2r-kill", {"ok": "200", CUT: "APIConnectionError", TIMED_OUT: "APITimeoutError"}),
    ],
)
def test_nginx_cut_streams_and_callers_timeouts_are_told_apart(tmp_path_factory, run, expected):
    out = analysed(tmp_path_factory, run)
    got, bars = _outcomes(_timeline(out))
    truth = _truth(run)
    assert got == {label: truth[key] for label, key in expected.items()}
    # the legend and its colours name the same labels, each with the log that says it
    scale = bars["encoding"]["color"]["scale"]
    assert set(scale["domain"]) == set(expected) and len(scale["range"]) == len(scale["domain"])
    assert "cut mid-stream" not in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("src", [STREAM, STREAM_JSON])
def test_a_litellm_stream_failure_is_named_by_its_log(analyzed, src):
    """The LiteLLM recording's first failure is tied to its 200: its request ended truncated, said by LiteLLM's
    own line, not as nginx's cut (test_stream_failed_outcome: 5 ok + 1 truncated)."""
    out, _, _ = analyzed(src)
    got, bars = _outcomes(_timeline(out))
    assert got == {"ok": 5, FAILED: 1}
    assert bars["encoding"]["color"]["scale"]["domain"] == ["ok", FAILED]


def test_outcome_labels_hold_no_log_text():
    """Every label the outcomes lane can give is logscope's own words (a status number at most): no field of a log
    reaches the legend or the tooltip, whatever it holds."""
    words = {
        *outcome_panel.BROKE_OFF.values(),
        outcome_panel.TRUNCATED,
        outcome_panel.TIMED_OUT,
        outcome_panel.CLIENT_LEFT,
        *outcome_panel.OUTCOME_COLORS,
    }
    assert all(re.fullmatch(r"[\w ,.()'-]+", w) for w in words), words
    # each fits the legend's label limit (260 px at ~6.6 px a character): a cut label would lose its source
    assert max(len(w) for w in words) * lanes.CHAR_PX <= 260
