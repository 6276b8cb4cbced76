"""A ladder step whose callers gave up is not 'met' on the answers of those who stayed (evid21).

lab storm-b is an open-loop climb of rates, 1.5 -> 6 req/s, its streaming callers giving up at their 3 s timeout
(83 of the 343 callers of the 6 req/s step, 24 %). Read up to its return to 1.5 req/s (--until) as a ladder of two
steps (ladder_min_steps=2) against an SLO the survivors meet (TTFT p95 <= 3 s, e2e p95 <= 30 s, success >= 70 %),
the 6 req/s step read 'met' and the working boundary was set there: its TTFT p95 of 2.31 s was over the answers
that came before their callers left. lab orphan (4 req/s, 4 s timeout: 101 of 186 gave up) and retry-storm (7 req/s,
timeouts of 5 and 20 s, retried: 80 of 499 gave up after 23 s) read alike: their steps carry the callers who gave
up, and their p95s are said to be floors, in every output."""

from __future__ import annotations

from datetime import datetime

import pytest

from conftest import LAB, need
from logscope.diagnose.thresholds import Thresholds

TWO_STEPS = Thresholds(ladder_min_steps=2)
LAX = {
    "slo_ttft_s": 3.0,
    "slo_e2e_s": 30.0,
    "slo_success": 0.7,
}  # an SLO the survivors of storm-b's step 2 meet
# run: (the start of its phase back to 1.5 req/s, from its client's phase_start record; the step that climbed to
# its rate and the figures its callers' records give: callers, gave up, share, stated timeout)
CASES = {
    "storm-b": ("2026-11-29T09:04:29+00:00", 2, 6.0, 343, 83, 0.242, 3.0),
    "orphan": ("2026-11-29T08:45:44+00:00", 2, 4.0, 186, 101, 0.543, 4.0),
    "retry-storm": ("2026-11-29T08:31:15+00:00", 2, 7.0, 499, 80, 0.1603, None),
}


def _run(analyzed, run: str, **slo):
    until = datetime.fromisoformat(CASES[run][0])
    return analyzed(need(LAB / run), until=until, thresholds=TWO_STEPS, **slo)


def _claims(diag: dict) -> dict[str, dict]:
    return {c["id"]: c for c in diag["claims"] if c["id"].startswith("ladder")}


def test_a_step_its_callers_left_is_not_met_nor_the_boundary(analyzed, rendered):
    out, s, diag = _run(analyzed, "storm-b", **LAX)
    lad = s["ladder"]
    one, two = lad["steps"]
    # read 'met' before, and the boundary was set at it
    assert (two["slo_status"], lad["working_boundary"]["step"]) == ("censored", 1)
    assert (one["concurrency"], one["slo_status"], one["gave_up"]) == (1.5, "met", 0)
    assert (two["concurrency"], two["ttft_p95"], two["e2e_p95"]) == (
        6.0,
        2.3119,
        21.9952,
    )  # under the lax SLO
    assert two["slo_status"] == "censored" and two["meets_slo"] is None
    assert (two["callers"], two["gave_up"], two["gave_up_share"], two["gave_up_timeout_s"]) == (
        343,
        83,
        0.242,
        3.0,
    )
    said = (
        "83 of 343 callers gave up (24%) before their answer (83 before a first token); their wait is at least the "
        "3 s timeout: ttft_p95 and e2e_p95 over the callers who stayed are floors; success counts them as failures"
    )
    assert two["slo_not_judged"] == said
    assert lad["working_boundary"]["step"] == 1 and lad["working_boundary"]["concurrency"] == 1.5
    assert lad["unknown_at_next_step"]["status"] == "censored"
    assert lad["unknown_at_next_step"]["not_judged"] == said
    c = _claims(diag)
    assert c["ladder.step.2"]["state"] == "censored" and c["ladder.step.2"]["missing"] == [said]
    facts = {f["name"]: f for f in c["ladder.step.2"]["facts"]}
    assert (facts["callers"]["value"], facts["gave_up"]["value"], facts["client_timeout"]["value"]) == (
        343,
        83,
        3.0,
    )
    assert facts["client_timeout"]["clock"] == "client"
    assert c["ladder.boundary"]["state"] == "met"
    assert (
        c["ladder.step.2"]["sentence"]
        == f"step 2 (rate 6): not judged by the callers' clock and the engine's clock: {said}"
    )
    (f,) = [f for f in s["findings"] if f["kind"] == "ladder"]
    assert f["title"] == f"Working boundary: rate 1.5 by the engine's clock; at 6 not judged: {said}"
    assert f["next_test"].startswith("Re-run step 2 (6) with a client timeout above the SLO's e2e (30 s)")
    seen = rendered(out, s)
    for where in ("summary.md", "report.html"):
        assert said in seen[where], where
        assert f["title"] in seen[where], where
    assert "censored" in seen["summary.md"] and "censored" in seen["report.html"]  # the step's status column
    assert f["title"] in seen["terminal"] or any(said in v for v in s["verdict"])


