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

import json

import jsonschema
import pytest
from compare_helpers import SCHEMA, lab_truth, reader_text

from conftest import ROOT, need
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


# a sweep judges by the pair's rule (reach.across): the smallest cap of all its runs, every run's running count
SWEEPS = [
    (("seqs-64", "seqs-32", "seqs-16"), 16, ["c=1", "c=2", "c=4", "c=8"]),
    (("seqs-64", "seqs-32", "seqs-16", "seqs-8"), 8, ["c=1", "c=2", "c=4"]),
]


@pytest.mark.parametrize(("runs", "cap", "idle"), SWEEPS)
def test_a_sweep_judges_no_step_where_no_run_reached_its_smallest_cap(lab_out, tmp_path, runs, cap, idle):
    res = sweep([lab_out(r) for r in runs], tmp_path / "s")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    said = reader_text(res)
    by_run = {t["run"]: t["value"] for t in doc["sweep"]["table"]}
    labels = {r.lower(): name for r, name in zip("ABCD", runs, strict=False)}
    assert [x["step"] for x in doc["sweep"]["reach"]] == doc["sweep"]["steps"]
    for x in doc["sweep"]["reach"]:
        r, c = x["reach"], int(x["step"].removeprefix("c="))
        assert r["setting"] == "max_num_seqs" and r["kind"] == "cap"
        assert {k: r["facts"]["setting"][k] for k in by_run} == by_run
        got = {k: r["facts"][k]["running_max"] for k in by_run}
        assert all(got[k] >= _running(labels[k])[c] for k in got)  # the step's range holds truth's window
        assert r["acts"] is (x["step"] not in idle) and (max(got.values()) >= cap) is r["acts"]
        if not r["acts"]:
            assert max(_running(labels[k])[c] for k in got) < cap
            assert f"Not judged at this step: max_num_seqs cannot act here: no run's running count reached the smallest cap, {cap}" in said  # fmt: skip
    # the steps the sweep holds as its control are those (the spread of the same work in every run) ...
    assert doc["sweep"]["control"]["steps"] == idle
    line = next(v for v in doc["verdict"] if v.startswith("Where max_num_seqs does not bind"))
    assert f"({', '.join(idle)}: no run's running count reached the smallest cap, {cap})" in line
    # ... and the trade between its ends names none of them (64 -> 16 named the callers' TTFT at c=8)
    assert doc["sweep"]["ends"]["text"] and not [
        s for s in idle if f"at {s} " in doc["sweep"]["ends"]["text"]
    ]


@pytest.mark.parametrize(("a", "b"), [("seqs-64", "seqs-16"), ("seqs-32", "seqs-16")])
def test_the_trade_names_no_step_where_the_change_cannot_act(lab_out, tmp_path, a, b):
    """seqs-64 -> seqs-16: 'the callers' TTFT p95 rose at c=8 from 0.2 s to 0.63 s' (the engine ran 8 sequences in
    both, under a cap of 16: the host's load at that step)."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    idle = [s["label"] for s in doc["steps"] if s["reach"]["acts"] is False]
    assert "c=8" in idle and max(_running(a)[8], _running(b)[8]) < 16
    assert not [m for m in doc["trade"]["rose"] if m["scope"].removeprefix("step ") in idle]
    text = doc["trade"]["text"] or ""
    assert not [s for s in idle if f"at {s} " in text or f"at {s}," in text or f"at {s})" in text]
    assert not [s for s in idle if f"| step {s} |" in res["paths"]["compare_md"].read_text()]


KV_PAIR = (
    ROOT / "tests" / "data" / "pairs" / "spike-kv"
)  # the spike scenario, --num-gpu-blocks-override 112 / 224


def _overlaps(episodes: list, window: list[str]) -> bool:
    """Whether a preemption episode of truth.json ([start, end, count]) falls in a step's range."""
    lo, hi = window
    return any(e[0] < hi and e[1] >= lo for e in episodes)


