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

from conftest import LAB, need
from logscope.api import compare
from logscope.compare.render import terminal_lines


@pytest.fixture(scope="module")
def outs(analyzed):
    """Each lab run's analysis by name, made once for the session (conftest's ``analyzed``)."""
    return lambda run: analyzed(need(LAB / run))[0]


def _row(doc: dict, name: str) -> dict:
    return next(r for r in doc["whole"]["metrics"] if r["name"] == name)


def _said(res: dict) -> str:
    """What a reader gets: the terminal's verdict, compare.md and compare.html."""
    doc = res["doc"]
    return "\n".join(
        [
            " ".join(terminal_lines(doc)),
            res["paths"]["compare_md"].read_text().replace("\\", ""),
            res["paths"]["compare_html"].read_text(),
        ]
    )


# truth.json: client.logical_requests against vllm.requests_received (550 / 351; 547 / 50)
BELOW_ONE = {"crash": 0.638, "oom-cgroup": 0.091}


@pytest.mark.parametrize("run", sorted(BELOW_ONE))
def test_executions_below_one_per_request_are_not_better(outs, tmp_path, run):
    res = compare(outs("calm"), outs(run), tmp_path / "c")
    doc = res["doc"]
    row = _row(doc, "amplification")
    assert row["a"] == 1 and round(row["b"], 3) == BELOW_ONE[run]
    truth = json.loads((LAB / run / "truth.json").read_text())
    assert row["b"] == pytest.approx(
        truth["vllm"]["requests_received"] / truth["client"]["logical_requests"], abs=0.01
    )
    assert row["direction"] is None and row["beyond_noise"] is True  # moved, but no work was saved
    why = json.loads((outs(run) / "summary.json").read_text())["retries"]["amplification_note"]
    assert why.startswith("below 1: ")
    assert row["noise"].endswith(f"not judged: below 1 in B ({why.removeprefix('below 1: ')}): no work saved")
    said = _said(res)
    assert "vLLM executions per logical request 1 → 0.6" not in said and "1 → 0.09" not in said
    assert "not judged: below 1 in B" in said.replace("&#39;", "'")
    # swapped, the same: below 1 in A
    swapped = _row(compare(outs(run), outs("calm"), tmp_path / "s")["doc"], "amplification")
    assert swapped["direction"] is None and "not judged: below 1 in A (" in swapped["noise"]


# whole-run counts when the traffic differs: (A, B, figure, A's, B's)
VOLUME = [
    ("calm", "crash", "completed", 186, 343),  # truth.json client.outcomes 200
    ("retry-storm", "storm-b", "throughput_tps", 640, 481),
    ("retry-storm", "storm-b", "client_retries", 592, 482),  # truth.json client.retries
]


@pytest.mark.parametrize(("a", "b", "name", "va", "vb"), VOLUME)
def test_counts_of_runs_given_other_traffic_are_not_better(outs, tmp_path, a, b, name, va, vb):
    res = compare(outs(a), outs(b), tmp_path / "c")
    doc = res["doc"]
    assert doc["traffic"]["alike"] is False
    row = _row(doc, name)
    assert (round(row["a"]), round(row["b"])) == (va, vb)
    assert row["direction"] is None
    assert row["noise"].endswith(
        "not judged: the traffic differs: it grows with the load each run was given, no better or worse"
    )
    verdict = " ".join(terminal_lines(doc))
    assert row["title"] not in verdict  # neither among the better nor among the worse
    # what the callers felt is still judged: the success share
    share = _row(doc, "success_share")
    assert share["direction"] in ("better", "worse") and share["title"] in verdict
