"""A folder whose requests vLLM aborted is not "nothing alarming". public-2 n02 (tenstorrent tt-inference-server
#350: the 9 sequences cmpl-1dac86b0…-0 … -8 of one completion aborted at 03:14:08, lm-eval's 10-minute timeout, after
two normal stats lines) read "Nothing alarming in 03:13:58–03:14:08: no preemption, crash, queue or error episode";
vllm-public 15 (vLLM #2484: one chat request aborted, the client's ECONNRESET on long prompts) read "Nothing
alarming cannot be said" (that one stays: no stats line shows the server serving). With the callers' records in the folder the cancellation claims say who left
(traced-1r: 9 vLLM aborts of 312 attempts, each a client timeout): no finding of its own there."""

from __future__ import annotations

import pytest

from conftest import LAB, PUBLIC, PUBLIC2, need

CASES = {  # source: (aborted, title)
    "n02": (
        PUBLIC2 / "n02-v0-0.8-dp16-stats-then-aborted-flood-10min-timeout.log",
        9,
        "9 request(s) aborted at 03:14:08, none finished",
    ),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_aborted_requests_are_a_finding_in_every_output(analyzed, key, rendered):
    src, n, title = CASES[key]
    out, s, _ = analyzed(need(src))
    f = s["findings"][0]
    assert (f["title"], f["severity"]) == (title, "medium")
    facts = {x["name"]: x["value"] for x in next(c for c in s["claims"] if c["id"] == f["claim"])["facts"]}
    assert (facts["aborted"], facts["finished"], facts["callers_seen"]) == (n, 0, False)
    assert "why these did is not in the folder" in f["cause"]
    assert s["retries"]["server_aborts"] == n
    outputs = rendered(out, s)
    for name, text in outputs.items():
        assert title in text, name
        assert "Nothing alarming" not in text, name


def test_an_abort_with_nothing_served_stays_the_unknown_calm_claim(analyzed):
    """vllm-public 15: no stats line, no request finished: 'nothing alarming' is unknown already, and its finding
    names the abort (tests/test_diagnose_public.py keeps it info)."""
    _, s, _ = analyzed(need(PUBLIC / "15-v0-0.5-single-aborted-chat-request.log"))
    assert [f["severity"] for f in s["findings"]] == ["info"]
    assert s["findings"][0]["title"].startswith("Nothing alarming cannot be said")
    assert "1 aborted by the caller" in s["findings"][0]["evidence"]


def test_aborts_beside_the_callers_records_are_the_cancellation_claims(analyzed):
    _, s, _ = analyzed(need(LAB / "traced-1r"))
    assert s["retries"]["server_aborts"] == 9
    assert not any("aborted" in f["title"] for f in s["findings"])
