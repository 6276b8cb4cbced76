"""vLLM lines behind wrappers and in pastes logscope had not seen (public-2, its INDEX.md names each thread; and
tests/data/vllm-deaths): another process's lines interleaved, another logging configuration, a wrap that lost
characters, V0's prefix-cache line."""

from __future__ import annotations

import polars as pl

from conftest import DATA, PUBLIC2, ingest_files, need


def _read(tmp_path, path):
    res = ingest_files(tmp_path, need(path))
    assert res.files["lines_unrecognized"].to_list() == [0], res.table("unrecognized")["examples"].to_list()
    return res


def test_v0_prefix_cache_line(tmp_path):
    """V0 logs 'Prefix cache hit rate: GPU: N%, CPU: M%' right after its stats line: it is that row's prefix hit
    (0.7.2, vllm#13939); pasted without its stats line (0.6.3, vllm#9539) it is a row of its own."""
    st = _read(tmp_path, DATA / "vllm-deaths" / "13939-v0.7.2-stats-prefix-cache-line-then-already-dead.log")
    st = st.table("server_stats")
    assert st.select("running", "kv_usage", "prefix_hit").rows() == [(3, 0.048, 0.5236)]
    st = _read(tmp_path / "b", PUBLIC2 / "n05-v0-0.6.3-speculative-metrics-and-prefix-cache-hit-rate.log")
    st = st.table("server_stats")
    assert st.select("era", "running", "kv_usage", "prefix_hit").rows() == [("v0", None, None, 0.9435)]


def test_wrap_that_lost_characters(tmp_path):
    """vllm#40350 (V1 ~0.20): a paste hard-wrapped at a fixed width lost the character at each wrap ('GPU KV cache
    usag' / ': 22.9%', 'Accepted: 0 tokens' / ' Drafted: 176 tokens, ...' without its comma): the stats rows keep
    their KV figure beside the speculative-decoding lines, and those keep their rates."""
    res = _read(
        tmp_path, PUBLIC2 / "n15-v1-0.20-hang-running1-waiting10-specdecode-zero-acceptance-hardwrapped.log"
    )
    st = res.table("server_stats")
    assert st.select("running", "waiting", "kv_usage", "prefix_hit").rows() == [(1, 10, 0.229, 0.832)] * 2
    sd = res.table("server_spec_decode")
    assert sd.select("drafted_tokens", "accepted_tokens", "draft_acceptance_rate").rows() == [
        (176, 0, 0.0),
        (174, 0, 0.0),
    ]


def test_rust_tracing_lines_interleaved(tmp_path):
    """NVIDIA Dynamo's KV block manager writes Rust ``tracing`` lines into vLLM's stream (dynamo#4087): known, no
    rows; the stats line between them is read."""
    res = _read(tmp_path, PUBLIC2 / "n16-v1-0.11-dynamo-kvbm-rust-tracing-interleaved-running16.log")
    st = res.table("server_stats")
    assert st.select("running", "kv_usage").rows() == [(16, 0.21)]
    assert res.table("server_events").filter(pl.col("kind") == "http_access").height == 3


def test_kserve_logging(tmp_path):
    """KServe's huggingfaceserver (kserve#4470): vLLM's 'Received request' through KServe's trace logger and
    uvicorn's access line in KServe's format (a process id after the client), among plain V0 lines."""
    res = _read(tmp_path, PUBLIC2 / "n09-v0-0.8-kserve-wrapper-mixed-formats-received-added-stats.log")
    rq = res.table("server_request_events")
    assert rq.select("event").to_series().to_list() == ["received", "added"]
    assert rq["request_id"].unique().to_list() == ["chatcmpl-017ee87d69ed40e9b67198e5c5e0ee7d"]
    assert rq["ts"].dt.strftime("%H:%M:%S%.3f").to_list()[0] == "17:45:10.901"
    assert rq.filter(pl.col("event") == "received")["prompt"].to_list() == [None]  # never copied unless asked
    acc = res.table("server_events").filter(pl.col("kind") == "http_access")
    assert acc.select("http_method", "http_path", "http_status", "client_addr").rows() == [
        ("POST", "/openai/v1/chat/completions", 200, "127.0.0.1:42226")
    ]
    assert res.table("server_requests").height == 1
