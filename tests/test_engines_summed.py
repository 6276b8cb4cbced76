"""Figures summed over data-parallel engines say so, and one sample has a time, not a duration.

public-2 n01 (vLLM #36748, V1 0.14 DP=8: 'Engine 000: … Running: 51 reqs, Waiting: 117 reqs, GPU KV cache usage:
100.0%' and 'Engine 001: … Running: 31 reqs, Waiting: 108 reqs, … 98.6%' in one second) read "KV up to 100.0 %, 82
running, 225 waiting": sums no line shows, beside the fullest engine's KV, unsaid; its finding read "KV cache ≥ 90.0 %
for 0 s" and "06:16:52–06:16:52 (0 s)". tests/data/vllm-pastes 36748 is the same report pasted flattened (one
physical line). A single engine's figures carry no note (public-2 n13, V0 0.4.2)."""

from __future__ import annotations

import pytest

from conftest import DATA, PUBLIC2, need

SUMMED = "82 running, 225 waiting (2 engines: running and waiting summed over them, KV the fullest's)"
CASES = {
    "n01": PUBLIC2 / "n01-v1-0.14-dp8-engine000-001-kv100-waiting117.log",
    "36748": DATA / "vllm-pastes" / "36748-flattened-dp8-stats.log",
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_summed_engines_are_said_in_every_output(analyzed, key, rendered):
    out, s, diag = analyzed(need(CASES[key]))
    (ep,) = diag["episodes"]
    st = ep["details"]["state_during"]
    assert (st["engines_max"], st["running_max"], st["waiting_max"], st["kv_max"]) == (2, 82.0, 225.0, 1.0)
    assert s["verdict"][0] == f"KV cache near full at 06:16:52 (one stats line): KV up to 100.0 %, {SUMMED}."
    f = s["findings"][0]
    assert f["symptom"].startswith("KV cache ≥ 90.0 % at 06:16:52 (one sample) (")
    assert "2 engines: running and waiting summed" in f["symptom"]
    assert f["evidence"].startswith("KV usage at 06:16:52 (one sample)")
    for text in rendered(out, s).values():
        assert SUMMED in text
        assert "(0 s)" not in text and "for 0 s" not in text


def test_one_engine_carries_no_note(analyzed):
    _, s, diag = analyzed(need(PUBLIC2 / "n13-v0-0.4.2-kv-99.7-100-running-247-219-pending-740-768.log"))
    assert diag["episodes"][0]["details"]["state_during"]["engines_max"] == 1
    assert s["verdict"][0].endswith("KV up to 100.0 %, 247 running, 768 waiting.")
