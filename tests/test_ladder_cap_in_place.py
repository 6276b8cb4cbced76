"""A ladder run at a --max-num-seqs already at or below the boundary it measured is not told to cap admitted
concurrency there (evid16). lab seqs-8 (--max-num-seqs 8, boundary 8) and seqs-16 (--max-num-seqs 16, boundary 16)
were told "Cap admitted concurrency at 8 / 16 (--max-num-seqs)", the setting they ran with; seqs-16's pressure
findings (16 running preempted by a cache of 9.3 requests) "Cap ... --max-num-seqs 16". seqs-32 (cap 32 above its
boundary of 16) keeps the cap as its test."""

from __future__ import annotations

import pytest

from conftest import LAB, need

CASES = {  # run: (cap, boundary step that broke, its concurrency)
    "seqs-8": (8, 5, 16),
    "seqs-16": (16, 6, 32),
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_a_cap_in_place_is_not_advised_again(analyzed, rendered, run):
    cap, step, conc = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    (f,) = [f for f in s["findings"] if f["kind"] == "ladder"]
    said = (
        f"The server's --max-num-seqs is already {cap}, at or below the boundary of {cap}: at step {step} ({conc}) "
        "the engine admitted no more at once and the callers above it waited in its queue; add capacity (a second "
        f"replica, or more KV cache) and re-run step {step} to confirm"
    )
    assert f["next_test"].startswith(said), f["next_test"]
    for g in s["findings"]:
        assert f"Cap admitted concurrency at {cap}" not in g["next_test"]
        assert f"--max-num-seqs {cap} (step" not in g["next_test"]
    seen = rendered(out, s)
    assert said in seen["summary.md"] and said in seen["report.html"]
    if s["findings"][0]["kind"] == "ladder":
        assert said in seen["terminal"]  # the verdict's first test


def test_pressure_above_a_cap_in_place_lowers_it_to_the_cache(analyzed):
    """seqs-16: 16 running preempted 140 times at c=64 with a cache of 9.3 requests of 384 tokens."""
    _, s, _ = analyzed(need(LAB / "seqs-16"))
    f = next(
        f for f in s["findings"] if f["title"] == "Sustained KV pressure: 140 preemptions 02:57:42–02:58:04"
    )
    assert f["next_test"].startswith("Lower --max-num-seqs from 16 to 9 (what the KV cache holds")


def test_a_cap_above_the_boundary_stays_the_test(analyzed):
    _, s, _ = analyzed(need(LAB / "seqs-32"))
    (f,) = [f for f in s["findings"] if f["kind"] == "ladder"]
    assert f["next_test"].startswith("Cap admitted concurrency at 16 (--max-num-seqs)")
