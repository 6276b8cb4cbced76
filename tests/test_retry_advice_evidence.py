"""The retries advice follows what the retried attempts ended in, as the folder states it.

* public-2 g01: LiteLLM's router retried each of 3 requests 10 times, 2 of them ending 'RateLimitError' (INDEX.md:
  2× RateLimitError, 1× APIError), no client log. The advice was to raise the client timeout; the gateway's own
  lines say the retries met a rate limit.
* tests/data/litellm: the `limited` model always answers 429 (README: 2 requests to it per pass of drive_litellm.py;
  litellm-proxy.log holds two passes); each of their failure lines ('LiteLLM Retried: 2 times') names the 429.
* tests/data/haproxy: over 09:50:19 (before its first 504) the retried lines all end 200 with a redispatch: nothing
  says what was retried, and the advice assumes no timeout; the whole log (two 'server timeout' 504s) keeps it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from conftest import DATA, PUBLIC2, need

TIMEOUT_ADVICE = "set the client timeout above the server's p95 latency"
LIMIT_ADVICE = "Keep the request rate under the limit that answers 429"
LITELLM_SAID = "the error or status named on each line with LiteLLM's own 'LiteLLM Retried: N times'"
G01 = PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log"


def _retries(s: dict) -> dict:
    [f] = [f for f in s["findings"] if f["kind"] == "retries"]
    return f


def _everywhere(out, s: dict, rendered) -> dict[str, str]:
    return rendered(out, s) | {"summary.json": json.dumps(s["findings"] + [s["verdict"]])}


def test_g01_retries_the_gateway_states_follow_its_429s(analyzed, rendered) -> None:
    out, s, d = analyzed(need(G01))
    index = (PUBLIC2 / "INDEX.md").read_text()
    assert "3 router failure lines (2× RateLimitError, 1× APIError)" in index
    assert d["traffic"]["retried_for"] == {
        "attempts": 3,
        "rate_limited": 2,
        "timed_out": 0,
        "other_status": 1,
        "unknown": 0,
        "source": LITELLM_SAID,
    }
    f = _retries(s)
    assert f["next_test"].startswith(LIMIT_ADVICE) and "let the gateway back off on 429" in f["next_test"]
    assert f["cause"].startswith(
        "the upstream rate-limited the gateway: 2 of the 3 retried request(s) ended in a 429 (Too Many Requests), "
        f"1 in another failure, none timed out, by {LITELLM_SAID}"
    )
    seen = _everywhere(out, s, rendered)
    for name, text in seen.items():
        assert TIMEOUT_ADVICE not in text, name
    # the terminal says the verdict only: its first thing to test is the upstream's limit (a 429 advice too)
    assert "under its limit" in seen["terminal"]
    for name in ("summary.md", "report.html", "summary.json"):
        assert LIMIT_ADVICE in seen[name] and "LiteLLM Retried: N times" in seen[name], name


@pytest.mark.parametrize(
    ("name", "limited", "other"),
    [("litellm-proxy.log", 4, 1), ("litellm-proxy-json.log", 2, 1)],
)
def test_litellm_limited_model_retries_are_read_as_429s(analyzed, rendered, name, limited, other) -> None:
    """Each failure line of the `limited` model names its 429; the `tiny` group's connection error is another."""
    src = need(DATA / "litellm" / name)
    assert src.read_text().count("LiteLLM Retried: 2 times") >= limited + other
    out, s, d = analyzed(src)
    assert d["traffic"]["retried_for"] == {
        "attempts": limited + other,
        "rate_limited": limited,
        "timed_out": 0,
        "other_status": other,
        "unknown": 0,
        "source": LITELLM_SAID,
    }
    for text_name, text in _everywhere(out, s, rendered).items():
        assert TIMEOUT_ADVICE not in text, text_name


def test_retries_nothing_names_assume_no_timeout(analyzed, rendered) -> None:
    src = need(DATA / "haproxy" / "haproxy.log")
    out, s, d = analyzed(src, until=datetime(2026, 11, 29, 9, 50, 19, 900000, tzinfo=UTC))
    rf = d["traffic"]["retried_for"]
    assert (rf["attempts"], rf["unknown"], rf["timed_out"], rf["other_status"]) == (5, 5, 0, 0)
    f = _retries(s)
    assert "what the retried attempts ended in is not in the folder" in f["next_test"]
    assert "timed out" not in f["cause"] and f["symptom"].startswith("requests were retried")
    for name, text in _everywhere(out, s, rendered).items():
        assert TIMEOUT_ADVICE not in text and LIMIT_ADVICE not in text, name
    # the whole log: two retried requests ended in HAProxy's 'server timeout' (504): the timeout advice stays
    _, s_all, d_all = analyzed(src)
    assert d_all["traffic"]["retried_for"]["timed_out"] == 2
    assert TIMEOUT_ADVICE in _retries(s_all)["next_test"]
