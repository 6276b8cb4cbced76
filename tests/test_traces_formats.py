"""The trace formats on real exports (tests/data/traces/INDEX.md): detection, every line accounted for, the
spans and their figures as the programs wrote them."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest

import parsers
from conftest import DATA, ingest_files

T = DATA / "traces"


def _ingest(tmp_path: Path, *files: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    ingest_files(tmp_path, *files)
    out = tmp_path / "out"
    return pl.read_parquet(out / "files.parquet"), pl.read_parquet(out / "spans.parquet")


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("sdk/otlp-vllm-a.jsonl", "otlp_json"),
        ("sdk/otlp-lab-client.jsonl", "otlp_json"),
        ("sdk/zipkin-1.json", "zipkin_json"),
        ("zipkin/kafka-consumer-blog.txt", "zipkin_json"),
        ("otlp/opentelemetry-proto-example.json", "otlp_json"),
        ("jaeger/jaeger-ui_01.json", "jaeger_json"),
        ("jaeger/microservices-demo-query-api.json", "jaeger_json"),
        ("sdk/console.txt", "otel_console"),
        ("console/griptape-docs.txt", "otel_console"),
        ("console/opentelemetry-bash-hello.txt", "otel_console"),
        ("debug/apisix-docs.txt", "otel_debug"),
        ("debug/otel-io-python-2022.txt", "otel_debug"),
    ],
)
def test_detected(path: str, fmt: str) -> None:
    head = (T / path).read_text().splitlines()[:200]
    mod, score, _ = parsers.detect(head)
    assert mod is not None and mod.NAME == fmt and score > 0.9


def test_otlp_vllm_span_figures(tmp_path: Path) -> None:
    files, sp = _ingest(tmp_path, T / "sdk/otlp-vllm-a.jsonl", T / "sdk/otlp-lab-client.jsonl")
    assert files["lines_unrecognized"].sum() == 0
    eng = sp.filter(pl.col("layer") == "engine").row(0, named=True)
    assert eng["name"] == "llm_request" and eng["role"] == "request" and eng["kind"] == "server"
    assert eng["request_id"] == "cmpl-storm-r-00007-0-9f2c1a7e" and eng["base_request_id"] == "storm-r-00007"
    assert (eng["queue_s"], eng["ttft_s"], eng["e2e_s"]) == (0.004, 0.011, 0.03)
    assert (eng["prompt_tokens"], eng["output_tokens"], eng["max_tokens"], eng["model"]) == (
        128,
        64,
        64,
        "tiny",
    )
    assert eng["first_token_ts"] is not None and eng["events"] == "first_token"
    # the engine span's parent is the client's second attempt (the one carrying traceparent)
    att = sp.filter(pl.col("role") == "attempt").sort("start")
    assert att["http_status"].to_list() == [502, 200] and att["resend_count"].to_list() == [None, 1]
    assert att["status"].to_list() == ["error", "unset"]
    assert eng["parent_span_id"] == att["span_id"][1] and eng["trace_id"] == att["trace_id"][1]
    req = sp.filter((pl.col("layer") == "client") & (pl.col("role") == "request"))
    assert req.height == 1 and req["name"][0] == "lab.request"
    assert att["parent_span_id"].unique().to_list() == [req["span_id"][0]]


def test_same_spans_in_every_format_the_sdk_printed(tmp_path: Path) -> None:
    """The SDK's console and Zipkin outputs of one run hold the same spans: same ids and starts; ends within the
    µs Zipkin's integer duration loses."""
    _, sp = _ingest(tmp_path, T / "sdk/console.txt", T / "sdk/zipkin-1.json", T / "sdk/zipkin-2.json")
    by = {
        s: d.sort("span_id").select("trace_id", "span_id", "parent_span_id", "layer", "role", "start", "end")
        for (s,), d in sp.with_columns(pl.col("source").str.extract(r"(console|zipkin)")).group_by("source")
    }
    assert by["console"].height == 4
    assert by["console"].drop("end").equals(by["zipkin"].drop("end"))
    gap = (by["console"]["end"] - by["zipkin"]["end"]).dt.total_microseconds().abs()
    assert gap.max() <= 1


