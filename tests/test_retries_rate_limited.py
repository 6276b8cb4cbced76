"""Retries that followed 429s are a rate limit, not a timeout: public-2 c01 (openai-python through LiteLLM to Groq:
429, retry in 0.89 s, 429, retry in 1.63 s) and c02 (LangBot: 429 ×3 with backoff, then another 429 44 min later)
were told "set the client timeout above the server's p95 latency under load so a slow answer is not abandoned and
re-sent" as the verdict's first thing to test, though no attempt timed out. c03 (lm-eval: a TimeoutError, then a
retry) keeps that advice."""

from __future__ import annotations

import pytest

from conftest import PUBLIC2, need

TIMEOUT_ADVICE = "set the client timeout above the server's p95 latency"
LIMIT_ADVICE = "Keep the request rate under the limit that answers 429"
CASES = {  # source: (retried attempts, of them answered 429)
    "c01": (PUBLIC2 / "c01-openai-python-via-litellm-groq-429-retry-backoff-custom-format.log", 2),
    "c02": (PUBLIC2 / "c02-openai-python-langbot-429-retry-backoff.log", 2),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_retries_after_429_are_a_rate_limit(analyzed, rendered, key):
    src, n = CASES[key]
    out, s, d = analyzed(need(src))
    assert d["traffic"]["retried_for"] == {
        "attempts": n,
        "rate_limited": n,
        "timed_out": 0,
        "other_status": 0,
    }
    [f] = [f for f in s["findings"] if f["title"].startswith("Retries:")]
    assert f["next_test"].startswith(LIMIT_ADVICE) and TIMEOUT_ADVICE not in f["next_test"]
    assert f["cause"].startswith(
        f"the callers were rate-limited: all {n} retried attempt(s) were answered 429"
    )
    assert s["verdict"][2] == f"First thing to test: {f['next_test']}"
    for name, text in rendered(out, s).items():
        assert LIMIT_ADVICE in text and TIMEOUT_ADVICE not in text, name


def test_retries_after_a_timeout_keep_the_timeout_advice(analyzed):
    out, s, d = analyzed(need(PUBLIC2 / "c03-lm-eval-harness-client-timeout-retry-tqdm-glued.log"))
    assert d["traffic"]["retried_for"] == {
        "attempts": 1,
        "rate_limited": 0,
        "timed_out": 1,
        "other_status": 0,
    }
    [f] = [f for f in s["findings"] if f["title"].startswith("Retries:")]
    assert TIMEOUT_ADVICE in f["next_test"] and LIMIT_ADVICE not in f["next_test"]
