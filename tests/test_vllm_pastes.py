"""vllm_server on vLLM logs as people paste and collect them (issue #26): hard-wrapped records joined, flattened
pastes split, fragments without their header (or behind markdown) read by their text with no made-up time,
speculative-decoding metrics and data-parallel engines as rows. Real excerpts from public threads in
tests/data/vllm-pastes (README.md there names each source); figures read off the excerpts, the line named."""

from __future__ import annotations

import polars as pl
import pytest

from conftest import DATA, PUBLIC, ingest_files, need

PASTES = DATA / "vllm-pastes"


@pytest.fixture(scope="module")
def pastes(tmp_path_factory):
    return ingest_files(tmp_path_factory.mktemp("pastes"), *sorted(PASTES.glob("*.log")))


def _src(res, prefix: str) -> str:
    return next(p for p in res.files["path"].to_list() if p.startswith(prefix + "-"))


def _rows(res, table: str, prefix: str) -> pl.DataFrame:
    return res.table(table).filter(pl.col("source") == _src(res, prefix)).sort("seq")


def _file(res, prefix: str) -> dict:
    return res.files.filter(pl.col("path") == _src(res, prefix)).row(0, named=True)


def _said(res, prefix: str, words: str) -> bool:
    return any(words in m for m in _file(res, prefix)["messages"])


def test_every_pasted_line_is_read(pastes):
    # before this work 17 of the first 18 files' 68 lines were unrecognised and 5 of them not taken for vLLM at all
    f = pastes.files.filter(pl.col("path").str.ends_with(".log"))
    assert f.height == 19 and f["format"].unique().to_list() == ["vllm_server"]
    assert (int(f["lines_total"].sum()), int(f["lines_unrecognized"].sum())) == (72, 0)


# ---- 1. hard wraps --------------------------------------------------------------------------------------------


def test_a_request_line_cut_at_a_width_is_joined(pastes):
    # line 1 ends '..., prompt_token_ids: [128000, 128006, 9125', line 2 goes on ', 128007, ... 271], lora_request:
    # None, prompt_adapter_request: None.': 49 ids in all (count of the list), max_tokens=8143 (line 1)
    r = _rows(pastes, "server_request_events", "10102").row(0, named=True)
    assert (r["event"], r["prompt_tokens"], r["max_tokens"], r["line_no"]) == ("received", 49, 8143, 1)
    assert _file(pastes, "10102")["lines_unrecognized"] == 0
    assert _said(pastes, "10102", "1 hard-wrapped line(s)")


def test_a_wrapped_traceback_line_is_one_text(pastes):
    # 5697: '... output = await self.model_executor.e' / 'xecute_model_async( ERROR 06-19 ...'
    dead = (
        _rows(pastes, "server_events", "5697-flattened-timeout")
        .filter(pl.col("kind") == "engine_dead")
        .row(0, named=True)
    )
    assert "output = await self.model_executor.execute_model_async(" in dead["detail"]
    assert (dead["line_no"], dead["line_count"], dead["level"]) == (1, 2, "ERROR")
    # kaito: re-wrapped by hand at word breaks: the space the break took out comes back after the comma
    kv = _rows(pastes, "server_events", "kaito").row(0, named=True)
    assert kv["detail"].startswith(
        "ValueError: To serve at least one request with the model's max seq len "
        "(1048576), 22.5 GiB KV cache is needed, which is larger than the available"
    )
    assert (kv["kind"], kv["max_model_len"], kv["line_count"]) == ("kv_insufficient", 1048576, 3)
    assert _said(pastes, "kaito", "2 hard-wrapped line(s)")


def test_the_public_wrapped_traceback_reads_whole(tmp_path):
    # vllm-public 23: '... in _initialize_k' / 'v_caches', '(4.26 GiB KV cach' / 'e is needed'
    res = ingest_files(tmp_path, need(PUBLIC) / "23-v1-enginecore-maxseqlen-valueerror-wrapped.log")
    d = res.table("server_events").row(0, named=True)["detail"]
    assert "in _initialize_kv_caches\n" in d and "(4.26 GiB KV cache is needed, which is larger" in d


# ---- 2. flattened pastes --------------------------------------------------------------------------------------


