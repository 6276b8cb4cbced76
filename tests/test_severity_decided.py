"""A pressure finding's severity by impact is decided once (findings/impact_rule.decide) from the facts its claim
carries, and its words are rendered from that decision: the rule named in every output is the one the claim's own
facts give against its own thresholds (evid27). Each impact rule on real lab runs: storm-b and retry-storm
(class_kept: the share and length of a high one, kept at its class's medium), ladder (impact_high, impact_short,
impact_none), seqs-16 (impact_short, impact_none), spike-b (impact_latency: the callers' e2e p95 rose 4.1×)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import LAB, need
from logscope.diagnose.findings import impact_rule

RUNS = {  # run: the impact rules its pressure findings were set by
    "storm-b": ["class_kept"],
    "retry-storm": ["class_kept"],
    "ladder": ["impact_high", "impact_short", "impact_none"],
    "seqs-16": ["impact_short", "impact_short", "impact_none"],
    "spike-b": ["impact_latency"],
}
IMPACT = {
    "impact_none",
    "impact_share",
    "impact_short",
    "impact_open",
    "impact_high",
    "impact_latency",
    "class_kept",
}


def _facts(claim: dict) -> dict:
    return {f["name"]: f["value"] for f in claim["facts"]}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_rule_is_the_one_its_facts_give(analyzed, rendered, run):
    out, s, d = analyzed(need(LAB / run))
    claims = [c for c in d["claims"] if c["id"].startswith("severity.") and _facts(c)["rule"] in IMPACT]
    assert [_facts(c)["rule"] for c in claims] == RUNS[run]
    seen = rendered(out, s)
    by_id = {f["id"]: f for f in s["findings"]}
    for c in claims:
        v = _facts(c)
        # the claim's facts and thresholds alone decide it again: nothing the words say is outside them
        fig = next((g for g in ("ttft", "e2e") if f"{g}_p95_during" in v), None)
        rise = (
            {"figure": fig, "clock": "client", "words": "", "p95_s": 0, "baseline_p95_s": 0} if fig else None
        )
        felt = impact_rule.Felt(
            v["failed"],
            v["slowed"],
            v["requests_in_flight"],
            v["under_pressure_s"],
            v["class_severity"],
            rise=rise,
            open_end=v["open_end"],
        )
        again = impact_rule.decide(felt, SimpleNamespace(**c["thresholds"]))
        assert (again.rule, again.level) == (v["rule"], c["state"])
        f = by_id[c["id"].removeprefix("severity.")]
        assert f["severity"] == c["state"] and f["severity_by"]["rule"] == v["rule"]
        # every output renders the one sentence
        assert f["severity_by"]["sentence"] == c["sentence"]
        for name in ("summary.md", "report.html"):
            assert c["sentence"] in seen[name], name
        # the terminal lists the first findings: each listed says its sentence
        if f"[{f['severity']}] {f['title']}" in seen["terminal"]:
            assert f"severity {c['sentence']}" in seen["terminal"]


def test_words_follow_the_rule_not_the_conditions():
    """The words name the threshold the rule compared: seqs-16's 176 of 177 over 22 s is impact_short's 'lasted
    22 s, under the 30 s'; long-burst's 123 of 128 over 64 s at its class's medium, class_kept's."""
    th = SimpleNamespace(impact_high_share=0.1, impact_high_min_s=30.0, impact_latency_ratio=2.0)
    short = impact_rule.decide(impact_rule.Felt(0, 176, 177, 22.067, "high"), th)
    assert (short.level, short.rule) == ("medium", "impact_short")
    assert short.said.endswith("it lasted 22 s, under the 30 s a high one must last (impact_high_min_s)")
    kept = impact_rule.decide(impact_rule.Felt(0, 123, 128, 64.0, "medium"), th)
    assert (kept.level, kept.rule) == ("medium", "class_kept")
    assert kept.said.endswith("over 64 s: the impact of a high one, kept at its class's medium")
    assert impact_rule.evidence(kept) == ""
    # the same figures still on when the logs end: its 22 s are a lower bound, so not short (tests/test_open_end.py)
    cut = impact_rule.decide(impact_rule.Felt(0, 176, 177, 22.067, "high", open_end=True), th)
    assert (cut.level, cut.rule) == ("high", "impact_open")
    assert (
        "still abnormal when the logs analysed end, 22 s in" in cut.said and "under the 30 s" not in cut.said
    )
    assert impact_rule.evidence(cut).startswith(
        "; severity high by its class, its length unknown: 176 of the 177"
    )
