"""An episode still on when the observation stops (a death with no restart, or 'still abnormal when the logs end')
has an open end: its end is where the logs stop, so its length is a lower bound ('≥' in every table) and the impact
rule does not call it short. Found on lab spike cut by --until inside its 23 s episode: the page said 'still abnormal
when the range analysed ends' and, of the same finding, 'it lasted 13 s, under the 30 s a high one must last'."""

from __future__ import annotations

from datetime import datetime

import pytest

from conftest import LAB, need

CUT = {  # run: an --until inside its impact_short episode (the episode's start, end: 08:26:26-08:26:49 in spike)
    "spike": "2026-11-29T08:26:40+00:00",
    "seqs-16": None,  # found from the whole run's first impact_short finding
}


def _facts(claim: dict) -> dict:
    return {f["name"]: f["value"] for f in claim["facts"]}


def _t(x: str) -> datetime:
    return datetime.fromisoformat(x.replace("Z", "+00:00"))


def _short(d: dict) -> dict:
    """The whole run's first finding set by impact_short, with its episode."""
    rules = {
        c["id"].removeprefix("severity."): _facts(c)["rule"]
        for c in d["claims"]
        if c["id"].startswith("severity.")
    }
    f = next(f for f in d["findings"] if rules.get(f["finding_id"]) == "impact_short")
    return f


@pytest.mark.parametrize("run", sorted(CUT))
def test_an_episode_cut_by_the_range_is_not_called_short(analyzed, rendered, run):
    _, whole, d = analyzed(need(LAB / run))
    f = _short(d)
    ep = next(e for e in whole["episodes"] if e["id"] == f["episode_id"])
    assert ep["recovered"] and not ep["open_end"]  # whole, it ended inside the logs: its length was measured
    start, end = _t(ep["start"]), _t(ep["end"])
    assert (end - start).total_seconds() < 30  # short: impact_short's condition
    cut = _t(CUT[run]) if CUT[run] else start + (end - start) / 2
    out, s, dc = analyzed(LAB / run, until=cut)
    (cut_ep,) = [e for e in s["episodes"] if _t(e["start"]) == start]
    assert cut_ep["open_end"] and not cut_ep["recovered"] and cut_ep["class"] == "sustained"
    finding = next(x for x in s["findings"] if x["episode"] == cut_ep["id"])
    claim = next(c for c in dc["claims"] if c["id"] == f"severity.{finding['id']}")
    v = _facts(claim)
    # the share of a high one, for less than impact_high_min_s, but still on: kept at its class's level
    assert v["rule"] == "impact_open" and v["open_end"] is True
    assert v["under_pressure_s"] < claim["thresholds"]["impact_high_min_s"]
    assert claim["state"] == v["class_severity"] == finding["severity"] == "high"
    for said in (claim["sentence"], finding["evidence"]):
        assert "whether it lasted the 30 s a high one must is not known" in said
        assert "under the 30 s a high one must last" not in said
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert claim["sentence"] in seen[name], name
    # the episodes table says its length is a lower bound
    row = next(x for x in seen["summary.md"].splitlines() if x.startswith(f"| {cut_ep['id']} |"))
    assert "| ≥ " in row
    assert "≥ " in seen["report.html"]


@pytest.mark.parametrize("run", ["traced-ladder-kill", "kill-norestart"])
def test_a_death_with_no_restart_has_an_open_end(analyzed, rendered, run):
    out, s, _ = analyzed(need(LAB / run))
    (crash,) = [e for e in s["episodes"] if e["class"] == "crash"]
    assert crash["open_end"] and not crash["recovered"]
    assert "no restart before" in crash["evidence"]
    row = next(x for x in rendered(out, s)["summary.md"].splitlines() if x.startswith(f"| {crash['id']} |"))
    assert "| ≥ " in row


def test_a_restarted_death_and_recovered_episodes_have_a_closed_end(analyzed):
    _, s, _ = analyzed(need(LAB / "crash"))
    crashes = [e for e in s["episodes"] if e["class"] == "crash"]
    assert crashes and all(e["recovered"] and not e["open_end"] for e in crashes)
    _, s, _ = analyzed(need(LAB / "spike"))
    assert [e["open_end"] for e in s["episodes"]] == [False]
