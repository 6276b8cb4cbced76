"""An engine's death whose record carries no time is said, its time unknown. tests/data/vllm-pastes 5697 (vLLM
#5697, V0 0.5: a flattened paste starting mid-traceback, '... AsyncEngineDeadError: Task finished unexpectedly. This
should never happen!', then three 'Aborted request' records at 11:25:01) read "Nothing alarming cannot be said:
nothing shows the server serving": the death no line placed in time was not said at all (public-2 g08 too: a llama.cpp
backend's fatal error behind llama-swap). A death with its time
(vllm-public 09, public-2 n17) keeps its timed finding and gets no second one."""

from __future__ import annotations

import pytest

from conftest import DATA, PUBLIC, PUBLIC2, need

TITLE = "Engine died (AsyncEngineDeadError: Task finished unexpectedly); when is unknown: its record carries no time"


def test_an_untimed_death_is_said(analyzed, rendered):
    out, s, diag = analyzed(need(DATA / "vllm-pastes" / "5697-flattened-deaderror-aborts.log"))
    assert diag["episodes"] == []
    f = s["findings"][0]
    assert (f["title"], f["severity"], f["start"]) == (TITLE, "critical", None)
    facts = {x["name"]: x["value"] for x in next(c for c in s["claims"] if c["id"] == f["claim"])["facts"]}
    assert (facts["fatal_records"], facts["kinds"]) == (1, "engine_dead")
    assert s["verdict"][0] == TITLE + "."
    assert "when it died and what came after are not in the logs" in s["verdict"][1]
    for text in rendered(out, s).values():
        assert TITLE in text
        assert "Nothing alarming" not in text


@pytest.mark.parametrize(
    "src",
    [
        PUBLIC / "09-v0-asyncenginedead-critical-500.log",
        PUBLIC2 / "n17-v1-0.10-apiserver-enginedeaderror-double-spaced-paste.log",
    ],
    ids=["09", "n17"],
)
def test_a_timed_death_gets_no_second_finding(analyzed, src):
    _, s, diag = analyzed(need(src))
    assert [e["signal"] for e in diag["episodes"]] == ["crash"]
    assert not any("when is unknown" in f["title"] for f in s["findings"])


def test_a_backend_that_died_behind_a_proxy_is_said(analyzed):
    """public-2 g08 (ik_llama.cpp #381 behind llama-swap, no timestamps): the backend's 'fattn.cu:66: fatal error',
    then the proxy's 502s. It read only '2 of 3 requests failed (2 × 502)'; the death that explains them leads."""
    _, s, _ = analyzed(need(PUBLIC2 / "g08-llama-swap-proxy-200-then-backend-fatal-then-502s.log"))
    titles = [f["title"] for f in s["findings"]]
    assert titles[0].startswith("Engine died (") and "fattn.cu:66: fatal error" in titles[0]
    assert titles[0].endswith("when is unknown: its record carries no time")
    assert titles[1] == "2 of 3 requests failed (2 × 502); when is unknown: their records carry no time"
