"""Spans joined to requests, and the OTLP export read back: by logscope itself and by the official OTLP schema
(opentelemetry-proto's ExportTraceServiceRequest, through protobuf's JSON parser). Real input: the OTel SDK's
OTLP export of a client retrying a 502 and a server span carrying vLLM's attributes (tests/data/traces/sdk)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from conftest import DATA
from logscope import traces_export
from logscope.api import AnalyzeOptions, analyze

SDK = DATA / "traces" / "sdk"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("traced")
    src = base / "in"
    src.mkdir()
    for f in ("otlp-lab-client.jsonl", "otlp-vllm-a.jsonl"):
        shutil.copy2(SDK / f, src / f)
    analyze(src, base / "out", AnalyzeOptions())
    return base / "out"


def test_a_trace_no_log_names_is_a_request_of_its_own(analysed: Path) -> None:
    rs = pl.read_parquet(analysed / "request_spans.parquet")
    assert rs.height == 1
    r = rs.row(0, named=True)
    assert r["logical_request_id"] is None and r["joined_by"].startswith("spans only")
    assert "parent span" in r["joined_by"]  # the engine span is the second attempt's child
    assert (r["attempt_spans"], r["attempt_statuses"], r["resend_count_max"]) == (2, "502,200", 1)
    assert (r["engine_spans"], r["span_queue_s"], r["span_ttft_s"], r["span_e2e_s"]) == (
        1,
        0.004,
        0.011,
        0.03,
    )
    assert (r["engine_clock"], r["attempt_clock"], r["latency_source"]) == ("engine", "client", "spans")
    # the retry's start to its engine span's start: 45 µs in this run (both spans' own stamps)
    assert r["before_engine_s"] == pytest.approx(0.000045, abs=2e-6)
    # the 502 attempt has no engine span, and nothing in the folder says why
    assert r["attempts_without_engine"] == 1 and r["no_engine_reason"].startswith("unknown")
    summ = json.loads((analysed / "correlation.json").read_text())["traces"]
    assert summ["spans"] == 4 and summ["spans_by_layer"] == {"client": 3, "engine": 1}
    assert summ["traces_alone"] == 1


def test_export_reads_back_and_fits_the_otlp_schema(analysed: Path, tmp_path: Path) -> None:
    dest = tmp_path / "back" / "export.otlp.jsonl"
    dest.parent.mkdir()
    got = traces_export.write(analysed, dest)
    assert got["input_spans"] == 4
    for line in dest.read_text().splitlines():
        doc = json.loads(line)
        # OTLP/JSON writes ids in hex; protobuf's JSON reader takes bytes as base64
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in s:
                            s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
        msg = json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())  # unknown fields raise
        assert sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans) == got["spans"]
    analyze(dest.parent, tmp_path / "out2", AnalyzeOptions())
    before = pl.read_parquet(analysed / "spans.parquet")
    after = pl.read_parquet(tmp_path / "out2" / "spans.parquet")
    cols = [
        "trace_id",
        "span_id",
        "parent_span_id",
        "name",
        "service",
        "kind",
        "layer",
        "role",
        "start",
        "end",
        "status",
        "http_status",
        "resend_count",
        "queue_s",
        "ttft_s",
        "e2e_s",
        "request_id",
        "prompt_tokens",
    ]
    assert after.select(cols).sort("span_id").equals(before.select(cols).sort("span_id"))
