"""A start-up death its KV check caused is told as that refusal, once.

Lab kv-short-refused (vLLM 0.32, --max-model-len 1024 with --num-gpu-blocks-override 20 = 640 tokens; truth.json: no
traffic): EngineCore's 'ValueError: To serve at least one request with the model's max seq len (1024), …' then
'Engine core initialization failed'. It led with "Engine died at 04:33:28" and the test "Reproduce with the same
request sizes at a lower --max-num-seqs from 64 to 32 to tell a load-driven death from a software fault": no request
was ever sent. The same refusal with no death in the excerpt (vllm-public 23, 47) keeps its own finding."""

from __future__ import annotations

import pytest

from conftest import LAB, PUBLIC, need

TITLE = "Engine died at start-up (04:33:28): max_model_len needs more KV cache than there is"
REFUSED = "The server cannot start: max_model_len needs more KV cache than there is"


def test_the_refusal_is_the_deaths_cause(analyzed, rendered):
    out, s, diag = analyzed(need(LAB / "kv-short-refused"))
    assert [(e["signal"], e["class"]) for e in diag["episodes"]] == [("crash", "crash")]
    assert diag["episodes"][0]["details"]["crash"]["at_startup"] is True
    assert [f["title"] for f in s["findings"]] == [TITLE]  # the check's own finding is not said twice
    f = s["findings"][0]
    assert "max seq len (1024)" in f["evidence"]
    assert f["next_test"].startswith("Start with a shorter --max-model-len")
    assert s["verdict"][2] == f"First thing to test: {f['next_test']}"
    assert s["retries"]["logical_requests"] in (None, 0)  # truth.json: no traffic
    for text in rendered(out, s).values():
        assert TITLE in text
        assert "lower --max-num-seqs" not in text and "same request sizes" not in text


@pytest.mark.parametrize("name", ["23", "47"])
def test_a_refusal_with_no_death_keeps_its_finding(analyzed, name):
    src = next(need(PUBLIC).glob(f"{name}-*.log"))
    _, s, diag = analyzed(src)
    assert not any(e["signal"] == "crash" for e in diag["episodes"])
    assert s["findings"][0]["title"] == REFUSED
