"""Envoy, HAProxy, Traefik and LiteLLM parsers on logs their real programs wrote on loopback here
(tests/data/<format>/README.md: versions, configs, commands). Every expected figure was counted on
the raw file with grep/awk, given in the comment beside it."""

from __future__ import annotations

import glob
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

import logscope.parsers as parsers
from logscope.parsers import envoy_access, haproxy, litellm, traefik
from logscope.parsers.base import ParseContext, safe_detect
from tests.conftest import DATA, LAB, need
from tests.conftest import ingest_files as _ingest_files

HAP, ENV, TRF, LIT = DATA / "haproxy", DATA / "envoy", DATA / "traefik", DATA / "litellm"
MINE = (envoy_access, haproxy, traefik, litellm)


def ingest_one(tmp_path: Path, f: Path) -> tuple[pl.DataFrame, dict]:
    res = _ingest_files(tmp_path, f)
    files = res.files.filter(pl.col("path") == f.name).row(0, named=True)
    assert files["lines_parsed"] + files["lines_unrecognized"] == files["lines_total"]
    return res.table("gateway_attempts"), files


def counts(df: pl.DataFrame, col: str) -> dict:
    return dict(df.group_by(col).len().iter_rows())


def frame(path: Path) -> pl.DataFrame:
    lines = path.read_text().split("\n")
    lines = lines[:-1] if lines[-1] == "" else lines
    return pl.DataFrame({"line_no": pl.int_range(1, len(lines) + 1, eager=True), "line": lines})


# ---------------- HAProxy ----------------

# statuses: grep -oE '\] fe_llm[_a-z]* \S+ \S+ -?[0-9]+' F | awk '{print $NF}' | sort | uniq -c
# tsc + retries: grep -oE ' [A-Za-z-]{4} [0-9]+/[0-9]+/[0-9]+/[0-9]+/\+?[0-9]+' F | awk '{split($2,a,"/"); print $1, a[5]}' | sort | uniq -c
HAP_FILES = {
    "haproxy.log": (
        {200: 10, 503: 14, 504: 2},
        {"----,redispatch": 6, "----": 4, "SC--": 14, "sH--,redispatch": 2},
    ),
    "haproxy-traditional.log": (
        {200: 10, 503: 14, 504: 2},
        {"----,redispatch": 6, "----": 4, "SC--": 14, "sH--,redispatch": 2},
    ),
    "haproxy-id.log": (
        {200: 12, 400: 1, 503: 12, 504: 1},
        {"----,redispatch": 7, "----": 5, "CH--,redispatch": 1, "SC--": 12, "sH--,redispatch": 1},
    ),
}


@pytest.mark.parametrize("name", HAP_FILES)
def test_haproxy_counts(tmp_path, name):
    rows, files = ingest_one(tmp_path, HAP / name)
    statuses, flags = HAP_FILES[name]
    assert files["format"] == "haproxy" and files["lines_total"] == 26 and files["lines_unrecognized"] == 0
    assert rows.height == 26 and set(rows["gateway"]) == {"haproxy"}
    assert counts(rows, "status") == statuses
    assert counts(rows, "flags") == flags
    # attempts = %rc + 1: '+1' -> 2, '0' -> 1, 'SC-- .../2' -> 3
    n_plus = sum(v for k, v in flags.items() if "redispatch" in k)
    assert counts(rows, "attempts_total") == {1: flags["----"], 2: n_plus, 3: flags["SC--"]}
    # HAProxy made the 503s/504s/400 itself (%Tr = -1): no upstream status; the 200s came from vllm-1
    assert counts(rows, "upstream_status") == {200: statuses[200], None: 26 - statuses[200]}
    assert counts(rows.filter(pl.col("status") == 503), "upstream") == {"be_vllm/vllm-dead": statuses[503]}