def test_console_between_program_output(tmp_path: Path) -> None:
    files, sp = _ingest(tmp_path, T / "console/griptape-docs.txt", T / "console/otel-python-1832.txt")
    f = {r["path"]: r for r in files.iter_rows(named=True)}
    g = f["griptape-docs.txt"]
    assert (g["lines_total"], g["lines_parsed"]) == (124, 120)  # the app's 4 log lines are not spans
    cut = f["otel-python-1832.txt"]
    # 'Hello world!' and the cut second object are unrecognized; the first object is read
    assert (cut["lines_total"], cut["lines_parsed"]) == (29, 24)
    assert any("never closes" in m for m in cut["messages"])
    grip = sp.filter(pl.col("source") == "griptape-docs.txt").sort("start")
    assert grip["name"].to_list()[0] == "main" and grip["service"].unique().to_list() == ["my-gt-app"]
    assert grip["status"].unique().to_list() == ["ok"]
    bar = sp.filter(pl.col("source") == "otel-python-1832.txt").row(0, named=True)
    assert bar["parent_span_id"] == "53321c6000aabdfe"  # SDK 1.2 wrote it without 0x
    assert bar["service"] == "unknown_service"  # its resource was flat


def test_debug_exporter_both_eras(tmp_path: Path) -> None:
    files, sp = _ingest(tmp_path, T / "debug/apisix-docs.txt", T / "debug/otel-io-python-2022.txt")
    assert files["lines_unrecognized"].sum() == 0
    ap = sp.filter(pl.col("source") == "apisix-docs.txt")
    assert ap.height == 7 and ap["service"].unique().to_list() == ["APISIX"]
    root = ap.filter(pl.col("parent_span_id").is_null()).row(0, named=True)
    assert root["name"] == "GET /anything" and root["http_status"] == 200 and root["layer"] == "gateway"
    assert root["duration_s"] == pytest.approx(0.00183808, abs=1e-6)
    old = sp.filter(pl.col("source") == "otel-io-python-2022.txt").row(0, named=True)
    assert (old["kind"], old["status"], old["http_status"], old["url"]) == (
        "server",
        "unset",
        200,
        "/rolldice",
    )
    assert str(old["start"]) == "2022-04-30 18:46:43.300618+00:00"


def test_jaeger_and_zipkin_ids_and_parents(tmp_path: Path) -> None:
    _, sp = _ingest(tmp_path, T / "jaeger/jaeger-ui_01.json", T / "zipkin/kafka-consumer-blog.txt")
    j = sp.filter(pl.col("source") == "jaeger-ui_01.json")
    assert j.height == 5 and set(j["service"]) == {"service-x", "service-y"}
    assert j.filter(pl.col("span_id") == "0000000000000004")["parent_span_id"][0] == "0000000000000002"
    assert j.filter(pl.col("status") == "error")["name"].to_list() == ["some-operation"]  # error=true tag
    z = sp.filter(pl.col("source") == "kafka-consumer-blog.txt")
    assert z["trace_id"].unique().to_list() == ["0000000000000000802bd09f480b5faa"]  # 64-bit id padded
    assert sorted(z["kind"]) == ["client", "server", "server"]


def test_otlp_single_pretty_export(tmp_path: Path) -> None:
    """OTLP/JSON as the protocol's own example writes it: one pretty-printed ExportTraceServiceRequest, ids in
    upper-case hex, times as JSON numbers (the lab's lines have strings and lower case)."""
    files, sp = _ingest(tmp_path, T / "otlp/opentelemetry-proto-example.json")
    assert files["format"].to_list() == ["otlp_json"] and files["lines_unrecognized"].sum() == 0
    row = sp.row(0, named=True)
    assert sp.height == 1 and (row["trace_id"], row["span_id"], row["parent_span_id"]) == (
        "5b8efff798038103d269b633813fc60c",
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b173",
    )
    assert (row["service"], row["kind"], row["duration_s"]) == ("my.service", "server", 1.0)
    assert str(row["start"]) == "2018-12-13 14:51:00+00:00"


