"""A finding about an SGLang server names SGLang's knobs (#37: a fix must hold for the next engine). Two public
SGLang threads never tuned to (sgl-project/sglang #26248 and #14972) were told to "run a concurrency ladder (vllm
bench serve ...) and cap --max-num-seqs", flags their server does not have, and that "vLLM writes request lines
with --enable-log-requests". A vLLM server beside them keeps vLLM's words."""

from __future__ import annotations

import shutil

import pytest

from conftest import DATA, PUBLIC, need

SGL = DATA / "sglang-advice"
VLLM = PUBLIC / "17-v1-stats-lines-glued-no-newline.log"
VLLM_WORDS = ("--max-num-seqs", "vllm bench serve", "--max-model-len", "--gpu-memory-utilization")


@pytest.mark.parametrize("name", sorted(p.name for p in need(SGL).glob("*.log")))
def test_an_sglang_servers_next_test_names_sglangs_flags(analyzed, name):
    out, s, _ = analyzed(SGL / name)
    f = s["findings"][0]
    assert f["title"].startswith("KV pressure when the logs end")
    assert "--max-running-requests" in f["next_test"] and "python -m sglang.bench_serving" in f["next_test"]
    for text in (f["title"], f["cause"], f["next_test"], *s["verdict"]):
        assert not any(w in text for w in VLLM_WORDS), text
    assert "SGLang's log" in s["retries"]["not_observed"]["server_requests"]
    assert "--log-requests" in s["retries"]["not_observed"]["server_requests"]
    md = (out / "summary.md").read_text()
    assert "--max-running-requests" in md and "--max-num-seqs" not in md


def test_each_server_of_a_mixed_folder_keeps_its_engines_words(analyzed, tmp_path):
    """One vLLM and one SGLang server in one folder: each finding's advice is its own server's."""
    both = tmp_path / "both"
    both.mkdir()
    shutil.copy2(need(VLLM), both / "vllm-a.log")
    shutil.copy2(need(SGL / "14972-sglang-token-usage-0.94-queue-5.log"), both / "sglang-b.log")
    _, s, _ = analyzed(both)
    by = {f["title"].split(":")[0]: f for f in s["findings"]}
    assert {"sglang-b", "vllm-a"} <= set(by), [f["title"] for f in s["findings"]]
    assert "--max-running-requests" in by["sglang-b"]["next_test"]
    assert "--max-num-seqs" not in by["sglang-b"]["next_test"]
    assert "vllm:num_requests_waiting" in by["vllm-a"]["next_test"]
    assert "--max-num-seqs" in by["vllm-a"]["next_test"]
    # the layer not observed names both engines' switches
    why = s["retries"]["not_observed"]["server_requests"]
    assert "--enable-log-requests" in why and "SGLang with --log-requests" in why
