"""'Recurring' holds the load at each beat and each beat's recovery, and the finding says them (diagnose.beats).

Lab abort-ignored read "[medium] Recurring KV pressure: 3 preemption spikes, starting 34–66 s apart" with its
symptom the first beat's alone ("2 preemptions at 02:07:02"). Against the raw files: one client phase (manifest
client_start phases '180:r0.9', Poisson 0.9 req/s for 180 s), 13 preemptions (truth notes: 3 small episodes
02:07:04, 02:08:09–02:08:11, 02:08:42), each back to 0 while the client kept sending (1.0, 1.2, 1.2/s as each
began against 0.8–0.9/s before: no surge). The load did not recur; the pressure did, at one load: 'recurring'
is backed, and the title now says on what. traced-2r-kill (one client phase at 2 req/s): 8 beats, 1 after a surge
of arrivals, 7 at a steady load, 174 preemptions. Beats that each follow a surge of their own load are one-offs
(tests/test_diagnose.py::test_pressure_after_each_surge_is_one_offs_not_a_pattern)."""

from __future__ import annotations

import json

import pytest

from conftest import LAB, need

CASES = {  # run: (spikes, preemptions in all, steady beats, beats after a surge, the client's phase)
    "abort-ignored": (3, 13, 3, 0, "0.9 requests/s"),
    "traced-2r-kill": (8, 174, 7, 1, "2 requests/s"),
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_recurring_says_the_load_at_each_beat(analyzed, rendered, run):
    spikes, total, steady, surge, phase = CASES[run]
    out, s, d = analyzed(need(LAB / run))
    eps = [e for e in d["episodes"] if e["class"] == "recurring"]
    assert len(eps) == spikes and sum(e["count"] for e in eps) == total
    # the manifest's one client phase holds every beat
    starts = [e["event"] for e in json.loads((LAB / run / "manifest.json").read_text())["events"]]
    assert starts.count("client_start") == 1
    # each beat's own reason says what came before it; the pattern's facts count them
    said_steady = sum("a transient at a steady load" in e["reason"] for e in eps)
    said_surge = sum("after a surge of arrivals" in e["reason"] for e in eps)
    assert (said_steady, said_surge) == (steady, surge)
    claim = next(c for c in s["claims"] if c["id"] == eps[0]["claim_id"])
    facts = {f["name"]: f["value"] for f in claim["facts"]}
    assert facts["beats_recovered"] == spikes and facts["beats_total"] == total
    assert (facts["beats_steady"], facts["beats_after_surge"]) == (steady, surge)
    assert facts["beats_phase"] == phase
    words = (
        f"each back to baseline, at a steady load (one client phase, {phase})"
        if surge == 0
        else f"each back to baseline, {surge} after a surge of load, {steady} at a steady load"
    )
    [f] = [f for f in s["findings"] if f["kind"] == "pressure" and "Recurring" in f["title"]]
    assert words in f["title"], f["title"]
    assert f["symptom"].startswith(f"{total} preemptions in {spikes} spikes; the first: ")
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert words in seen[name] and f["symptom"] in seen[name], name