def test_jaeger_query_api_of_a_real_app(tmp_path: Path) -> None:
    """A second Jaeger JSON: the query API's answer for one trace of Online Boutique's frontend (OpenCensus spans,
    2020), as pasted whole in a README: 13 spans, two processes, the frontend's fan-out under its server span."""
    files, sp = _ingest(tmp_path, T / "jaeger/microservices-demo-query-api.json")
    assert files["format"].to_list() == ["jaeger_json"] and files["lines_unrecognized"].sum() == 0
    assert sp.height == 13 and dict(sp.group_by("service").len().iter_rows()) == {
        "frontend": 12,
        "adservice": 1,
    }
    root = sp.filter(pl.col("parent_span_id").is_null())
    assert root["name"].to_list() == ["Recv./product/1YMWWN1N4O"] and root["http_status"].to_list() == [200]
    assert root["duration_s"][0] == pytest.approx(0.022380)  # 22380 µs
    assert str(root["start"][0]) == "2020-12-06 19:37:13.018919+00:00"
    assert (
        sp.filter(pl.col("service") == "frontend")["parent_span_id"].drop_nulls() == "0cd101e01a221222"
    ).all()
    ad = sp.filter(pl.col("service") == "adservice")  # the callee's span under the caller's client span
    assert ad["parent_span_id"].to_list() == ["f3deb38eb851e31b"]


def test_compressed_and_compose_wrapped(tmp_path: Path) -> None:
    """A gzipped export and a console exporter's stdout collected by ``docker compose logs`` read the same."""
    src = tmp_path / "src"
    src.mkdir()
    with open(T / "sdk/otlp-vllm-a.jsonl", "rb") as f, gzip.open(src / "otlp-vllm-a.jsonl.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    # docker compose logs puts '<service>-<n>  | ' in front of each line a container printed
    (src / "client-compose.log").write_text(
        "".join(f"client-1  | {ln}\n" for ln in (T / "sdk/console.txt").read_text().splitlines())
    )
    files, sp = _ingest(tmp_path, src / "otlp-vllm-a.jsonl.gz", src / "client-compose.log")
    assert set(files["format"]) == {"otlp_json", "otel_console"}
    assert files["lines_unrecognized"].sum() == 0
    assert sp.filter(pl.col("source") == "client-compose.log").height == 4
    assert sp.filter(pl.col("source") == "otlp-vllm-a.jsonl.gz")["queue_s"].to_list() == [0.004]


def test_litellm_span_is_the_gateway_not_the_engine(tmp_path: Path) -> None:
    """LiteLLM's OTel logger as its PR printed it (ConsoleSpanExporter): the upstream's gen_ai.response.id on a
    gateway's span does not make it an engine span."""
    files, sp = _ingest(tmp_path, T / "console/litellm-pr4076.txt")
    assert files["format"].to_list() == ["otel_console"] and files["lines_unrecognized"].sum() == 0
    r = sp.row(0, named=True)
    assert (r["service"], r["name"], r["layer"], r["role"], r["status"]) == (
        "litellm",
        "litellm-completion",
        "gateway",
        "request",
        "ok",
    )
    assert (r["request_id"], r["model"], r["prompt_tokens"], r["output_tokens"], r["max_tokens"]) == (
        "chatcmpl-9XtcaF1Q0cm8pL2fcOIblCL8cmhVO",
        "gpt-3.5-turbo-0125",
        8,
        9,
        200,
    )
    assert r["duration_s"] == pytest.approx(1.017791)