def test_flattened_stats_records_are_split_even_from_inside_a_prefix(pastes):
    # 2595: one line, '_AsyncLLMEngine pid=1974) INFO 01-25 11:26:53 ...' then ' (_AsyncLLMEngine pid=1974) INFO ...'
    # five whole V0 stats records 5 s apart (the sixth is cut before 'Running:')
    st = _rows(pastes, "server_stats", "2595")
    assert st["ts"].dt.strftime("%m-%d %H:%M:%S").to_list() == [
        "01-25 11:26:53",
        "01-25 11:26:58",
        "01-25 11:27:03",
        "01-25 11:27:08",
        "01-25 11:27:13",
    ]
    assert st["gen_tps"].to_list() == [0.0, 77.3, 77.3, 76.8, 76.4]
    assert st["kv_usage"].to_list() == [0.001, 0.002, 0.003, 0.004, 0.005]
    assert st["running"].to_list() == [1] * 5 and st["era"].unique().to_list() == ["v0"]
    assert _said(pastes, "2595", "5 record(s) split out of lines")


def test_a_flattened_traceback_starting_mid_word_and_the_aborts_after_it(pastes):
    # 5697 (later part): 'raceback (most recent call last):   File ...' ... 'AsyncEngineDeadError: Task finished
    # unexpectedly. ... Please open an ' / 'issue on Github. ... INFO 06-19 11:25:01 ... Aborted request cmpl-...'
    ev = _rows(pastes, "server_events", "5697-flattened-deaderror")
    dead = ev.row(0, named=True)
    assert (dead["kind"], dead["line_count"], dead["level"], dead["ts"]) == ("engine_dead", 2, None, None)
    assert "Please open an issue on Github." in dead["detail"]
    ab = _rows(pastes, "server_request_events", "5697-flattened-deaderror")
    # the third id is followed by 'INFO 06-19 11:', a header the excerpt cut: not part of the id
    assert ab["base_request_id"].to_list() == [
        "7347d49f836c40a6b8d00fff45f5998d",
        "10f955208ce04051aeb80f37a1b930b4",
        "66dbd15ae2574c24ad701af023c451e6",
    ]
    assert ab["ts"].dt.strftime("%H:%M:%S").unique().to_list() == ["11:25:01"]


def test_flattened_access_lines_and_a_wrap_turned_into_a_space(pastes):
    # 24655: four 'INFO: 20.98.116.19:592xx - "POST /score HTTP/1.1" 200 OK' records on the one line, before any
    # time; the stats say 'Avg generation throughpu t: 0.0 tokens/s'
    acc = _rows(pastes, "server_events", "24655")
    assert acc["http_status"].to_list() == [200] * 4 and acc["http_path"].unique().to_list() == ["/score"]
    assert acc["ts"].null_count() == 4
    st = _rows(pastes, "server_stats", "24655")
    assert st["prompt_tps"].to_list() == [77889.2, 78240.2] and st["gen_tps"].to_list() == [0.0, 0.0]
    assert st["prefix_hit"].to_list() == [0.055, 0.055]
    assert _said(pastes, "24655", "4 row(s) without any time")


# ---- 3. fragments without their header -------------------------------------------------------------------------


def test_a_paste_starting_inside_the_startup_traceback(pastes):
    # tpu-223: 5 lines, '  File .../kv_cache_utils.py", line 970, ...' to 'ValueError: To serve at least one request
    # with the models's max seq len (131072), (16.00 GiB KV cache is needed, ...': no header, no time anywhere
    kv = _rows(pastes, "server_events", "tpu-223").row(0, named=True)
    assert (kv["kind"], kv["max_model_len"], kv["line_count"], kv["ts"], kv["level"]) == (
        "kv_insufficient",
        131072,
        5,
        None,
        None,
    )
    assert _said(pastes, "tpu-223", "1 row(s) without any time")