@pytest.mark.parametrize("order", [("kv112", "kv224"), ("kv224", "kv112")])
def test_the_kv_rule_on_a_real_pair(analyzed, tmp_path, order):
    """The KV cache's size acts only where a run preempted or queued: the calm c=2 phase before the burst (2
    callers, neither run preempting or queueing) is no test of it; the burst of 48, where the run of 112 blocks
    preempted (truth.json's episodes, from vLLM's own counter), is."""
    runs = [need(KV_PAIR / x) for x in order]
    res = compare(analyzed(runs[0])[0], analyzed(runs[1])[0], tmp_path / "c")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["comparable"]["changed"] == ["num_gpu_blocks_override"]
    truth = {
        side: json.loads((p / "truth.json").read_text())["preemptions"]
        for side, p in zip("ab", runs, strict=True)
    }
    assert truth["a" if order[0] == "kv112" else "b"]["total"] > 0
    said = reader_text(res)
    acts = {}
    for s in doc["steps"]:
        r = s["reach"]
        assert r["setting"] == "num_gpu_blocks_override" and r["kind"] == "kv"
        assert {r["facts"]["setting"]["a"], r["facts"]["setting"]["b"]} == {112, 224}
        seen = {side: r["facts"][side] for side in "ab"}
        assert r["acts"] is any(v[k] > 0 for v in seen.values() for k in ("preemptions", "waiting_max"))
        for side in "ab":  # a preemption the step counts is one truth.json saw in its range, and the reverse
            assert (seen[side]["preemptions"] > 0) is _overlaps(truth[side]["episodes"], s["window"][side])
        acts[s["label"]] = r["acts"]
        if r["acts"] is False:
            assert not [m for m in s["metrics"] if m["direction"] in ("better", "worse")]
            assert "Not judged at this step: num_gpu_blocks_override cannot act here: neither run preempted or queued" in said  # fmt: skip
    # steps where neither run preempted or queued beside the burst, where one did
    assert acts["c=2"] is False and acts["c=48"] is True, acts


# the spike scenario once more beside spike-kv/kv112, with one gateway directive changed: nginx's :8081
# proxy_read_timeout 300s -> 8s (its notes.md); the same 112 KV blocks
GW_RUNS = {
    "kv112": KV_PAIR / "kv112",
    "read8s": ROOT / "tests" / "data" / "pairs" / "spike-read-timeout" / "read8s",
}


@pytest.mark.parametrize("order", [("kv112", "read8s"), ("read8s", "kv112")])
def test_the_gateway_rule_on_a_real_pair(analyzed, tmp_path, order):
    """A gateway setting acts only where the gateway acted. Here it did at every step, in both runs: nginx tried
    the pool's dead replica and went on to the live one (truth.json: 14 attempts to :8002 in each run), so every
    step is judged; each step's retries are the gateway's own, and no more than truth counts."""
    runs = [need(GW_RUNS[x]) for x in order]
    res = compare(analyzed(runs[0])[0], analyzed(runs[1])[0], tmp_path / "c")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    assert doc["comparable"]["changed"] == ["proxy_read_timeout"] and doc["comparable"]["traffic_alike"]
    dead = {s: json.loads((p / "truth.json").read_text())["gateway"]["upstream_attempts_to_dead_8002"]
            for s, p in zip("ab", runs, strict=True)}  # fmt: skip
    retries = {"a": 0, "b": 0}
    for s in doc["steps"]:
        r = s["reach"]
        assert r["setting"] == "proxy_read_timeout" and r["kind"] == "gateway"
        assert {r["facts"]["setting"]["a"], r["facts"]["setting"]["b"]} == {"300s", "8s"}
        seen = [
            r["facts"][side][k] for side in "ab" for k in ("gateway_retries", "gateway_5xx", "gateway_499")
        ]
        assert r["acts"] is any(v > 0 for v in seen) and r["acts"] is True, s["label"]
        for side in "ab":
            retries[side] += r["facts"][side]["gateway_retries"]
        assert r["text"].startswith("proxy_read_timeout can act here: the gateway acted (retries A ")
    assert all(0 < retries[side] <= dead[side] for side in "ab"), (retries, dead)
    assert not [
        x for x in reader_text(res).splitlines() if "Not judged at this step: proxy_read_timeout" in x
    ]
