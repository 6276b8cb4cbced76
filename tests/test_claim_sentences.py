"""An observed claim's sentence writes its facts as the report writes them: a time as a time of day (Python's
'2026-11-29 08:33:42.500000+00:00' was printed as it was), a latency with its unit and its clock ('cold ttft p95 3.07'
named neither). Read from every output on lab crash (a dead upstream's first/last attempt; a cold start's TTFT) and
retry-storm."""

from __future__ import annotations

import re

import pytest

from conftest import LAB, need

PY_TIME = re.compile(r"\d{2}:\d{2}:\d{2}(\.\d{6})?\+00:00")


@pytest.mark.parametrize("run", ["crash", "retry-storm"])
def test_observed_claims_write_times_and_latencies_as_the_report_does(analyzed, rendered, run):
    out, s, _ = analyzed(need(LAB / run))
    observed = [c for c in s["claims"] if c["kind"] == "observed"]
    assert observed
    for c in observed:
        assert not PY_TIME.search(c["sentence"]), c["sentence"]
        for f in c["facts"]:
            if f["unit"] == "s" and f["value"] is not None and f["clock"]:
                said = f"{f['name'].replace('_', ' ')} "
                assert re.search(re.escape(said) + r"[0-9.]+ m?s \(the \w+'s? clock\)", c["sentence"]), c[
                    "sentence"
                ]
    texts = rendered(out, s)
    for name in ("summary.md", "report.html"):  # each claim's one sentence, as summary.json holds it
        for c in observed:
            assert c["sentence"] in texts[name], (name, c["id"])
    if run == "crash":
        f3 = next(c for c in observed if c["id"] == "finding.F3")
        assert f3["sentence"].endswith("first 08:33:42.500; last 08:36:46.993")
        f4 = next(c for c in observed if c["id"] == "finding.F4")
        assert (
            "cold ttft p95 3.07 s (the callers' clock); warm ttft p95 74 ms (the callers' clock)"
            in f4["sentence"]
        )
