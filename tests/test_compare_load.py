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

import html

import pytest
from compare_helpers import metric_row, reader_text

from conftest import DATA
from logscope.api import compare

PAIRS = DATA / "pairs"
HELD = "Whole-run latencies"  # then the success share and executions per request when known: " are not judged: the load differs ("


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
        "prompt tokens mean 128 in A, 64.1 in B, 50 % apart",
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
    assert " are not judged: the load differs (" in line and differs in line and text.count(line) >= 3
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
    assert " are not judged: the load" not in reader_text(res) and HELD not in reader_text(res)


# (A, B, what differs in a word each, the success share and the executions per logical request as truth.json
# gives them: client outcomes 200 / logical_requests; vllm requests_received (A) or client attempts / logical)
SHARES = [
    (
        "retry-storm",
        "storm-b",
        "steps, arrival rate, max tokens mean",
        (457 / 653, 409 / 494),
        (914 / 653, 976 / 494),
        ("70.0 % → 82.8 %", "1.40 → 1.98"),
    ),
    (
        "traced-1r",
        "traced-2r-kill",
        "step 2/s's length",  # 2/s for 180 s against 360 s (303 and 637 requests)
        (303 / 303, 582 / 637),
        (312 / 303, 1.0),
        ("100.0 % → 91.4 %", "1.03 → 1.00"),
    ),
]


def _outputs(res: dict) -> str:
    """compare.json beside what a reader gets (the terminal, compare.md, compare.html)."""
    return reader_text(res) + res["paths"]["compare_json"].read_text()


@pytest.mark.parametrize(("a", "b", "what", "share", "amp", "said"), SHARES)
def test_whole_run_success_and_executions_are_not_judged_when_the_load_differs(
    a, b, what, share, amp, said, lab_out, tmp_path
):
    """retry-storm against storm-b read 'better in B: success share 70.0 % → 82.8 %; worse in B: vLLM executions
    per logical request 1.4 → 1.98'; traced-1r against traced-2r-kill (one 2/s step run twice as long) read
    'worse in B: success share 100.0 % → 91.4 %'. A burst's failures and retries weigh as its share of the run."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    load = doc["whole"]["load"]
    assert load["matched"] is False and ", ".join(load["what"]) == what
    assert {"success_share", "amplification"} <= set(load["held"])
    for name, (va, vb) in (("success_share", share), ("amplification", amp)):
        row = next(r for r in doc["whole"]["metrics"] if r["name"] == name)
        assert (row["a"], row["b"]) == pytest.approx((va, vb), abs=1e-3)
        assert row["beyond_noise"] and row["direction"] is None
        assert f"; not judged: {load['text']}, no better or worse over the whole runs" in row["noise"]
    text = _outputs(res)
    line = next(v for v in doc["verdict"] if v.startswith(HELD))
    assert line.startswith(
        "Whole-run latencies, success share and vLLM executions per logical request are not "
    )
    assert f"success share {said[0]}" in line and f"vLLM executions per logical request {said[1]}" in line
    assert text.count(line) >= 3  # the terminal, compare.md, compare.html (compare.json's verdict too)
    assert not any(v.startswith("Over the whole runs") and "success share" in v for v in doc["verdict"])


# (A, B, each run against the SLO over the whole run, with its figures)
SLO_HELD = [
    (
        "retry-storm",
        "storm-b",
        # each run's callers' e2e p95 is censored (80 of 653, 85 of 494 callers gave up): named, deciding nothing
        "A misses it (success share 70.0 %; e2e p95 (callers) 7.502 s is censored (80 of 653 callers gave up: a "
        "lower bound) and decides nothing); B misses it (success share 82.8 %; e2e p95 (callers) 14.659 s is "
        "censored (85 of 494 callers gave up: a lower bound) and decides nothing): not judged between the runs, the "
        "load differs (steps, arrival rate, max tokens mean).",
        "A misses it, B misses it",
    ),
    (
        "traced-1r",
        "traced-2r-kill",
        "A meets it (TTFT p95 (engine) in 0.1–0.25 s, e2e p95 (callers) 2.803 s, success share 100.0 %); B misses "
        "it (TTFT p95 (engine) in 40–80 s, success share 91.4 %; e2e p95 (callers) 70.093 s is censored (35 of 637 "
        "callers gave up: a lower bound) and decides nothing): not judged between the runs, the load differs (step "
        "2/s's length). B misses it at 2/s where A met it.",
        "A meets it, B misses it",
    ),
]


@pytest.mark.parametrize(("a", "b", "line", "head"), SLO_HELD)
def test_the_whole_run_slo_is_not_judged_between_two_loads(a, b, line, head, lab_out, tmp_path):
    """retry-storm against storm-b read 'neither run meets it', traced-1r against traced-2r-kill 'B misses it
    (...) where A met it' over whole runs given other loads: each run's result is said with its figures, and the
    matched step's flip (2/s) is still judged."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    got = next(v for v in doc["verdict"] if v.startswith("SLO ("))
    assert got.endswith(line) and "where A met it." not in got.removesuffix(
        " B misses it at 2/s where A met it."
    )
    slo = doc["whole"]["load"]["slo"]
    assert slo.startswith("not judged between the runs, the load differs (") and slo in got
    text = _outputs(res)
    assert text.count(got) >= 3
    assert text.count(f"{head}: {slo}.") == 2  # the whole runs' table in compare.md and compare.html


