"""A pressure finding's [high] is a claim on its callers: where no request, client or gateway record was in flight
during it (a server log alone), what they felt is unknown, and the class alone does not make it high (evid17).
vllm-public 41 read "[high] Sustained KV pressure, as far as the logs show: KV cache ≥ 90.0 % 02:38:15–02:38:25",
33 "[high] … at least 1 preemption … at 11:16:41" and n13 "[high] … KV cache ≥ 90.0 % 09:55:30–09:55:50", none
with a request record: each is medium, and says why. A death is its own impact: vllm-public 09's dead engine,
with no request record either, stays critical."""

from __future__ import annotations

import re

import pytest

from conftest import PUBLIC, PUBLIC2, need

SAID = "severity medium, not high by its class: impact on callers unknown: no request records"
CASES = {
    "41": (
        PUBLIC / "41-v0-2023-earliest-scheduler-throughput-stats.log",
        "Sustained KV pressure, as far as the logs show: KV cache ≥ 90.0 % 02:38:15–02:38:25",
    ),
    "33": (
        PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log",
        "Sustained KV pressure, as far as the logs show: at least 1 preemption (vLLM V0 logs every 50th) at "
        "11:16:41",
    ),
    "n13": (
        PUBLIC2 / "n13-v0-0.4.2-kv-99.7-100-running-247-219-pending-740-768.log",
        "Sustained KV pressure, as far as the logs show: KV cache ≥ 90.0 % 09:55:30–09:55:50",
    ),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_no_request_record_caps_the_class(analyzed, rendered, key):
    src, title = CASES[key]
    out, s, _ = analyzed(need(src))
    f = next(f for f in s["findings"] if f["title"] == title)
    assert f["severity"] == "medium", f["evidence"]
    assert f["failed_requests"] is None and f["slowed_requests"] is None  # nothing counted: unknown, not zero
    assert f["evidence"].endswith(SAID)
    assert not any(g["severity"] in ("critical", "high") for g in s["findings"])
    seen = rendered(out, s)
    assert f"[medium] {title}" in seen["summary.md"] and SAID in seen["summary.md"]
    card = " ".join(re.sub(r"<[^>]+>", " ", seen["report.html"]).split())  # the card's badge, then its title
    assert f"medium {title}" in card and f"high {title}" not in card
    assert SAID in seen["report.html"]
    assert "[high]" not in seen["terminal"] and title in seen["terminal"]


def test_a_death_stays_critical_without_request_records(analyzed):
    _, s, _ = analyzed(need(PUBLIC / "09-v0-asyncenginedead-critical-500.log"))
    f = s["findings"][0]
    assert f["kind"] == "crash" and f["severity"] == "critical", f["title"]
    assert "impact on callers unknown" not in f["evidence"]
