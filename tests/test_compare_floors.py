"""A censored callers' figure decides no SLO (compare/censored.py, verdict.meets).

traced-1r against traced-2r-kill read "B misses it (… e2e p95 (callers) 70.09 s …)" in its SLO line while the table
marked that figure censored (35 of traced-2r-kill's 637 callers gave up: the answers that came are a lower bound).
The line now names the figure as censored, a lower bound that decides nothing, beside the figures that do decide; a
run that only the censored figure would have failed cannot be judged, and says why."""

from __future__ import annotations

import html

import pytest
from compare_helpers import lab_truth, metric_row, reader_text

from logscope.api import AnalyzeOptions, compare
from logscope.compare.render import terminal_lines

# (A, B, the SLO given (None: the default), B's result, the figures B misses it on)
CASES = [
    ("traced-1r", "traced-2r-kill", None, False, ["engine_ttft_p95", "success_share"]),
    # storm-b's callers' e2e p95 is above 10 s, its engine TTFT and success share within this SLO
    ("spike-b", "storm-b", {"ttft_s": 30.0, "e2e_s": 10.0, "success": 0.8}, None, []),
]


@pytest.mark.parametrize(("a", "b", "slo", "met", "failed"), CASES)
def test_a_censored_figure_decides_no_slo(lab_out, tmp_path, a, b, slo, met, failed) -> None:
    res = compare(lab_out(a), lab_out(b), tmp_path / "c", AnalyzeOptions(compare_slo=slo))
    whole = res["doc"]["whole"]
    truth = lab_truth(b)["client"]
    gave_up, callers = truth["outcomes"]["APITimeoutError"], truth["logical_requests"]
    row = metric_row(res["doc"], "e2e_p95")
    limit = (slo or {}).get("e2e_s", 20.0)
    assert whole["slo_judged_on"]["e2e"] == "e2e_p95" and row["b"] > limit  # above the limit, yet a floor
    assert row["noise"].startswith(f"censored (B: {gave_up:,} of its {callers:,} callers gave up")
    assert whole["meets_slo"]["b"] is met and whole["slo_failed"]["b"] == failed
    assert whole["slo_floors"]["b"] == [{"name": "e2e_p95", "gave_up": gave_up, "callers": callers}]
    line = next(v for v in res["doc"]["verdict"] if v.startswith("SLO ("))
    fig = f"{row['b']:.3f}".rstrip("0").rstrip(".")
    if met is False:  # what decides is named, and the floor beside it
        words = (
            f"e2e p95 (callers) {fig} s is censored ({gave_up:,} of {callers:,} callers gave up: a lower bound) "
            "and decides nothing"
        )
        assert words in line and "TTFT p95 (engine) in 40–80 s, success share 91.4 %; " + words in line
    else:  # nothing else decides: B cannot be judged, and the line says why
        words = f"B cannot be judged (B's e2e p95: unknown ({gave_up:,} of {callers:,} callers gave up before their"
        assert words in line and "B misses" not in line
    # the same line in the terminal and compare.md, its words in compare.html (where a range is kept on one
    # line), and the floor never among what B misses on
    md = res["paths"]["compare_md"].read_text().replace("\\", "")
    assert line in " ".join(terminal_lines(res["doc"])) and line in md
    assert words in html.unescape(res["paths"]["compare_html"].read_text())
    text = reader_text(res)
    assert f"e2e p95 (callers) {fig} s)" not in text and f"e2e p95 (callers) {fig} s," not in text
