"""The verdict's second line says what the first line's finding did over time, in words that read.

A slow engine with no episode read "No episode in …: nothing that spikes or lasts over time" beside a first line
that gave it a range (public-2 n14: 0.4 tokens/s for 2 running on 4 stats lines over 30 s; tests/data/vllm-slow-decode
8847 and 12153: 0.8 and 0.1 tokens/s on every stats line to the end). A crash's companions were its signals' names
joined by 'and' (public-2 n10: "not back before the logs end with stall meanwhile"; lab traced-2r-kill: "with e2e and
errors and kv_pressure and preemptions and queue and retries and ttft meanwhile")."""

from __future__ import annotations

import pytest

from conftest import DATA, LAB, PUBLIC2, need

SLOW = {  # source: (stats lines, range)
    "n14": (PUBLIC2 / "n14-v0-0.8-running2-0.4tok-s-degenerate-slow-decode.log", 4, "09:04:46–09:05:15"),
    "8847": (
        DATA / "vllm-slow-decode" / "8847-v0-0.6-llama3-8b-0.8-tokens-per-s-one-request.log",
        3,
        "11:35:23–11:35:43",
    ),
    "12153": (
        DATA / "vllm-slow-decode" / "12153-v0-cpu-granite-8b-0.1-tokens-per-s.log",
        2,
        "07:46:18–07:57:37",
    ),
}
CRASH = {
    "n10": (
        PUBLIC2 / "n10-v0-0.5.5-stuck-running27-zero-throughput-then-iteration-timeout.log",
        "A crash, not back before the logs end, with a stall meanwhile.",
    ),
    "traced-2r-kill": (
        LAB / "traced-2r-kill",
        "A crash of 1 of the 2 replicas, down 415 s, with slow answers, errors, KV pressure, preemptions, a queue, "
        "retries and slow first "
        "tokens meanwhile (10 episodes in all).",
    ),
}


@pytest.mark.parametrize("key", sorted(SLOW))
def test_a_slow_engine_lasted(analyzed, key, rendered):
    src, lines, rng = SLOW[key]
    out, s, _ = analyzed(need(src))
    f = s["findings"][0]
    assert f["title"].startswith("Decode at ") and not s["episodes"]
    facts = {x["name"]: x["value"] for x in next(c for c in s["claims"] if c["id"] == f["claim"])["facts"]}
    assert (facts["samples"], facts["to_the_end"]) == (lines, True)
    line = (
        f"No episode in {rng}: no pressure, error or latency episode; the slowness held on {lines} stats lines in a "
        "row to the end of the logs, so how long it lasted is not in them."
    )
    assert s["verdict"][1] == line
    for text in rendered(out, s).values():
        assert line in text
        assert "nothing that spikes or lasts" not in text


@pytest.mark.parametrize("key", sorted(CRASH))
def test_a_crash_names_what_came_with_it(analyzed, key, rendered):
    src, line = CRASH[key]
    out, s, _ = analyzed(need(src))
    assert s["verdict"][1] == line
    for text in rendered(out, s).values():
        assert line in text