def test_haproxy_fields_of_one_line(tmp_path):
    rows, _ = ingest_one(tmp_path, HAP / "haproxy-id.log")
    # line 7: ... [29/Nov/2026:09:50:25.019] fe_llm_id be_vllm/vllm-1 0/0/0/-1/2001 504 198 - - sH-- 1/1/0/0/+1 0/0
    #         {client-slow-007} "POST /v1/completions HTTP/1.1" 7F000001:DD2A_7F000001:46A1_6B0BF561_0006:4062
    r = rows.filter(pl.col("line_no") == 7).row(0, named=True)
    assert r["ts_start"] == datetime(2026, 11, 29, 9, 50, 25, 19000, tzinfo=UTC)
    assert r["ts_end"] == datetime(2026, 11, 29, 9, 50, 27, 20000, tzinfo=UTC)
    assert (r["request_time_s"], r["connect_s"], r["header_s"], r["duration_s"]) == (2.001, 0.0, None, None)
    assert r["request_id"] == "7F000001:DD2A_7F000001:46A1_6B0BF561_0006:4062"
    assert r["client_request_id"] == "client-slow-007"
    assert (r["status"], r["upstream_status"], r["attempt"], r["attempts_total"]) == (504, None, 2, 2)
    assert r["error"] == "server timeout while waiting for response headers"
    assert (r["method"], r["path"], r["bytes_sent"], r["upstream"]) == (
        "POST",
        "/v1/completions",
        198,
        "be_vllm/vllm-1",
    )
    # line 8 (client left at 0.5 s with option abortonclose): CH-- 400
    r = rows.filter(pl.col("line_no") == 8).row(0, named=True)
    assert (r["status"], r["flags"], r["error"]) == (
        400,
        "CH--,redispatch",
        "client aborted while waiting for response headers",
    )


def test_haproxy_syslog_prefix_does_not_change_rows(tmp_path):
    a = haproxy.parse_chunk(frame(HAP / "haproxy.log"), ParseContext("a", "r"), {}).tables["gateway_attempts"]
    b = haproxy.parse_chunk(frame(HAP / "haproxy-traditional.log"), ParseContext("a", "r"), {}).tables[
        "gateway_attempts"
    ]
    assert a.equals(b)


def test_haproxy_zone_from_tz():
    ctx = ParseContext("a", "r", tz="Europe/Paris")
    res = haproxy.parse_chunk(frame(HAP / "haproxy.log").head(1), ctx, {})
    # line 1 [29/Nov/2026:09:50:19.056] read as Paris time (UTC+1 in November)
    assert res.tables["gateway_attempts"]["ts_start"][0] == datetime(
        2026, 11, 29, 8, 50, 19, 56000, tzinfo=UTC
    )
    assert any("Europe/Paris" in a for a in res.assumptions)


# ---------------- Envoy ----------------


def test_envoy_default_text(tmp_path):
    rows, files = ingest_one(tmp_path, ENV / "envoy-access.log")
    assert (
        files["format"] == "envoy_access" and files["lines_total"] == 26 and files["lines_unrecognized"] == 0
    )
    # awk '{print $5, $6}' envoy-access.log | sort | uniq -c -> 1 "0 DC", 20 "200 -", 3 "503 UO,UF", 1 "503 URX,UF", 1 "504 UT"
    assert counts(rows, "status") == {200: 20, 503: 4, 504: 1, None: 1}
    assert counts(rows, "flags") == {None: 20, "UO,UF": 3, "URX,UF": 1, "UT": 1, "DC": 1}
    assert counts(rows, "upstream_status") == {200: 20, None: 6}
    assert rows["attempts_total"].null_count() == 26  # the default format has no attempt count
    r = rows.filter(pl.col("request_id") == "client-slow-007").row(0, named=True)
    # [2026-11-29T09:54:05.206Z] ... 504 UT 50 24 2003 - ...
    assert r["ts_start"] == datetime(2026, 11, 29, 9, 54, 5, 206000, tzinfo=UTC)
    assert (r["request_time_s"], r["duration_s"], r["bytes_sent"]) == (2.003, None, 24)


def test_istio_default_text(tmp_path):
    """Istio's default access log (every sidecar's and gateway's, so KServe's): Envoy's default with the code
    details, termination details and transport failure after the flags, and cluster, addresses and route at the
    end (tests/data/envoy/README.md). The details say which answers came from the upstream."""
    rows, files = ingest_one(tmp_path, ENV / "envoy-istio-access.log")
    assert (files["format"], files["lines_total"], files["lines_unrecognized"]) == ("envoy_access", 26, 0)
    # awk '{print $5, $6}' envoy-istio-access.log | sort | uniq -c -> 1 "0 DC", 20 "200 -", 2 "503 UO,UF",
    # 2 "503 URX,UF", 1 "504 UT"; awk '{print $7}' ... -> 20 via_upstream
    assert counts(rows, "status") == {200: 20, 503: 4, 504: 1, None: 1}
    assert counts(rows, "flags") == {None: 20, "UO,UF": 2, "URX,UF": 2, "UT": 1, "DC": 1}
    assert counts(rows, "upstream_status") == {200: 20, None: 6}
    r = rows.filter(pl.col("request_id") == "client-slow-007").row(0, named=True)
    # [2026-11-30T08:08:54.496Z] ... 504 UT response_timeout - "-" 50 24 2000 - ...
    assert r["ts_start"] == datetime(2026, 11, 30, 8, 8, 54, 496000, tzinfo=UTC)
    assert (r["request_time_s"], r["error"], r["upstream"]) == (2.0, "response_timeout", "127.0.0.1:18001")
    r = rows.filter(pl.col("request_id") == "client-burst-009-5").row(0, named=True)
    assert r["error"] == (
        "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:"
        "_Connection_refused}; delayed_connect_error:_Connection_refused"
    )


