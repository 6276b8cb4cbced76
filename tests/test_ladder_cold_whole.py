"""A ladder step whose every request was sent in the cold-start window is judged on them, and says so.

The cold-start rule sets a step's cold requests aside when it has warm ones; a first step that lies wholly inside
the window (the server's first 30 s of traffic) had none to set aside and was judged 'met' on its cold requests
with nothing saying so (its claim and the boundary's evidence named only the steps that lost requests). lab
ladder-gaveup-3s: step 1 (c=2) 24 requests from 10:58:27.8, the window from 10:58:28; lab ladder: step 1 (c=1) 6
requests of `vllm bench serve`, the window from 08:19:20; lab v0-ladder: step 1 (c=2) 26 requests."""

from __future__ import annotations

import pytest

from conftest import LAB, need

# run: (the wholly cold step, its requests, the window's start as said)
CASES = {
    "ladder-gaveup-3s": (1, 24, "10:58:28"),
    "ladder": (1, 6, "08:19:20"),
    "v0-ladder": (1, 26, None),
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_a_step_wholly_in_the_cold_start_says_it_was_judged_on_it(run, analyzed, rendered):
    step, requests, window = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    lad = s["ladder"]
    assert [(c["step"], c["requests"]) for c in lad["cold_whole_steps"]] == [(step, requests)]
    row = lad["steps"][step - 1]
    assert (row["cold"], row["cold_set_aside"], row["requests"]) == (True, 0, requests)
    # the step's own claim holds the fact and says it
    claim = next(c for c in s["claims"] if c["id"] == f"ladder.step.{step}")
    facts = {f["name"]: f["value"] for f in claim["facts"]}
    assert facts["cold_whole"] is True
    # a step with warm requests carries no such fact
    later = next(c for c in s["claims"] if c["id"] == f"ladder.step.{step + 2}")
    assert {f["name"]: f["value"] for f in later["facts"]}["cold_whole"] is None
    said = f"step {step} (all {requests} request(s) sent in the first 30 s of traffic after a server start"
    for name, text in rendered(out, s).items():
        if name == "terminal":  # titles only: the evidence is the pages'
            continue
        flat = text.replace("\\_", "_")
        assert "judged on cold-start requests only" in flat, name
        assert said in flat, name
        if window is not None:
            assert f"the window from {window}" in flat, name
