"""compare says 'better' or 'worse' only where the figures it holds back it, read on the lab pairs a reviewer runs.

- vLLM's executions per logical request below 1 are requests that never reached it (analyze says why: the crash's
  199 answered 502 by the gateway; oom-cgroup's server dead for most of the run): calm against crash read
  'better in B: vLLM executions per logical request 1 → 0.64'.
- A count of the whole runs grows with the load each was given: calm (1/s, 186 requests) against crash (c=8, 550)
  read 'better in B: completed ok 186 → 343'; retry-storm against storm-b (other rates and max_tokens) read
  'worse in B: output tokens/s 640 → 481' and 'better: client retries 592 → 482'.
Each stays in the table with its change and its noise, and says why it is not judged."""

from __future__ import annotations

import json

import pytest
from compare_helpers import lab_truth, metric_row, reader_text

from logscope.api import compare
from logscope.compare.render import terminal_lines

# truth.json: client.logical_requests against vllm.requests_received (550 / 351; 547 / 50)
BELOW_ONE = {"crash": 0.638, "oom-cgroup": 0.091}


@pytest.mark.parametrize("run", sorted(BELOW_ONE))
def test_executions_below_one_per_request_are_not_better(lab_out, tmp_path, run):
    res = compare(lab_out("calm"), lab_out(run), tmp_path / "c")
    doc = res["doc"]
    row = metric_row(doc, "amplification")
    assert row["a"] == 1 and round(row["b"], 3) == BELOW_ONE[run]
    truth = lab_truth(run)
    assert row["b"] == pytest.approx(
        truth["vllm"]["requests_received"] / truth["client"]["logical_requests"], abs=0.01
    )
    assert row["direction"] is None and row["beyond_noise"] is True  # moved, but no work was saved
    why = json.loads((lab_out(run) / "summary.json").read_text())["retries"]["amplification_note"]
    assert why.startswith("below 1: ")
    assert row["noise"].endswith(f"not judged: below 1 in B ({why.removeprefix('below 1: ')}): no work saved")
    said = reader_text(res)
    assert "vLLM executions per logical request 1 → 0.6" not in said and "1 → 0.09" not in said
    assert "not judged: below 1 in B" in said
    # swapped, the same: below 1 in A
    swapped = metric_row(compare(lab_out(run), lab_out("calm"), tmp_path / "s")["doc"], "amplification")
    assert swapped["direction"] is None and "not judged: below 1 in A (" in swapped["noise"]


# whole-run counts when the traffic differs: (A, B, figure, A's, B's)
VOLUME = [
    ("calm", "crash", "completed", 186, 343),  # truth.json client.outcomes 200
    ("retry-storm", "storm-b", "throughput_tps", 640, 481),
    ("retry-storm", "storm-b", "client_retries", 592, 482),  # truth.json client.retries
]


@pytest.mark.parametrize(("a", "b", "name", "va", "vb"), VOLUME)
def test_counts_of_runs_given_other_traffic_are_not_better(lab_out, tmp_path, a, b, name, va, vb):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    assert doc["traffic"]["alike"] is False
    row = metric_row(doc, name)
    assert (round(row["a"]), round(row["b"])) == (va, vb)
    assert row["direction"] is None
    assert row["noise"].endswith(
        "not judged: the traffic differs: it grows with the load each run was given, no better or worse"
    )
    verdict = " ".join(terminal_lines(doc))
    assert row["title"] not in verdict  # neither among the better nor among the worse
    # the success share mixes the two loads' steps as well (logscope.compare.profile): shown, named, not judged
    share = metric_row(doc, "success_share")
    assert share["direction"] is None and "not judged: the load differs (" in share["noise"]
    assert "Over the whole runs, better" not in verdict and "Over the whole runs, worse" not in verdict
