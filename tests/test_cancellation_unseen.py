"""Callers left, but the folder holds no vLLM request line: what vLLM did with their attempts is unknown, never 0.
public-2 c01-c03 (openai-python and lm-eval clients alone) and g03 (ingress-nginx's 504 after 60 s, no vLLM log) read
"cancellation not observed (vLLM aborted none of them, so no abort was seen to propagate): of 1 attempts abandoned by
their callers, vLLM aborted 0, 0 ran on for nobody" beside "vLLM aborts | not observed: no vLLM or SGLang log in the
folder" in the same table: correlation.json already said so (orphans.abort_lines null)."""

from __future__ import annotations

import pytest

from conftest import LAB, PUBLIC2, need

CASES = {  # source: who left (correlation.json's callers_left)
    "c01": (PUBLIC2 / "c01-openai-python-via-litellm-groq-429-retry-backoff-custom-format.log", "client"),
    "c03": (PUBLIC2 / "c03-lm-eval-harness-client-timeout-retry-tqdm-glued.log", "client"),
    "g03": (PUBLIC2 / "g03-ingress-nginx-vllm-cpu-completions-504-after-60s.log", "gateway"),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_no_vllm_line_leaves_the_aborts_unknown(analyzed, rendered, key):
    src, who = CASES[key]
    out, s, d = analyzed(need(src))
    c = s["retries"]["cancellation"]
    assert (c["abandoned"], c["callers_left"][who], c["verdict"]) == (1, 1, "not observed")
    assert (c["engine_seen"], c["aborted"], c["finished_in_race"], c["ran_on"]) == (False, None, None, None)
    assert s["retries"]["server_aborts"] is None  # the table's own row: not observed
    claim = next(x for x in s["claims"] if x["id"] == "cancellation")
    assert claim == next(x for x in d["claims"] if x["id"] == "cancellation")
    facts = {f["name"]: f["value"] for f in claim["facts"]}
    assert (facts["abandoned"], facts["aborted"], facts["ran_on"]) == (1, None, None)
    assert claim["missing"] and "vLLM request line" in claim["missing"][0]
    assert c["text"] == claim["sentence"]
    assert c["text"].startswith(
        "cancellation not observed: 1 attempt(s) abandoned by their callers, but the folder "
    )
    for name, text in rendered(out, s).items():
        assert "vLLM aborted 0" not in text and "0 ran on for nobody" not in text, name
        if name != "terminal":  # the terminal prints the verdict only
            assert c["text"] in text, name


def test_with_vllm_lines_the_aborts_are_counted(analyzed):
    """The same claim where vLLM's request lines are in the folder (killed-debug: 490 streams left in flight by a
    killed client, each aborted by vLLM): the counts stand."""
    _, s, _ = analyzed(need(LAB / "killed-debug"))
    c = s["retries"]["cancellation"]
    assert (c["engine_seen"], c["abandoned"], c["aborted"], c["ran_on"]) == (True, 490, 490, 0)
    assert c["verdict"] == "propagated"
