"""Diagnosis of each real public vLLM excerpt, alone in its folder (a server log and nothing else).

Each expectation says why, from the excerpt's own lines (``grep "Running:"`` etc. over the file);
INDEX.md describes each excerpt.
"""

from __future__ import annotations

import re
import shutil
from datetime import datetime

import polars as pl
import pytest

from conftest import PUBLIC, need
from logscope import schemas
from logscope.api import AnalyzeOptions, diagnose, ingest


def _diagnose(tmp_path, name: str) -> dict:
    src = tmp_path / "in"
    src.mkdir(parents=True)
    matches = sorted(need(PUBLIC).glob(f"{name}-*.log"))
    assert len(matches) == 1, name
    shutil.copy(matches[0], src)
    ingest(src, tmp_path / "out")
    return diagnose(tmp_path / "out")


def _hms(iso: str) -> str:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).strftime("%H:%M:%S")


def _episodes(d: dict) -> list[tuple]:
    return [(e["signal"], e["class"], _hms(e["start"]), _hms(e["end"])) for e in d["episodes"]]


def _top(d: dict) -> tuple[str, str]:
    return d["findings"][0]["severity"], d["findings"][0]["kind"]


def test_01_sustained_kv_near_full_8_running(tmp_path):
    # 6 stats lines 06:42:09..06:42:59, 'Running: 8 reqs, Waiting: 0 reqs', GPU KV 93.9 % -> 95.8 %: every line
    # is >= 90 %, to the last one, so it never recovers inside the excerpt
    d = _diagnose(tmp_path, "01")
    assert _episodes(d) == [("kv_pressure", "sustained", "06:42:09", "06:42:59")]
    e = d["episodes"][0]
    assert (e["count"], e["running_max"], e["waiting_max"], e["kv_max"], e["recovered"]) == (
        6,
        8.0,
        0.0,
        0.958,
        False,
    )
    assert e["share_of_span"] == 1.0
    # a level, not pressure: nothing waits on any line, no preemption is counted (findings/kv_admitted.py); it was
    # "high" before, which no line of the excerpt supports
    assert _top(d) == ("low", "pressure")
    assert d["findings"][0]["title"].startswith("KV cache near full with nothing waiting")


def test_03_sustained_queue_draining(tmp_path):
    # Waiting 90 -> 84 -> 78 -> 72 -> 66 while Running 10 -> 34 and KV 19.3 % -> 65.4 %: a queue on all 5 lines
    # with KV below 90 %, so it is a queue episode (prefill-bound), not KV pressure
    d = _diagnose(tmp_path, "03")
    assert _episodes(d) == [("queue", "sustained", "15:38:10", "15:38:50")]
    e = d["episodes"][0]
    assert (e["peak"], e["running_max"], e["kv_max"]) == (90.0, 34.0, 0.654)
    assert d["findings"][0]["title"].startswith("Sustained queue")


def test_04_preemption_warning_without_a_time(tmp_path):
    # one V0 warning stripped of its prefix: 'total_num_cumulative_preemption=101', no timestamp -> no episode
    d = _diagnose(tmp_path, "04")
    assert d["episodes"] == []
    assert _top(d) == ("low", "pressure")
    assert "101" in d["findings"][0]["evidence"]


def test_05_stuck_pending_115_kv_99(tmp_path):
    # one V0 stats line: Running 35, Pending 115, GPU KV 99.0 %, and the excerpt ends there
    d = _diagnose(tmp_path, "05")
    assert _episodes(d) == [("kv_pressure", "sustained", "06:36:05", "06:36:05")]
    e = d["episodes"][0]
    assert (e["running_max"], e["waiting_max"], e["kv_max"]) == (35.0, 115.0, 0.99)
    assert [c["signal"] for c in e["details"]["companions"]] == ["queue"]


