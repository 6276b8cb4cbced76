"""vllm_router (vLLM production-stack router) on real logs: the shutdown under load of production-stack issue
#448 (/work/shared/fixtures/vllm-public/31-...) and the two excerpts in tests/data/vllm-router (README there).
Every figure below is read off the few lines of each file, the line named next to it."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

import logscope.parsers as parsers
from conftest import DATA, PUBLIC, ingest_files, need
from logscope.parsers import litellm, vllm_router, vllm_server

R448 = PUBLIC / "31-production-stack-router-shutdown-under-load.log"
PR428 = DATA / "vllm-router" / "pr428-static-router-health.log"
I706 = DATA / "vllm-router" / "issue706-router-not-forwarding.log"
VLLM_UVICORN = (
    PUBLIC / "07-v1-hang-running1-waiting14-with-metrics-polls.log"
)  # a vLLM server log with uvicorn access lines


def _lines(path):
    return need(path).read_text().splitlines()


@pytest.fixture(scope="module")
def shutdown(tmp_path_factory):
    return ingest_files(tmp_path_factory.mktemp("r448"), R448)


def test_shutdown_log_is_the_routers_and_every_line_is_read(shutdown):
    f = shutdown.files.row(0, named=True)
    assert f["format"] == "vllm_router"
    assert (f["lines_total"], f["lines_parsed"], f["lines_unrecognized"]) == (14, 14, 0)


def test_shutdown_access_answers(shutdown):
    att = shutdown.table("gateway_attempts").sort("line_no")
    # lines 2, 4-8: 'INFO:     127.0.0.1:42496 - "POST /v1/chat/completions HTTP/1.0" 200 OK' ...
    assert att["line_no"].to_list() == [2, 4, 5, 6, 7, 8]
    assert set(att["method"]) == {"POST"} and set(att["path"]) == {"/v1/chat/completions"}
    assert set(att["status"]) == {200} and set(att["gateway"]) == {"vllm_router"}
    # before any router record: no time was written, none is made up
    assert att["ts_end"].null_count() == 6 and att["request_id"].null_count() == 6


def test_shutdown_messages(shutdown):
    err = shutdown.table("gateway_errors").sort("line_no")
    assert err["line_no"].to_list() == [1, 3, 9, 10, 11, 12, 13, 14]
    assert err["message"].to_list()[:3] == [
        "Shutting down",
        "Waiting for connections to close. (CTRL+C to force quit)",
        "Waiting for application shutdown.",
    ]
    rec = err.filter(pl.col("line_no").is_between(10, 12))
    assert rec["ts"].to_list() == [
        datetime(2025, 5, 21, 11, 44, 46, 898000, tzinfo=UTC),
        datetime(2025, 5, 21, 11, 44, 46, 899000, tzinfo=UTC),
        datetime(2025, 5, 21, 11, 44, 46, 899000, tzinfo=UTC),
    ]
    assert set(rec["logger"]) == {"vllm_router.httpx_client"} and set(rec["level"]) == {"info"}
    assert (
        rec["message"][2] == "httpx AsyncClient closed"
    )  # line 12, its '(httpx_client.py:43:...)' tail cut off
    # lines 13-14: app.py's lifespan messages through the 'uvicorn' logger, at the time of line 12
    last = err.filter(pl.col("line_no") >= 13)
    assert last["message"].to_list() == ["Closing engine stats scraper", "Closing service discovery module"]
    assert set(last["ts"]) == {datetime(2025, 5, 21, 11, 44, 46, 899000, tzinfo=UTC)} and set(
        last["logger"]
    ) == {"uvicorn"}
    # uvicorn's 'Shutting down' (the first line) is the router's stop; the rest are notices
    assert err["ts"].null_count() == 3 and err["kind"].to_list() == ["shutdown"] + ["notice"] * 7


def test_routed_request_and_its_answer(tmp_path):
    res = ingest_files(tmp_path, PR428, I706)
    assert set(res.files["format"]) == {"vllm_router"} and res.files["lines_unrecognized"].sum() == 0
    att = res.table("gateway_attempts").sort("source", "line_no")
    routed = att.filter(pl.col("flags") == "routed")
    assert routed.select("request_id", "upstream", "ts_start").rows() == [
        (
            "10d2a488ed55424a34ee296d103cb43f",
            "http://10.42.7.92:8000",  # issue 706 line 1 ('with session id None')
            datetime(2025, 9, 19, 7, 18, 11, 808000, tzinfo=UTC),
        ),
        (
            "597e3325-c6c9-4d1b-9644-f792ce76b82c",
            "https://vllm-node05.code.example.rocks/qwen3-30b-a3b",  # PR 428 line 2
            datetime(2025, 5, 21, 13, 22, 23, 320000, tzinfo=UTC),
        ),
    ]
    answers = att.filter(pl.col("flags").is_null())
    assert answers.select("method", "path", "status", "ts_end").rows() == [
        ("POST", "/v1/chat/completions", 200, datetime(2025, 9, 19, 7, 18, 11, 808000, tzinfo=UTC)),
        ("POST", "/v1/completions", 200, datetime(2025, 5, 21, 13, 22, 23, 320000, tzinfo=UTC)),
    ]
    err = res.table("gateway_errors").sort("source", "line_no")
    assert err.select("level", "logger", "message").rows() == [
        ("debug", "vllm_router.routers.main_router", "No cache hit, forwarding request to backend"),
        (
            "debug",
            "vllm_router.services.request_service.request",
            "Routing request 597e3325-c6c9-4d1b-9644-f792ce76b82c for model: qwen3-30b-a3b",
        ),
    ]


def test_zone_applies_to_router_records(tmp_path):
    att = ingest_files(tmp_path, I706, tz="Europe/Berlin").table("gateway_attempts")
    assert set(att["ts_end"]) == {datetime(2025, 9, 19, 5, 18, 11, 808000, tzinfo=UTC)}  # CEST = UTC+2


def test_detection_keys_on_the_router_only():
    for path in (R448, PR428, I706):
        mod, score, _ = parsers.detect(_lines(path))
        assert mod is vllm_router and score == 1.0
    # uvicorn lines alone (any FastAPI app's, vLLM's own) are not the router's
    head = _lines(VLLM_UVICORN)
    assert vllm_router.detect(head) == 0.0 and parsers.detect(head)[0] is vllm_server
    only_uvicorn = [ln for ln in _lines(R448) if ln.startswith("INFO:     127.0.0.1")]
    assert vllm_router.detect(only_uvicorn) == 0.0
    assert litellm.detect(_lines(R448)) < parsers.MIN_CONFIDENCE