def test_envoy_json_attempts(tmp_path):
    rows, files = ingest_one(tmp_path, ENV / "envoy-access.json")
    assert files["format"] == "envoy_access" and files["lines_unrecognized"] == 0
    # grep -o '"attempts":[0-9]*' envoy-access.json | sort | uniq -c -> 13 x 1, 10 x 2, 3 x 3
    assert counts(rows, "attempts_total") == {1: 13, 2: 10, 3: 3}
    assert int(rows["attempts_total"].sum()) == 13 + 20 + 9
    assert counts(rows, "flags") == {None: 20, "UO,UF": 3, "URX,UF": 1, "UT": 1, "DC": 1}
    r = rows.filter(pl.col("request_id") == "client-burst-009-5").row(0, named=True)
    assert (r["status"], r["attempts_total"], r["upstream"]) == (503, 3, "127.0.0.1:18002")
    assert r["error"].endswith("; delayed_connect_error:_Connection_refused")
    r = rows.filter(pl.col("request_id") == "client-abort-008").row(0, named=True)
    assert (r["status"], r["flags"], r["error"]) == (None, "DC", "downstream_remote_disconnect")
    # response_duration 65 ms -> header_s
    assert rows.filter(pl.col("request_id") == "client-ok-002")["header_s"][0] == 0.065


# ---------------- Traefik ----------------


def test_traefik_json(tmp_path):
    rows, files = ingest_one(tmp_path, TRF / "traefik-access.json")
    assert files["format"] == "traefik" and files["lines_total"] == 26 and files["lines_unrecognized"] == 0
    # grep -o '"DownstreamStatus":[0-9]*' | sort | uniq -c -> 22 x 200, 1 x 499, 2 x 502, 1 x 504; RetryAttempts all 0
    assert counts(rows, "status") == {200: 22, 499: 1, 502: 2, 504: 1}
    assert counts(rows, "attempts_total") == {1: 26}
    assert counts(rows, "flags") == {None: 22, "client_closed": 1, "bad_gateway": 2, "gateway_timeout": 1}
    assert counts(rows, "upstream_status") == {200: 22, None: 4}
    assert rows["request_id"].to_list() == rows["client_request_id"].to_list()
    r = rows.filter(pl.col("request_id") == "client-ok-001").row(0, named=True)
    # "StartUTC":"2026-11-29T09:54:20.951740711Z","Duration":85193635,"OriginDuration":51665097
    assert r["ts_start"] == datetime(2026, 11, 29, 9, 54, 20, 951740, tzinfo=UTC)
    assert (r["request_time_s"], r["duration_s"], r["port"]) == (0.085193635, 0.051665097, 18090)


# ---------------- LiteLLM ----------------

# text: grep -c 'acompletion(model=.*200 OK' (19); grep -c 'acompletion(model=.* Exception' (33);
#   grep -cE '^[0-9:]{8} - LiteLLM Router:.*([Ff]all(ing )?back|fallbacks)' (27);
#   grep -c '_handle_llm_api_exception(): Exception occured - litellm_call_id' (7);
#   grep -oE '^INFO: +[0-9.:]+ - "[^"]*" [0-9]{3}' | awk '{print $NF}' | sort | uniq -c (21 x 200, 2 x 400, 4 x 429, 1 x 500)
# json: same greps on the JSON lines (9, 16, 15, 4) and "component": "uvicorn.access" (10 x 200, 1 x 400, 2 x 429, 1 x 500)
LIT_FILES = {
    "litellm-proxy.log": (
        580,
        23,
        {"attempt": 19, "attempt,exception": 33, "fallback": 27, "failed": 7, None: 28},
        {200: 21, 400: 2, 429: 4, 500: 1},
    ),
    "litellm-proxy-json.log": (
        140,
        29,
        {"attempt": 9, "attempt,exception": 16, "fallback": 15, "failed": 4, None: 14},
        {200: 10, 400: 1, 429: 2, 500: 1},
    ),
}