@pytest.mark.parametrize("run", sorted(CASES))
def test_a_steps_callers_who_gave_up_are_said_in_every_output(analyzed, rendered, run):
    """With the default SLO each of these steps misses it on its success share (the callers who gave up counted as
    failures); its p95s over the callers who stayed are floors, and every output says how many left."""
    _, step, rate, callers, gave, share, timeout = CASES[run]
    out, s, diag = _run(analyzed, run)
    st = s["ladder"]["steps"][step - 1]
    assert (st["concurrency"], st["slo_status"]) == (rate, "missed")
    assert (st["callers"], st["gave_up"], st["gave_up_share"], st["gave_up_timeout_s"]) == (
        callers,
        gave,
        share,
        timeout,
    )
    assert (
        st["success_share"] <= 1 - share + 1e-3
    )  # each caller who gave up is a failure (figures to 4 places)
    said = st["slo_not_judged"]
    assert said.startswith(f"{gave} of {callers} callers gave up ({share:.0%}) before their answer")
    assert said.endswith("over the callers who stayed are floors; success counts them as failures")
    if timeout is not None:
        assert f"their wait is at least the {timeout:g} s timeout" in said
    claim = _claims(diag)[f"ladder.step.{step}"]
    assert claim["state"] == "not met" and said in claim["sentence"]
    if run == "storm-b":  # its step 1 met the SLO: step 2 is the one above the boundary
        assert s["ladder"]["broke_first_at_next_step"]["floors"] == said
    seen = rendered(out, s)
    for where in ("summary.md", "report.html"):
        assert said in seen[where], where


# lab ladder-gaveup (evid21's recording, notes.md): a closed-loop ladder c=1..32, streaming, a 4 s client timeout and
# no retries. At c=32 16 of its 256 callers gave up before a first token (6.25 %); at c=16 5 of 120 (4.2 %, under
# the p95's 5 %). Against an SLO its survivors meet at c=32 (TTFT p95 <= 4 s, the callers' own timeout; success
# >= 90 %) the ladder read "the SLO held up to 32".
RECORDED = {  # run: (SLO, steps' (concurrency, status, gave up), boundary's concurrency, the censored step's words)
    "ladder-gaveup": (
        {"slo_ttft_s": 4.0, "slo_e2e_s": 20.0, "slo_success": 0.9},
        [(1, "met", 0), (2, "met", 0), (4, "met", 0), (8, "met", 0), (16, "met", 5), (32, "censored", 16)],
        16,
        "16 of 256 callers gave up (6%) before their answer (16 before a first token); their wait is at least the "
        "4 s timeout: ttft_p95 and e2e_p95 over the callers who stayed are floors; success counts them as failures",
    ),
    # the same ladder with a 3 s timeout (c=2..32): 34 of the c=32 step's 260 callers gave up (13.1 %), its survivors'
    # TTFT p95 2.60 s and success 86.9 % (the callers who gave up failures) meet TTFT <= 3 s and success >= 85 %
    "ladder-gaveup-3s": (
        {"slo_ttft_s": 3.0, "slo_e2e_s": 20.0, "slo_success": 0.85},
        [(2, "met", 0), (4, "met", 0), (8, "met", 0), (16, "met", 0), (32, "censored", 34)],
        16,
        "34 of 260 callers gave up (13%) before their answer (31 before a first token); their wait is at least the "
        "3 s timeout: ttft_p95 and e2e_p95 over the callers who stayed are floors; success counts them as failures",
    ),
}


