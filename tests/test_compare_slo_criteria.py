"""The SLO line names every figure the verdict judged the SLO on (logscope.compare.verdict.criteria): retry-storm
against storm-b read 'judged on e2e p95 (callers): A misses it (success share 70.0 %; …)', a run missing the SLO on a
figure the line had not named. The line's list and the verdict's checks are now one list."""

from __future__ import annotations

import re

import pytest
from compare_helpers import reader_text

from logscope.api import compare
from logscope.compare.moves import BY_NAME

# (A, B, the figures the line names, each run's figures that missed the SLO over the whole runs)
PAIRS = [
    (
        "retry-storm",
        "storm-b",
        "e2e p95 (callers) and success share",
        {"a": ["success_share"], "b": ["success_share"]},  # 70.0 % and 82.8 % against 99 %
    ),
    (
        "calm-b",
        "crash",
        "TTFT p95 (callers), e2e p95 (callers) and success share",
        {"a": [], "b": ["success_share"]},  # crash: 343 of 550 ok, 62.4 %
    ),
]


@pytest.mark.parametrize(("a", "b", "named", "failed"), PAIRS)
def test_the_slo_line_names_every_figure_the_verdict_used(a, b, named, failed, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    whole = doc["whole"]
    assert whole["slo_failed"] == failed
    line = next(v for v in doc["verdict"] if v.startswith("SLO ("))
    got = re.search(r"over the whole run, judged on (.+?): ", line)
    assert got is not None and got.group(1) == named
    from logscope.compare.verdict import criteria  # here: the line is checked before the list it is made of

    # the line's list is the verdict's: every criterion with a figure, in the order meets() reads them
    judged = [c.key for c in criteria(doc["slo"], whole["slo_judged_on"]) if c.key]
    assert named == _and([BY_NAME[k].title for k in judged])
    for side in ("a", "b"):  # a figure a run misses the SLO on is among those named
        assert set(whole["slo_failed"][side]) <= set(judged)
        for k in whole["slo_failed"][side]:
            assert BY_NAME[k].title in named
    assert line in reader_text(res).replace("\\", "")


def _and(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]
