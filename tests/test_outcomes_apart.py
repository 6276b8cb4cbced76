"""The requests 'What callers saw' counts and those the retries' table counts are one population: a request no time
places is counted apart from the outcomes and said so beside both (public-2 g09: 'What callers saw' said 1 logical
request, the retries' table 2 on the same page, the untimed one said only in a finding)."""

from __future__ import annotations

import re

import pytest

from conftest import LAB, PUBLIC2, need

G09 = "g09-litellm-proxy-compose-wrapped-200s-then-upstream-503-overloaded-no-fallback.log"
C05 = "c05-openai-python-httpx-502-bad-gateway-then-retries-connection-error-llama-swap.log"


@pytest.mark.parametrize(
    ("src", "timed", "apart"),
    [
        (PUBLIC2 / G09, 1, 1),  # LiteLLM's first access line precedes any timed record
        (PUBLIC2 / C05, None, 9),  # no line carries a time: no outcomes' table, the 9 said by their finding
        (LAB / "spike", 284, None),
        (LAB / "retry-storm", None, None),  # every request timed: the two counts agree, whatever they are
    ],
    ids=["g09", "c05", "spike", "retry-storm"],
)
def test_outcomes_and_retries_count_one_population(analyzed, rendered, src, timed, apart):
    out, s, _ = analyzed(need(src))
    o, logical = s["outcomes"], s["retries"]["logical_requests"]
    said = (o or {}).get("untimed")
    if timed is not None:
        assert o["requests"] == timed
    assert (said or {}).get("requests") == (apart if o else None)
    counted = (o["requests"] if o else 0) + (said["requests"] if said else 0)
    seen = rendered(out, s)
    if o is None:  # all of them untimed: the finding that counts them says the retries' number
        assert apart == logical and f"{apart:,} logical request(s)" in seen["summary.md"]
        return
    assert counted == logical
    if said:
        for name in ("summary.md", "report.html"):
            text = re.sub(r"<[^>]+>", "", seen[name])  # the page's words without its tags
            assert f"Not among them: {said['text']} (counted apart)" in text, name
            assert f"{logical:,} ({said['requests']:,} with no time, not among the outcomes above)" in text, (
                name
            )
