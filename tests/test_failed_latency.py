"""Where none of a range's requests succeeded, their e2e is the time to their failure, not an answer's latency. The
lab's crash (SIGKILL mid-traffic: 502s from nginx with no live upstream, 8 streams cut) read "e2e p95 3.36 s (client
clock, client_records), success 0.0 %", and enginecore-kill (EngineCore SIGKILLed: 2,176 × 502) "e2e p95 0.24 s
(client clock, client_records), success 0.0 %", as if some request had been answered in that time."""

from __future__ import annotations

import pytest

from conftest import LAB, need


@pytest.mark.parametrize("run", ["crash", "enginecore-kill"])
def test_an_e2e_of_failed_requests_says_so(analyzed, rendered, run):
    out, s, d = analyzed(need(LAB / run))
    [ep] = [e for e in d["episodes"] if e["class"] == "crash"]
    assert ep["success_share"] == 0 and ep["e2e_p95"] is not None and ep["e2e_clock"] == "client"
    said = f"e2e p95 {ep['e2e_p95']:.2f} s (client clock, client_records) to their failure, success 0.0 %"
    f = next(f for f in s["findings"] if f["episode"] == ep["episode_id"])
    assert said in f["evidence"]
    outputs = rendered(out, s)
    assert said in outputs["summary.md"] and said in outputs["report.html"]


def test_an_e2e_of_answered_requests_stays_as_it_was(analyzed):
    """spike: every request of the burst answered 200 (truth: 284 × 200): its e2e p95 is an answer's latency."""
    _, s, d = analyzed(need(LAB / "spike"))
    [ep] = d["episodes"]
    assert ep["success_share"] == 1.0
    f = next(f for f in s["findings"] if f["episode"] == ep["episode_id"])
    assert f"e2e p95 {ep['e2e_p95']:.2f} s (client clock, client_records), success 100.0 %" in f["evidence"]
