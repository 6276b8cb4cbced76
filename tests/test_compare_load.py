"""A whole-run latency is judged only when the two runs were given the same load profile
(logscope/compare/profile.py): a whole-run percentile mixes the steps in each run's proportions.

Found: spike against spike-b (manifest.json phases '75s c=2, 18s c=48, 75s c=2' and '90:c2,20:c40,40:c2') read
'better in B: e2e p95 (callers) 14.89 s → 7.91 s' over the whole runs; retry-storm against storm-b (7/s against
6/s, max_tokens 256 against 192) read 'worse in B: e2e p95 (gateway) 7.49 s → 14.65 s'; ladder against ladder-b
(other steps, no step matched) read five whole-run latencies better or worse. Where the profiles match (the same
steps, each with its requests or its length within 10 %: seqs-8 against seqs-64, the real pairs of
tests/data/pairs) the whole-run latencies are judged as before, and the verdict says how they match.
"""

from __future__ import annotations

import pytest
from compare_helpers import reader_text

from conftest import DATA
from logscope.api import compare

PAIRS = DATA / "pairs"
HELD = "Whole-run latencies are not judged: the load differs ("


def _latencies(doc: dict) -> list[dict]:
    return [r for r in doc["whole"]["metrics"] if r["unit"] == "s" and r["name"] != "orphan_s"]


# (A, B, what the load's object names as differing, a whole-run latency judged before, A's and B's figure)
DIFFER = [
    (
        "spike",
        "spike-b",
        "steps c=2, c=48, c=2 (#2) in A, c=2, c=40, c=2 (#2) in B",
        "e2e_p95",
        14.8878,
        7.9131,
    ),
    (
        "retry-storm",
        "storm-b",
        "max tokens mean 256 in A, 192 in B, 25 % apart",
        "gateway_e2e_p95",
        7.49,
        14.6488,
    ),
    (
        "ladder",
        "ladder-b",
        "prompt tokens mean 128.12 in A, 64.13 in B, 50 % apart",
        "e2e_p95",
        14.4794,
        22.5433,
    ),
]


@pytest.mark.parametrize(("a", "b", "differs", "name", "va", "vb"), DIFFER)
def test_whole_run_latencies_are_not_judged_when_the_load_differs(
    a, b, differs, name, va, vb, lab_out, tmp_path
):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    load = doc["whole"]["load"]
    assert load["matched"] is False and differs in load["differs"], load
    assert not load["missing"]
    row = next(r for r in doc["whole"]["metrics"] if r["name"] == name)
    assert (row["a"], row["b"]) == pytest.approx((va, vb), abs=1e-4)  # shown, with its interval, not judged
    assert row["beyond_noise"] and row["direction"] is None
    assert "not judged: the load differs (" in row["noise"] and differs in row["noise"]
    assert not [r["name"] for r in _latencies(doc) if r["direction"] in ("better", "worse")]
    text = reader_text(res)  # the terminal, compare.md and compare.html say it the same way
    line = next(v for v in doc["verdict"] if v.startswith(HELD))
    assert differs in line and text.count(line) >= 3
    assert not any(
        r["title"] in v for r in _latencies(doc) for v in doc["verdict"] if v.startswith("Over the whole")
    )


def test_the_matched_steps_are_still_judged_when_the_whole_runs_are_not(lab_out, tmp_path):
    """retry-storm against storm-b: the first 1.5/s step, before either burst, keeps its judgement."""
    doc = compare(lab_out("retry-storm"), lab_out("storm-b"), tmp_path / "c")["doc"]
    step = next(s for s in doc["steps"] if s["label"] == "1.5/s")
    e2e = next(r for r in step["metrics"] if r["name"] == "e2e_p95")
    assert (e2e["a"], e2e["b"], e2e["direction"]) == (
        pytest.approx(2.3927, abs=1e-4),
        pytest.approx(1.5715, abs=1e-4),
        "better",
    )
    assert "The matched steps are judged one by one." in next(v for v in doc["verdict"] if v.startswith(HELD))


# (A, B, a whole-run latency judged, its direction)
MATCH = [
    ("lab", "seqs-8", "seqs-64", "ttft_p50", "better"),
    ("pairs", "spike-seqs/seqs64", "spike-seqs/seqs8", "ttft_p95", "worse"),
    ("pairs", "storm-retries/retries3", "storm-retries/retries0", "gateway_e2e_p95", "better"),
]


@pytest.mark.parametrize(("where", "a", "b", "name", "direction"), MATCH)
def test_whole_run_latencies_are_judged_when_the_load_matches(
    where, a, b, name, direction, lab_out, analyzed, tmp_path
):
    def out(run):
        return lab_out(run) if where == "lab" else analyzed(PAIRS / run)[0]

    res = compare(out(a), out(b), tmp_path / "c")
    doc = res["doc"]
    load = doc["whole"]["load"]
    steps = ", ".join(s["label"] for s in doc["steps"])
    assert load["matched"] is True and not load["differs"] and not load["missing"], load
    assert load["how"].startswith(
        f"the same steps ({steps}), each with its requests or its length within 10 %"
    )
    assert next(r for r in doc["whole"]["metrics"] if r["name"] == name)["direction"] == direction
    assert "not judged: the load" not in " ".join(r["noise"] or "" for r in doc["whole"]["metrics"])
    assert "Whole-run latencies are not judged" not in reader_text(res)
