"""A stream cut mid-response had an HTTP answer: its headers went out with 200 (nginx logged status=200, then
'upstream prematurely closed connection'). "What callers saw" read "truncated | no HTTP answer" for the lab crash's 8
streams cut by the SIGKILL (truth: 8 APIConnectionError after 72-81 chunks) and traced-2r-kill's 20 streams cut on
replica b (truth: nginx logged all 20 as status=200)."""

from __future__ import annotations

import pytest

from conftest import LAB, need

CUT = "2xx at the gateway, the answer cut mid-response"
CASES = {"crash": 8, "traced-2r-kill": 20}  # run: streams cut (truth)


@pytest.mark.parametrize("run", sorted(CASES))
def test_a_cut_stream_had_an_answer(analyzed, rendered, run):
    out, s, _ = analyzed(need(LAB / run))
    rows = [r for r in s["outcomes"]["by_status"] if r["outcome"] == "truncated"]
    assert [(r["requests"], r["status"], r["status_text"]) for r in rows] == [(CASES[run], None, CUT)]
    outputs = rendered(out, s)
    # then the error lines that say it (test_stream_cut_after_200: each is the file's own line)
    assert f"| truncated | {CUT}; its error lines: nginx-error.log:" in outputs["summary.md"]
    assert f"<td>truncated</td><td>{CUT}; its error lines: nginx-error.log:" in outputs["report.html"]
    for name, text in outputs.items():
        assert (
            "truncated | no HTTP answer" not in text and "<td>truncated</td><td>no HTTP answer" not in text
        ), name
