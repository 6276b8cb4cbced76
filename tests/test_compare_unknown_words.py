"""An outcome no record states reads in the same words in analyze and in compare, both from diagnose.stated.Unknown:
vllm-public 05's pending request read '1 unknown (no caller's or gateway's record)' in analyze and '1 of its
requests of unknown outcome left out' in compare; public-2 g01's three LiteLLM router requests with no status read
'no status in the caller's or gateway's record' in analyze and 'no record states the outcome of any of its 3
requests: no caller's or gateway's status or error, and no end the engine logged' in compare."""

from __future__ import annotations

import pytest
from compare_helpers import metric_row, reader_text

from conftest import DATA, PUBLIC, PUBLIC2
from logscope.api import compare
from logscope.diagnose.stated import NO_RECORD, NO_STATUS, Unknown

# (a run, its requests, those of unknown outcome, why analyze's status column gives them none)
UNKNOWN = [
    (PUBLIC / "05-v0-0.3-stuck-pending-115-kv-99.log", 3, 1, NO_RECORD),  # 2 'Finished request', 1 pending
    (PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log", 3, 3, NO_STATUS),
    (DATA / "sglang" / "4045-receive-request-line.log", 1, 1, NO_RECORD),  # a 'Receive' line and no end
]


@pytest.mark.parametrize(("src", "n", "unknown", "why"), UNKNOWN, ids=lambda x: getattr(x, "stem", "")[:4])
def test_an_unknown_outcome_reads_alike_in_analyze_and_compare(src, n, unknown, why, analyzed, tmp_path):
    out, summary, _ = analyzed(src)
    words = f"{unknown} unknown ({why})"
    # analyze: summary.json's outcomes and summary.md's table
    rows = [r for r in summary["outcomes"]["by_status"] if r["outcome"] == "unknown"]
    assert [(r["status_text"], r["requests"], r["stated_by"]) for r in rows] == [(why, unknown, None)]
    assert summary["outcomes"]["requests"] == n
    assert f"| unknown | {why} | {unknown} |" in (out / "summary.md").read_text().replace("\\", "")
    # one function gives both: analyze's status column is its reason, compare's words its text
    recorded = unknown if why == NO_STATUS else 0
    assert Unknown(unknown, recorded).why == rows[0]["status_text"]
    assert Unknown(unknown, recorded).text == words
    # compare, the run against itself: its outcome rows say the same words, and no others
    res = compare(out, out, tmp_path / "c")
    text = reader_text(res) + res["paths"]["compare_json"].read_text()
    for name in ("completed", "success_share"):
        row = metric_row(res["doc"], name)
        if unknown == n:  # no outcome known: the figure is unknown, and says which requests
            assert (row["a"], row["b"]) == (None, None)
            assert row["noise"] == f"unknown in both runs (in each: {words})"
        else:  # the known ones counted, the unknown left out
            assert name != "completed" or row["a"] == summary["outcomes"]["by_outcome"]["ok"]
            assert f"(in each: {words} left out)" in row["noise"]
    assert words in text.replace("\\", "")
    assert "unknown outcome" not in text and "no record states the outcome" not in text