# (where, A, B, a whole-run success share or SLO line judged as before)
SHARES_MATCH = [
    (
        "pairs",
        "spike-kv/kv112",
        "spike-read-timeout/read8s",
        "worse in B: completed ok 392 → 264; success share 100.0 % → 96.0 %",
    ),
    (
        "pairs",
        "storm-retries/retries3",
        "storm-retries/retries0",
        # retries0's callers' e2e p95 is censored (324 of its 1,155 callers gave up): named, deciding nothing
        "neither run meets it (A misses success share; B misses success share; e2e p95 (callers) 7.412 s is "
        "censored (324 of 1,155 callers gave up: a lower bound) and decides nothing).",
    ),
    (
        "lab",
        "seqs-8",
        "seqs-64",
        "neither run meets it (A misses TTFT p95 (callers); B misses TTFT p95 (callers)).",
    ),
]


@pytest.mark.parametrize(("where", "a", "b", "said"), SHARES_MATCH)
def test_whole_run_success_and_slo_are_judged_when_the_load_matches(
    where, a, b, said, lab_out, analyzed, tmp_path
):
    """The same load profile in both runs: the success share, the executions per request and the SLO over the whole
    runs are judged as before (read8s' gateway timeout cut 4 % of the answers)."""

    def out(run):
        return lab_out(run) if where == "lab" else analyzed(PAIRS / run)[0]

    res = compare(out(a), out(b), tmp_path / "c")
    doc = res["doc"]
    load = doc["whole"]["load"]
    assert load["matched"] is True and load["held"] == [] and load["slo"] == ""
    assert any(said in v for v in doc["verdict"]) and said in reader_text(res)
    assert "not judged between the runs" not in _outputs(res)
    share = next(r for r in doc["whole"]["metrics"] if r["name"] == "success_share")
    assert "not judged" not in share["noise"]


@pytest.mark.parametrize(("a", "b"), [("traced-1r", "traced-2r-kill"), ("traced-2r-kill", "traced-1r")])
def test_whole_run_counts_are_not_judged_when_only_the_steps_lengths_differ(a, b, lab_out, tmp_path):
    """traced-1r's 2/s ran 180 s, traced-2r-kill's 360 s: the traffic alike (one step, the same shapes) but not the
    load, and 'better in B: completed ok 303 → 582; worse: preemptions 5 → 1,543' counted twice the time. (Of the
    lab's pairs this one alone has alike traffic and another profile.)"""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    load = doc["whole"]["load"]
    assert doc["traffic"]["alike"] is True and load["matched"] is False
    counts = {
        "completed": (303, 582),
        "preemptions": (5, 1543),
        "waiting_max": (0, 119),
    }  # truth: 303 and 582 ok
    for name, (va, vb) in counts.items():
        row = metric_row(doc, name)
        assert (row["a"], row["b"]) == ((va, vb) if a == "traced-1r" else (vb, va))
        assert row["direction"] is None and f"not judged: {load['text']}: " in row["noise"], name
    assert not any(v.startswith("Over the whole runs") for v in doc["verdict"])
    last = doc["verdict"][-1]  # what is still judged is named: counts of 0 against 0 here
    assert last.startswith("Of the figures still judged over the whole runs (") and "completed ok" not in last
    assert reader_text(res).count(last) >= 3


