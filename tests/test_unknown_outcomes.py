"""Why a request's outcome is unknown is read from the records, not assumed. "unknown (no caller's or gateway's
record)" was printed for every request with no status, also where the folder is the gateway's or the caller's own
log: public-2 g01 (LiteLLM's router lines, each a RateLimitError or APIError with no HTTP status) and c03
(lm-eval's 'TimeoutError(), undefined, retrying' then 'Retry attempt 1', the end not in the excerpt). vLLM's own
lines alone (public-2 n02: 9 'Aborted request' lines; vllm-public 05: a 'Received request' and its 'Finished'
lines) are the requests that have no caller's or gateway's record."""

from __future__ import annotations

import pytest

from conftest import PUBLIC, PUBLIC2, need

CASES = {  # source: (unknown requests, what a missing status means)
    "g01": (
        PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log",
        3,
        "no status in the caller's or gateway's record",
    ),
    "c03": (
        PUBLIC2 / "c03-lm-eval-harness-client-timeout-retry-tqdm-glued.log",
        1,
        "no status in the caller's or gateway's record",
    ),
    "n02": (
        PUBLIC2 / "n02-v0-0.8-dp16-stats-then-aborted-flood-10min-timeout.log",
        9,
        "no caller's or gateway's record",
    ),
    "05": (PUBLIC / "05-v0-0.3-stuck-pending-115-kv-99.log", 1, "no caller's or gateway's record"),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_an_unknown_outcome_says_which_record_is_missing(analyzed, key, rendered):
    src, n, why = CASES[key]
    out, s, _ = analyzed(need(src))
    rows = [r for r in s["outcomes"]["by_status"] if r["outcome"] == "unknown"]
    assert [(r["requests"], r["status"], r["status_text"]) for r in rows] == [(n, None, why)]
    seen = rendered(out, s)
    assert f"| unknown | {why} | {n} |" in seen["summary.md"]
    assert f"<td>unknown</td><td>{why}</td>" in seen["report.html"]
    assert f"{n} unknown ({why})" in seen["terminal"]
