"""A death's next test tries a lower --max-num-seqs below what actually ran. The lab's crash, oom-cgroup and
enginecore-kill ran 64-seat servers with at most 8, 32 and 4 requests running, and each was told "test a lower
--max-num-seqs from 64 to 32": a cap at or above what ran changes nothing, and the figure came from no fact."""

from __future__ import annotations

import json

import pytest

from conftest import LAB, need

RAN = {"crash": 8, "oom-cgroup": 32, "enginecore-kill": 4}  # the stats lines' most running around the death


@pytest.mark.parametrize("run", sorted(RAN))
def test_a_deaths_lower_cap_is_below_what_ran(analyzed, rendered, run):
    out, s, _ = analyzed(need(LAB / run))
    ran = RAN[run]
    # what ran is read off the server's own stats lines: the episode's figures say the same
    d = json.loads((out / "diagnosis.json").read_text())
    death = next(e for e in d["episodes"] if e["signal"] == "crash")
    assert int(death["running_max"]) == ran
    f = next(f for f in s["findings"] if f["severity"] == "critical")
    said = f"--max-num-seqs from 64 to {ran // 2} (half the {ran} that ran at most around it: a cap at or above {ran} changes nothing)"
    assert said in f["next_test"] and "from 64 to 32" not in f["next_test"]
    for name, text in rendered(out, s).items():
        assert "from 64 to 32" not in text, name
        assert name == "terminal" or said in text, name
