"""compare's figures from the gateway read as analyze reads the same run: a 2xx whose answer broke off after it
(nginx's cut stream: the lab's crash, 8 streams cut by the SIGKILL; traced-2r-kill, 20 at the kill) or that the
caller gave up on (abort-ignored: nginx logged all 169 lines 200, 76 callers had timed out) is no served answer,
so no latency of one; and a client's retry that came through the gateway as a request of its own is no gateway
retry (retry-storm: 14 retries nginx made, as analyze says; compare read 329).

Each run is compared with calm (no failure at all), the way a reviewer sets an incident beside a calm run."""

from __future__ import annotations

import html
import json

import jsonschema
import polars as pl
import pytest
from compare_helpers import SCHEMA, lab_truth, metric_row
from test_stream_failed_after_200 import G09, STREAM, STREAM_JSON

from logscope.api import compare
from logscope.compare.render import terminal_lines

# the requests through the gateway that ended without a served answer, from the client's own records
# (truth.json client.outcomes): APIConnectionError is the stream cut after nginx's 200 ('upstream prematurely
# closed connection' in nginx-error.log), APITimeoutError the caller giving up, 502 the gateway's error
LEFT_OUT = {
    "crash": {"error": 199, "truncated, cut": 8},
    "traced-2r-kill": {"timeout": 35, "truncated, cut": 20},
    "abort-ignored": {"timeout": 76},
}
TRUTH_KEYS = {"error": "502", "truncated, cut": "APIConnectionError", "timeout": "APITimeoutError"}


@pytest.mark.parametrize("run", sorted(LEFT_OUT))
def test_the_gateways_e2e_counts_served_answers_only(lab_out, tmp_path, run):
    """The gateway's e2e p95 was read off every 2xx access line: crash's 8 cut streams (about 1 s each) pulled it
    to 3.111 s, abort-ignored's 76 answers nobody waited for to 7.359 s against the callers' 2.821 s. It is now
    the gateway's span of the completed requests (as the callers' e2e is), and the row says what it left out."""
    res = compare(lab_out("calm"), lab_out(run), tmp_path / "c")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    truth = lab_truth(run)["client"]["outcomes"]
    row = metric_row(doc, "gateway_e2e_p95")
    assert row["clock"] == "gateway" and row["left_out"] == {"a": None, "b": LEFT_OUT[run]}
    assert {k: truth[TRUTH_KEYS[k]] for k in LEFT_OUT[run]} == LEFT_OUT[run]
    # served answers: the callers' completed requests, the same ones on the gateway's clock (the lab's network is
    # local: the two p95s lie within 1 % of each other)
    completed = metric_row(doc, "completed")["b"]
    assert completed == truth["200"]
    callers = metric_row(doc, "e2e_p95")["b"]
    assert abs(row["b"] - callers) <= 0.01 * callers, (row["b"], callers)
    # what a reader sees: the row names what it did not count, in compare.md and compare.html alike
    cut = {
        "crash": "B 199 failed, 8 cut after the gateway's 2xx (its error log: the upstream closed mid-response)",
        "traced-2r-kill": "B 35 timed out (the caller gave up), 20 cut after the gateway's 2xx",
        "abort-ignored": "B 76 timed out (the caller gave up)",
    }[run]
    md = res["paths"]["compare_md"].read_text().replace("\\", "")
    page = html.unescape(res["paths"]["compare_html"].read_text())
    for text in (md, page):
        assert f"completed requests only; not counted: {cut}" in text
    # the success share is analyze's 'What callers saw' (summary.json outcomes) for the same run
    seen = json.loads((lab_out(run) / "summary.json").read_text())["outcomes"]
    share = metric_row(doc, "success_share")["b"]
    assert share == pytest.approx(seen["by_outcome"]["ok"] / seen["requests"], abs=5e-4)
    assert seen["by_outcome"].get("truncated", 0) == LEFT_OUT[run].get("truncated, cut", 0)
    # the terminal's verdict states the gateway's figure compare.json holds, and that it counts served answers only
    said = " ".join(terminal_lines(doc))
    if row["direction"] in ("better", "worse"):
        assert f"e2e p95 (gateway) (served answers only) 2.45 s → {row['b']:.3g} s" in said


# retries nginx made (its $upstream_addr lists more than one server), per analyze's summary.json: the runs' truth
GATEWAY_RETRIES = {"retry-storm": 14, "crash": 11, "storm-b": 0}


@pytest.mark.parametrize("run", sorted(GATEWAY_RETRIES))
def test_gateway_retries_are_the_gateways_own(lab_out, tmp_path, run):
    """compare summed each logical request's gateway attempts less one, so a client's retry that reached the
    gateway as a new request counted as the gateway's: retry-storm read 329 gateway retries, analyze 14."""
    doc = compare(lab_out("calm"), lab_out(run), tmp_path / "c")["doc"]
    row = metric_row(doc, "gateway_retries")
    summary = json.loads((lab_out(run) / "summary.json").read_text())["retries"]
    assert row["b"] == summary["gateway_retries"] == GATEWAY_RETRIES[run]
    assert row["a"] == 0 and row["clock"] == "gateway"
    # the gateway's access log itself: attempts beyond the first of each line that reached a server or tried one
    ga = pl.read_parquet(lab_out(run) / "gateway_attempts.parquet")
    real = ga.filter(
        pl.col("upstream").str.contains(":") & ~pl.col("flags").fill_null("").str.contains("no_live")
    )
    per_line = real.group_by("source", "line_no").len()
    assert int((per_line["len"] - 1).clip(0).sum()) == GATEWAY_RETRIES[run]


@pytest.mark.parametrize("first", [G09, STREAM_JSON], ids=["g09", "stream-json"])
def test_a_gateway_log_without_request_times_gives_no_gateway_e2e(tmp_path, first):
    """LiteLLM's access lines ('"POST /v1/chat/completions HTTP/1.1" 200 OK') carry no request time: compare summed
    their missing durations to 0 s, read 'e2e p95 (gateway) 0 s' for both runs and called the SLO's e2e p95 met on
    it. It is unknown, and the SLO's e2e cannot be judged."""
    a, b = tmp_path / "a", tmp_path / "b"
    for d, f in ((a, first), (b, STREAM)):
        d.mkdir()
        (d / f.name).write_bytes(f.read_bytes())
    res = compare(a, b, tmp_path / "cmp")
    doc = res["doc"]
    row = metric_row(doc, "gateway_e2e_p95")
    assert (row["a"], row["b"], row["noise"]) == (None, None, "unknown in both runs")
    assert doc["whole"]["slo_met"] == {"a": [], "b": []}
    assert "e2e p95: no clock gives it for both runs" in doc["whole"]["slo_undecided"]["a"]
    md = res["paths"]["compare_md"].read_text().replace("\\", "")
    assert "| e2e p95 (gateway) | gateway's clock | unknown | unknown |" in md