def test_whole_run_counts_are_judged_when_the_load_matches(lab_out, tmp_path):
    """seqs-16 against seqs-8, one bench of the same steps: 289 preemptions → 0 is still 'better'."""
    doc = compare(lab_out("seqs-16"), lab_out("seqs-8"), tmp_path / "c")["doc"]
    assert doc["whole"]["load"]["matched"] is True
    row = metric_row(doc, "preemptions")
    assert (row["a"], row["b"], row["direction"]) == (289, 0, "better")


# (A, B, whole-run figures that read 'within noise' or 'small' between two loads, though the verdict said the
# whole runs' latencies, success share and counts are not judged)
WITHIN = [
    ("crash", "kill-norestart", ("success_share", "ttft_p50", "amplification")),
    ("retry-storm", "storm-b", ("completed",)),
    ("spike", "spike-b", ("completed", "waiting_mean", "throughput_tps", "gateway_retries")),
    ("traced-1r", "traced-2r-kill", ("throughput_tps", "client_retries")),
]


@pytest.mark.parametrize(("a", "b", "names"), WITHIN)
def test_within_noise_is_not_said_of_a_figure_not_judged(a, b, names, lab_out, tmp_path):
    """'Within noise' judges as much as 'better' does: between two load profiles a whole-run figure that mixes
    the steps, or a count of the load, is shown with its interval, not judged either way; and the verdict's
    last line names what is still judged (or says nothing is), never 'none moved' of figures it did not judge."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    assert doc["whole"]["load"]["matched"] is False
    for name in names:
        row = metric_row(doc, name)
        assert row["a"] is not None and row["b"] is not None
        assert row["direction"] is None and "; not judged: " in row["noise"], (name, row)
    judged = [r["title"] for r in doc["whole"]["metrics"] if r["direction"] is not None]
    assert {r["direction"] for r in doc["whole"]["metrics"]} <= {None, "none", "same bucket"}
    last = doc["verdict"][-1]
    assert all(t in last for t in judged[:4]) and not any(
        metric_row(doc, n)["title"] + ";" in last for n in names
    )
    md = res["paths"]["compare_md"].read_text().replace("\\", "")
    whole_md = md.split("## What moved (whole runs)")[1].split("\n## ")[0].split("\n### ")[0]
    assert "| within noise |" not in whole_md and "| small |" not in whole_md
    assert reader_text(res).count(last) >= 3


@pytest.mark.parametrize(("a", "b"), [("traced-1r", "traced-2r-kill"), ("traced-2r-kill", "traced-1r")])
def test_the_traffic_section_says_the_load_differs_where_the_verdict_does(a, b, lab_out, tmp_path):
    """The same request shapes at 2/s, for 180 s in one run and 360 s in the other: compare.html read 'The loads
    match (tolerance 10 %)' and compare.md 'Traffic: alike' under a verdict saying the load differs."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    assert doc["traffic"]["alike"] is True and doc["whole"]["load"]["matched"] is False
    said = f"The request shapes match, but {doc['whole']['load']['text']}."
    page = html.unescape(res["paths"]["compare_html"].read_text())
    md = res["paths"]["compare_md"].read_text().replace("\\", "")
    assert "The loads match" not in page and said in page
    assert "Traffic: alike in its request shapes, not in its load. " + said in md
