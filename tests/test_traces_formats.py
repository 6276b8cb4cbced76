"""The trace formats on real exports (tests/data/traces/INDEX.md): detection, every line accounted for, the
spans and their figures as the programs wrote them."""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

import parsers
from conftest import DATA, ingest_files

T = DATA / "traces"


def _ingest(tmp_path: Path, *files: Path, **opts) -> tuple[pl.DataFrame, pl.DataFrame]:
    ingest_files(tmp_path, *files, **opts)
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
        ("genai/openai-v2-otlp.jsonl", "otlp_json"),
        ("genai/openai-v2-console.txt", "otel_console"),
        ("genai/openinference-otlp.jsonl", "otlp_json"),
        ("genai/openinference-console.txt", "otel_console"),
        ("sglang/sglang-0.5.23-otlp.jsonl", "otlp_json"),
        ("sglang/sglang-0.5.23-console.txt", "otel_console"),
        ("otlp/tempo-api-batches.json", "otlp_json"),
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


def test_an_event_name_that_is_no_text_keeps_its_span(tmp_path: Path) -> None:
    """An event whose name is a number (a Zipkin annotation's value, an OTLP event's name: text as the SDKs write
    them, but an export is input like any log) is read as its text, and its span is kept. Before, the number failed
    the chunk's whole span table: every span of the file unrecognized, "parser zipkin_json failed"."""
    zipkin = json.loads((T / "sdk/zipkin-2.json").read_text())
    zipkin[0]["annotations"][0]["value"] = 5
    otlp = json.loads((T / "sdk/otlp-vllm-a.jsonl").read_text())
    otlp["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["events"][0]["name"] = 7
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "zipkin-2.json").write_text(json.dumps(zipkin) + "\n")
    (damaged / "otlp-vllm-a.jsonl").write_text(json.dumps(otlp) + "\n")
    files, sp = _ingest(tmp_path, damaged / "zipkin-2.json", damaged / "otlp-vllm-a.jsonl")
    assert files["lines_unrecognized"].to_list() == [0, 0] and files["lines_parsed"].to_list() == [1, 1]
    got = {r["source"]: r for r in sp.iter_rows(named=True)}
    assert (got["zipkin-2.json"]["events"], got["otlp-vllm-a.jsonl"]["events"]) == ("5", "7")
    for r in got.values():
        assert (r["name"], r["request_id"], r["ttft_s"]) == (
            "llm_request",
            "cmpl-storm-r-00007-0-9f2c1a7e",
            0.011,
        )
        assert r["first_token_ts"] is None  # no event is named first_token now


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


def _calls(sp: pl.DataFrame, source: str) -> pl.DataFrame:
    return sp.filter(pl.col("source") == source).sort("start")


@pytest.mark.parametrize("fmt", ["otlp.jsonl", "console.txt"])
def test_genai_newer_token_names_on_a_callers_span(tmp_path: Path, fmt: str) -> None:
    """opentelemetry-instrumentation-openai-v2 (the GenAI conventions' gen_ai.usage.input_tokens / output_tokens)
    on the real openai client: the caller's call, not an engine, though it names the answer's id."""
    files, sp = _ingest(tmp_path, T / f"genai/openai-v2-{fmt}")
    assert files["lines_unrecognized"].sum() == 0
    c = _calls(sp, f"openai-v2-{fmt}")
    assert c["name"].to_list() == ["chat tiny"] * 4 and (c["kind"] == "client").all()
    assert (c["layer"] == "client").all() and (c["role"] == "request").all()
    assert c["prompt_tokens"].to_list() == [13, 25, 13, None]
    assert c["output_tokens"].to_list() == [8, 12, 12, None]
    assert c["max_tokens"].to_list() == [8, 16, 12, 100000]
    assert c["request_id"].to_list() == [
        "chatcmpl-0001a7c3e1f0",
        "chatcmpl-0002a7c3e1f0",
        "chatcmpl-0003a7c3e1f0",
        None,
    ]
    assert c["status"].to_list() == ["unset", "unset", "unset", "error"] and (c["model"] == "tiny").all()
    assert c["server_address"].unique().to_list() == ["127.0.0.1"]


