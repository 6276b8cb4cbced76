"""SGLang server logs (parsers/sglang_server.py) read into the vLLM tables, on real public excerpts
(tests/data/sglang/README.md names each one's thread)."""

from __future__ import annotations

import polars as pl

import logscope.parsers as parsers
from conftest import DATA, ingest_files

SG = DATA / "sglang"


TABLES = ("files", "server_stats", "server_events", "server_request_events", "server_requests")


def _read(tmp_path, name, **opts):
    res = ingest_files(tmp_path, SG / name, **opts)
    out = res.out_dir
    return {t: pl.read_parquet(out / f"{t}.parquet") for t in TABLES}


def test_detected_as_sglang_and_not_vllm():
    for f in sorted(SG.glob("*.log")):
        head = f.read_text().splitlines()
        best, score, sc = parsers.detect(head)
        assert best is not None and best.NAME == "sglang_server", (f.name, sc)
        assert sc["vllm_server"] < score


def test_decode_and_prefill_rows(tmp_path):
    t = _read(tmp_path, "10053-prefill-decode-access.log")
    st = t["server_stats"]
    assert st["engine_kind"].unique().to_list() == ["sglang"] and st["engine"].unique().to_list() == ["TP0"]
    assert st.height == 7  # 3 prefill + 4 decode lines
    assert st["gen_tps"].drop_nulls().to_list() == [1.06, 84.2, 3.17, 81.97]
    # the prefill batch's cache hit: #cached-token / (#new-token + #cached-token)
    assert round(st["prefix_hit"].drop_nulls()[1], 4) == round(184 / (18 + 184), 4)
    ev = t["server_events"]
    assert ev.filter(pl.col("kind") == "http_access")["http_status"].to_list() == [200, 200]
    assert t["files"]["lines_unrecognized"].sum() == 0


def test_queue_draining_without_rank(tmp_path):
    st = _read(tmp_path, "11970-prefill-queue-draining.log")["server_stats"]
    assert st["waiting"].to_list()[0] == 114 and st["waiting"].to_list()[-1] == 53
    assert st["running"].max() == 64 and st["kv_usage"].max() == 0.24
    assert st["engine"].null_count() == st.height


def test_hybrid_pool_usage_and_lost_bracket(tmp_path):
    st = _read(tmp_path, "26248-hybrid-swa-full-token-usage.log")["server_stats"]
    assert st.height == 3  # the first line lost its '[' in the paste and is still read
    assert st["kv_usage"].to_list() == [1.0, 1.0, 1.0]  # max(full 1.00, swa 0.06)
    assert st["waiting"].to_list() == [3, 3, 3]


def test_retraction_is_preemption(tmp_path):
    t = _read(tmp_path, "retract-kv-pool-full.log")
    ev = t["server_events"].filter(pl.col("kind") == "preemption")
    assert ev.height == 5 and ev["preemption_mode"].unique().to_list() == ["RETRACT"]
    st = t["server_stats"]
    # the 4 retractions logged between the 16:06:07 and 16:06:08 decode lines, then 1
    assert st["preemptions"].to_list() == [0, 0, 0, 0, 4, 1]
    assert st["kv_usage"].max() == 1.0 and st["waiting"].to_list()[-1] == 20


def test_deaths(tmp_path):
    ev = _read(tmp_path, "soft-thinking-10-watchdog-timeout.log")["server_events"]
    assert ev["kind"].to_list() == ["engine_timeout", "engine_dead"]
    t = _read(tmp_path / "b", "3713-illegal-memory-access-sigquit.log")
    ev = t["server_events"]
    assert ev["kind"].to_list() == ["engine_dead"]
    assert ev["line_count"][0] == 17 and "illegal memory access" in ev["detail"][0]
    assert t["files"]["lines_unrecognized"].sum() == 0
    ev = _read(tmp_path / "c", "8864-startup-sigquit-scheduler-exception.log")["server_events"]
    assert ev["kind"].to_list() == ["engine_dead", "engine_dead"]


def test_receive_line_is_a_request(tmp_path):
    # SGLang 0.4.3, an OpenAI chat request (text=None: the chat template's ids only), rid last
    t = _read(tmp_path, "4045-receive-request-line.log")
    sr = t["server_requests"]
    assert sr.height == 1
    r = sr.row(0, named=True)
    assert r["request_id"] == "ced00776101841e180bf04c8dbdc4ec2" and r["engine_kind"] == "sglang"
    assert str(r["received_ts"]) == "2025-03-03 17:53:04+00:00"
    assert r["prompt_tokens"] == 64  # len(input_ids); its Prefill line said #new-token 63 + #cached-token 1
    assert r["max_tokens"] is None  # 'max_new_tokens': None
    assert r["endpoint"] is None and r["prompt"] is None
    ev = t["server_request_events"].row(0, named=True)
    assert (ev["n"], ev["temperature"], ev["ignore_eos"]) == (1, 0.1, False)
    assert t["server_events"]["kind"].to_list() == ["http_access"]
    assert t["files"]["lines_unrecognized"].sum() == 0


