"""compare counts a run's requests as analyze does: a logical request with no time (no start, no end) is counted
apart, never among the requests, outcomes or latencies compared, and the page says so where it gives a count.
public-2 g09 (LiteLLM behind docker compose: uvicorn's first access line precedes any timed record) read 'logical
requests 2', 'completed ok 2' and '2 ok answer(s) may include a stream that failed' in compare, where analyze's
outcomes counted 1 request, 1 ok, and its finding '1 logical request(s) read from the gateway's log with no time'."""

from __future__ import annotations

import html

import pytest
from compare_helpers import metric_row, reader_text

from conftest import PUBLIC2
from logscope.api import compare

G05 = (
    PUBLIC2 / "g05-envoy-archgw-ingress-200s-baseline-chat-completions.log"
)  # 5 requests, each with its time
# (a run, its requests a time places, those with none, the records they were read from)
UNTIMED = [
    (PUBLIC2 / "g09-litellm-proxy-compose-wrapped-200s-then-upstream-503-overloaded-no-fallback.log", 1, 1, "the gateway's log"),
    (PUBLIC2 / "c05-openai-python-httpx-502-bad-gateway-then-retries-connection-error-llama-swap.log", 0, 9, "the client's records"),
]  # fmt: skip
APART = "counted apart, as analyze counts them"


@pytest.mark.parametrize(
    ("src", "timed", "apart", "where"), UNTIMED, ids=lambda x: getattr(x, "stem", "")[:3]
)
def test_requests_with_no_time_are_counted_apart_as_analyze_counts_them(
    src, timed, apart, where, analyzed, tmp_path
):
    out, summary, _ = analyzed(src)
    # analyze: its outcomes count the requests a time places; its finding the others, apart
    outcomes = summary["outcomes"]
    assert (outcomes["requests"] if outcomes else 0) == timed
    said = f"{apart} logical request(s) read from {where} with no time"
    assert any(f["evidence"].startswith(said + "; ") for f in summary["findings"])
    res = compare(out, analyzed(G05)[0], tmp_path / "c")
    doc = res["doc"]
    # compare: the same counts, and B (every request timed) as before
    row = metric_row(doc, "requests")
    assert (row["a"], row["b"]) == (timed, 5)
    assert (doc["traffic"]["a"]["requests"], doc["traffic"]["a"]["untimed_requests"]) == (timed, apart)
    assert (doc["traffic"]["b"]["requests"], doc["traffic"]["b"]["untimed_requests"]) == (5, 0)
    assert row["noise"].endswith(f"; A: {apart} more with no time, {APART}")
    done = metric_row(doc, "completed")
    assert done["a"] == (outcomes["by_outcome"]["ok"] if outcomes else None)
    # said where the page gives the count: the notes, the requests' row, the traffic table
    note = f"A: {said}, {APART}: not among the requests, outcomes or latencies compared here"
    assert note in doc["notes"] and note in reader_text(res)
    page = html.unescape(res["paths"]["compare_html"].read_text())
    assert f"<td>{timed} (+{apart} with no time, {APART})</td><td>5</td>" in page


def test_g09s_ok_answers_that_may_hide_a_failed_stream_are_analyzes(analyzed, tmp_path):
    """g09's one failed stream may be its one timed ok answer's, as analyze says; compare read '2 ok answer(s)'."""
    src = UNTIMED[0][0]
    out, summary, _ = analyzed(src)
    assert summary["outcomes"]["uncertain"]["may_include"] == 1
    res = compare(out, analyzed(G05)[0], tmp_path / "c")
    line = next(v for v in res["doc"]["verdict"] if v.startswith("SLO ("))
    assert "A's success share: unknown (1 ok answer(s) may include a stream that failed after its 200" in line