@pytest.mark.parametrize("fmt", ["otlp.jsonl", "console.txt"])
def test_openinference_llm_spans(tmp_path: Path, fmt: str) -> None:
    """openinference-instrumentation-openai: llm.token_count.*, llm.model_name, the request's max_tokens inside
    llm.invocation_parameters; an INTERNAL span of kind LLM is the caller's call. The prompt and the answer the
    instrumentation copied (input.value, llm.input_messages.*) are not kept unless prompts are asked for."""
    files, sp = _ingest(tmp_path, T / f"genai/openinference-{fmt}")
    assert files["lines_unrecognized"].sum() == 0
    c = _calls(sp, f"openinference-{fmt}")
    assert c["name"].to_list() == ["ChatCompletion"] * 4 and (c["kind"] == "internal").all()
    assert (
        (c["openinference_kind"] == "LLM").all()
        and (c["layer"] == "client").all()
        and (c["role"] == "request").all()
    )
    assert c["prompt_tokens"].to_list() == [13, 25, 13, None]
    assert c["output_tokens"].to_list() == [8, 12, 12, None]
    assert c["max_tokens"].to_list() == [8, 16, 12, 100000]
    assert c["model"].to_list() == ["tiny", "tiny", "tiny", None]
    assert c["status"].to_list() == ["ok", "ok", "ok", "error"]
    keys = set(c["attributes"].list.eval(pl.element().struct.field("key")).explode().drop_nulls())
    assert "llm.invocation_parameters" in keys and "llm.token_count.total" in keys
    assert "input.mime_type" in keys  # kept: no text of the prompt
    assert "llm.input_messages.0.message.role" in keys  # the roles stay, the text goes
    assert not {k for k in keys if k in ("input.value", "output.value") or k.endswith(".message.content")}
    raw = (tmp_path / "out" / "spans.parquet").read_bytes()
    assert b"Summarise the incident" not in raw
    # asked for, the copied prompt is kept as the program wrote it
    _, kept = _ingest(tmp_path / "with", T / f"genai/openinference-{fmt}", include_prompts=True)
    vals = kept["attributes"].list.eval(pl.element().struct.field("value")).explode()
    assert "Summarise the incident in one line" in vals.to_list()


def _sglang_raw() -> dict[str, dict]:
    """rid -> the root span's attributes and its trace's stage durations (s), straight from the exporter's line."""
    import json

    got: dict[str, dict] = {}
    spans = [
        sp
        for rs in json.loads((T / "sglang/sglang-0.5.23-otlp.jsonl").read_text())["resourceSpans"]
        for ss in rs["scopeSpans"]
        for sp in ss["spans"]
    ]
    for sp in spans:
        a = {kv["key"]: next(iter(kv["value"].values())) for kv in sp.get("attributes", [])}
        if "rid" in a:
            waits = [
                (int(w["endTimeUnixNano"]) - int(w["startTimeUnixNano"])) / 1e9
                for w in spans
                if w["traceId"] == sp["traceId"] and w["name"] == "prefill_waiting"
            ]
            got[a["rid"]] = {
                **a,
                "name": sp["name"],
                "wait": sum(waits),
                "n": sum(w["traceId"] == sp["traceId"] for w in spans),
            }
    return got


