"""compare's 'completed ok' and success share count what a record states of each request, the engine's own end
where only the engine logged it (TGI's 'Success', SGLang's 'Finish', vLLM V0's 'Finished request'), and say
unknown, naming what is missing, where nothing states it. TGI 1374's one 'Success' read 'completed ok 0' and
'success share 0.0 %' in compare.md while analyze said '1 unknown (no caller's or gateway's record)'."""

from __future__ import annotations

import json
import re

import pytest
from compare_helpers import lab_truth, metric_row, reader_text

from conftest import DATA, PUBLIC
from logscope.api import compare

SGLANG, UNSEEN = DATA / "sglang", DATA / "unseen"

# (an engine log alone, its requests, those the engine logged as ended well, those no record states the end of)
ENDED = [
    (UNSEEN / "tgi-1374-v1.3.3-compose-compat-generate-success-2.46s.log", 1, 1, 0),  # TGI's 'Success'
    (
        SGLANG / "23049-diffusion-request-lines-text-and-json.log",
        4,
        4,
        0,
    ),  # SGLang's 'Finish ... error: None'
    (PUBLIC / "05-v0-0.3-stuck-pending-115-kv-99.log", 3, 2, 1),  # vLLM V0: 2 'Finished request', 1 pending
]
ZERO = re.compile(r"(?<![\d.])0\.0 %")  # a success share of 0 % (not 100.0 %)
# in analyze's words (diagnose.stated.Unknown: test_compare_unknown_words.py)
MISSING = "1 unknown (no caller's or gateway's record)"


def _with_itself(src, analyzed, tmp_path) -> tuple[dict, str]:
    out = analyzed(src)[0]
    res = compare(out, out, tmp_path / "c")
    return res, reader_text(res) + "\n" + res["paths"]["compare_json"].read_text()


@pytest.mark.parametrize(("src", "n", "ended", "unstated"), ENDED, ids=lambda x: getattr(x, "name", None))
def test_the_engines_own_end_of_a_request_is_its_outcome(src, n, ended, unstated, analyzed, tmp_path):
    res, text = _with_itself(src, analyzed, tmp_path)
    doc = res["doc"]
    assert metric_row(doc, "requests")["a"] == n
    done, share = metric_row(doc, "completed"), metric_row(doc, "success_share")
    assert (done["a"], done["b"], share["a"], share["b"]) == (ended, ended, 1.0, 1.0)
    assert done["clock"] == "engine" and done["source"] == {"a": "engine_log", "b": "engine_log"}
    md = res["paths"]["compare_md"].read_text()
    assert f"| completed ok | engine's clock · engine log | {ended} | {ended} |" in md
    assert "| success share | engine's clock · engine log | 100.0 % | 100.0 % |" in md
    assert not ZERO.search(text) and "completed ok 0" not in text
    left = f"{unstated} unknown (no caller's or gateway's record) left out"
    assert (left in share["noise"]) == bool(unstated) and (left in md) == bool(unstated)


@pytest.mark.parametrize(
    "src", [SGLANG / "4045-receive-request-line.log"], ids=lambda x: getattr(x, "name", None)
)
def test_no_stated_outcome_is_unknown_and_names_what_is_missing(src, analyzed, tmp_path):
    """SGLang 4045: a 'Receive' line and no end: no record states the outcome, so neither figure is 0."""
    res, text = _with_itself(src, analyzed, tmp_path)
    for name in ("completed", "success_share"):
        row = metric_row(res["doc"], name)
        assert (row["a"], row["b"]) == (None, None)
        assert row["noise"].startswith("unknown in both runs (in each: " + MISSING)
    assert "| completed ok | engine's clock | unknown | unknown |" in res["paths"]["compare_md"].read_text()
    assert MISSING in text and not ZERO.search(text)
    # analyze's own success share of it is unknown too, never 0 %
    assert analyzed(src)[1]["cold_start"]["warm"]["success_share"] is None


def test_an_abort_the_engine_logged_stays_a_failure(analyzed, tmp_path):
    """SGLang 25887: the engine's 'Finish' of an abort ('Request running timeout reached.', 503) states the
    failure: 0 completed and 0.0 %, as analyze's success share says."""
    src = SGLANG / "25887-finish-abort-headerless.log"
    res, _ = _with_itself(src, analyzed, tmp_path)
    done, share = metric_row(res["doc"], "completed"), metric_row(res["doc"], "success_share")
    assert (done["a"], share["a"]) == (0, 0.0)
    assert "unknown" not in share["noise"]
    assert json.dumps(analyzed(src)[1]).count('"success_share": 0.0') == 1


def test_callers_outcomes_are_unchanged(lab_out, tmp_path):
    """retry-storm against storm-b, every request recorded by its client: the 200s of truth.json are completed
    ok, of all its logical requests, none left out."""
    res = compare(lab_out("retry-storm"), lab_out("storm-b"), tmp_path / "c")
    done, share = metric_row(res["doc"], "completed"), metric_row(res["doc"], "success_share")
    ta, tb = lab_truth("retry-storm")["client"], lab_truth("storm-b")["client"]
    assert (done["a"], done["b"]) == (ta["outcomes"]["200"], tb["outcomes"]["200"]) == (457, 409)
    want = [round(t["outcomes"]["200"] / t["logical_requests"], 4) for t in (ta, tb)]
    assert [share["a"], share["b"]] == want == [0.6998, 0.8279]
    assert " unknown (" not in share["noise"] and " unknown (" not in done["noise"]
    assert "success share 70.0 % → 82.8 %" in reader_text(res)
