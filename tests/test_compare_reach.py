"""compare judges a change only where it can act, and says what a figure left out, read on the lab's runs.

- ``--max-num-seqs`` caps the sequences run at once: at a ladder step where neither run's running count reached the
  smaller cap the engine admitted every caller in both, so the setting cannot move anything there. seqs-8 against
  seqs-64 read 'worse' for output tokens/s at c=1, c=2 and c=4 (830 -> 517 at c=2, 25 % rule) and for the callers'
  TTFT / e2e p50 at c=2: the host's run-to-run noise, now shown with the running max of each run and both caps.
- A count over a step grows with the step's length: spike's last c=2 phase ran 75 s, spike-b's 40 s (manifest.json
  phases), and 88 -> 44 completed read 'worse'.
- The engine's queue gauges (no noise estimate) grow with the load: ladder against ladder-b (other steps and
  prompts) read 'better in B: waiting, max 54 -> 39'.
- The sweep table's 'e2e p95 (gateway)' counts served answers only and now names what it left out (the crash's
  199 answered 502 and 8 streams cut after nginx's 200, truth.json client.outcomes), as the pair table does.
"""

from __future__ import annotations

import jsonschema
import pytest
from compare_helpers import SCHEMA, lab_truth, reader_text

from logscope.api import compare, sweep
from logscope.compare.render import terminal_lines


def _running(run: str) -> dict[int, int]:
    """truth.json ladder_steps: the most sequences vLLM's stats lines showed running at each step."""
    return {s["concurrency"]: s["max_running_stats"] for s in lab_truth(run)["ladder_steps"]}


# (A, B, the smaller cap, the steps it cannot act at)
CAPS = [
    ("seqs-8", "seqs-64", 8, ["c=1", "c=2", "c=4"]),
    ("seqs-16", "seqs-32", 16, ["c=1", "c=2", "c=4", "c=8"]),
]


@pytest.mark.parametrize(("a", "b", "cap", "idle"), CAPS)
def test_a_cap_judges_no_step_where_neither_run_reached_it(lab_out, tmp_path, a, b, cap, idle):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    said = reader_text(res)
    ra, rb = _running(a), _running(b)
    for s in doc["steps"]:
        reach = s["reach"]
        assert reach["setting"] == "max_num_seqs" and reach["kind"] == "cap"
        assert reach["facts"]["setting"]["a"] == int(a.split("-")[1])
        assert reach["facts"]["setting"]["b"] == int(b.split("-")[1])
        c = int(s["value"])
        got = (reach["facts"]["a"]["running_max"], reach["facts"]["b"]["running_max"])
        assert got[0] >= ra[c] and got[1] >= rb[c]  # the step's range holds the truth's window, and its drain
        assert reach["acts"] is (s["label"] not in idle)
        assert (max(got) >= cap) is reach["acts"]
        if s["label"] in idle:
            assert max(ra[c], rb[c]) < cap
            assert not [r for r in s["metrics"] if r["direction"] in ("better", "worse")]
            assert f"running max A {got[0]}, B {got[1]}" in reach["text"]
            assert f"Not judged at this step: max_num_seqs cannot act here: neither run's running count reached the smaller cap, {cap}" in said  # fmt: skip
    # where the cap binds the rows are judged as before
    top = doc["steps"][-1]
    assert top["reach"]["acts"] is True and [
        r for r in top["metrics"] if r["direction"] in ("better", "worse")
    ]


def test_the_idle_steps_moves_read_as_noise_not_worse(lab_out, tmp_path):
    """seqs-8 against seqs-64 at c=2: output tokens/s 830 -> 517 read 'worse' (the 25 % rule); the callers' TTFT
    p50 0.016 -> 0.076 s 'worse' (the bootstrap): the engine ran 2 sequences in both."""
    res = compare(lab_out("seqs-8"), lab_out("seqs-64"), tmp_path / "c")
    step = next(s for s in res["doc"]["steps"] if s["label"] == "c=2")
    for name in ("throughput_tps", "ttft_p50", "e2e_p50"):
        r = next(r for r in step["metrics"] if r["name"] == name)
        assert r["change"] is not None and r["direction"] is None
        assert r["noise"].endswith(
            "not judged: max_num_seqs cannot act here: neither run's running count reached the smaller cap, 8: the "
            "engine admitted every caller (running max A 2, B 2; max_num_seqs A 8, B 64, from the non-default args): "
            "a difference here is the host's run-to-run noise or load"
        )
    tps = next(r for r in step["metrics"] if r["name"] == "throughput_tps")
    assert (round(tps["a"]), round(tps["b"])) == (830, 517)


def test_a_count_over_steps_of_other_lengths_is_not_judged(lab_out, tmp_path):
    """spike's phases '75s c=2, 18s c=48, 75s c=2', spike-b's '90:c2,20:c40,40:c2' (manifest.json)."""
    res = compare(lab_out("spike"), lab_out("spike-b"), tmp_path / "c")
    step = next(s for s in res["doc"]["steps"] if s["label"] == "c=2 (#2)")
    assert step["duration_s"] == {"a": 75, "b": 40}
    row = next(r for r in step["metrics"] if r["name"] == "completed")
    assert (row["a"], row["b"]) == (88, 44) and row["direction"] is None
    assert row["noise"].endswith(
        "not judged: the step lasted 75 s in A, 40 s in B (88 and 44 requests): a count grows with the time it ran, "
        "no better or worse"
    )
    assert "the step lasted 75 s in A, 40 s in B (88 and 44 requests)" in reader_text(res)


def test_queue_gauges_of_other_traffic_are_not_better(lab_out, tmp_path):
    res = compare(lab_out("ladder"), lab_out("ladder-b"), tmp_path / "c")
    doc = res["doc"]
    assert doc["traffic"]["alike"] is False
    for name, va, vb in (("waiting_max", 54, 39), ("waiting_mean", 14.11, 9.15)):
        row = next(r for r in doc["whole"]["metrics"] if r["name"] == name)
        assert (round(row["a"], 2), round(row["b"], 2)) == (va, vb) and row["direction"] is None
        assert row["noise"].endswith("not judged: the traffic differs: a queue grows with the load each run was given, and its noise is not estimated")  # fmt: skip
    verdict = " ".join(terminal_lines(doc))
    assert "waiting, max" not in verdict and "waiting, mean" not in verdict


# a sweep holding the crash at its c=8 step: truth.json client.outcomes 502 and APIConnectionError
@pytest.mark.parametrize("others", [("seqs-8", "seqs-16"), ("ladder", "seqs-64")])
def test_the_sweep_table_says_what_the_gateways_e2e_left_out(lab_out, tmp_path, others):
    res = sweep([lab_out(others[0]), lab_out(others[1]), lab_out("crash")], tmp_path / "s")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    outcomes = lab_truth("crash")["client"]["outcomes"]
    want = {"error": outcomes["502"], "truncated, cut": outcomes["APIConnectionError"]}
    table = doc["sweep"]["table"]
    crash = [t for t in table if t["steps"][0]["left_out"]]
    assert [t["steps"][0]["left_out"] for t in crash] == [want] and crash[0]["steps"][0]["label"] == "c=8"
    assert crash[0]["run"] == "c"  # given third
    head = str(crash[0]["value"]) if doc["sweep"]["setting"] else "C"  # its column, as the table heads it
    said = reader_text(res)
    text = (
        f"not counted: {head}: {want['error']} failed, {want['truncated, cut']} cut after the gateway's 2xx"
    )
    assert said.count(text) == 2  # compare.md and compare.html
    assert "e2e p95 (gateway) (served answers only)" in said
