"""A streamed answer that failed after the access log's 200. uvicorn writes its access line when the response's
headers go out, before the body; LiteLLM's 'async_data_generator(): Exception occured' is the body's failure after
it. public-2 g09 (LiteLLM#8632: Gemini's 503 'The model is overloaded' inside a stream) read '1 request(s), none
failed' and 'Nothing alarming cannot be said'; tests/data/litellm/litellm-proxy-stream.log (a real LiteLLM 1.108.7
in front of fake_upstream.py's streams: two cut, one broken by an error event, all six access lines 200) read
'Nothing alarming cannot be said: 6 request(s) served'. Every output says the failed streams now, with their
evidence lines and what is not known (which request: LiteLLM's error line names none)."""

from __future__ import annotations

import json
from datetime import time

import polars as pl
import pytest

from conftest import DATA, PUBLIC2, ingest_files

G09 = PUBLIC2 / "g09-litellm-proxy-compose-wrapped-200s-then-upstream-503-overloaded-no-fallback.log"
STREAM = DATA / "litellm" / "litellm-proxy-stream.log"
STREAM_JSON = DATA / "litellm" / "litellm-proxy-stream-json.log"  # the same run with json_logs: true
POSTED = DATA / "litellm" / "public-ollama-stream-b-empty-after-200.log"
OVERLOADED = "The model is overloaded. Please try again later."

G09_TITLE = f"1 stream(s) failed after the access log's 200 (upstream status 503: '{OVERLOADED}')"
STREAM_TITLE = f"3 stream(s) failed after the access log's 200 (no upstream status named: 'Connection error.' / '{OVERLOADED}')"


def _claim(summary: dict, cid: str) -> dict:
    return next(c for c in summary["claims"] if c["id"] == cid)


def _facts(claim: dict) -> dict:
    return {f["name"]: f["value"] for f in claim["facts"]}


POSTED_TITLE = "1 stream(s) failed after the access log's 200 (no upstream status named)"


@pytest.mark.parametrize(
    ("src", "title"),
    [(G09, G09_TITLE), (STREAM, STREAM_TITLE), (STREAM_JSON, STREAM_TITLE), (POSTED, POSTED_TITLE)],
)
def test_every_output_says_the_failed_streams(analyzed, rendered, src, title):
    out, s, d = analyzed(src)
    texts = {"summary.json": " ".join(s["verdict"]), **rendered(out, s)}
    assert s["verdict"][0] == title + "."
    for where, text in texts.items():
        assert title in text, where
        assert "Nothing alarming" not in text and "none failed" not in text, where
    # an access log's 200 is no completed answer, and the next test is fallbacks on mid-stream errors
    f = next(f for f in d["findings"] if f["claim_id"] == "gateway.stream_failed")
    assert f["severity"] == "medium" and f["kind"] == "errors"
    assert "does not mean the answer completed" in f["cause"]
    assert "fallback" in f["next_test"] and "[DONE]" in f["next_test"]
    for where in ("summary.md", "report.html"):
        assert "does not mean the answer completed" in texts[where], where


def test_g09_the_failure_is_untied_and_says_what_is_missing(analyzed):
    """Two access lines of 200 precede the error (line 1, before any LiteLLM record, so untimed; line 5) and the
    excerpt does not begin at the proxy's start: which request failed is not decided, and the claim says so."""
    out, s, d = analyzed(G09)
    c = _claim(s, "gateway.stream_failed")
    assert c["state"] == "observed"
    v = _facts(c)
    assert (v["failed_streams"], v["tied"], v["untied"], v["upstream_statuses"]) == (1, 0, 1, "503")
    assert v["first_record"] == f"line 6 of {G09.name}"
    # the day is the file's modification time's (LiteLLM's records carry HH:MM:SS only)
    assert v["first"] == v["last"] and v["first"].endswith("T14:59:09.000Z")
    assert any(m.startswith("which request 1 of the failed streams") for m in c["missing"])
    assert any("does not show the proxy's start" in m for m in c["missing"])
    assert any(m.startswith("when 1 of the access lines") for m in c["missing"])
    f = next(f for f in d["findings"] if f["claim_id"] == "gateway.stream_failed")
    assert f"line 6 of {G09.name} at 14:59:09" in f["evidence"]
    assert "2 access line(s) of 200 before it in its file, lines 1, 5" in f["evidence"]
    assert f["failed_requests"] == 1
    # the untimed request (line 1) is not 'none failed': the failed stream may be its own
    u = next(f for f in d["findings"] if "when is unknown" in f["title"])
    assert u["title"].startswith(
        "1 request(s) with no failing status, yet 1 stream(s) that failed after a 200"
    )
    assert "1 more request(s) in the folder carry a time and are counted apart" in u["evidence"]


# (file, [(error line, its access lines)], the first error's time, the finding's span): text logs carry HH:MM:SS,
# json_logs' records their own time to the microsecond (uvicorn's access lines too)
RECORDED = [
    (
        STREAM,
        [(41, [40]), (107, [101, 106]), (176, [101, 106, 159, 170, 175])],
        "01:02:02",
        ("02.000", "09.000"),
    ),
    (STREAM_JSON, [(40, [39]), (49, [44, 48]), (67, [44, 48, 53, 62, 66])], "01:28:04", ("04.577", "12.420")),
]


