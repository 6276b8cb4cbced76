"""One V0 preemption warning is one per 50 preemptions: vLLM V0's scheduler prints it only when its counter is a
multiple of 50 (vllm/core/scheduler.py ``_preempt``), with total_num_cumulative_preemption=N. vllm-public 04 carries N=101 with no
time (read "Preemption warning without a time (1 line(s))"); the lab's v0-ladder server log alone carries 1, 51,
…, 201 (read "201 preemptions", not saying whose count); vllm-public 33's line is cut before N (read "1
preemption", as if exact)."""

from __future__ import annotations

from conftest import LAB, PUBLIC

P33 = PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log"
P04 = PUBLIC / "04-v0-single-preemption-warning-no-prefix.log"
V0_SERVER = LAB / "v0-ladder" / "vllm-server.log"

FLOOR_33 = "at least 1 preemption (vLLM V0 logs every 50th) at 11:16:41"
COUNTER = "by vLLM's cumulative counter (total_num_cumulative_preemption)"


def test_a_v0_warning_cut_before_its_count_is_a_floor(analyzed, rendered):
    """33's one warning is cut at 'total_num_cumulative_pr': at least 1 preemption, never '1 preemption' as exact."""
    out, s, diag = analyzed(P33)
    (ep,) = diag["episodes"]
    assert (ep["signal"], ep["count"], ep["details"]["preemptions_counted_by"]) == (
        "preemptions",
        1,
        "v0_floor",
    )
    assert ep["details"]["v0_preemption_warnings"]["last_cumulative"] is None
    assert s["verdict"][0].startswith(f"A{FLOOR_33[1:]}, beside a queue 11:16:34–11:16:39")
    for name, text in rendered(out, s).items():
        assert FLOOR_33 in text, name
        assert "—1 preemption" not in text and " 1 preemption at" not in text, name


def test_a_v0_warning_with_its_count_is_vllms_counter(analyzed, rendered):
    """04 (no time): 101 by the counter; the v0-ladder's server log alone (1, 51, 101, 151, 201 within 58 s):
    201, the counter's last value."""
    out, s, diag = analyzed(P04)
    title = f"101 preemptions {COUNTER}, on warning(s) without a time (1 line(s))"
    assert s["findings"][0]["title"] == title
    assert (
        "total_num_cumulative_preemption=101 (101 preemptions since the engine started"
        in s["findings"][0]["evidence"]
    )
    for name, text in rendered(out, s).items():
        assert title in text, name
    out, s, diag = analyzed(V0_SERVER)
    (ep,) = diag["episodes"]
    w = ep["details"]["v0_preemption_warnings"]
    assert (w["lines"], w["last_cumulative"], ep["count"]) == (5, 201, 201)
    assert ep["details"]["preemptions_counted_by"] == "v0_counter"
    said = f"201 preemptions {COUNTER} 09:37:14–09:38:12"
    assert s["findings"][0]["title"] == f"Sustained KV pressure, as far as the logs show: {said}"
    for name, text in rendered(out, s).items():
        assert said in text, name