def test_07_sustained_hang_waiting_14_unchanged(tmp_path):
    # 'Running: 1 reqs, Waiting: 14 reqs' on all 3 stats lines (22:54:32, :42, :52), KV 76.5 % -> 76.8 %:
    # a queue that does not move while KV is not full
    d = _diagnose(tmp_path, "07")
    assert _episodes(d) == [("queue", "sustained", "22:54:32", "22:54:52")]
    e = d["episodes"][0]
    assert (e["peak"], e["waiting_mean"], e["running_max"], e["kv_max"]) == (14.0, 14.0, 1.0, 0.768)
    assert "still abnormal when the logs end" in e["reason"]
    # none admitted while 23 % of the cache was free and nothing was prefilled (findings/pressure._not_admitted)
    assert (
        "none of the waiting requests is admitted with 23.2 % of the cache free" in d["findings"][0]["cause"]
    )
    assert "no prompt prefilled on any of its 3 stats lines" in d["findings"][0]["evidence"]


@pytest.mark.parametrize(
    ("name", "kinds", "title"),
    [
        # 'AsyncLLMEngine is already dead, terminating server process' (CRITICAL), then a 500 in the access log
        ("09", ["engine_dead"], "Engine died at 07:01:39"),
        # 'EngineCore encountered a fatal error.' (shm_broadcast dequeue timeout; the TimeoutError line was cut)
        ("11", ["engine_dead"], "Engine died at 03:38:10"),
        # TimeoutError inside the busy loop of EngineCore_DP0
        ("13", ["engine_timeout"], "Engine step timed out"),
        # torch.OutOfMemoryError in EngineCore and, the same second, 'AsyncLLM output_handler failed.': nothing in
        # the excerpt says it was serving (no request, stats or busy-loop line; the thread says so), so not
        # 'while serving' (evid25: '(at start-up: unknown)')
        ("37", ["engine_dead", "oom"], "Out of memory: engine died at 14:39:06"),
    ],
)
def test_engine_deaths_are_crashes(tmp_path, name, kinds, title):
    d = _diagnose(tmp_path, name)
    [e] = d["episodes"]
    assert (e["signal"], e["class"], e["recovered"]) == ("crash", "crash", False)
    assert e["details"]["crash"]["kinds"] == kinds
    assert "no restart" in e["reason"]
    assert _top(d) == ("critical", "crash") and d["findings"][0]["title"].startswith(title)


def test_37_oom_next_test_is_a_smaller_batch(tmp_path):
    d = _diagnose(tmp_path, "37")
    assert d["findings"][0]["next_test"].startswith("Lower --max-num-seqs")
    assert "memory" not in d["findings"][0]["next_test"].lower().replace("out of memory", "")


def test_39_startup_oom(tmp_path):
    # 'RuntimeError: CUDA driver error: out of memory' inside gptq_marlin_repack (weight processing at load time)
    d = _diagnose(tmp_path, "39")
    [e] = d["episodes"]
    assert e["details"]["crash"]["at_startup"] is True
    assert d["findings"][0]["title"] == "Out of memory at startup (07:35:19)"
    assert "quantization" in d["findings"][0]["next_test"]


def test_15_single_aborted_request_is_not_an_incident(tmp_path):
    # one 'Aborted request chat-<32hex>.' line: the caller left; nothing else
    d = _diagnose(tmp_path, "15")
    assert d["episodes"] == []
    assert {f["severity"] for f in d["findings"]} == {"info"}
    assert "1 aborted by the caller" in d["findings"][0]["evidence"]


def test_17_glued_stats_lines_kv_91(tmp_path):
    # three V1 records (two glued on one physical line): 8 running, KV 91.2 %, 91.6 %, 91.9 %
    d = _diagnose(tmp_path, "17")
    assert _episodes(d) == [("kv_pressure", "sustained", "06:40:59", "06:41:19")]
    assert d["episodes"][0]["count"] == 3