@pytest.mark.parametrize(("src", "errors", "first_at", "span"), RECORDED)
def test_recorded_streams_tied_only_where_the_order_decides(analyzed, src, errors, first_at, span):
    """The recordings begin at the proxy's start (uvicorn's 'Started server process', line 1): the first failure
    follows exactly one 200, so it is that request's; the second follows two free ones and the third five (the
    first 200 is taken): not tied, whatever their times (a stream may last minutes)."""
    out, s, d = analyzed(src)
    v = _facts(_claim(s, "gateway.stream_failed"))
    assert (v["failed_streams"], v["tied"], v["untied"], v["upstream_statuses"]) == (3, 1, 2, None)
    f = next(f for f in d["findings"] if f["claim_id"] == "gateway.stream_failed")
    ev = f["evidence"]
    (first, (tied,)), *rest = errors
    assert f"line {first} of {src.name} at {first_at} " in ev
    assert f"tied to the access line at line {tied}: the only 200 since the proxy's start" in ev
    for line, cands in rest:
        said = ", ".join(map(str, cands))
        assert f"line {line} of {src.name}" in ev
        assert f"{len(cands)} access line(s) of 200 before it in its file, lines {said}" in ev
    assert f["failed_requests"] == 3
    lo, hi = span
    assert f["start"].endswith(f"T{first_at[:-2]}{lo}Z") and f["end"].endswith(f"{hi}Z")


def test_the_parser_flags_the_stream_failures_and_the_proxys_start(tmp_path):

    from logscope.api import AnalyzeOptions, ingest

    res = ingest_files(tmp_path, STREAM)
    g = res.table("gateway_attempts")
    failed = g.filter(pl.col("flags") == "failed,stream")
    assert failed["line_no"].to_list() == [41, 107, 176]
    assert failed["upstream_status"].to_list() == [None, None, None]  # 'Connection error.': no answer to name
    assert (
        failed["error"][1]
        == f"litellm.APIConnectionError: APIConnectionError: OpenAIException - {OVERLOADED}"
    )
    assert g.filter(pl.col("flags").is_null())["status"].to_list() == [200] * 6
    life = res.table("gateway_errors").select("kind", "line_no", "logger").rows()
    assert life == [("start", 1, "uvicorn"), ("shutdown", 232, "uvicorn")]
    # the router's failures of whole requests keep their flag
    src = tmp_path / "b"
    src.mkdir()
    (src / "litellm-proxy.log").write_bytes((DATA / "litellm" / "litellm-proxy.log").read_bytes())
    res = ingest(src, tmp_path / "b-out", AnalyzeOptions())
    flags = res.table("gateway_attempts")["flags"].drop_nulls()
    assert "failed,stream" not in flags.to_list() and (flags == "failed").sum() > 0
    g09 = ingest_files(tmp_path / "c", G09).table("gateway_attempts")
    row = g09.filter(pl.col("flags") == "failed,stream").row(0, named=True)
    assert (row["line_no"], row["upstream_status"], row["ts_start"].time()) == (6, 503, time(14, 59, 9))


def test_one_200_before_it_is_no_tie_when_the_file_may_have_lost_others(analyzed):
    """The posted excerpt (an older LiteLLM, Ollama's empty error body) holds one access line of 200 and then the
    stream's error, but not the proxy's start: a stream opened before the excerpt could be the one that failed."""
    out, s, d = analyzed(POSTED)
    c = _claim(s, "gateway.stream_failed")
    v = _facts(c)
    assert (v["failed_streams"], v["tied"], v["untied"], v["upstream_statuses"]) == (1, 0, 1, None)
    assert any("does not show the proxy's start" in m for m in c["missing"])
    f = next(f for f in d["findings"] if f["claim_id"] == "gateway.stream_failed")
    error = "'b''' "  # Ollama's empty body, as LiteLLM printed it
    want = f"line 2 of {POSTED.name} at 16:30:59 {error}(not tied: 1 access line(s) of 200 before it in its file, line 1)"
    assert want in f["evidence"]


@pytest.mark.parametrize("run", ["retry-storm", "crash"])
def test_nginx_flags_are_no_failed_streams(run, tmp_path):
    """nginx's 'no_live_upstreams' flag holds the word 'stream': the lab's nginx runs (334 and 814 such rows) have no
    stream that failed after its 200, and no finding says so."""
    from conftest import LAB, need
    from logscope.api import AnalyzeOptions, analyze
    from logscope.correlate import stream_failures

    out = tmp_path / "out"
    analyze(need(LAB / run), out, AnalyzeOptions())
    summary = json.loads((out / "summary.json").read_text())
    flags = pl.read_parquet(out / "gateway_attempts.parquet")["flags"]
    assert (flags == "no_live_upstreams").sum() > 0
    assert stream_failures.load(out).failures == []
    assert not [f for f in summary["findings"] if "stream(s) failed" in f["title"]]
