"""KV pressure beside work done for callers who had left: its next test is the cancellation, measured by the
preemptions, not a lower cap on the sequences (evid16). lab abort-ignored (nginx :8082 with proxy_ignore_client_abort
on; 13 preemptions, at most 9 running of --max-num-seqs 64, the engine starved of CPU) was told "Lower --max-num-seqs
from 64 to 5 (what the KV cache holds at the observed request size)", which would queue the callers still waiting,
while the executions for callers that had gone held cache blocks in the same seconds; lab orphan (the same
listener, 937 preemptions, 531 orphaned executions) was told the same with 9."""

from __future__ import annotations

import pytest

from conftest import LAB, need

CANCEL = (
    "Propagate client disconnects: set proxy_ignore_client_abort off on :8082 (nginx.conf has it on), so a client "
    "that leaves makes vLLM abort its request; then replay the same traffic and count the preemptions again"
)
CASES = {  # run: (the orphaned executions beside its first pressure episode, their range, the cap if they stay)
    "abort-ignored": (6, "02:07:00–02:07:03", 5),
    "orphan": (531, "08:45:26–08:47:03", 9),
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_pressure_beside_orphans_tests_the_cancellation_first(analyzed, rendered, run):
    n, when, cap = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    (f,) = [f for f in s["findings"] if f["kind"] == "pressure"]
    assert (
        f"; {n} executions ran on for callers that had left ({when}), holding cache blocks for nobody"
        in (f["cause"])
    )
    assert f["next_test"] == (
        f"{CANCEL} (the {n} executions for callers that had left, {when}, held cache blocks): lower --max-num-seqs "
        f"from 64 to {cap} only if they stay"
    )
    assert not f["next_test"].startswith("Lower --max-num-seqs")
    seen = rendered(out, s)
    for where in ("summary.md", "report.html"):
        assert f["next_test"] in seen[where] and f["cause"] in seen[where]


def test_pressure_with_no_orphans_keeps_the_cap(analyzed):
    """spike-b: no caller left (cancellation not put to the test): the cap on the sequences stays its next test."""
    _, s, _ = analyzed(need(LAB / "spike-b"))
    (f,) = [f for f in s["findings"] if f["kind"] == "pressure"]
    assert f["next_test"].startswith("Lower --max-num-seqs from 64 to 9 (what the KV cache holds")
    assert "callers that had left" not in f["cause"]
