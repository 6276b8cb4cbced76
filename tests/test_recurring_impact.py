"""A recurring pattern's impact covers every beat, and its severity names the rule that set it (evid25).

Lab abort-ignored read "[medium] Recurring KV pressure: 3 preemption spikes …" with its cost counted on the first
beat alone (02:07:02, one sample: 1 failed of the requests then in flight) and nothing saying what made it medium.
Over its 3 beats (02:07:02, 02:08:08–02:08:10, 02:08:42) 4 of the 9 requests in flight failed (the callers' 3 s
timeout), 2 s under pressure in all: medium by impact_high_min_s. traced-2r-kill's 8 beats (its first 03:23:44:
5 slowed of 24) hold 124 slowed or failed of 261 over 62 s, the callers' TTFT p95 6.09 s during them against
1.75 s in the calm before each (client clock): felt as a high one, kept medium by its class (impact never raises a
severity). Every count here is recomputed from the run's own requests.parquet and episodes."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl
import pytest

from conftest import LAB, need
from logscope import terminal

CASES = {  # run: (spikes, slowed or failed, in flight, rule, seconds under pressure)
    "abort-ignored": (3, 4, 9, "impact_short", 2),
    "traced-2r-kill": (8, 124, 261, "class_kept", 62),
}


def _t(x: str) -> datetime:
    return datetime.fromisoformat(x.replace("Z", "+00:00"))


def _pattern(s: dict) -> dict:
    [f] = [f for f in s["findings"] if f["kind"] == "pressure" and "Recurring" in f["title"]]
    return f


@pytest.mark.parametrize("run", sorted(CASES))
def test_the_impact_counts_every_beat(analyzed, run):
    spikes, hit, n, _, _ = CASES[run]
    out, s, d = analyzed(need(LAB / run))
    f = _pattern(s)
    beats = sorted(
        ((_t(e["start"]), _t(e["end"])) for e in s["episodes"] if e["class"] == "recurring"),
        key=lambda b: b[0],
    )
    assert len(beats) == spikes
    # the requests in flight during any beat, from the run's own table: the finding's count is theirs
    req = pl.read_parquet(out / "requests.parquet")
    end = pl.col("ts_end").fill_null(pl.col("ts_start"))
    during = pl.any_horizontal([(pl.col("ts_start") <= hi) & (end >= lo) for lo, hi in beats])
    assert req.filter(during).height == n
    assert f["failed_requests"] + f["slowed_requests"] == hit
    first = req.filter((pl.col("ts_start") <= beats[0][1]) & (end >= beats[0][0])).height
    assert first < n  # the first beat alone held fewer: what the finding counted before
    # the evidence says it over the beats and for each, every latency on its clock
    said = (
        f"impact over its {spikes} spikes: {hit} of the {n} requests in flight during them slowed or failed"
    )
    assert said in f["evidence"]
    assert "(client clock); per spike (client clock): " in f["evidence"]


@pytest.mark.parametrize("run", sorted(CASES))
def test_the_severity_names_its_rule_and_facts_everywhere(analyzed, rendered, capsys, run):
    spikes, hit, n, rule, secs = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    f = _pattern(s)
    by = f["severity_by"]
    assert by["level"] == f["severity"] == "medium" and by["rule"] == rule
    claim = next(c for c in s["claims"] if c["id"] == by["claim"] == f"severity.{f['id']}")
    facts = {x["name"]: x for x in claim["facts"]}
    assert facts["rule"]["value"] == rule
    assert facts["slowed_or_failed_share"]["value"] == round(hit / n, 4)
    assert round(facts["under_pressure_s"]["value"]) == secs
    assert facts["spikes"]["value"] == spikes and facts[f"spike_{spikes}_start"]["value"] is not None
    # every latency fact names its clock
    lat = [x for x in claim["facts"] if x["unit"] == "s"]
    assert lat and all(x["clock"] == "client" for x in lat)
    assert f"{hit} of the {n} requests in flight during them were slowed or failed" in by["sentence"]
    assert f"{secs} s" in by["sentence"]
    # one object in every output: summary.md, report.html, the terminal
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert by["sentence"] in seen[name] and by["claim"] in seen[name], name
    capsys.readouterr()
    terminal.print_verdict(s, {"report_html": out / "report.html"}, verbose=True)
    assert f"severity {by['sentence']}" in " ".join(capsys.readouterr().out.split())
    diag = json.loads((out / "diagnosis.json").read_text())
    assert any(c["id"] == by["claim"] and c["sentence"] == by["sentence"] for c in diag["claims"])


def test_the_pattern_latency_against_the_calm(analyzed):
    """traced-2r-kill: the callers' TTFT p95 during the 8 beats against the calm before each, on the client's
    clock, recomputed from requests.parquet; abort-ignored's beats hold too few answers to read one (said so)."""
    out, s, _ = analyzed(need(LAB / "traced-2r-kill"))
    f = _pattern(s)
    beats = [(_t(e["start"]), _t(e["end"])) for e in s["episodes"] if e["class"] == "recurring"]
    req = pl.read_parquet(out / "requests.parquet").filter(
        (pl.col("origin") == "client") & (pl.col("outcome") == "ok") & pl.col("ttft_s").is_not_null()
    )
    during = req.filter(
        pl.any_horizontal([(pl.col("ts_start") <= hi) & (pl.col("ts_end") >= lo) for lo, hi in beats])
    )
    p95 = during["ttft_s"].quantile(0.95, "linear")
    assert during.height == 241 and round(p95, 2) == 6.09
    assert (
        "the callers' TTFT p95 6.09 s (241 answered) during them against 1.75 s (136 answered)"
        in f["evidence"]
    )
    claim = next(c for c in s["claims"] if c["id"] == f["severity_by"]["claim"])
    facts = {x["name"]: x for x in claim["facts"]}
    assert (
        facts["ttft_p95_during"]["value"] == round(p95, 3) and facts["ttft_p95_during"]["clock"] == "client"
    )
    _, s2, _ = analyzed(need(LAB / "abort-ignored"))
    g = _pattern(s2)
    assert "e2e p95 not read (5 answered, under 10) during them" in g["evidence"]
    c2 = next(c for c in s2["claims"] if c["id"] == g["severity_by"]["claim"])
    assert any("under 10 answered" in m for m in c2["missing"])
