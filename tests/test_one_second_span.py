"""A range whose two ends read the same second is said at its time, not as 'a–a'. traced-1r's verdict read "No
episode the callers felt: E1 (5 preemptions, 03:39:23–03:39:23) slowed or failed none of the requests in flight";
kv-short's finding "first tokens slow (TTFT p95 (client clock, client_records) above 2 s 04:43:30–04:43:30)"."""

from __future__ import annotations

from conftest import LAB, need


def test_the_verdict_says_an_instant_at_its_time(analyzed, rendered):
    out, s, _ = analyzed(need(LAB / "traced-1r"))
    line = s["verdict"][1]
    assert line.startswith(
        "No episode the callers felt: E1 (5 preemptions, at 03:39:23) slowed or failed none"
    )
    assert "03:39:23–03:39:23" not in line
    for name, text in rendered(out, s).items():
        assert line in text, name


def test_a_finding_says_an_instant_at_its_time(analyzed, rendered):
    out, s, _ = analyzed(need(LAB / "kv-short"))
    f = s["findings"][0]
    assert f["symptom"].endswith(
        "; first tokens slow (TTFT p95 (client clock, client_records) above 2 s at 04:43:30)"
    )
    for name, text in rendered(out, s).items():
        assert "04:43:30–04:43:30" not in text, name
