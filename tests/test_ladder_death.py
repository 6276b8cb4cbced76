"""A ladder step a server died in is judged on what came before the death (evid26; diagnose/ladder_death.py).

lab traced-ladder-kill (notes.md): a closed-loop ladder c=1 -> 4 -> 16 through nginx, the only vLLM replica's process
group SIGKILLed 25 s into c=16 (its log stops at 11:15:58; 187 callers got 502 or a cut connection after). The ladder
read "Working boundary: concurrency 4; at 16 success broke first" (success 46.0 % < 99 %): the failures were the
death's. From the client's own records (client-tlkill.jsonl, phase 2): 143 requests ended before 11:15:58, all 200,
their TTFT p95 1.0986 s and e2e p95 5.6571 s; 16 more were sent before it and ended after; 187 were sent after it.

The lab's one-phase runs with a death in their phase, read as a ladder of one step (ladder_min_steps=1: the client's
phase used as a step), give the other kinds: crash (a silent kill: not judged), oom-cgroup (the kernel's OOM killer,
03:55:11.98 by the kernel: the load's failure), enginecore-kill (EngineCore SIGKILLed, vLLM logs its engine dead
with no memory error: cause unknown, not judged), traced-2r-kill (replica b of two killed: the requests that ended before it
already missed the SLO, the death named beside)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from conftest import LAB, need
from logscope.diagnose.thresholds import Thresholds

KILL = "traced-ladder-kill"
ONE_STEP = Thresholds(ladder_min_steps=1)
SAID = (
    "the server died at 11:15:58, 24 s into the step (silent: cause unknown); the 143 request(s) that ended before "
    "it met the SLO"
)

DIED = (
    "the server died at 11:15:58, 24 s into the step (silent: cause unknown); before it 143 request(s) ended (TTFT "
    "p95 1.10 s (client clock), e2e p95 5.66 s (client clock), success 100.0%), 16 were cut by it, 187 sent after it"
)


def _raw_before(death: datetime) -> tuple[int, int, int, int]:
    """From client-tlkill.jsonl's request records of the c=16 phase: (ended before the death, of them 200, sent
    before it and not ended before, sent after it)."""
    t = death.timestamp()
    rows = [json.loads(x) for x in (need(LAB / KILL) / "client-tlkill.jsonl").read_text().splitlines()]
    req = [r for r in rows if r["kind"] == "request" and r["phase"] == 2]
    before = [r for r in req if r["end"] < t]
    sent = sum(r["send"] < t for r in req)
    return len(before), sum(r["status"] == 200 for r in before), sent - len(before), len(req) - sent


def test_the_step_the_server_died_in_is_not_judged_on_the_deaths_failures(analyzed, rendered):
    out, s, diag = analyzed(need(LAB / KILL))
    lad = s["ladder"]
    one, two, top = lad["steps"]
    assert [r["slo_status"] for r in lad["steps"]] == ["met", "met", "censored"]  # step 3 was 'missed'
    assert top["success_share"] == 0.4595  # the whole step's, the death's failures in it: no verdict
    died = datetime(2026, 12, 7, 11, 15, 58, tzinfo=UTC)
    assert (top["before_death_requests"], 143, top["cut_by_death"], top["sent_after_death"]) == _raw_before(
        died
    )
    assert (top["before_death_ttft_p95"], top["before_death_e2e_p95"], top["before_death_success_share"]) == (
        1.0986,
        5.6571,
        1.0,
    )
    assert (top["died_at"], top["died_kinds"], top["died_load_driven"], top["died_into_s"]) == (
        "2026-12-07T11:15:58.000Z",
        "silent",
        False,
        24.187,
    )
    assert top["slo_not_judged"] == SAID and top["broke"] is None
    assert top["died"] == DIED
    assert one["died"] is None and two["died"] is None
    assert lad["working_boundary"]["concurrency"] == 4  # never at the step it died in
    nxt = lad["broke_first_at_next_step"]
    assert (nxt["first"], nxt["reasons"][0]["text"], nxt["death"]["requests_before"]) == ("death", DIED, 143)
    assert lad["unknown_at_next_step"]["not_judged"] == SAID
    claim = {c["id"]: c for c in diag["claims"]}["ladder.step.3"]
    assert (claim["state"], claim["missing"]) == ("censored", [SAID])
    facts = {f["name"]: f for f in claim["facts"]}
    assert (
        facts["before_death_ttft_p95"]["clock"] == "client" and facts["before_death_requests"]["value"] == 143
    )
    (f,) = [f for f in s["findings"] if f["kind"] == "ladder"]
    assert f["title"] == f"Working boundary: concurrency 4; at 16 not judged: {SAID}"
    assert "success" not in f["title"]
    assert f["next_test"].startswith("Find what ended the server in step 3 (16), then re-run that step")
    from test_traces_ladder import schema_errors

    assert schema_errors(out) == []
    for name, text in rendered(out, s).items():
        assert f["title"] in text, name
        assert "success broke first" not in text, name
        if name != "terminal":  # the ladder table's columns, the finding's evidence
            assert "censored" in text and DIED in text, name


# (run, step's concurrency, status, what broke / why not judged, first, requests ended before the death, cut, after)
ONE_PHASE = {
    "crash": (
        8.0,
        "censored",
        "the server died at 08:34:22, 42 s into the step (silent: cause unknown); the 36 request(s) that ended "
        "before it met the SLO",
        "death",
        (36, 8, 330),
    ),
    "oom-cgroup": (
        32.0,
        "missed",
        "the server died (engine dead, kernel OOM) at 03:55:11, 26 s into the step",
        "death",
        (0, 0, 497),  # every warm request of the step sent after the death (the cold window holds it)
    ),
    "enginecore-kill": (  # EngineCore SIGKILLed: vLLM's EngineDeadError says nothing of why (no memory error)
        4.0,
        "censored",
        "the server died at 04:09:36, 54 s into the step (engine dead: cause unknown); the 20 request(s) that ended "
        "before it met the SLO",
        "death",
        (20, 4, 2178),
    ),
    "traced-2r-kill": (
        2.0,
        "missed",
        "TTFT p95 3.42 s > 2 s before the death; e2e p95 24.72 s > 20 s before the death",
        "ttft",
        (54, 41, 490),
    ),
}


@pytest.mark.parametrize("run", sorted(ONE_PHASE))
def test_a_client_phase_a_server_died_in(analyzed, rendered, run):
    level, status, said, first, counts = ONE_PHASE[run]
    out, s, diag = analyzed(need(LAB / run), thresholds=ONE_STEP)
    (st,) = s["ladder"]["steps"]
    assert (st["concurrency"], st["slo_status"]) == (level, status)
    nxt = s["ladder"]["broke_first_at_next_step"]
    assert nxt["first"] == first  # was 'success' (the death's failures) at each
    assert "success" not in (st["broke"] or "")
    assert (st["before_death_requests"], st["cut_by_death"], st["sent_after_death"]) == counts
    (f,) = [f for f in s["findings"] if f["kind"] == "ladder"]
    if status == "censored":
        assert st["slo_not_judged"] == said and nxt["not_judged"] == said
        assert f["title"] == f"Working boundary unknown; at {level:g} not judged: {said}"
    elif first == "death":  # the load's: what broke first
        assert st["broke"] == said and st["died_load_driven"] is True
        assert f["title"].endswith(f"; at {level:g} {said} (what broke first)")
    else:  # missed before it: the death beside
        assert st["broke"] == said and st["died_load_driven"] is False
        assert st["died"] == (
            "vllm-server-b (1 of 2 replicas) died at 03:24:34, 79 s into the step (silent: cause unknown); before it "
            "54 request(s) ended (TTFT p95 3.42 s (client clock), e2e p95 24.72 s (client clock), success 100.0%), "
            "41 were cut by it, 490 sent after it"
        )
        assert f["title"].endswith(
            "; at 2 ttft broke first, before vllm-server-b (1 of 2 replicas) died at 03:24:34, 79 s into the step "
            "(silent: cause unknown)"
        )
    claim = {c["id"]: c for c in diag["claims"]}["ladder.step.1"]
    assert {x["name"]: x["value"] for x in claim["facts"]}["died_at"] == st["died_at"]
    for name, text in rendered(out, s).items():
        assert f["title"] in text, name


@pytest.mark.parametrize("run", ["ladder", "ladder-gaveup", "v0-ladder"])
def test_a_ladder_no_server_died_in_has_no_death(analyzed, run):
    _, s, _ = analyzed(need(LAB / run))
    assert s["ladder"]["died_in_steps"] == []
    assert all(r["died"] is None and r["before_death_requests"] is None for r in s["ladder"]["steps"])


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_calm_hour_beside_keeps_the_steps_reading(tmp_path, where):
    """traced-ladder-kill with the calm run laid ten minutes before (as its rotated logs) or after (the same address
    restarted: the death then has a start after it): step 3 stays not judged on the same death and requests."""
    from test_metamorphic import _diagnosed

    from metamorphic import calm_hour_after, calm_hour_before

    lay = calm_hour_after if where == "after" else calm_hour_before
    lay(need(LAB / KILL), need(LAB / "calm"), tmp_path / "in")
    diag = _diagnosed(tmp_path / "in", tmp_path / "out")
    lad = diag["ladder"]
    top = lad["steps"][-1]
    assert (top["concurrency"], top["slo_status"], top["before_death_requests"]) == (16, "censored", 143)
    assert top["slo_not_judged"] == SAID
    assert lad["working_boundary"]["concurrency"] == 4 and lad["broke_first_at_next_step"]["first"] == "death"


def test_the_ladder_tables_words_wrap(analyzed):
    """The step's reasons (died, broke, not judged) are words, wrapped in their cell: in a right-aligned nowrap figure
    cell traced-ladder-kill's 'died' ran past a 1,024 px screen and pushed every figure after it off the page."""
    import re

    out, s, _ = analyzed(need(LAB / KILL))
    page = (out / "report.html").read_text()
    table = page[page.index('id="ladder"') :]
    table = table[: table.index("</table>")]
    died = s["ladder"]["steps"][2]["died"]
    cells = re.findall(r'<td class="(\w+)">([^<]*)</td>', table)
    assert ("words", died.replace("'", "&#39;")) in cells or ("words", died) in cells
    assert {c for c, text in cells if text in ("16", "346")} == {"num"}
