"""A gateway's requests that are no inference call are named beside the retries table that leaves them out.
public-2 g02 (ingress-nginx #9443: one GET / tried 3 times, 504 504 504) read "gateway requests 0, gateway upstream
attempts 0" beside a finding of the same 3 attempts; the lab's ladders hold Prometheus's GET /metrics and the
bench's POST /tokenize behind the same nginx."""

from __future__ import annotations

import pytest

from conftest import LAB, PUBLIC2, need

CASES = {  # source: (requests, attempts, the calls as printed)
    "g02": (PUBLIC2 / "g02-ingress-nginx-default-format-3-upstream-tries-504-504-504.log", 1, 3, "GET /: 1"),
    "g05": (PUBLIC2 / "g05-envoy-archgw-ingress-200s-baseline-chat-completions.log", 1, 1, "GET /healthz: 1"),
    "ladder": (LAB / "ladder", 35, 42, "GET /metrics: 28, POST /tokenize: 7"),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_calls_that_are_no_inference_are_named_in_every_output(analyzed, key, rendered):
    src, n, k, calls = CASES[key]
    out, s, _ = analyzed(need(src))
    g = s["retries"]["gateway_other"]
    assert (g["requests"], g["attempts"]) == (n, k)
    assert f"no inference call ({calls})" in g["text"]
    assert g["text"].endswith("not counted in the retries table")
    seen = rendered(out, s)
    assert g["text"] in seen["summary.md"]
    assert g["text"] in seen["report.html"]
    assert g["text"] in seen["terminal"]


def test_a_folder_of_inference_calls_only_says_nothing(analyzed):
    """abort-ignored's nginx saw completions only: no sentence, no key."""
    _, s, _ = analyzed(need(LAB / "abort-ignored"))
    assert s["retries"]["gateway_requests"]
    assert s["retries"]["gateway_other"] is None