def test_finish_line_without_header_aborted(tmp_path):
    # SGLang 0.5.10 printed it without the '[date time]' header: its own epoch times place it; an 'abort'
    # finish (the server's running timeout) is an aborted request, received e2e_latency before
    t = _read(tmp_path, "25887-finish-abort-headerless.log")
    r = t["server_requests"].row(0, named=True)
    assert t["server_requests"].height == 1 and r["request_id"] == "bf890d9ca8ce4008bef7ef25d97f8fba"
    assert r["aborted_ts"].timestamp() == 1779264164.565102 and r["finished_ts"] is None
    assert abs(r["received_ts"].timestamp() - 1779262962.6408873) < 1e-5  # meta_info's request_received_ts
    assert (r["max_tokens"], r["prompt_tokens"]) == (32000, 32472)
    # the ranks prefix with an underscore (ATTN_CP7) is a header: 9 stats rows, the death after
    assert t["server_stats"].height == 9 and "PP0 ATTN_CP7 TP7" in t["server_stats"]["engine"].to_list()
    assert t["server_events"]["kind"].to_list() == ["http_access", "engine_dead"]
    assert t["files"]["lines_unrecognized"].sum() == 0


def _with_prompt(tmp_path, prompt: str):
    """The real 4045 line with its text field as SGLang prints a prompt (repr)."""
    line = (SG / "4045-receive-request-line.log").read_text().splitlines()[1]
    f = tmp_path / "sglang-prompt.log"
    f.write_text(line.replace("text=None", f"text={prompt!r}") + "\n")
    return f


def test_prompt_is_never_read_as_fields_nor_copied(tmp_path):
    prompt = "rid='spoof', 'max_new_tokens': 7, CUDA out of memory Traceback (most recent call last)"
    f = _with_prompt(tmp_path, prompt)
    for sub, opts in (("a", {}), ("b", {"include_prompts": True})):
        res = ingest_files(tmp_path / sub, f, **opts)
        sr = pl.read_parquet(res.out_dir / "server_requests.parquet")
        assert sr["request_id"].to_list() == ["ced00776101841e180bf04c8dbdc4ec2"]
        assert sr["max_tokens"].to_list() == [None] and sr["prompt_tokens"].to_list() == [64]
        assert pl.read_parquet(res.out_dir / "server_events.parquet").height == 0  # no OOM, no traceback
        assert sr["prompt"].to_list() == ([None] if not opts else [prompt])


DIFFUSION = "23049-diffusion-request-lines-text-and-json.log"


def _utc(ts) -> str:
    return ts.strftime("%H:%M:%S.%f")


def test_request_lines_of_the_diffusion_server_text_and_json(tmp_path):
    # SGLang's diffusion server (PR 23049's test runs): a text pair and a --log-requests-format json pair per case,
    # behind the '[date time]' header; the JSON form's own 'timestamp' (microseconds) is the line's time
    t = _read(tmp_path, DIFFUSION, include_prompts=True)
    assert t["files"]["lines_unrecognized"].sum() == 0 and t["files"]["format"].to_list() == ["sglang_server"]
    sr = t["server_requests"].sort("received_ts")
    assert sr["request_id"].to_list() == [
        "6ef3fb55-a97c-4c92-87c5-b8f1fb7735da",
        "ff61568f-f577-468f-afde-ea1aab475acc",
        "5d6089f0-dc0f-466d-a95d-17d40f3a7c0f",
        "7547dcb2-7268-4a16-a2a4-731a503a53a1",
    ]
    assert sr["engine_kind"].unique().to_list() == ["sglang"]
    # text: the header's seconds; JSON: its timestamp field
    assert [(_utc(r["received_ts"]), _utc(r["finished_ts"])) for r in sr.iter_rows(named=True)] == [
        ("09:14:38.000000", "09:14:41.000000"),
        ("09:15:47.282730", "09:15:50.214678"),
        ("09:17:05.000000", "09:17:14.000000"),
        ("09:18:30.974658", "09:18:40.151854"),
    ]
    assert (
        sr["aborted_ts"].null_count() == 4 and sr["prompt_tokens"].null_count() == 4
    )  # no tokens in an image job
    assert (
        sr["prompt"].to_list()
        == ["A beautiful sunset over mountains, oil painting style"] * 2 + ["A cat playing with a ball"] * 2
    )
    # each Finish also says when it began: its time less out.meta_info.e2e_latency (2.8768238479970023 s)
    ev = t["server_request_events"].filter((pl.col("line_no") == 7) & (pl.col("event") == "received"))
    assert _utc(ev["ts"][0]) == "09:15:47.337855"
    assert t["server_events"].height == 0  # a request line is no event


