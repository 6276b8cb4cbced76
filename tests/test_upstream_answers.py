"""An upstream that answered every attempt with an error is not one that never answered. public-2 g01 (LiteLLM
#19985: OpenRouter's free model rate-limited, 'RateLimitError … limited to 8 requests per minute' twice and
'Provider returned error' once) read "Upstream openai/qwen/qwen3-4b:free never answered (3 attempts)" and told to
remove it from the upstream group. An upstream with no status (Envoy's 503 UF), or the gateway's own 502/504 with
no response header (nginx: connection refused, connect timeout), still never answered."""

from __future__ import annotations

import pytest

from conftest import LAB, PUBLIC2, need

G01 = PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log"
SILENT = {  # source: (upstream, attempts, what the gateway did after them): each line an attempt with no answer
    # Envoy 503 UF (upstream connection failure): no upstream status
    "g04": (
        PUBLIC2 / "g04-envoy-archgw-503-UF-chat-completions-openai-python.log",
        "[2607:7700:0:33:0:1:ac42:f3]:443",
        3,
        # three separate calls (distinct x-request-ids: openai-python's retries), no attempt count in the line
        "Envoy flag UF (upstream connection failure) × 3; whether the gateway retried them is not in its log",
    ),
    # ingress-nginx: 'upstream timed out (110) while connecting', upstream_status 504 504 504 written by nginx
    "g02": (
        PUBLIC2 / "g02-ingress-nginx-default-format-3-upstream-tries-504-504-504.log",
        "192.168.215.1:80",
        3,
        # one request's three tries ('504, 504, 504'): the first two each followed by the next
        "at 16:02:45, none answered (no upstream status, or the gateway's own 502/504 with no response header); "
        "2 of them followed by a gateway retry",
    ),
    # the lab's nginx pool holds :8002 where nothing listens: us="502, 200", uht="-, 0.008" (no header came)
    "calm-b": (LAB / "calm-b", "127.0.0.1:8002", 9, "9 of them followed by a gateway retry"),
}


def _upstream(s: dict, upstream: str) -> tuple[dict, dict]:
    f = next(f for f in s["findings"] if f["title"].startswith(f"Upstream {upstream} "))
    claim = next(c for c in s["claims"] if c["id"] == f["claim"])
    return f, {x["name"]: x["value"] for x in claim["facts"]}


def test_a_rate_limited_upstream_answered(analyzed, rendered):
    out, s, _ = analyzed(need(G01))
    f, facts = _upstream(s, "openai/qwen/qwen3-4b:free")
    # two RateLimitError lines (429), one APIError 'Provider returned error' with no status in the line
    assert (facts["attempts"], facts["answered"], facts["statuses"], facts["no_status"]) == (
        3,
        2,
        "429 × 2",
        1,
    )
    title = (
        "Upstream openai/qwen/qwen3-4b:free answered none of its 3 attempts with success "
        "(429 × 2; 1 with no upstream status)"
    )
    assert f["title"] == title and f["severity"] == "medium"
    assert "rate-limits" in f["cause"] and "429" in f["next_test"]
    assert s["verdict"][0] == title + "."
    for name, text in rendered(out, s).items():
        assert title in text, name
        assert "never answered" not in text, name
        assert "Remove it from the upstream group" not in text, name


@pytest.mark.parametrize("key", sorted(SILENT))
def test_an_upstream_with_no_answer_never_answered(analyzed, key, rendered):
    src, upstream, n, then = SILENT[key]
    out, s, _ = analyzed(need(src))
    f, facts = _upstream(s, upstream)
    assert f["title"] == f"Upstream {upstream} never answered ({n} attempts)"
    assert (facts["attempts"], facts["answered"]) == (n, 0)
    # what followed each attempt is said from the gateway's own attempt count, never assumed (it read 'each costs a
    # connect failure and a gateway retry' of g04's three separate calls)
    assert then in f["evidence"] and "each costs" not in f["evidence"]
    assert facts["retried_after"] == (None if key == "g04" else n - 1 if key == "g02" else n)
    for name, text in rendered(out, s).items():
        assert f["title"] in text, name
        assert name == "terminal" or then in text, name  # the terminal shows titles only


def test_a_latency_of_milliseconds_is_said_in_milliseconds(analyzed, rendered):
    """g04's 503 UF came back in 2–3 ms (Envoy's duration): its e2e p95 read '0.00 s', as if no time at all."""
    src = SILENT["g04"][0]
    out, s, _ = analyzed(need(src))
    f = next(f for f in s["findings"] if f["title"].startswith("Errors "))
    said = "e2e p95 2 ms (gateway clock, gateway_log) to their failure"
    assert said in f["evidence"] and "0.00 s" not in f["evidence"]
    for name, text in rendered(out, s).items():
        assert name == "terminal" or said in text, name
