"""A preemption count read at an instant between stats lines (a Prometheus scrape's, with milliseconds) has no server
state beside it: its finding's symptom read "2 preemptions at 02:07:02 (one sample) ()" (abort-ignored) and "5
preemptions at 03:39:23 (one sample) ()" (traced-1r), an empty parenthesis where the state would be."""

from __future__ import annotations

import pytest

from conftest import LAB, need

CASES = {  # run: the symptom of its instant's finding
    "abort-ignored": "2 preemptions at 02:07:02 (one sample)",
    "traced-1r": "5 preemptions at 03:39:23 (one sample)",
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_an_instant_with_no_state_has_no_empty_parenthesis(analyzed, rendered, run):
    out, s, d = analyzed(need(LAB / run))
    # (abort-ignored's is a recurring pattern's first beat: "13 preemptions in 3 spikes; the first: …")
    f = next(f for f in s["findings"] if CASES[run] in f["symptom"])
    ep = next(e for e in d["episodes"] if e["episode_id"] == f["episode"])
    assert ep["duration_s"] == 0 and (ep["running_max"], ep["waiting_max"], ep["kv_max"]) == (
        None,
        None,
        None,
    )
    assert f["symptom"].endswith(CASES[run])
    for name, text in rendered(out, s).items():
        assert f"{CASES[run]} ()" not in text, name
        if name != "terminal":  # the terminal prints the verdict and the findings' titles only
            assert f"{CASES[run]}\n" in text or f"{CASES[run]}</" in text, name
