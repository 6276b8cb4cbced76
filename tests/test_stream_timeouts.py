"""A streaming request whose headers came (HTTP 200) and whose stream then timed out is a caller that left, as a
timeout before any answer is. traced-2r-kill's 35 APITimeoutError came after a 200 (truth.json: 35 client timeouts;
vLLM logged 35 aborts): the attempts were not marked timed out, so cancellation read 'no caller left before its
answer'. Both the client's JSON lines and its DEBUG log carry them."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze


@pytest.fixture(scope="module")
def out(analyzed):
    return analyzed(need(LAB / "traced-2r-kill"))[0]


def test_stream_timeouts_are_timeouts_in_both_client_files(out):
    att = pl.read_parquet(out / "client_attempts.parquet")
    to = att.filter(pl.col("error").str.contains("Timeout").fill_null(False))
    by_source = to.group_by("source").agg(pl.col("timed_out").sum(), pl.len()).sort("source")
    assert by_source["len"].to_list() == [35, 35]  # the .jsonl and the DEBUG .log
    assert by_source["timed_out"].to_list() == [35, 35]
    assert set(to["status"].to_list()) == {200}  # their headers had come


def test_cancellation_of_stream_timeouts_is_propagated(out):
    truth = json.loads((LAB / "traced-2r-kill" / "truth.json").read_text())
    s = json.loads((out / "summary.json").read_text())
    c = next(x for x in s["claims"] if x["id"] == "cancellation")
    facts = {f["name"]: f["value"] for f in c["facts"]}
    assert c["state"] == "propagated"
    assert facts["abandoned"] == 35 and facts["aborted"] == 35 and facts["ran_on"] == 0
    assert truth["client"]["timeouts_logical"] == 35
    # vLLM's own lines (truth.json's requests_aborted reads an older wording: 0): one 'Aborted request(s)' each
    logs = "".join(p.read_text() for p in sorted((LAB / "traced-2r-kill").glob("vllm-server-*.log")))
    assert logs.count("Aborted request(s) cmpl-") == 35
    assert "of 35 attempts abandoned by their callers, vLLM aborted 35" in (out / "summary.md").read_text()


def test_timeouts_before_any_answer_are_unchanged(tmp_path):
    """traced-1r: 9 non-streaming client timeouts with no answer, 9 nginx 499, 9 vLLM aborts: still 9."""
    src = tmp_path / "in"
    shutil.copytree(need(LAB / "traced-1r"), src)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    c = next(x for x in s["claims"] if x["id"] == "cancellation")
    facts = {f["name"]: f["value"] for f in c["facts"]}
    assert c["state"] == "propagated" and facts["abandoned"] == 9 and facts["aborted"] == 9