def test_json_request_lines_as_the_request_target_prints_them(tmp_path):
    # --log-requests-target (stdout or a folder) prints the JSON lines with '%(message)s' alone: the same lines
    # without the header the thread shows; a file of them is SGLang's and each line keeps its own time
    lines = (SG / DIFFUSION).read_text().splitlines()
    bare = [ln.split("] ", 1)[1] for ln in lines if '] {"timestamp": ' in ln]
    assert len(bare) == 4
    f = tmp_path / "host_0.log"
    f.write_text("\n".join(bare) + "\n")
    best, score, _ = parsers.detect(bare)
    assert best is not None and best.NAME == "sglang_server" and score == 1.0
    res = ingest_files(tmp_path / "a", f)
    sr = pl.read_parquet(res.out_dir / "server_requests.parquet").sort("received_ts")
    assert [(_utc(r["received_ts"]), _utc(r["finished_ts"])) for r in sr.iter_rows(named=True)] == [
        ("09:15:47.282730", "09:15:50.214678"),
        ("09:18:30.974658", "09:18:40.151854"),
    ]
    files = pl.read_parquet(res.out_dir / "files.parquet")
    assert files["lines_unrecognized"].to_list() == [0]
    assert not any("take the time of the line before" in a for a in files["assumptions"][0])


def test_time_only_headers_of_2024(tmp_path):
    """SGLang 0.2-0.3 wrote '[16:43:29 TP0]', no date (sglang#1612's prefill lines with their 'cache hit rate',
    sglang#1270's decode lines): every line read, the day anchored and said."""
    from conftest import PUBLIC2, need

    t = _read(tmp_path, "1270-time-only-header-decode-lines.log")
    st = t["server_stats"]
    assert st.height == 10 and st["running"].to_list()[:4] == [2, 2, 2, 1]
    assert st["gen_tps"][0] == 447.31 and st["ts"].null_count() == 0
    assert st["ts"].dt.strftime("%H:%M:%S").to_list()[0] == "04:40:55"
    notes = t["files"]["assumptions"][0].to_list()
    assert any("time and no date" in n for n in notes)
    res = ingest_files(
        tmp_path / "b", need(PUBLIC2 / "s01-sglang-0.3-prefill-batches-queue-draining-token-usage-rising.log")
    )
    st = res.table("server_stats")
    assert st.height == 7 and st["waiting"].max() == 38 and st["running"].max() == 21
    assert st["kv_usage"].max() == 0.77 and st["prefix_hit"].to_list()[1] == 0.0276  # 'cache hit rate: 2.76%'
    assert res.files["lines_unrecognized"].to_list() == [0]  # 'Prompts loaded.', 'SGLang Generating!' too


def test_stats_line_pasted_bare(tmp_path):
    """sglang#938: one 'Decode batch.' line pasted without its header: read, with no time."""
    from conftest import PUBLIC2, need

    res = ingest_files(
        tmp_path,
        need(PUBLIC2 / "s02-sglang-single-decode-line-running-1010-queue-12279-token-usage-0.93.log"),
    )
    st = res.table("server_stats")
    assert st.select("running", "waiting", "kv_usage", "gen_tps").rows() == [(1010, 12279, 0.93, 1397.13)]
    assert st["ts"].to_list() == [None] and res.files["format"].to_list() == ["sglang_server"]


def test_python_logging_prefix_and_bare_uvicorn(tmp_path):
    """sglang-omni#712 (2026-06): SGLang's loggers behind '%(asctime)s [%(levelname)s] %(name)s: ', uvicorn's
    access lines in uvicorn's own format between them: stats rows with their milliseconds, access lines read."""
    t = _read(tmp_path, "omni-712-python-logging-prefix-uvicorn-bare.log")
    st = t["server_stats"]
    assert st.height == 5 and st["ts"].dt.strftime("%H:%M:%S%.3f").to_list()[0] == "10:59:31.659"
    assert st["gen_tps"].drop_nulls().to_list() == [126.29, 83.17, 82.34]
    acc = t["server_events"].filter(pl.col("kind") == "http_access")
    assert acc["http_status"].to_list() == [200, 200, 200]
    assert acc["http_path"].unique().to_list() == ["/v1/audio/speech"]
    assert t["files"]["lines_unrecognized"].sum() == 0
