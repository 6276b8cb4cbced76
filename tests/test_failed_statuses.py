"""A few failed requests are told by the statuses that failed, not by a list of all of them. public-2 g06 (Higress,
one /v1/chat/completions refused 403 by its ext-auth plugin) was told "for 504, compare the gateway's
proxy_read_timeout with the server's e2e latency"; g03 (ingress-nginx, one 504 after the default 60 s
proxy_read_timeout in front of a slow vLLM) keeps that test."""

from __future__ import annotations

import pytest

from conftest import PUBLIC2, need

CASES = {  # source: (title, words the cause and test must hold, words they must not)
    "g06": (
        PUBLIC2 / "g06-higress-envoy-json-accesslog-chat-completions-403-ext-auth.log",
        "1 of 1 requests failed (1 × 403, after up to 0.002 s)",
        ("403 an authorization refusal", "the gateway's auth policy"),
        ("504", "proxy_read_timeout"),
    ),
    "g03": (
        PUBLIC2 / "g03-ingress-nginx-vllm-cpu-completions-504-after-60s.log",
        "1 of 1 requests failed (1 × 504, after up to 60 s)",
        ("504 an upstream slower than the gateway's timeout", "proxy_read_timeout"),
        ("403", "auth"),
    ),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_the_failed_statuses_say_where_and_what_to_test(analyzed, key, rendered):
    src, title, must, never = CASES[key]
    out, s, _ = analyzed(need(src))
    f = s["findings"][0]
    assert f["title"] == title
    said = f"{f['cause']} {f['next_test']}"
    assert all(w in said for w in must), said
    assert not any(w in said for w in never), said
    assert s["verdict"][2] == f"First thing to test: {f['next_test']}"
    for text in rendered(out, s).values():
        assert f["next_test"] in text
