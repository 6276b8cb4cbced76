"""An engine process that ended with no error of its own was killed or crashed in native code (#37 item 7: every
death gets the cause its evidence supports). The lab's enginecore-kill (SIGKILL of the EngineCore alone, truth:
04:09:35.867) and zai-org/GLM-V #208 (V1 0.10-era 'Engine core proc EngineCore_DP0 died unexpectedly') read
"see the first error record before the death; reproduce at a lower --max-num-seqs" before, though no error of the
engine precedes either. An EngineCore that printed its own fatal error keeps that as its cause."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, LAB, PUBLIC, PUBLIC2, need

GLM = DATA / "vllm-deaths" / "glm-v-208-v1-enginecore-dp0-died-unexpectedly-no-own-error.log"


def test_a_sigkilled_enginecore_is_said_to_have_ended_with_no_error_of_its_own(analyzed):
    run = need(LAB / "enginecore-kill")
    truth = json.loads((run / "truth.json").read_text())
    out, s, _ = analyzed(run)
    f = s["findings"][0]
    assert f["title"].startswith("Engine process ended with no error of its own at 04:09:36")
    assert "killed from outside" in f["cause"] and "no line of the engine's processes at ERROR" in f["cause"]
    assert "dmesg -T / journalctl -k" in f["next_test"]
    # 4 ran at most around the kill: a cap of 32 (half the setting) would have changed nothing (tests/test_death_cap.py)
    assert "--max-num-seqs from 64 to 2 (half the 4 that ran at most around it" in f["next_test"]
    # the pid named is the process the lab killed (truth.json), not the API server's 25488
    killed = next(
        v["pid"] for v in _walk(truth) if isinstance(v, dict) and v.get("fault", "").startswith("SIGKILL")
    )
    assert f"(pid {killed})" in f["next_test"]
    assert "see the first error record" not in f["cause"]
    md = (out / "summary.md").read_text()
    assert f["title"] in md and "(pid 26701)" in md


def test_a_public_enginecore_died_unexpectedly_with_nothing_before_it(analyzed):
    _, s, _ = analyzed(need(GLM))
    f = s["findings"][0]
    assert f["title"].startswith("Engine process ended with no error of its own at 13:42:23")
    assert "in the 9 s the log covers before it" in f["cause"]  # 13:42:14 stats line to 13:42:23
    assert "pid" not in f["next_test"].split("at about")[0]  # the excerpt names no EngineCore pid


@pytest.mark.parametrize(
    "src",
    [
        PUBLIC2 / "n11-v1-enginecore-pid-rpc-timeout-fatal-trailing-spaces.log",
        PUBLIC / "11-v1-0.8-received-added-then-enginecore-fatal-timeout.log",
        DATA / "vllm-deaths" / "lmcache-2306-v1-enginedeaderror-output-handler.log",
    ],
    ids=lambda p: p.name[:24],
)
def test_an_engine_that_printed_its_own_error_keeps_it(analyzed, src):
    _, s, _ = analyzed(need(src))
    f = s["findings"][0]
    assert f["title"].startswith("Engine died at"), f["title"]
    assert "no error of its own" not in f["cause"]


def _walk(x):
    yield x
    for v in x.values() if isinstance(x, dict) else x if isinstance(x, list) else ():
        yield from _walk(v)
