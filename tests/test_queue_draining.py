"""A queue being worked off as fast as prompts are prefilled is said as such, with the one change that would drain
it faster, not 'each waiting request needs more free blocks than remain (long prompts), or the engine is stalled'
and 'cap --max-num-seqs there' (evid16). vllm-public 03 (vLLM PR 37307, a load test: waiting 90 → 66 while running
10 → 34, KV 19 → 65 %, prompt throughput 24,000 tokens/s on every line) and public-2 s01 (SGLang #1612: queue 38 → 18
while running 1 → 21, token usage 0.04 → 0.77, 8192 new tokens in every prefill batch). kv-short's queue (2 waiting
behind 1 running at KV 75 %, its running set flat) is not one: its cause stays."""

from __future__ import annotations

import pytest

from conftest import LAB, PUBLIC, PUBLIC2, need

CASES = {
    "03": (
        PUBLIC / "03-v1-apiserver-prefix-waiting-queue-draining.log",
        "the queue was being worked off: on each of its 5 stats lines fewer waited and more ran (waiting 90 → 66, "
        "running 10 → 34, 15:38:10–15:38:50) while the KV cache had room (at most 65.4 %), prompt throughput "
        "23,998–24,001 tokens/s on every line: the waiting requests were admitted as fast as their prompts were "
        "prefilled",
        "Raise the prefill tokens per engine step (--max-num-batched-tokens) and replay the same burst: it drained at "
        "0.60 requests/s (90 → 66 waiting in 40 s, 66 left: about 110 s more at that pace), and should drain faster; "
        "if the prompt throughput stays at 23,998–24,001 tokens/s, prefill compute is the limit",
    ),
    "s01": (
        PUBLIC2 / "s01-sglang-0.3-prefill-batches-queue-draining-token-usage-rising.log",
        "the queue was being worked off: on each of its 5 stats lines fewer waited and more ran (waiting 38 → 18, "
        "running 1 → 21, 16:43:29–16:43:33) while the KV cache had room (at most 77.0 %): the waiting requests were "
        "admitted as fast as their prompts were prefilled",
        # SGLang's words for the same knob (engine_words)
        "Raise the prefill tokens per engine step (--chunked-prefill-size) and replay the same burst: it drained at "
        "5 requests/s (38 → 18 waiting in 4 s, 18 left: about 4 s more at that pace), and should drain faster; if "
        "the prompt throughput does not rise, prefill compute is the limit",
    ),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_a_draining_queue_is_said_and_tested_as_one(analyzed, rendered, key):
    src, cause, test = CASES[key]
    out, s, _ = analyzed(need(src))
    (f,) = [f for f in s["findings"] if f["kind"] == "pressure"]
    assert f["cause"].startswith(cause), f["cause"]
    assert f["next_test"].startswith(test), f["next_test"]
    for stale in (
        "long prompts",
        "stalled on the running",
        "cap --max-num-seqs",
        "cap --max-running-requests",
    ):
        assert stale not in f["cause"] + f["next_test"]
    seen = rendered(out, s)
    for where in ("summary.md", "report.html"):
        assert f["cause"] in seen[where] and f["next_test"] in seen[where]
    assert f["next_test"] in seen["terminal"]  # the verdict's first test is this finding's


def test_a_flat_queue_keeps_its_cause(analyzed):
    """kv-short: 2 waiting behind 1 running (KV up to 75 %), the running set never grew: no drain is claimed. Its
    queue began after the last arrival: the last requests' backlog (test_queue_backlog)."""
    _, s, _ = analyzed(need(LAB / "kv-short"))
    (f,) = [f for f in s["findings"] if f["kind"] == "pressure"]
    assert "worked off" not in f["cause"]
    assert f["cause"].startswith("the backlog of the last requests: up to 2 waited behind 1 running")