LIT_ANSWERED = {"litellm-proxy.log": {500: 12, 429: 12}, "litellm-proxy-json.log": {500: 6, 429: 6}}


@pytest.mark.parametrize("name", LIT_FILES)
def test_litellm_counts(tmp_path, name):
    total, unrec, flags, statuses = LIT_FILES[name]
    rows, files = ingest_one(tmp_path, LIT / name)
    assert files["format"] == "litellm" and files["lines_total"] == total
    # the unrecognised lines are the start-up banner (ASCII art, feedback box, blank lines)
    assert files["lines_unrecognized"] == unrec
    assert counts(rows, "flags") == flags
    assert counts(rows.filter(pl.col("flags").is_null()), "status") == statuses
    # attempts: 200 OK rows carry upstream_status 200; exceptions the error text, and the status the upstream
    # answered when it did (grep 'acompletion(model=' | grep -c 'fake upstream error 500' / '... 429'; the
    # 'Connection error.' ones got no answer)
    att = rows.filter(pl.col("flags").str.starts_with("attempt"))
    assert set(att["upstream"]) == {"openai/tiny"}
    answered = LIT_ANSWERED[name]
    assert counts(att, "upstream_status") == {
        200: flags["attempt"],
        500: answered[500],
        429: answered[429],
        None: flags["attempt,exception"] - answered[500] - answered[429],
    }
    # failed requests: call id, and LiteLLM Retried: 2 times -> 3 attempts (the unknown-model 400s have none)
    failed = rows.filter(pl.col("flags") == "failed")
    assert failed["request_id"].str.contains(r"^[0-9a-f]{8}-[0-9a-f-]{27}$").all()
    assert counts(failed, "attempts_total") == {3: flags["failed"] - statuses[400], None: statuses[400]}