@pytest.mark.parametrize("name", ["19", "23"])
def test_startup_kv_too_small_for_max_model_len(tmp_path, name):
    # 19: "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV
    # cache (23648)"; 23: the V1 'To serve at least one request with the model's max seq len (100000)' error
    d = _diagnose(tmp_path, name)
    assert d["episodes"] == []
    assert _top(d) == ("critical", "startup")
    assert "--max-model-len" in d["findings"][0]["next_test"]
    assert d["verdict"][1].endswith("a start-up failure, not a load regime.")
    # the evidence quotes what did not fit, not the traceback's first 'File ...' lines; the paste's
    # 80-character wrap is joined back ('KV cach' + 'e is needed')
    ev = d["findings"][0]["evidence"]
    if name == "19":
        assert ev.startswith("The model's max seq len (29000) is larger than the maximum number of tokens")
        assert "max_model_len 29000" in d["findings"][0]["symptom"]
    else:
        assert ev.startswith(
            "ValueError: To serve at least one request with the model's max seq len (100000), "
            "(4.26 GiB KV cache is needed, which is larger than the available KV cache memory"
        )
        assert "max_model_len 100000" in d["findings"][0]["symptom"]


def test_two_failed_startups_quote_the_latest_whatever_the_order_of_reading(tmp_path):
    """19 and 23 in one folder (neither has a time): one finding, counting both, quoting the one read last
    in path order, the same when the files are parsed in another order (ingest starts the longest first)."""
    src = tmp_path / "in"
    src.mkdir()
    for name in ("19", "23"):
        shutil.copy(next(need(PUBLIC).glob(f"{name}-*.log")), src)
    ev = []
    for workers in (1, 3):
        out = tmp_path / f"out{workers}"
        ingest(src, out, AnalyzeOptions(workers=workers))
        f = [x for x in diagnose(out)["findings"] if x["kind"] == "startup"]
        assert len(f) == 1
        ev.append(f[0]["evidence"])
    assert ev[0] == ev[1]
    assert ev[0].startswith(
        "2 failed start-ups; the latest (23-v1-enginecore-maxseqlen-valueerror-wrapped.log): "
        "ValueError: To serve at least one request"
    )


def test_19_mentions_the_run_that_started(tmp_path):
    # the same paste holds a first start with max_model_len 20000 ('Maximum concurrency for 20000 tokens per
    # request: 1.56x') that worked
    d = _diagnose(tmp_path, "19")
    assert "a run with max_model_len 20000 did start" in d["findings"][0]["evidence"]


def test_21_startup_capacity_only(tmp_path):
    # 'GPU KV cache size: 42,656 tokens', 'Maximum concurrency for 32,768 tokens per request: 1.30x'
    d = _diagnose(tmp_path, "21")
    assert d["episodes"] == []
    assert (d["capacity"]["kv_tokens"], d["capacity"]["max_concurrency_startup"]) == (42656, 1.3)
    assert {f["severity"] for f in d["findings"]} == {"info"}


@pytest.mark.parametrize("name", ["25", "27"])
def test_input_too_long_is_low(tmp_path, name):
    # 'Error in preprocessing prompt inputs' for a prompt longer than the model's context (HTTP 400)
    d = _diagnose(tmp_path, name)
    assert d["episodes"] == []
    assert _top(d) == ("low", "other") and "Cap prompt + max_tokens" in d["findings"][0]["next_test"]


def test_29_stall_running_1_zero_throughput(tmp_path):
    # 4 DEBUG stats lines 18:07:24..18:07:54, 'Avg prompt throughput: 0.0 ... generation throughput: 0.0',
    # 'Running: 1 reqs', while /health keeps answering 200
    d = _diagnose(tmp_path, "29")
    assert _episodes(d) == [("stall", "sustained", "18:07:24", "18:07:54")]
    assert _top(d) == ("critical", "stall")


def test_31_unrecognised_router_log(tmp_path):
    # a production-stack router's uvicorn lines only: no vLLM record at all. Its 6 answers all come after its
    # 'Shutting down' (the router stopped under load, tests/test_gateway_stop.py): that is the verdict, and
    # 'nothing alarming' is never said (nothing of the engine behind it was seen either)
    d = _diagnose(tmp_path, "31")
    assert d["episodes"] == []
    assert d["verdict"][0].startswith(
        "The gateway stopped while it was still answering by 11:44:46: 6 answer(s)"
    )
    assert all(c["state"] != "nothing alarming" for c in d["claims"] if c["id"] == "calm")


