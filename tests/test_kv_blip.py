"""A one-sample KV blip is context, not a finding (#37 item 8), on a real recording: the lab's kv-blip, vLLM 0.32 with
kv-short's small cache (33 blocks x 32 tokens, 32 usable) behind nginx, stats lines every 10 s, a calm streaming client
(c=1) for 180 s and one burst of 3 requests of 929 prompt tokens + 28 output tokens (30 blocks each: one at a time)
timed to straddle one stats tick. vLLM printed KV 93.8 % (1 running, 2 waiting) on that line only; the lines before
and after read the calm baseline while the server kept serving. The figures asserted are its truth.json "purpose"
(the lab's purpose_kvblip.py, from the raw files).

Before this recording the rule had no real input: on it, the one-sample episode read "sustained" (the burst client's
0.15 s phase ended and that client sent nothing more, so 'its load paused', while the calm client kept the same rate),
got a "Sustained KV pressure" finding, led the verdict and matched ``--fail-on sustained``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.cli import ExitCode, app

RUN = LAB / "kv-blip"
runner = CliRunner()


def _truth() -> dict:
    return json.loads((need(RUN) / "truth.json").read_text())


@pytest.fixture(scope="module")
def out(analyzed) -> Path:
    return analyzed(need(RUN))[0]


def _json(out: Path, name: str) -> dict:
    return json.loads((out / name).read_text())


def _t(x: str) -> datetime:
    return datetime.fromisoformat(x.replace("Z", "+00:00"))


def _blip(doc: dict) -> dict:
    eps = [e for e in doc["episodes"] if e["signal"] == "kv_pressure"]
    assert len(eps) == 1, [(e["signal"], e["class"]) for e in doc["episodes"]]
    return eps[0]


def _facts(doc: dict, claim_id: str) -> dict:
    claim = next(c for c in doc["claims"] if c["id"] == claim_id)
    return {f["name"]: f["value"] for f in claim["facts"]}


def test_the_recording_is_what_it_claims() -> None:
    """The ground truth itself: exactly one stats line at or above 90 %, inside the burst, the next back at the calm
    baseline with the server still serving; no preemption, every request answered 200, no retries."""
    t = _truth()
    p = t["purpose"]
    assert p["criterion_met"] is True and p["kv_blip_line_inside_burst"] is True and p["served_on_next_line"]
    (line,) = p["stats_lines_kv_ge_90"]
    prev, nxt = p["stats_lines_around"]
    assert line["kv_pct"] >= 90 > p["max_kv_pct_other_lines"]
    assert prev["kv_pct"] < 20 and nxt["kv_pct"] < 20 and nxt["gen_tps"] > 0
    assert p["burst"]["requests"] == 3 and p["burst"]["statuses"] == {"200": 3}
    assert p["preemptions"] == 0 and t["preemptions"]["total"] == 0
    assert set(p["calm"]["statuses"]) == {"200"} and p["burst"]["max_retries"] == 0


def test_the_blip_is_a_context_episode_with_the_truths_figures(out: Path) -> None:
    """One KV episode, class context, decided by the one_sample rule (its claim's facts in diagnosis.json and in
    summary.json), at the stats line's time with its level, running and waiting, and the calm level as baseline."""
    line = _truth()["purpose"]["stats_lines_kv_ge_90"][0]
    diag, summ = _json(out, "diagnosis.json"), _json(out, "summary.json")
    e = _blip(diag)
    assert e["class"] == "context" and _blip(summ)["class"] == "context"
    assert _t(e["start"]) == _t(e["end"]) == _t(line["at"])
    assert (e["duration_s"], e["count"]) == (0, 1)
    assert e["peak"] == pytest.approx(line["kv_pct"] / 100, abs=5e-4)
    assert (e["running_max"], e["waiting_max"]) == (line["running"], line["waiting"])
    before = _truth()["purpose"]["stats_lines_around"][0]
    assert e["baseline"] <= before["kv_pct"] / 100 + 5e-4  # the calm level (9.4 % or 0 %), not the blip
    for doc in (diag, summ):
        facts = _facts(doc, e["claim_id"])
        assert facts["rule"] == "one_sample" and facts["samples"] == 1 and facts["recovered"] is True
    assert "(context, not a finding)" in e["reason"] and "one sample" in e["reason"]


