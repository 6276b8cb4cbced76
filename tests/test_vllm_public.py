"""vllm_server on real excerpts users pasted into public issues (/work/shared/fixtures/vllm-public, see
its INDEX.md): every era's line shapes and the paste artefacts (glued records, hard wraps, stripped
headers, pager-cut lines).

Counting methods (run in the fixture folder): stats rows = `grep -o 'Avg prompt throughput\\|Throughput: '
FILE | wc -l` (-o: 17 and 27 hold several records on one line); the other figures are read off the
few lines of each excerpt, the line named next to each assertion.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

import logscope.parsers as parsers
from conftest import PUBLIC, ingest_files, need, real_vllm_lines
from logscope.ingest import sources
from logscope.parsers import vllm_server

# file prefix -> (stats rows, {event kind: rows}, {request event: rows})
EXPECTED: dict[str, tuple[int, dict[str, int], dict[str, int]]] = {
    "01": (6, {}, {}),
    "03": (5, {}, {}),
    "04": (0, {"preemption": 1}, {"preempted": 1}),
    "05": (1, {"http_access": 2}, {"finished": 2, "received": 1}),
    "07": (3, {"http_access": 5}, {}),
    # a raw traceback ending in AsyncEngineDeadError, then CRITICAL 'AsyncLLMEngine is already dead'
    "09": (0, {"engine_dead": 2, "http_access": 1}, {}),
    # 'EngineCore encountered a fatal error.' + 6 traceback lines (cut before the TimeoutError)
    "11": (0, {"engine_dead": 1, "http_access": 2}, {"received": 1, "added": 1}),
    "13": (0, {"engine_timeout": 1}, {}),
    "15": (0, {}, {"aborted": 1}),
    "17": (3, {}, {}),
    # 2 x ('Loading model weights took', 'Memory profiling results', '# GPU blocks', 'Maximum concurrency')
    "19": (0, {"capacity": 8, "kv_insufficient": 1}, {}),
    "21": (0, {"capacity": 3}, {}),
    "23": (0, {"kv_insufficient": 1}, {}),
    "25": (0, {"input_too_long": 1}, {}),
    "27": (2, {"http_access": 1, "input_too_long": 1}, {"added": 1}),
    "29": (4, {"http_access": 2}, {}),
    "33": (2, {"preemption": 1}, {"preempted": 1}),
    "37": (0, {"oom": 1, "engine_dead": 1}, {}),
    "39": (0, {"oom": 1}, {}),
    "40": (4, {}, {}),
    "41": (4, {}, {}),
    "43": (5, {}, {}),
    "45": (5, {}, {}),
}


@pytest.fixture(scope="module")
def pub(tmp_path_factory):
    files = sorted(need(PUBLIC).glob("*.log"))
    res = ingest_files(tmp_path_factory.mktemp("public"), *files)
    return res


def _src(res, prefix: str) -> str:
    return next(p for p in res.files["path"].to_list() if p.startswith(prefix + "-"))


def _rows(res, table: str, prefix: str) -> pl.DataFrame:
    return res.table(table).filter(pl.col("source") == _src(res, prefix))


@pytest.mark.parametrize("prefix", sorted(EXPECTED))
def test_counts_per_file(pub, prefix):
    stats, kinds, reqs = EXPECTED[prefix]
    f = pub.files.filter(pl.col("path") == _src(pub, prefix)).row(0, named=True)
    assert f["format"] == "vllm_server"
    assert f["lines_unrecognized"] == 0 and f["lines_parsed"] == f["lines_total"]
    assert _rows(pub, "server_stats", prefix).height == stats
    ev = _rows(pub, "server_events", prefix)
    assert dict(ev.group_by("kind").len().iter_rows()) == kinds
    rq = _rows(pub, "server_request_events", prefix)
    assert dict(rq.group_by("event").len().iter_rows()) == reqs


def test_31_router_log_is_the_routers(pub):
    # The production-stack router: uvicorn lines (any FastAPI app prints them) and the router's own
    # '[2025-05-21 11:44:46,898] INFO: ... (httpx_client.py:35:vllm_router.httpx_client)' lines. Nothing
    # in it is vLLM's: vllm_server must not claim it (its access lines are no vLLM requests); the router reads
    # it (tests/test_vllm_router.py).
    f = pub.files.filter(pl.col("path") == _src(pub, "31")).row(0, named=True)
    assert f["format"] == "vllm_router"
    assert f["lines_unrecognized"] == 0 and f["lines_parsed"] == f["lines_total"] == 14
    head, _ = sources.head(sources.discover(need(PUBLIC) / f["path"])[0])
    assert vllm_server.detect(head) < parsers.MIN_CONFIDENCE


def test_every_era_of_the_stats_line(pub):
    def first(prefix):
        return _rows(pub, "server_stats", prefix).sort("seq").row(0, named=True)

    # 41, pre-0.1: 'Throughput: 765.8 tokens/s, Running: 22 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 33.3%'
    r = first("41")
    assert (
        r["era"],
        r["gen_tps"],
        r["prompt_tps"],
        r["running"],
        r["swapped"],
        r["waiting"],
        r["kv_usage"],
    ) == ("v0-pre0.1", 765.8, None, 22, 0, 0, 0.333)
    # 05, 0.3 patched build with 'Max iteration time / Avg time/tok': Running 35, Pending 115, GPU KV 99.0%
    r = first("05")
    assert (r["era"], r["prompt_tps"], r["running"], r["waiting"], r["kv_usage"], r["kv_device"]) == (
        "v0",
        382.6,
        35,
        115,
        0.99,
        "GPU",
    )
    # 33, 0.6.3 (trailing period): Pending 98, GPU KV 73.8%
    r = first("33")
    assert (r["era"], r["waiting"], r["gpu_kv_usage"], r["cpu_kv_usage"], r["kv_usage"]) == (
        "v0",
        98,
        0.738,
        0.0,
        0.738,
    )
    # 03, V1 'Engine 000:' with the (APIServer pid=...) prefix: Running 10, Waiting 90, GPU KV 19.3%
    r = first("03")
    assert (r["era"], r["engine"], r["running"], r["waiting"], r["kv_usage"], r["prefix_hit"]) == (
        "v1",
        "000",
        10,
        90,
        0.193,
        0.0,
    )
    assert r["swapped"] is None and r["deferred"] is None and r["preemptions"] is None
    # 43: prefix cache hit rate climbing, last line 77.5%
    assert _rows(pub, "server_stats", "43").sort("seq")["prefix_hit"].to_list()[-1] == 0.775


def test_glued_records_are_all_recovered(pub):
    # 17: line 2 holds two records ('... hit rate: 0.0%INFO 07-28 06:41:19 ...'): 3 records on 2 lines
    st = _rows(pub, "server_stats", "17").sort("seq")
    assert st["line_no"].to_list() == [1, 2, 2]
    assert st["kv_usage"].to_list() == [0.912, 0.916, 0.919]
    assert st["ts"].dt.strftime("%H:%M:%S").to_list() == ["06:40:59", "06:41:09", "06:41:19"]
    # 27: a whole paste flattened onto 2 lines: access line, Added request, 2 V0 stats, an error traceback
    st = _rows(pub, "server_stats", "27").sort("seq")
    assert st["kv_usage"].to_list() == [0.346, 0.348]
    itl = _rows(pub, "server_events", "27").filter(pl.col("kind") == "input_too_long").row(0, named=True)
    assert (itl["line_no"], itl["line_count"], itl["level"]) == (1, 2, "ERROR")
    assert itl["message"].startswith("Error in preprocessing prompt inputs")


def test_debug_stats_are_kept(pub):
    st = _rows(pub, "server_stats", "29")
    # 4 'DEBUG 05-11 18:07:.4 [loggers.py:111] Engine 000: ... Running: 1 reqs' lines of a hung engine
    assert st["level"].unique().to_list() == ["DEBUG"]
    assert st["running"].unique().to_list() == [1]
    assert st["gen_tps"].unique().to_list() == [0.0]


def test_container_timestamps_are_the_time(pub):
    st = _rows(pub, "server_stats", "40").sort("seq")
    # line 1: '2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] ...'
    assert st["ts"].to_list()[0] == datetime(2026, 5, 12, 8, 1, 39, 331095, tzinfo=UTC)
    assert st["ts"].to_list()[-1] == datetime(2026, 5, 12, 8, 2, 9, 334253, tzinfo=UTC)
    assert st["kv_usage"].to_list() == [0.628, 0.688, 0.745, 0.799]
    f = pub.files.filter(pl.col("path") == _src(pub, "40")).row(0, named=True)
    assert any("container timestamps" in a for a in f["assumptions"])


def test_preemptions(pub):
    # 04: header stripped by the reporter, '... total_num_cumulative_preemption=101'
    p = _rows(pub, "server_events", "04").row(0, named=True)
    assert (p["cumulative_preemptions"], p["preemption_mode"], p["request_id"]) == (101, "RECOMPUTE", "221")
    # 33: the last line is cut inside 'total_num_cumulative_pr': the counter is unknown (null), not guessed
    p = _rows(pub, "server_events", "33").row(0, named=True)
    assert (p["preemption_mode"], p["request_id"], p["base_request_id"], p["cumulative_preemptions"]) == (
        "SWAP",
        "chat-7e630abf1a8b4c8a88775b1e98a54cf2",
        "7e630abf1a8b4c8a88775b1e98a54cf2",
        None,
    )
    assert p["ts"] == datetime(2026, 10, 28, 11, 16, 41, tzinfo=UTC)


def test_capacity_lines(pub):
    cap = _rows(pub, "server_events", "21").sort("seq")
    # (EngineCore_DP0 pid=1133552): 'Available KV cache memory: 6.51 GiB', 'GPU KV cache size: 42,656 tokens',
    # 'Maximum concurrency for 32,768 tokens per request: 1.30x'
    assert cap["kv_memory_gib"].to_list()[0] == 6.51
    assert cap["kv_tokens"].to_list()[1] == 42656
    assert (cap["max_concurrency_tokens"].to_list()[2], cap["max_concurrency"].to_list()[2]) == (32768, 1.3)
    assert cap["process"].unique().to_list() == ["EngineCore_DP0"] and cap["pid"].unique().to_list() == [
        1133552
    ]
    ev = _rows(pub, "server_events", "19").sort("seq")
    cap = ev.filter(pl.col("kind") == "capacity")
    assert cap["weights_gib"].drop_nulls().to_list() == [14.9888, 14.9888]
    assert cap["kv_memory_gib"].drop_nulls().to_list() == [3.81, 2.89]  # 'kv_cache_size=3.81GiB'
    assert cap["gpu_blocks"].drop_nulls().to_list() == [1952, 1478]  # the first lost its '# ' in the paste
    assert cap["cpu_blocks"].drop_nulls().to_list() == [2048, 2048]
    # no block size in the excerpt: vLLM's default 16; 1478 x 16 = 23648, the number the error prints
    assert cap["kv_tokens"].drop_nulls().to_list() == [31232, 23648]
    assert cap["max_concurrency"].drop_nulls().to_list() == [1.56, 0.82]
    kv = ev.filter(pl.col("kind") == "kv_insufficient").row(0, named=True)
    assert (kv["max_model_len"], kv["line_no"]) == (29000, 9)


def test_errors(pub):
    # 23: raw traceback hard-wrapped at ~100 columns; the ValueError itself is split over lines 17-18
    kv = _rows(pub, "server_events", "23").row(0, named=True)
    assert (kv["line_no"], kv["line_count"], kv["max_model_len"], kv["pid"]) == (1, 18, 100000, 316)
    # 37: the engine's OOM line, then the API server's 'AsyncLLM output_handler failed.' (5 lines)
    ev = _rows(pub, "server_events", "37").sort("seq")
    assert ev["kind"].to_list() == ["oom", "engine_dead"]
    assert ev["process"].to_list() == ["EngineCore", "APIServer"] and ev["pid"].to_list() == [112, 1]
    assert ev["line_count"].to_list() == [1, 5]
    # 39: 7 logger lines ending in 'RuntimeError: CUDA driver error: out of memory' + 7 raw traceback lines
    oom = _rows(pub, "server_events", "39").row(0, named=True)
    assert (oom["line_count"], oom["level"], oom["pid"]) == (14, "ERROR", 77)
    # 13: '(EngineCore_DP0 pid=18052) ERROR ... [core.py:968]' x 12 ending in run_busy_loop / TimeoutError
    to = _rows(pub, "server_events", "13").row(0, named=True)
    assert (to["line_count"], to["process"]) == (12, "EngineCore_DP0")
    # 11: 'EngineCore encountered a fatal error.' + 6 lines, same header, no CR (a paste)
    dead = _rows(pub, "server_events", "11").filter(pl.col("kind") == "engine_dead").row(0, named=True)
    assert (dead["line_no"], dead["line_count"]) == (5, 7)
    # 09: the excerpt starts mid-traceback (13 lines + 1 blank), then the CRITICAL line and a 500
    ev = _rows(pub, "server_events", "09").sort("seq")
    assert ev["line_no"].to_list() == [1, 15, 16]
    assert ev["line_count"].to_list() == [14, 1, 1]
    assert ev["level"].to_list() == [None, "CRITICAL", "INFO"]
    assert ev.filter(pl.col("kind") == "http_access")["http_status"].to_list() == [500]
    # 25: 'Error in preprocessing prompt inputs' + 7 traceback lines
    itl = _rows(pub, "server_events", "25").row(0, named=True)
    assert (itl["line_count"], itl["level"]) == (8, "ERROR")


def test_request_lines(pub):
    rq = _rows(pub, "server_request_events", "05").sort("seq")
    # 0.3 layout 'prompt: None, prefix_pos: None,sampling_params: SamplingParams(n=1, ... temperature=0.0, ...'
    # cut before max_tokens
    recv = rq.filter(pl.col("event") == "received").row(0, named=True)
    assert (recv["request_id"], recv["n"], recv["temperature"], recv["max_tokens"], recv["prompt"]) == (
        "cmpl-a523b4f84b1b491d9f61ddc4558f532b-0",
        1,
        0.0,
        None,
        None,
    )
    assert rq.filter(pl.col("event") == "finished")["base_request_id"].to_list() == [
        "50c32d7a66084c3f9980d2bf06d79900",
        "90590e17ce6b4fa4b19f0812c0c98446",
    ]
    # 11: the prompt was cut by the reporter's pager (line ends in '>'): no field is read from it
    rq = _rows(pub, "server_request_events", "11").sort("seq")
    assert rq["event"].to_list() == ["received", "added"]
    assert rq["request_id"].unique().to_list() == ["chatcmpl-9e545abeb2a345dc94c20df290504d9a"]
    assert rq["max_tokens"].is_null().all() and rq["prompt"].is_null().all()
    # 15: 0.5 chat ids were 'chat-<32hex>'
    ab = _rows(pub, "server_request_events", "15").row(0, named=True)
    assert (ab["event"], ab["base_request_id"]) == ("aborted", "12fa08eea52d4308ab46efbdeb7a300a")
    assert ab["ts"] == datetime(2026, 8, 19, 11, 15, 47, tzinfo=UTC)
    # 27: 'Added request chatcmpl-c7fb9a0fcba844e996ceca2878cc0f92.' in the middle of a flattened line
    add = _rows(pub, "server_request_events", "27").row(0, named=True)
    assert (add["request_id"], add["line_no"]) == ("chatcmpl-c7fb9a0fcba844e996ceca2878cc0f92", 1)


def test_samples_are_real_and_detected():
    assert vllm_server.detect(vllm_server.SAMPLES) >= 0.9
    text = "".join(p.read_text() for p in sorted(need(PUBLIC).glob("*.log")))
    lab = "".join(
        (need(PUBLIC).parent / "lab" / r / "vllm-server.log").read_text()
        for r in ("spike", "v0-ladder", "ladder")
    )
    # and the real excerpts of tests/data (each with its source URL in its folder's README)
    data = "\n".join(real_vllm_lines("unseen"))
    for s in vllm_server.SAMPLES:
        assert s in text or s in lab or s in data, s


def test_year_rolls_over_across_a_rotated_stream():
    # Two real excerpts read as one stream (as ingest reads vllm.log.1 then vllm.log): 45 ends on
    # 12-25 13:40:20, 03 starts on 03-17: the month went back, so the year advances.
    from logscope.parsers.base import ParseContext

    ctx = ParseContext(source="s", replica="r", year=2025, year_source="year 2025 (test)")
    state: dict = {}
    stats, notes = [], []
    for prefix in ("45", "03"):
        f = sources.discover(next(need(PUBLIC).glob(prefix + "-*.log")))[0]
        for chunk in sources.iter_line_chunks(f):
            res = vllm_server.parse_chunk(chunk, ctx, state)
            stats.append(res.tables["server_stats"])
            notes += res.assumptions
    ts = pl.concat(stats, how="diagonal_relaxed").sort("seq")["ts"].to_list()
    assert ts[0] == datetime(2025, 12, 25, 13, 39, 40, tzinfo=UTC)
    assert ts[4] == datetime(2025, 12, 25, 13, 40, 20, tzinfo=UTC)
    assert ts[5] == datetime(2026, 3, 17, 15, 38, 10, tzinfo=UTC)
    assert any("month went back" in n for n in notes)


def test_local_zone_is_applied():
    from logscope.parsers.base import ParseContext

    f = sources.discover(need(PUBLIC) / "01-v1-stats-kv-climbing-8-running.log")[0]
    ctx = ParseContext(source="s", replica="r", tz="Europe/Paris", year=2025, year_source="test")
    res = vllm_server.parse_chunk(next(sources.iter_line_chunks(f)), ctx, {})
    # 'INFO 07-28 06:42:09' in Paris summer time (UTC+2)
    assert res.tables["server_stats"]["ts"][0] == datetime(2025, 7, 28, 4, 42, 9, tzinfo=UTC)
    assert "vLLM timestamps have no zone: read as Europe/Paris (--tz)" in res.assumptions