def test_33_pending_98_then_swap_preemption(tmp_path):
    # Pending 98 on both stats lines (11:16:34, 11:16:39), KV 73.8 % -> 86.1 %, then a SWAP preemption warning
    # at 11:16:41 that ends the excerpt (the reporter says vLLM then stopped processing)
    d = _diagnose(tmp_path, "33")
    assert _episodes(d) == [("preemptions", "sustained", "11:16:41", "11:16:41")]
    e = d["episodes"][0]
    assert [(c["signal"], _hms(c["start"]), _hms(c["end"])) for c in e["details"]["companions"]] == [
        ("queue", "11:16:34", "11:16:39")
    ]
    assert e["details"]["v0_preemption_warnings"]["modes"] == ["SWAP"]
    assert e["waiting_max"] == 98.0


def test_40_kv_62_to_80_is_not_an_incident(tmp_path):
    # KV 62.8 % -> 79.9 % (below 90 %), 9-10 running, 'Waiting: 1' on one line only (a burst being admitted)
    d = _diagnose(tmp_path, "40")
    assert d["episodes"] == []
    assert {f["severity"] for f in d["findings"]} == {"info"}


def test_41_kv_climbing_to_99_9_with_pending(tmp_path):
    # pre-0.1 stats: KV 33.3 % -> 86.5 % -> 99.2 % -> 99.9 %, Pending 0, 0, 8, 10
    d = _diagnose(tmp_path, "41")
    assert _episodes(d) == [("kv_pressure", "sustained", "02:38:15", "02:38:25")]
    e = d["episodes"][0]
    assert (e["kv_max"], e["waiting_max"]) == (0.999, 10.0)
    assert [c["signal"] for c in e["details"]["companions"]] == ["queue"]


def test_43_nothing_alarming_irregular_gaps(tmp_path):
    # 5 stats lines 21:33:52, 21:36:42, 21:39:02, 21:43:12, 21:49:42 (gaps 140-390 s), Running 1, KV 3 %
    d = _diagnose(tmp_path, "43")
    assert d["episodes"] == []
    [f] = d["findings"]
    assert f["severity"] == "info" and "gaps of 140–390 s" in f["evidence"]
    assert "single long generation" not in f["evidence"]  # prompts keep arriving (4.0 tokens/s)


def test_45_single_long_generation_not_an_incident(tmp_path):
    # 5 lines 10 s apart: Running 1, Waiting 0, prompt throughput 0.0, generation 149.8 -> 143.2 tokens/s, KV 3.3 -> 3.8 %
    d = _diagnose(tmp_path, "45")
    assert d["episodes"] == []
    [f] = d["findings"]
    assert f["severity"] == "info" and "single long generation, not an incident" in f["evidence"]


def test_every_excerpt_gets_a_verdict(tmp_path):
    """Every excerpt (new ones included) yields three verdict lines, ranked findings and conforming tables."""
    files = sorted(need(PUBLIC).glob("*.log"))
    listed = re.findall(r"^\| `([^`]+\.log)` \|", (PUBLIC / "INDEX.md").read_text(), flags=re.M)
    assert [f.name for f in files] == sorted(listed) and files  # INDEX.md lists each excerpt (25 this round)
    for i, f in enumerate(files):
        d = _diagnose(tmp_path / str(i), f.name.split("-")[0])
        assert len(d["verdict"]) == 3 and d["verdict"][2].startswith("First thing to test")
        assert [x["rank"] for x in d["findings"]] == list(range(1, len(d["findings"]) + 1))
        for name in ("episodes", "findings", "ladder"):
            assert pl.read_parquet(tmp_path / str(i) / "out" / f"{name}.parquet").schema == schemas.schema(
                name
            )
