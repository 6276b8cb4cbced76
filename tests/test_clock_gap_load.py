"""A queue in front of the engine is found without an episode (#37 item 3): the gap between the callers' clock and
the engine's is measured over the load's phases, not only inside an episode or a ladder step.

gateway-queue (nginx ``limit_req`` in front of one vLLM 0.32; callers' TTFT p95 33.7 s against the engine's 0.45 s)
analysed with a lax SLO (``--slo-ttft 60 --slo-e2e 120``) forms no episode: it read "Nothing alarming". Its figures
are its truth.json "purpose" per phase (the lab's purpose_gwqueue.py, from the raw files). The rule and its
thresholds are a ladder step's: large when the callers' p95 is at least ``clock_gap_min_s`` (1 s) above the upper
bound of the engine p95's histogram bucket and at least ``clock_gap_ratio`` (2) times that bound. On traced-2r-kill
(a queue inside the engine, both clocks, no ladder) the gap is small and nothing fires."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze

TITLE = (
    "TTFT waits in the gateway, in front of the engine: the callers' p95 is at least 33.3 s above vLLM's own"
)


def _claims(out: Path) -> dict[str, dict]:
    return {c["id"]: c for c in json.loads((out / "summary.json").read_text())["claims"]}


def _facts(claim: dict) -> dict[str, dict]:
    return {f["name"]: f for f in claim["facts"]}


@pytest.fixture(scope="module")
def lax(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("gwq-lax")
    shutil.copytree(need(LAB / "gateway-queue"), base / "in")
    analyze(base / "in", base / "out", AnalyzeOptions(slo_ttft_s=60.0, slo_e2e_s=120.0))
    return base / "out"


def test_no_episode_forms_under_a_lax_slo(lax) -> None:
    out = lax
    truth = json.loads((need(LAB / "gateway-queue") / "truth.json").read_text())["purpose"]["whole_run"]
    assert truth["callers_ttft_p95_s"] < 60 and truth["callers_e2e_p95_s"] < 120
    assert json.loads((out / "summary.json").read_text())["episodes"] == []


def test_the_gap_is_found_over_the_phases_with_the_truths_figures(lax) -> None:
    out = lax
    phases = json.loads((need(LAB / "gateway-queue") / "truth.json").read_text())["purpose"]["phases"]
    claims = _claims(out)
    t = next(p for p in phases if p["phase"] == 1)
    c = claims["clock_gap.phase.1.ttft"]
    f = _facts(c)
    assert c["state"] == "large gap" and f["scope"]["value"] == "load"
    assert f["where"]["value"] == "phase 1 (4 requests/s)"
    assert (f["callers_p95"]["clock"], f["callers_p95"]["source"]) == ("client", "client_records")
    assert f["callers_p95"]["value"] == pytest.approx(t["callers_ttft_p95_s"], abs=1e-3)
    assert f["requests"]["value"] == t["ok_200"] == 465
    lo, hi = t["engine_ttft_p95_bucket_s"]
    assert f["engine_p95_bucket"]["value"] == f"{lo:g}–{hi:g} s"
    assert (f["engine_p95_hi"]["clock"], f["engine_p95_hi"]["source"]) == ("engine", "engine_histogram")
    assert f["gap_s"]["value"] == pytest.approx(t["callers_ttft_p95_s"] - hi, abs=1e-3)
    assert c["thresholds"]["clock_gap_min_s"] == 1.0 and c["thresholds"]["clock_gap_ratio"] == 2.0
    # the gateway's own clock over the phase: nginx request_time against upstream_response_time, and limit_req
    assert f["gateway_requests"]["value"] == t["gateway_lines"]
    assert f["gateway_request_time_p95"]["clock"] == "gateway"
    # the phase's lines are taken by their start on the gateway's clock, the truth's by the client's phase: 0.1 %
    assert f["gateway_request_time_p95"]["value"] == pytest.approx(t["gateway_request_time_p95_s"], rel=1e-3)
    assert f["gateway_upstream_p95"]["value"] == pytest.approx(
        t["gateway_upstream_response_time_p95_s"], abs=1e-3
    )
    assert f["gateway_rate_limit_delayed"]["value"] == t["gateway_limit_req"]["DELAYED"] == 464
    # phase 0 (1 request/s, under the limit): the callers' p95 is 0.05 s above the engine's bucket: small
    t0 = next(p for p in phases if p["phase"] == 0)
    c0 = _facts(claims["clock_gap.phase.0.ttft"])
    assert claims["clock_gap.phase.0.ttft"]["state"] == "small gap"
    assert c0["callers_p95"]["value"] == pytest.approx(t0["callers_ttft_p95_s"], abs=1e-3)
    assert c0["gap_s"]["value"] == pytest.approx(t0["ttft_p95_gap_vs_bucket_upper_s"], abs=1e-3)


def test_every_output_gives_the_finding(lax, rendered) -> None:
    out = lax
    summary = (out / "summary.json").read_text()
    said = {"summary.json": summary, **rendered(out, json.loads(summary))}
    diag = json.loads((out / "diagnosis.json").read_text())
    [f] = [f for f in diag["findings"] if f.get("claim_id") == "clock_gap.phase.1.ttft"]
    assert f["title"] == TITLE + " (phase 1 (4 requests/s))"
    assert "limit_req" in f["cause"] and "request-rate limit" in f["next_test"]
    for where, text in said.items():
        assert f["title"] in text, where
        assert "Nothing alarming" not in text, where
    assert diag["verdict"][0].startswith(TITLE)
    assert diag["verdict"][-1] == "First thing to test: " + f["next_test"]


def test_a_small_gap_does_not_fire(analyzed, rendered) -> None:
    """traced-2r-kill: streaming callers at 2 requests/s, both clocks, no ladder; after replica b died the queue was
    in the engine (replica a: 119 waiting), so the engine's own TTFT histogram holds the wait (callers' TTFT p95
    57.1 s beside the engine's 40–80 s bucket), and no finding says the time waits in front of the engine. The gap
    itself is not read: 35 of the load's callers (truth: APITimeoutError 35) gave up at their 60 s timeout before a
    first token, more than the 5 % a p95 leaves above it, so the callers' p95 is a floor (test_clock_gap_censored)."""
    out, s, _ = analyzed(need(LAB / "traced-2r-kill"))
    said = {"summary.json": (out / "summary.json").read_text(), **rendered(out, s)}
    truth = json.loads((LAB / "traced-2r-kill" / "truth.json").read_text())["client"]
    claims = _claims(out)
    for f in ("ttft", "e2e"):
        c = claims[f"clock_gap.phase.0.{f}"]
        facts = _facts(c)
        assert (c["state"], facts["scope"]["value"]) == ("censored", "load"), c["sentence"]
        assert facts["gave_up"]["value"] == truth["outcomes"]["APITimeoutError"] == 35
        assert facts["client_timeout"]["value"] == 60 and facts["gap_s"]["value"] is None
        assert facts["callers_p95"]["value"] < 2 * facts["engine_p95_hi"]["value"]
    ttft = _facts(claims["clock_gap.phase.0.ttft"])
    assert ttft["engine_p95_bucket"]["value"] == "40–80 s"
    assert ttft["callers_p95"]["value"] == pytest.approx(57.1, abs=0.05)
    for where, text in said.items():
        assert "in front of the engine" not in text, where