@pytest.mark.parametrize("fmt", ["otlp.jsonl", "console.txt"])
def test_sglang_request_span_tree(tmp_path: Path, fmt: str) -> None:
    """SGLang 0.5.23's own tracing (make_sglang_samples.py): the root span ' Req <rid[:8]>' (a leading space when not
    disaggregated) is the engine's request with its whole rid; the thread spans and stages under it are its phases,
    never start-up work; the queue is its prefill_waiting stage, taken out of SGLang's prefill figure (which runs
    from the dispatch to the first token)."""
    files, sp = _ingest(tmp_path, T / f"sglang/sglang-0.5.23-{fmt}")
    assert files["lines_unrecognized"].sum() == 0
    raw = _sglang_raw()
    assert sp.height == sum(r["n"] for r in raw.values()) == 28 and (sp["layer"] == "engine").all()
    req = sp.filter(pl.col("role") == "request").sort("start")
    assert req["name"].to_list() == [" Req 9f0c2d4b", " Req 1b7e4a2c"]
    assert req["request_id"].to_list() == [
        "9f0c2d4be1a84c5f8a7e3b6d2c1f0e9a",
        "1b7e4a2c9d3f4e5a8b6c7d8e9f0a1b2c",
    ]
    assert (sp.filter(pl.col("role") != "request")["role"] == "phase").all()
    assert set(sp["name"]) >= {
        "tokenize",
        "api_server_dispatch",
        "prefill_waiting",
        "prefill_forward",
        "decode_loop",
    }
    for r in req.iter_rows(named=True):
        a = raw[r["request_id"]]
        assert r["ttft_s"] == pytest.approx(float(a["gen_ai.latency.time_to_first_token"]), abs=1e-9)
        assert r["e2e_s"] == pytest.approx(float(a["gen_ai.latency.e2e"]), abs=1e-9)
        assert r["decode_s"] == pytest.approx(float(a["gen_ai.latency.time_in_model_decode"]), abs=1e-9)
        assert r["queue_s"] == pytest.approx(a["wait"], abs=2e-6)  # the console prints times to the µs
        assert r["prefill_s"] == pytest.approx(
            float(a["gen_ai.latency.time_in_model_prefill"]) - a["wait"], abs=2e-6
        )
    assert req["queue_s"].round(4).to_list() == [0.0304, 0.0309]


def test_tempo_trace_api_answer(tmp_path: Path) -> None:
    """A second single OTLP export, as Grafana Tempo's trace API answers: "batches" (the older name of
    resourceSpans), instrumentationLibrarySpans, SPAN_KIND_* names and nanosecond times as bare JSON numbers past
    2**53. Its openai.chat spans (OpenLLMetry) carry the newer gen_ai.usage.input_tokens / output_tokens; the prompt
    Google ADK copies into gcp.vertex.agent.llm_request is not kept."""
    files, sp = _ingest(tmp_path, T / "otlp/tempo-api-batches.json")
    assert files.select("format", "lines_total", "lines_parsed").row(0) == ("otlp_json", 1, 1)
    assert dict(sp.group_by("service").len().iter_rows()) == {"helm_agent": 67, "kagent-controller": 19}
    assert sp["trace_id"].unique().to_list() == ["dd547580319ab0312cee07f1def50dad"]
    first = sp.filter(pl.col("span_id") == "21beb323d66610f7").row(0, named=True)
    assert (first["kind"], first["http_status"], first["http_method"]) == ("server", 404, "GET")
    assert first["start"] == datetime(2026, 4, 30, 13, 17, 33, 780274, tzinfo=UTC)
    chat = sp.filter(pl.col("name") == "openai.chat").sort("start")
    assert chat["prompt_tokens"].to_list() == [2256, 2392] and chat["output_tokens"].to_list() == [13, 116]
    assert chat["request_id"].to_list() == [
        "chatcmpl-DaLYlqJDD4djXUGg9TjyClK9BdeVV",
        "chatcmpl-DaLYmIS19l0ClnUwPDWAYAmn2jz66",
    ]
    assert (chat["model"] == "gpt-4.1-mini-2025-04-14").all()
    assert (chat["layer"] == "client").all() and (chat["role"] == "request").all()
    keys = set(sp["attributes"].list.eval(pl.element().struct.field("key")).explode().drop_nulls())
    assert "gcp.vertex.agent.invocation_id" in keys and "gcp.vertex.agent.llm_request" not in keys
    assert not any(
        k.startswith(("gen_ai.completion.", "gen_ai.prompt.")) and k.endswith(".content") for k in keys
    )