def test_lines_behind_markdown(pastes):
    # 16118: '> ERROR 04-05 01:12:55 [core.py:390] ValueError: ... max seq len (1048576) ...'
    kv = _rows(pastes, "server_events", "16118").row(0, named=True)
    assert (kv["kind"], kv["level"], kv["max_model_len"]) == ("kv_insufficient", "ERROR", 1048576)
    assert kv["ts"].strftime("%m-%d %H:%M:%S") == "04-05 01:12:55"
    # 34076: '`(EngineCore_DP0 pid=1094) ValueError: ... max seq len (262144) ...' (cut: no closing backtick)
    kv = _rows(pastes, "server_events", "34076").row(0, named=True)
    assert (kv["process"], kv["pid"], kv["max_model_len"]) == ("EngineCore_DP0", 1094, 262144)
    # 4760: '`Avg prompt throughput: 102.2 tokens/s, ... GPU KV cache usage: 0.8%, CPU KV cache usage: 0.0%`'
    st = _rows(pastes, "server_stats", "4760").row(0, named=True)
    assert (st["prompt_tps"], st["gen_tps"], st["running"], st["kv_usage"], st["ts"]) == (
        102.2,
        2.2,
        1,
        0.008,
        None,
    )
    for prefix, said in (
        ("16118", "1 line(s) read after removing the markdown"),
        ("4760", "1 record(s) recognised by their text alone"),
    ):
        assert _said(pastes, prefix, said), prefix
    # ascend-1170 starts '....INFO:     127.0.0.1:51658 - "POST /v1/completions HTTP/1.1" 200 OK'
    acc = _rows(pastes, "server_events", "ascend-1170").filter(pl.col("kind") == "http_access")
    assert acc.select("line_no", "http_path", "http_status").row(0) == (1, "/v1/completions", 200)


def test_a_line_in_bold(pastes):
    # 8784: '**INFO 09-24 15:46:11 gptq_marlin.py:108] The model is convertible ... Using gptq_marlin kernel.**' (line
    # 4): its lead and closing mark removed, counted once (line 1's '**however ...**' is inside its text); read as a
    # flattened record instead, it would be said 'split out'
    f = _file(pastes, "8784")
    assert (f["lines_total"], f["lines_unrecognized"]) == (4, 0)
    assert _said(pastes, "8784", "1 line(s) read after removing the markdown")
    assert not _said(pastes, "8784", "split out")


def test_messages_without_header_have_no_time(pastes):
    # 15902: three lines quoted without any header
    st, sp = _rows(pastes, "server_stats", "15902"), _rows(pastes, "server_spec_decode", "15902")
    assert (st.height, sp.height) == (1, 2)
    assert st["ts"].null_count() == 1 and sp["ts"].null_count() == 2 and sp["level"].null_count() == 2
    assert _said(pastes, "15902", "3 record(s) recognised by their text alone")
    assert _said(pastes, "15902", "3 row(s) without any time")


def test_a_bare_preemption_warning_is_said(tmp_path):
    # vllm-public 04: ' Sequence group 221 is preempted by ...' with no 'WARNING <date> scheduler.py:N]'
    res = ingest_files(tmp_path, need(PUBLIC) / "04-v0-single-preemption-warning-no-prefix.log")
    assert res.table("server_events")["ts"].to_list() == [None]
    msgs = res.files.row(0, named=True)["messages"]
    assert any("1 record(s) recognised by their text alone" in m for m in msgs)


# ---- 4. speculative decoding, data parallelism -----------------------------------------------------------------


def test_speculative_decoding_lines_of_every_wording(pastes):
    cols = [
        "era",
        "draft_acceptance_rate",
        "mean_acceptance_length",
        "accepted_tokens",
        "drafted_tokens",
        "num_spec_tokens",
    ]
    # V0: 'Draft acceptance rate: 0.642, System efficiency: 0.598, Number of speculative tokens: 3, Number of
    # accepted tokens: 8547, Number of draft tokens: 13311, Number of emitted tokens: 10616.'
    v0 = _rows(pastes, "server_spec_decode", "9539").row(0, named=True)
    assert [v0[c] for c in cols] == ["v0", 0.642, None, 8547, 13311, 3]
    assert (v0["system_efficiency"], v0["emitted_tokens"]) == (0.598, 10616)
    # V1 ~0.10: 'Draft acceptance rate: 88.8%, Mean acceptance length: 5.44, ... Accepted: 262 tokens, Drafted: 295
    # tokens, Per-position acceptance rate: 0.983, 0.949, 0.915, 0.881, 0.712'
    r = _rows(pastes, "server_spec_decode", "24127").row(0, named=True)
    assert [r[c] for c in cols] == ["v1", 0.888, 5.44, 262, 295, 5]
    assert (r["accepted_tps"], r["drafted_tps"]) == (4.37, 4.92)
    assert r["per_position_acceptance"] == [0.983, 0.949, 0.915, 0.881, 0.712]
    # later V1: '... Drafted: 975 tokens, Per-position acceptance rate: 0.600, ... (15), Avg Draft acceptance rate: 9.1%'
    r = _rows(pastes, "server_spec_decode", "aeon7").row(0, named=True)
    assert [r[c] for c in cols] == ["v1", 0.091, 2.37, 89, 975, 15]
    # V1 0.8.0 'Speculative metrics: Draft acceptance rate: 1.000, Number of accepted tokens: 66, ...' (no System
    # efficiency: V1's wording) and 0.8.x 'SpecDecoding metrics: Draft acceptance rate: 100.0%, Accepted: 66 tokens'
    sp = _rows(pastes, "server_spec_decode", "15902")
    assert sp.select(cols).rows() == [("v1", 1.0, None, 66, 66, None)] * 2


