"""The retries table names the engine its server rows came from (report.layers_seen.engine, summary.json's
retries.server_engine): a TGI or SGLang folder read 'vLLM requests received', 'vLLM aborts' and 'vLLM executions
per logical request' of its router's Success lines or of an SGLang log, in summary.md, report.html and the
terminal's 'not observed' line."""

from __future__ import annotations

import pytest

from conftest import DATA, PUBLIC, PUBLIC2

CASES = {  # sample: (engine, server requests counted, or None: not observed)
    DATA / "unseen" / "tgi-1374-v1.3.3-compose-compat-generate-success-2.46s.log": ("TGI", 1),
    PUBLIC2 / "s01-sglang-0.3-prefill-batches-queue-draining-token-usage-rising.log": ("SGLang", None),
    PUBLIC2 / "s02-sglang-single-decode-line-running-1010-queue-12279-token-usage-0.93.log": ("SGLang", None),
    PUBLIC / "15-v0-0.5-single-aborted-chat-request.log": ("vLLM", 1),
}


@pytest.mark.parametrize("src", sorted(CASES), ids=lambda p: p.name[:24])
def test_the_server_rows_name_their_engine(analyzed, rendered, src):
    eng, n = CASES[src]
    out, s, _ = analyzed(src)
    r = s["retries"]
    assert r["server_engine"] == eng and r["server_requests"] == n
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        text = seen[name]
        for row in ("requests received", "aborts", "executions per logical request"):
            assert f"{eng} {row}" in text, (name, row)
        if eng != "vLLM":
            assert "vLLM requests received" not in text and "vLLM executions" not in text, name
    if n is None:  # the terminal names only the rows not observed
        assert f"{eng} requests, {eng} aborts: " in seen["terminal"]
        assert "vLLM requests" not in seen["terminal"]