def test_litellm_text_times_and_fields():
    # the text format has HH:MM:SS only: the date comes from the file's mtime (given here)
    ctx = ParseContext("litellm-proxy.log", "r", file_mtime=datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    state: dict = {}
    res = litellm.parse_chunk(frame(LIT / "litellm-proxy.log"), ctx, state)
    assert res.tables == {}  # text rows wait for finish()
    rows = litellm.finish(ctx, state).tables["gateway_attempts"]
    # line 41: 09:51:42 - LiteLLM Router:INFO: router.py:4244 - litellm.acompletion(model=openai/tiny)\x1b[31m Exception
    #          litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.\x1b[0m
    r = rows.filter(pl.col("line_no") == 41).row(0, named=True)
    assert r["ts_start"] == datetime(2026, 11, 29, 9, 51, 42, tzinfo=UTC)
    assert (
        r["error"] == "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error."
    )
    # line 94: Falling back to model_group = backup
    assert rows.filter(pl.col("line_no") == 94)["upstream"][0] == "backup"
    # line 189: uvicorn 429 line, no time of its own: takes 09:52:00 from the record before it
    r = rows.filter(pl.col("line_no") == 189).row(0, named=True)
    assert (r["status"], r["method"], r["path"]) == (429, "POST", "/v1/chat/completions")
    assert r["ts_start"] == datetime(2026, 11, 29, 9, 52, 0, tzinfo=UTC)


def test_litellm_text_split_in_chunks_gives_same_rows():
    ctx = ParseContext("x", "r", file_mtime=datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    df = frame(LIT / "litellm-proxy.log")
    one: dict = {}
    litellm.parse_chunk(df, ctx, one)
    whole = litellm.finish(ctx, one).tables["gateway_attempts"]
    parts: dict = {}
    # cut inside the traceback of the first failed request (its 'LiteLLM Retried' line is 188)
    ok = [
        litellm.parse_chunk(c, ctx, parts).recognized
        for c in (df.slice(0, 150), df.slice(150, 300), df.slice(450))
    ]
    split = litellm.finish(ctx, parts).tables["gateway_attempts"]
    assert split.equals(whole)
    assert sum(int(s.sum()) for s in ok) == 580 - 23


def test_litellm_json_times(tmp_path):
    rows, _ = ingest_one(tmp_path, LIT / "litellm-proxy-json.log")
    # "Falling back to model_group = backup", "timestamp": "2026-11-29T09:53:31.306900"
    r = (
        rows.filter((pl.col("upstream") == "backup") & (pl.col("flags") == "fallback"))
        .sort("line_no")
        .row(0, named=True)
    )
    assert r["ts_start"] == datetime(2026, 11, 29, 9, 53, 31, 306900, tzinfo=UTC)


# ---------------- detection ----------------

OWN = {
    "haproxy": [HAP / "haproxy.log", HAP / "haproxy-traditional.log", HAP / "haproxy-id.log"],
    "envoy_access": [ENV / "envoy-access.log", ENV / "envoy-access.json", ENV / "envoy-istio-access.log"],
    "traefik": [TRF / "traefik-access.json"],
    "litellm": [LIT / "litellm-proxy.log", LIT / "litellm-proxy-json.log"],
}


def head(p: Path) -> list[str]:
    return p.read_text(errors="replace").split("\n")[:200]


@pytest.mark.parametrize("name", OWN)
def test_detect_own_files_only(name):
    for p in OWN[name]:
        mod, score, sc = parsers.detect(head(p))
        assert mod is not None and mod.NAME == name, (p.name, sc)
        for other in MINE:
            if other.NAME != name:
                assert safe_detect(other, head(p)) < 0.3, (other.NAME, p.name)


def test_detect_does_not_claim_lab_or_nginx_files():
    lab = need(LAB)
    paths = [
        Path(p) for p in sorted(glob.glob(str(lab / "*" / "*.log")) + glob.glob(str(lab / "*" / "*.jsonl")))
    ]
    paths += sorted((DATA / "nginx").glob("*.log"))
    assert len(paths) > 20
    for p in paths:
        h = head(p)
        for mod in MINE:
            assert safe_detect(mod, h) < 0.3, (mod.NAME, str(p))


@pytest.mark.parametrize(
    ("folder", "answers", "inference"),
    [
        # uvicorn answers (21+2+4+1, 10+1+2+1, 6+6 streamed, 1 posted); 3 are GET /health/liveliness
        (LIT, 55, 52),
        (DATA / "vllm-router", None, None),  # the router's own excerpts: counted below from the table
    ],
)
def test_a_proxys_lines_apart_are_not_requests(tmp_path, folder, answers, inference):
    """LiteLLM and the vLLM router write a line per upstream attempt, fallback or routing apart from the access
    line that answers the request, with no id to pair them: counted as requests of their own, LiteLLM's 42
    answers made 169 gateway requests. Only the answers are requests, in correlation.json, summary.json and
    summary.md alike; the other lines stay in gateway_attempts."""
    from logscope.api import AnalyzeOptions, analyze

    src = tmp_path / "in"
    shutil.copytree(folder, src, ignore=shutil.ignore_patterns("*.md", "*.py", "*.yaml"))
    analyze(src, tmp_path / "out", AnalyzeOptions())
    out = tmp_path / "out"
    ga = pl.read_parquet(out / "gateway_attempts.parquet")
    apart = ga.filter(pl.col("status").is_null() & pl.col("flags").is_not_null())
    answered = ga.filter(pl.col("status").is_not_null())
    assert apart.height > 0 and set(apart["flags"]) <= {
        "attempt",
        "attempt,exception",
        "fallback",
        "retry",
        "failed",
        "failed,stream",
        "routed",
    }
    if answers is not None:
        assert answered.height == answers
    want = (
        inference
        if inference is not None
        else answered.filter(
            (pl.col("method") != "GET") & ~pl.col("path").str.contains("health|metrics|models")
        ).height
    )
    corr = json.loads((out / "correlation.json").read_text())["retry_multiplication"]
    summ = json.loads((out / "summary.json").read_text())["retries"]
    assert corr["gateway_requests"] == summ["gateway_requests"] == want
    assert f"| gateway requests | {want} |" in (out / "summary.md").read_text()
    # a uvicorn answer line has one time: the request's latency is unknown (it read 'e2e p95 0 s')
    req = pl.read_parquet(out / "requests.parquet").filter(pl.col("origin") == "gateway")
    assert req.height == want and req["e2e_s"].null_count() == want
    assert "e2e p95 0 s" not in (out / "summary.md").read_text()
    # no vLLM log here: its executions are unknown, not none (it said 'amplification 0.0' and 'below 1: 39 of 39
    # logical requests never reached vLLM')
    assert corr["amplification"] is None and corr["factors"]["server_requests_per_gateway_attempt"] is None
    assert summ["amplification"] is None
    assert json.loads((out / "diagnosis.json").read_text())["traffic"].get("amplification_below_1") is None
    assert pl.read_parquet(out / "windows.parquet")["amplification"].null_count() == len(
        pl.read_parquet(out / "windows.parquet")
    )
