"""A cold start's TTFT names its clock. The lab's crash run (SIGKILL at 08:34:23, ready again at 08:35:31; the
callers' JSONL times each first token) read "TTFT p95 3.07 s in the first 30 s of traffic, 0.07 s warm": two
latencies on no named clock, where the claim's facts said 'client'."""

from __future__ import annotations

from conftest import LAB, need


def test_a_cold_start_names_its_clock(analyzed, rendered):
    out, s, d = analyzed(need(LAB / "crash"))
    [f] = [f for f in s["findings"] if f["title"].startswith("Slow first tokens after the server start")]
    facts = {x["name"]: x for x in next(c for c in s["claims"] if c["id"] == f["claim"])["facts"]}
    cold, warm = facts["cold_ttft_p95"], facts["warm_ttft_p95"]
    assert (cold["clock"], warm["clock"]) == ("client", "client")
    window = next(w for w in d["cold_start"]["windows"] if w["ttft_p95"] == cold["value"])
    assert window["ttft_clock"] == "client" and cold["value"] > 2.0 > 0.1 > warm["value"]
    said = f"TTFT p95 (client clock) {cold['value']:.2f} s in the first 30 s of traffic, {warm['value']:.2f} s warm"
    assert f["symptom"] == said
    outputs = rendered(out, s)
    assert said in outputs["summary.md"] and said in outputs["report.html"]
