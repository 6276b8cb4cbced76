"""Gateways logscope had not seen: any proxy's access records read by their field names (JSON on one line or many,
key=value, with the format beside them or not), Istio's default without its start time, llama-swap, and LiteLLM's
statuses inside its error texts. Real excerpts only (tests/data/gateway-generic/README.md, tests/data/envoy/README.md,
tests/data/llama-swap/README.md and public-2's INDEX.md name each thread)."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from conftest import DATA, PUBLIC2, ingest_files, need
from logscope.api import AnalyzeOptions, ingest

GEN, SWAP = DATA / "gateway-generic", DATA / "llama-swap"


def _one(tmp_path, path):
    res = ingest_files(tmp_path, need(path))
    f = res.files.row(0, named=True)
    assert f["lines_unrecognized"] == 0, res.table("unrecognized")["examples"].to_list()
    return res, f


@pytest.mark.parametrize(
    ("path", "row"),
    [
        # Higress (Envoy) pretty-printed by a reporter: single-quoted value, trailing comma
        (
            PUBLIC2 / "g07-higress-envoy-pretty-json-accesslog-503-UC-connection-termination.log",
            ("envoy", 503, "UC", 0.007, "127.0.0.1:30080", "2292fb31e765e93f343c08883a032609"),
        ),
        # Istio's JSON as engarde prints it: a TCP passthrough (status 0: no HTTP answer)
        (GEN / "engarde-8-istio-json-pretty-printed.log", ("envoy", None, None, 0.063, "1.2.3.4:443", None)),
        # a custom json_format a broken template left invalid (envoyproxy/envoy#24063)
        (GEN / "envoy-24063-json-custom-names-broken.log", ("envoy", 200, "UPE", 0.005, None, None)),
    ],
)
def test_json_records_by_field_name(tmp_path, path, row):
    res, f = _one(tmp_path, path)
    assert f["format"] == "access_generic"
    g = res.table("gateway_attempts")
    assert g.select("gateway", "status", "flags", "request_time_s", "upstream", "trace_id").rows() == [row]
    note = next(a for a in f["assumptions"] if a.startswith("access records read by their field names"))
    assert "status <- " in note and "not read: " in note


def test_key_value_with_and_without_its_format(tmp_path):
    """envoyproxy/envoy#9242: a key=value format whose 'status=200' came with flag UT after 15 s; read by its names
    alone, and by the operators of the format the reporter quoted when it lies beside the log."""
    res, f = _one(tmp_path, GEN / "envoy-9242-key-value-ut-200.log")
    want = [
        (
            "envoy",
            200,
            "UT",
            15.001,
            "127.0.0.1:7000",
            "POST",
            "/StudentService/get",
            "upstream_response_timeout",
        )
    ]
    cols = ("gateway", "status", "flags", "request_time_s", "upstream", "method", "path", "error")
    g = res.table("gateway_attempts")
    assert g.select(cols).rows() == want
    assert g["ts_start"].dt.strftime("%Y-%m-%dT%H:%M:%S").to_list() == ["2019-12-05T16:14:53"]
    assert any("(the usual names)" in a for a in f["assumptions"])
    src = tmp_path / "with"
    shutil.copytree(GEN / "envoy-9242-with-format", src)
    res = ingest(src, tmp_path / "out2", AnalyzeOptions())
    assert dict(res.files.select("path", "format").iter_rows()) == {
        "access-log-format.txt": "envoy_config",
        "access.log": "access_generic",
    }
    assert res.table("gateway_attempts").select(cols).rows() == want
    note = res.files.filter(pl.col("path") == "access.log")["assumptions"][0].to_list()
    assert any(
        "access log format in access-log-format.txt" in a and "duration <- total_time_ms" in a for a in note
    )


def test_istio_default_without_start_time(tmp_path):
    """istio/istio#45802: Istio's default line with its '[start time]' cut: read, time unknown; #51619: the same
    format with it (503 UC after 120 s)."""
    res, _ = _one(tmp_path, DATA / "envoy" / "istio-45802-default-format-without-start-time-503-UC.log")
    g = res.table("gateway_attempts")
    assert g.select("status", "flags", "ts_start", "request_id").rows() == [
        (503, "UC", None, "3a7cbcc1-af72-47fb-bbac-a7672951f50f")
    ]
    res, _ = _one(tmp_path / "b", DATA / "envoy" / "istio-51619-default-format-503-UC-after-120s.log")
    assert res.table("gateway_attempts").select("status", "flags", "request_time_s").rows() == [
        (503, "UC", 120.001)
    ]


def test_tail_header(tmp_path):
    """A 'tail -F' header ('==> file <==') before an access log (public-2 g05) is read as what it is."""
    res, f = _one(tmp_path, PUBLIC2 / "g05-envoy-archgw-ingress-200s-baseline-chat-completions.log")
    assert f["format"] == "envoy_access" and res.table("gateway_attempts").height == 6


@pytest.mark.parametrize(
    ("path", "statuses", "death"),
    [
        (
            PUBLIC2 / "g08-llama-swap-proxy-200-then-backend-fatal-then-502s.log",
            [200, 200, 502, 200, 502],
            None,
        ),
        (SWAP / "pr155-200s-then-backend-crash-then-502s.log", [200, 200, 200, 502, 502], "SIGABRT"),
    ],
)
def test_llama_swap_200s_then_backend_death_then_502s(tmp_path, path, statuses, death):
    res = ingest_files(tmp_path, need(path))
    f = res.files.row(0, named=True)
    assert f["format"] == "llama_swap"
    g = res.table("gateway_attempts").sort("line_no")
    assert g["status"].to_list() == statuses and set(g["gateway"]) == {"llama-swap"}
    assert g.filter(pl.col("status") == 502)["flags"].unique().to_list() == ["bad_gateway"]
    dead = res.table("server_events").filter(pl.col("kind") == "engine_dead")
    assert dead.height == 1 and dead["signal"].to_list() == [death] and dead["fatal"].to_list() == [True]
    # g08: the backend's fatal line between the last answered POST and the first 502; pr155: llama-swap reports the
    # process's exit after the 502s it caused
    post = g.filter(pl.col("method") == "POST")
    last_ok = post.filter(pl.col("status") == 200)["line_no"].max()
    first_bad = post.filter(pl.col("status") == 502)["line_no"].min()
    at = dead["line_no"][0]
    assert (last_ok < at < first_bad) if death is None else (first_bad < at)


def test_llama_swap_timings_and_old_format(tmp_path):
    res = ingest_files(tmp_path, need(PUBLIC2 / "g08-llama-swap-proxy-200-then-backend-fatal-then-502s.log"))
    g = res.table("gateway_attempts").sort("line_no")
    # '[DEBUG] Process [deepseek-v3] request /v1/chat/completions - start: 11.260061323s, total: 1m10.727098281s'
    first = g.row(0, named=True)
    assert (first["upstream"], first["connect_s"], first["duration_s"]) == (
        "deepseek-v3",
        11.260061323,
        70.727098281,
    )
    assert first["request_time_s"] == pytest.approx(70.727207572)
    assert g["request_time_s"].to_list()[-1] == pytest.approx(273.281e-6)  # '273.281µs'
    acc = res.table("server_events").filter(pl.col("kind") == "http_access")
    assert acc.select("http_status", "http_path").rows() == [
        (200, "/v1/chat/completions")
    ]  # the backend's own
    res, f = _one(tmp_path / "b", SWAP / "issue75-old-format-timestamped-with-llama-server.log")
    g = res.table("gateway_attempts")
    assert g["ts_end"].dt.strftime("%H:%M:%S").to_list() == ["20:41:16", "20:41:19"]
    assert g["request_time_s"].to_list() == pytest.approx([10.260119763, 226.659e-6])
    assert res.table("server_events")["http_path"].to_list() == ["/health", "/"]


def test_litellm_status_and_retries_inside_error_text(tmp_path):
    """LiteLLM#19985: the router's failures name the upstream's 429 by their class and 'LiteLLM Retried: 10 times';
    LiteLLM#8632: the proxy's stream cut by Vertex AI's 503 (its body inside the error text) is a failure row."""
    res, _ = _one(tmp_path, PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log")
    att = res.table("gateway_attempts").filter(pl.col("flags") == "attempt,exception")
    assert att.select("upstream_status", "attempts_total").rows() == [(429, 11), (None, 11), (429, 11)]
    res, _ = _one(
        tmp_path / "b",
        PUBLIC2 / "g09-litellm-proxy-compose-wrapped-200s-then-upstream-503-overloaded-no-fallback.log",
    )
    g = res.table("gateway_attempts")
    # the stream's failure after its access line's 200 (async_data_generator): flagged so, apart from the requests
    failed = g.filter(pl.col("flags") == "failed,stream")
    assert failed.select("upstream_status", "status").rows() == [(503, None)]
    assert g.filter(pl.col("flags").is_null())["status"].to_list() == [200, 200]