def test_a_spec_line_takes_its_engine_from_the_stats_line_before_it(pastes):
    # club-3090: 'Engine 000: ...' then 'SpecDecoding metrics: ...' in the same second, twice
    sp = _rows(pastes, "server_spec_decode", "club3090")
    assert sp["engine"].to_list() == ["000", "000"] and sp["drafted_tokens"].to_list() == [2355, 2345]
    assert sp["ts"].dt.strftime("%H:%M:%S").to_list() == ["04:56:17", "04:56:27"]
    # vllm-ascend 11876: data-parallel engine 001, one draft position
    sp = _rows(pastes, "server_spec_decode", "ascend-11876")
    assert sp["engine"].to_list() == ["001", "001"] and sp["per_position_acceptance"].to_list() == [
        [0.918],
        [0.903],
    ]
    st = _rows(pastes, "server_stats", "ascend-11876")
    assert (st["engine"].to_list(), st["deferred"].to_list(), st["interval_s"].to_list()) == (
        ["001", "001"],
        [None, 1],
        [None, 10.0],
    )


def test_data_parallel_engines_in_one_second_are_rows_of_their_own(pastes):
    # vllm-ascend 1170: 'Engine 000: ... 10.3 tokens/s' and 'Engine 001: ... 10.0 tokens/s', both at 11:46:37
    st = _rows(pastes, "server_stats", "ascend-1170")
    assert st["engine"].to_list() == ["000", "001"] and st["gen_tps"].to_list() == [10.3, 10.0]
    assert st["ts"].n_unique() == 1
    # each engine's first row: no interval (the second engine's is not 0 s after the first's)
    assert st["interval_s"].to_list() == [None, None]
    # 36748 (flattened, 8 engines; the third cut): Running 51 / 31, Waiting 117 / 108, KV 100.0% / 98.6%
    st = _rows(pastes, "server_stats", "36748")
    assert st.select("engine", "running", "waiting", "kv_usage", "prefix_hit").rows() == [
        ("000", 51, 117, 1.0, 0.7),
        ("001", 31, 108, 0.986, 0.66),
    ]


def test_formats_says_what_the_vllm_parser_reads():
    from typer.testing import CliRunner

    from logscope.cli import app

    r = CliRunner().invoke(app, ["formats"], terminal_width=400)
    assert r.exit_code == 0
    flat = " ".join(r.stdout.split())
    assert "speculative- decoding metrics" in flat or "speculative-decoding metrics" in flat
    assert "hard wraps joined" in flat and "data-parallel engines" in flat


def test_a_markdown_list_of_real_lines_reads_as_the_lines(tmp_path):
    """No public paste with a '- ' list lead was found (quote, inline code and bold have theirs, above): a real
    excerpt's every line behind '- ', as a markdown list renders it, gives the same rows as the excerpt itself,
    each line counted as read after removing the markdown."""
    src = need(PUBLIC / "01-v1-stats-kv-climbing-8-running.log")
    listed = tmp_path / "listed" / src.name
    listed.parent.mkdir()
    lines = src.read_text().splitlines()
    listed.write_text("".join(f"- {x}\n" for x in lines))
    plain, md = ingest_files(tmp_path / "a", src), ingest_files(tmp_path / "b", listed)
    a, b = (r.table("server_stats").drop("source") for r in (plain, md))
    assert a.height == len(lines) >= 5 and a.equals(b)
    assert b["kv_usage"].to_list()[:2] == [0.939, 0.943]  # 'GPU KV cache usage: 93.9%', '94.3%'
    f = md.files.row(0, named=True)
    assert (f["lines_total"], f["lines_unrecognized"]) == (len(lines), 0)
    assert f"{len(lines)} line(s) read after removing the markdown" in " ".join(f["messages"])