@pytest.mark.parametrize("run", sorted(RECORDED))
def test_a_recorded_ladder_is_not_met_where_its_callers_gave_up(analyzed, rendered, run):
    slo, steps, boundary, said = RECORDED[run]
    out, s, diag = analyzed(need(LAB / run), **slo)
    lad = s["ladder"]
    assert lad["working_boundary"]["concurrency"] == boundary  # was the top step, 'met' on those who stayed
    assert [(r["concurrency"], r["slo_status"], r.get("gave_up")) for r in lad["steps"]] == steps
    (top,) = [r for r in lad["steps"] if r["slo_status"] == "censored"]
    assert top["slo_not_judged"] == said and top["callers"] and top["gave_up_timeout_s"] is not None
    under = [r for r in lad["steps"] if r["gave_up"] and r["slo_status"] == "met"]
    assert all(r["gave_up_share"] < 0.05 and r["slo_not_judged"] is None for r in under)
    claim = _claims(diag)[f"ladder.step.{top['step']}"]
    assert (claim["state"], claim["missing"]) == ("censored", [said])
    verdict = f"the SLO held up to {boundary}; at {top['concurrency']:g} not judged: {said}."
    assert verdict in s["verdict"][0]
    seen = rendered(out, s)
    for where in ("summary.md", "report.html", "terminal"):
        assert verdict in seen[where], where


# the boundary and every step's state stay under the metamorphic transforms (tests/test_metamorphic.py's): the
# same server's calm run ten minutes before (as its rotated logs) and after (the incident's logs rotated before it),
# and the range narrowed to start a few seconds before a step (phase starts from each run's client records)
META = {
    "storm-b": (
        {"until": datetime.fromisoformat(CASES["storm-b"][0]), "thresholds": TWO_STEPS, **LAX},
        "2026-11-29T09:03:17+00:00",  # 12 s before its 6 req/s phase
    ),
    "ladder-gaveup": (RECORDED["ladder-gaveup"][0], "2026-12-07T10:53:30+00:00"),  # 6 s before its c=8 phase
    "ladder-gaveup-3s": (RECORDED["ladder-gaveup-3s"][0], "2026-12-07T10:59:00+00:00"),  # 8 s before c=8
}


def _ladder_states(diag: dict) -> tuple:
    lad = diag["ladder"]
    return (
        (lad["working_boundary"] or {}).get("concurrency"),
        {r["concurrency"]: (r["slo_status"], r["gave_up"]) for r in lad["steps"]},
    )


@pytest.mark.parametrize("where", ["before", "after", "narrowed"])
@pytest.mark.parametrize("run", sorted(META))
def test_the_boundary_holds_under_calm_time_and_a_narrower_range(run, where, tmp_path):
    from test_metamorphic import _diagnosed

    from metamorphic import calm_hour_after, calm_hour_before, copy

    opts, since = META[run]
    base = _ladder_states(_diagnosed(need(LAB / run), tmp_path / "base", **opts))
    assert "censored" in [st for st, _ in base[1].values()]
    src = tmp_path / "in"
    if where == "before":
        calm_hour_before(LAB / run, need(LAB / "calm"), src)
    elif where == "after":
        calm_hour_after(LAB / run, need(LAB / "calm"), src)
    else:
        copy(LAB / run, src)
        opts = {**opts, "since": datetime.fromisoformat(since)}
    got = _ladder_states(_diagnosed(src, tmp_path / "out", **opts))
    assert got[0] == base[0]
    kept = [c for c in got[1] if c >= base[0]]  # a narrower range may cut the steps below the boundary
    assert kept and {c: got[1][c] for c in kept} == {c: base[1][c] for c in kept}