def test_no_finding_and_the_verdict_is_not_about_it(out: Path) -> None:
    """No finding names the blip (none of kind pressure, none tied to its episode); the verdict does not lead with it;
    'nothing alarming' stands with the blip's level in its evidence (the truth's 93.8 %), not hidden."""
    diag = _json(out, "diagnosis.json")
    e = _blip(diag)
    line = _truth()["purpose"]["stats_lines_kv_ge_90"][0]
    assert all(f.get("episode_id") != e["episode_id"] for f in diag["findings"])
    assert not [f["title"] for f in diag["findings"] if f["kind"] == "pressure"]
    assert "KV" not in diag["verdict"][0]  # it leads nothing; line 2 says it was set aside (test below)
    calm = next(f for f in diag["findings"] if f["claim_id"] == "calm")
    assert calm["title"] == "Nothing alarming"
    assert f"KV at most {line['kv_pct']:.1f} %" in calm["evidence"]
    assert {c["id"]: c["state"] for c in diag["claims"]}["calm"] == "nothing alarming"


def test_fail_on_does_not_match_it(tmp_path: Path) -> None:
    """``--fail-on`` with every class a pipeline can fail on exits 0: the blip is context, which none matches."""
    args = ["analyze", str(need(RUN)), "-o", str(tmp_path / "o"), "-q"]
    for c in ("spike", "sustained", "recurring", "crash"):
        args += ["--fail-on", c]
    r = runner.invoke(app, args)
    assert r.exit_code == ExitCode.OK, r.output
    summ = _json(tmp_path / "o", "summary.json")
    assert [e["class"] for e in summ["episodes"]] == ["context"]


def test_every_output_shows_it_as_context(out: Path) -> None:
    """summary.md and report.html render the same episode as context beside the timeline, with its level."""
    md = (out / "summary.md").read_text()
    page = (out / "report.html").read_text()
    row = next(r for r in md.splitlines() if r.startswith("| E1 |"))
    assert "| context |" in row and "93.8 %" in row
    assert "context, not a finding" in page
    # its timeline is drawn: a panel's axis cut once read a null row as its top value and the chart was dropped
    assert "Timeline not available" not in page and "could not be drawn (" not in page


ASIDE = "1 one-sample level set aside as context: KV 93.8 % at 09:53:24"


def test_the_verdict_names_what_it_set_aside(out: Path, tmp_path: Path) -> None:
    """'No episode in …' beside an episodes table listing E1 read as a contradiction: the verdict's second line names
    the level it set aside (the truth's one stats line, 93.8 % at 09:53:24), in its claim and in every output: the
    terminal, summary.json, summary.md and report.html render the same lines."""
    line = _truth()["purpose"]["stats_lines_kv_ge_90"][0]
    assert (
        ASIDE == f"1 one-sample level set aside as context: KV {line['kv_pct']:.1f} % at {line['at'][11:19]}"
    )
    summ = _json(out, "summary.json")
    assert (
        summ["verdict"][1]
        == f"No episode in 09:51:32–09:54:38: nothing that spikes or lasts over time; {ASIDE}."
    )
    claim = next(c for c in summ["claims"] if c["id"] == "verdict")
    assert ASIDE in claim["sentence"] and _facts(summ, "verdict")["context_episodes"] == 1
    assert ASIDE in (out / "summary.md").read_text()
    assert ASIDE in (out / "report.html").read_text()
    r = runner.invoke(app, ["analyze", str(need(RUN)), "-o", str(tmp_path / "o")])
    assert r.exit_code == ExitCode.OK, r.output
    assert ASIDE in " ".join(r.output.split())


def test_the_clause_holds_with_a_calm_hour_before(tmp_path: Path) -> None:
    """No second real recording has a context episode (kv-blip is the only one among the lab runs and the public
    excerpts): the same recording with the lab's calm run laid before it as its rotated logs (tests/metamorphic.py)
    keeps the clause word for word, the range aside."""
    from metamorphic import calm_hour_before

    calm_hour_before(RUN, need(LAB / "calm"), tmp_path / "in")
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    summ = _json(tmp_path / "out", "summary.json")
    assert summ["verdict"][1].endswith(f"; {ASIDE}."), summ["verdict"]
