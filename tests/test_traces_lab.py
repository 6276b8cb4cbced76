"""Real vLLM 0.32 spans: the lab's traced-2r-kill (two traced replicas behind nginx, replica b's process group
SIGKILLed at 03:24:36.685 with 20 requests in flight). The figures asserted are its truth.json "purpose" and
notes.md: 637 logical requests, 640 attempts, 3 retries; spans lab-client 1,277, vllm-a 541, vllm-b 79; 581 of
640 attempt spans with an engine span (a 528, b 53); the 59 without: 20 cut on b, 35 timed out and aborted on a,
3 x 502 sent to b after the kill, 1 finished on b whose span batch the SIGKILL lost."""

from __future__ import annotations

import base64
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze

RUN = LAB / "traced-2r-kill"
KILL = datetime(2026, 12, 6, 3, 24, 36, 685000, tzinfo=UTC)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("traced2r")
    shutil.copytree(need(RUN), base / "in")
    analyze(base / "in", base / "out", AnalyzeOptions(export_traces=True))
    return base / "out"


def _raw_engine_spans() -> dict[str, dict]:
    """gen_ai.request.id -> the llm_request span's own attributes, read straight from the exporter's lines."""
    got = {}
    for f in ("otlp-vllm-a.jsonl", "otlp-vllm-b.jsonl"):
        for line in (RUN / f).read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        if sp["name"] == "llm_request":
                            a = {kv["key"]: next(iter(kv["value"].values())) for kv in sp["attributes"]}
                            got[a["gen_ai.request.id"]] = a
    return got


def test_every_span_and_line_read(out: Path) -> None:
    files = pl.read_parquet(out / "files.parquet").filter(pl.col("format") == "otlp_json")
    assert sorted(files["path"]) == ["otlp-lab-client.jsonl", "otlp-vllm-a.jsonl", "otlp-vllm-b.jsonl"]
    assert (files["lines_parsed"] == files["lines_total"]).all() and files[
        "lines_total"
    ].sum() == 82 + 74 + 21
    sp = pl.read_parquet(out / "spans.parquet")
    assert dict(sp.group_by("service").len().iter_rows()) == {"lab-client": 1277, "vllm-a": 541, "vllm-b": 79}
    eng = sp.filter(pl.col("name") == "llm_request")
    assert dict(eng.group_by("service").len().iter_rows()) == {"vllm-a": 528, "vllm-b": 53}
    assert (eng["role"] == "request").all() and (eng["layer"] == "engine").all()


def test_vllm_startup_spans_are_the_cold_start(out: Path) -> None:
    """vLLM 0.32's own start-up spans (@instrument in vllm/v1: 'Overall Loading' at the root, 13 per start):
    a once, b twice (the first start and the restart after the kill)."""
    sp = pl.read_parquet(out / "spans.parquet").filter(pl.col("role") == "startup")
    assert dict(sp.group_by("service").len().iter_rows()) == {"vllm-a": 13, "vllm-b": 26}
    roots = sp.filter(pl.col("parent_span_id").is_null()).sort("start")
    assert roots["name"].to_list() == ["Overall Loading"] * 3
    assert set(sp["name"]) >= {"Load weights", "Allocate KV cache", "Warmup (CPU)", "EngineCoreProc init"}
    # b's restart: its loading ends 2 s before its log says the server is ready (03:31:29)
    restart = roots.filter(pl.col("start") > KILL).row(0, named=True)
    assert restart["service"] == "vllm-b"
    assert str(restart["end"]) == "2026-12-06 03:31:27.858965+00:00"


def test_three_layers_joined_by_trace_id(out: Path) -> None:
    rs = pl.read_parquet(out / "request_spans.parquet")
    assert rs.height == 637 and rs["logical_request_id"].null_count() == 0
    summ = json.loads((out / "correlation.json").read_text())["traces"]
    assert summ["traced"] == {"client": 637, "gateway": 0, "gateway_log": 637, "engine": 581}
    assert summ["requests_three_layers"] == 581
    assert (summ["attempt_spans"], summ["attempts_with_engine"]) == (640, 581)
    # one trace per logical request: the gateway's traceparent names the trace of the client's spans
    gw = pl.read_parquet(out / "gateway_attempts.parquet")
    tp = gw["traceparent"].str.extract(r"^00-([0-9a-f]{32})-", 1)
    assert tp.null_count() == 0 and set(tp) == set(rs["trace_id"])
    # the 3 retries are sibling attempt spans: the 502 from b, then 200 from a
    assert rs.filter(pl.col("attempt_spans") == 2)["attempt_statuses"].to_list() == ["502,200"] * 3
    # ... and each retry reached an engine (vllm-a's span under it): the reach the logs' correlation also gives
    ra = summ["retried_attempts"]
    assert (ra["retries"], ra["with_engine_span"], ra["without_engine_span"]) == (3, 3, 0)
    flags = json.loads((out / "correlation.json").read_text())["flags"]["retried_attempts"]["client"]
    assert (flags["retries"], flags["reached"]) == (3, 3)
    per_engine = rs.group_by("engine_service").len()
    assert dict(per_engine.drop_nulls().iter_rows()) == {"vllm-a": 528, "vllm-b": 53}


def test_queue_and_ttft_are_the_engine_spans_own(out: Path) -> None:
    rs = pl.read_parquet(out / "request_spans.parquet").filter(pl.col("engine_spans").is_not_null())
    raw = _raw_engine_spans()
    assert rs.height == 581 == len(raw)
    for r in rs.iter_rows(named=True):
        a = raw[r["engine_request_id"]]
        assert r["span_queue_s"] == a["gen_ai.latency.time_in_queue"]
        assert r["span_ttft_s"] == a["gen_ai.latency.time_to_first_token"]
        assert r["span_prefill_s"] == a["gen_ai.latency.time_in_model_prefill"]
        assert (r["engine_clock"], r["latency_source"]) == ("engine", "spans")
    # the time before the engine (gateway + API server) is never negative beyond the two clocks' skew
    assert rs["before_engine_s"].min() > -0.01


def test_attempts_without_engine_span_and_why(out: Path) -> None:
    summ = json.loads((out / "correlation.json").read_text())["traces"]["no_engine_span"]
    assert summ["attempts"] == 59
    assert summ["by_class"] == {"aborted": 35, "cut by death": 20, "spans lost": 1, "never reached": 3}
    by = {(d["why_class"], d["replica"]): d["attempts"] for d in summ["by_class_and_replica"]}
    assert by == {
        ("aborted", "vllm-server-a"): 35,
        ("cut by death", "vllm-server-b"): 20,
        ("spans lost", "vllm-server-b"): 1,
        ("never reached", None): 3,
    }
    rs = pl.read_parquet(out / "request_spans.parquet")
    why = dict(rs.group_by("no_engine_class").agg(pl.col("outcome").unique().sort()).drop_nulls().iter_rows())
    # the cut streams are the callers' truncated answers, the aborts their timeouts, the others were answered
    assert why == {
        "aborted": ["timeout"],
        "cut by death": ["truncated"],
        "spans lost": ["ok"],
        "never reached": ["ok"],
    }
    lost = rs.filter(pl.col("no_engine_class") == "spans lost")["no_engine_reason"][0]
    assert "vllm-server-b" in lost and "before its log stopped at 03:24:34" in lost


def test_the_death_shown_by_what_the_folder_holds(out: Path) -> None:
    """A SIGKILL writes no death line: the stop is the log's last line, the spans' last end and nginx's errors
    for b's address, each of them before or after the real kill as it must be."""
    stops = json.loads((out / "correlation.json").read_text())["traces"]["stops"]
    assert len(stops) == 1
    s = stops[0]
    assert (s["replica"], s["service"], s["upstream"], s["how"]) == (
        "vllm-server-b",
        "vllm-b",
        "127.0.0.1:8002",
        "restart",
    )
    ts = {
        k: datetime.fromisoformat(s[k])
        for k in ("log_last", "spans_last", "last_scrape", "gateway_errors_first")
    }
    assert ts["spans_last"] < ts["log_last"] < ts["last_scrape"] < KILL < ts["gateway_errors_first"]
    # nginx's error log for :8002 while b was down (truth.json gateway.error_log_kinds)
    assert s["gateway_errors"] == {
        "upstream_disabled": 26,
        "connect_failed": 23,
        "upstream_closed": 20,
        "upstream_reset": 3,
    }
    diag = json.loads((out / "diagnosis.json").read_text())
    deaths = diag["server_lifecycle"]["deaths"]
    assert [d["replica"] for d in deaths] == ["vllm-server-b"]
    assert deaths[0]["ts"].startswith("2026-12-06T03:24:34")


@pytest.fixture(scope="module")
def one(tmp_path_factory) -> Path:
    """traced-1r: one traced replica, non-streaming, 3 s client timeout, max_retries 2 (truth: 303 logical, 312
    attempts, 9 retries after 9 timeouts; nginx 499 x 9, vLLM aborts 9; spans lab-client 615, vllm-a 316)."""
    base = tmp_path_factory.mktemp("traced1r")
    shutil.copytree(need(LAB / "traced-1r"), base / "in")
    analyze(base / "in", base / "out", AnalyzeOptions())
    return base / "out"


def test_one_replica_timeouts_retried_in_their_trace(one: Path) -> None:
    sp = pl.read_parquet(one / "spans.parquet")
    assert dict(sp.group_by("service").len().iter_rows()) == {"lab-client": 615, "vllm-a": 316}
    assert sp.filter(pl.col("role") == "startup").height == 13
    summ = json.loads((one / "correlation.json").read_text())["traces"]
    assert (summ["requests"], summ["requests_joined"], summ["requests_three_layers"]) == (303, 303, 303)
    assert (summ["attempt_spans"], summ["attempts_with_engine"]) == (312, 303)
    # the 9 attempts without an engine span are the timed-out ones vLLM aborted; no replica stopped
    assert summ["no_engine_span"]["by_class"] == {"aborted": 9} and summ["stops"] == []
    rs = pl.read_parquet(one / "request_spans.parquet")
    assert rs["resend_count_max"].null_count() == rs.height  # httpx 0.66b2 does not write the resend count
    retried = rs.filter(pl.col("attempt_spans") > 1)
    assert retried["attempts_without_engine"].sum() == 9 and (retried["engine_spans"] == 1).all()
    assert sorted(retried["attempt_statuses"].to_list()) == ["-,-,200"] + ["-,200"] * 7
    assert (retried["no_engine_class"] == "aborted").all()
    # 9 retries as sibling spans: 8 reached vllm-a; the middle one of '-,-,200' timed out too (aborted, no span)
    ra = summ["retried_attempts"]
    assert (ra["retries"], ra["with_engine_span"], ra["without_engine_span"]) == (9, 8, 1)
    md = (one / "summary.md").read_text()
    assert "Retries as sibling attempt spans: 9, 8 of them reached an engine" in md


def test_export_of_the_real_run_fits_otlp_and_reads_back(out: Path, tmp_path: Path) -> None:
    """analyze --export-traces: every line an ExportTraceServiceRequest by opentelemetry-proto's own JSON reader;
    read back by logscope, the input's spans come back with their ids, times, figures and attribute types."""
    dest = out / "traces.otlp.jsonl"
    lines = dest.read_text().splitlines()
    n_spans = 0
    for line in lines:
        doc = json.loads(line)
        for rs in doc[
            "resourceSpans"
        ]:  # OTLP/JSON writes ids in hex; protobuf's reader takes bytes as base64
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    for k in ("traceId", "spanId", "parentSpanId"):
                        if k in sp:
                            sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
        msg = json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())  # unknown fields raise
        n_spans += sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
    # the 1,897 spans read, and the logs' view: 637 requests and 663 upstream tries of nginx
    assert n_spans == 1897 + 637 + 663
    back = tmp_path / "back"
    back.mkdir()
    shutil.copy2(dest, back / "x.otlp.jsonl")
    analyze(back, tmp_path / "out2", AnalyzeOptions())
    before = pl.read_parquet(out / "spans.parquet")
    after = pl.read_parquet(tmp_path / "out2" / "spans.parquet").filter(pl.col("service") != "logscope: logs")
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
    ]
    cols += ["status", "http_status", "queue_s", "ttft_s", "prefill_s", "decode_s", "request_id", "scope"]
    cols += ["attributes"]
    # (vLLM's start-up spans have the same span ids in every start: its workers seed their random generator)
    key = ["trace_id", "span_id", "start"]
    assert after.select(cols).sort(key).equals(before.select(cols).sort(key))


def test_span_figures_per_segment_reach_the_diagnosis(out: Path) -> None:
    spans = json.loads((out / "diagnosis.json").read_text())["spans"]
    assert spans["source"] == "spans" and spans["requests_with_engine_span"] == 581
    whole = spans["segments"][0]
    assert (whole["segment"], whole["requests"]) == ("whole range", 581)
    raw = _raw_engine_spans()
    ttft = pl.Series([a["gen_ai.latency.time_to_first_token"] for a in raw.values()])
    lat = whole["latencies"]["ttft"]
    assert (lat["clock"], lat["source"], lat["n"]) == ("engine", "spans", 581)
    assert lat["p50_ms"] == pytest.approx(ttft.median() * 1000, abs=1e-3)
    # the parts' means add up to the callers' mean e2e of the requests that have every part
    parts = {p["part"]: p for p in whole["split"]}
    assert (
        parts["queue"]["clock"] == "engine"
        and parts["before the attempt (retries, backoff, the client)"]["clock"] == "client"
    )
    total = sum(p["mean_ms"] for p in whole["split"])
    assert total == pytest.approx(whole["latencies"]["caller_e2e"]["mean_ms"], rel=0.02)
    # the crash episode (b's downtime) has its own split: a alone queued far longer than the whole run
    crash = next(s for s in spans["segments"] if "crash" in s["segment"])
    assert crash["latencies"]["queue"]["p95_ms"] > whole["latencies"]["queue"]["p50_ms"]


def test_report_shows_the_stop_the_waterfall_and_the_cold_start(out: Path) -> None:
    page = (out / "report.html").read_text()
    assert '<h2 id="traces">Traces</h2>' in page and 'href="#traces"' in page
    assert "vllm-server-b&#39;s log stops at 03:24:34 with no shutdown line" in page
    assert 'id="spec-waterfall"' in page and 'id="spec-span_split"' in page
    assert "Start-up from vLLM's own spans" in page and "the chart could not be drawn" not in page


def test_narrowing_the_range_keeps_each_attempts_reason(out: Path, tmp_path: Path) -> None:
    """Metamorphic: the same folder looked at over 03:24:00-03:26:00 only (``logscope report --since/--until``):
    the requests in it keep the reason each had over the whole run, and the stop is found the same."""
    from datetime import timedelta

    from logscope import api

    narrow = tmp_path / "narrow"
    shutil.copytree(out, narrow)
    lo = KILL.replace(minute=24, second=0, microsecond=0)
    opts = AnalyzeOptions(since=lo, until=lo + timedelta(minutes=2))
    api.rerender(narrow, opts, again=True)
    whole = pl.read_parquet(out / "request_spans.parquet").select("trace_id", "no_engine_class")
    part = pl.read_parquet(narrow / "request_spans.parquet").select("trace_id", "no_engine_class")
    assert 0 < part.height < whole.height
    both = part.join(whole, on="trace_id", suffix="_whole")
    assert both.height == part.height
    assert both["no_engine_class"].equals(both["no_engine_class_whole"])
    assert set(part["no_engine_class"].drop_nulls()) == {"cut by death", "spans lost", "never reached"}
    stops = json.loads((narrow / "correlation.json").read_text())["traces"]["stops"]
    assert [(s["replica"], s["log_last"]) for s in stops] == [("vllm-server-b", "2026-12-06T03:24:34+00:00")]


def schema_errors(out: Path) -> list[str]:
    """summary.json against logscope/summary.schema.json (its traces object declared key by key)."""
    import jsonschema

    import logscope

    schema = json.loads((Path(logscope.__file__).parent / "summary.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return [
        f"{e.json_path}: {e.message}" for e in v.iter_errors(json.loads((out / "summary.json").read_text()))
    ]


def test_every_output_says_the_same_of_the_spans(out: Path, one: Path) -> None:
    """One object, four outputs: correlation.json's traces, summary.json, summary.md and the report agree."""
    assert schema_errors(out) == [] and schema_errors(one) == []
    corr = json.loads((out / "correlation.json").read_text())["traces"]
    summ = json.loads((out / "summary.json").read_text())["traces"]
    assert summ["no_engine_span"]["by_class"] == corr["no_engine_span"]["by_class"]
    assert summ["stops"][0]["evidence"] == corr["stops"][0]["evidence"]
    assert summ["segments"][0]["requests"] == 581
    md = (out / "summary.md").read_text()
    assert "581 of 640 client attempts have an engine span" in md
    assert all(f"{k} {v}" in md for k, v in corr["no_engine_span"]["by_class"].items())
    page = (out / "report.html").read_text()
    assert "581 of 640 client attempts have one" in page
    from logscope.terminal import trace_words

    assert trace_words(json.loads((out / "summary.json").read_text())["traces"]) == (
        "spans: 1,897 read; 637 of 637 requests joined to a trace; 581 of 640 client attempts have an engine span"
        " (without: aborted 35, cut by death 20, never reached 3, spans lost 1)"
    )
    for k, v in corr["no_engine_span"]["by_class"].items():
        assert f'<td>{k}</td><td class="num">{v}</td>' in page


def test_trace_charts_are_valid_vega_lite(out: Path) -> None:
    from logscope.report import context, vl
    from logscope.report.load import load
    from logscope.report.summary import build

    ld = load(out)
    charts = context(ld, build(ld, AnalyzeOptions()), AnalyzeOptions())["charts"]
    for name in ("waterfall", "span_split", "timeline"):  # the timeline holds the spans panel
        assert charts[name] is not None, name
        vl.validate(charts[name])


def test_compare_reads_the_engine_spans_per_request(one: Path, out: Path, tmp_path: Path) -> None:
    """compare traced-1r (one calm replica) with traced-2r-kill (a's queue after b died): TTFT and time in queue
    from vLLM's own spans, per request, so the change gets a bootstrap interval, clock engine named."""
    from logscope.api import compare

    doc = compare(one, out, tmp_path / "c")["doc"]
    rows = {r["name"]: r for r in doc["whole"]["metrics"]}
    ttft, queue = rows["span_ttft_p95"], rows["span_queue_p95"]
    assert "clock engine" in ttft["title"] and "clock engine" in queue["title"]
    assert ttft["a"] == pytest.approx(0.2003, abs=1e-3) and ttft["b"] == pytest.approx(56.63, abs=0.01)
    assert queue["a"] < 0.001 and queue["b"] == pytest.approx(56.17, abs=0.01)
    assert ttft["beyond_noise"] is True and queue["beyond_noise"] is True
    # two incidents of different loads (one calm replica against a kill under a ladder): a whole-run latency is
    # shown with its interval, not judged better or worse (compare/profile.py)
    assert doc["whole"]["load"]["matched"] is False
    assert ttft["direction"] is None and queue["direction"] is None
    assert (
        "not judged: the load differs" in ttft["noise"] and "not judged: the load differs" in queue["noise"]
    )
    assert "queue time p95 (vLLM's spans, clock engine)" in (tmp_path / "c" / "compare.md").read_text()


def test_same_input_same_request_spans_and_waterfall(out: Path, tmp_path: Path) -> None:
    """Run again on the same folder: request_spans.parquet and the waterfall's rows are the same (its picks break
    ties by duration, then trace id, not by the order a group-by happened to give)."""
    from logscope.report import context
    from logscope.report.load import load
    from logscope.report.summary import build

    again = tmp_path / "again"
    analyze(out.parent / "in", again, AnalyzeOptions())
    assert pl.read_parquet(again / "request_spans.parquet").equals(
        pl.read_parquet(out / "request_spans.parquet")
    )

    def titles(o: Path) -> list[str]:
        ld = load(o)
        spec = context(ld, build(ld, AnalyzeOptions()), AnalyzeOptions())["charts"]["waterfall"]
        return [c["title"]["text"] if isinstance(c["title"], dict) else c["title"] for c in spec["vconcat"]]

    first = titles(out)
    assert first == titles(again)
    assert [t.split(" · ", 1)[1] for t in first[:4]] == [
        "around a death: cut by death",
        "around a death: never reached",
        "around a death: spans lost",
        "around a death: cut by death",
    ]


def test_every_clock_shifted_keeps_the_join_and_the_reasons(out: Path, tmp_path: Path) -> None:
    """Metamorphic: every time of the folder (logs, metrics, the spans' UnixNano) moved by one odd offset: the
    same joins, the same attempts without an engine span and the same reasons, the stop moved by the offset."""
    from datetime import timedelta

    from metamorphic import copy_shifted

    shift = timedelta(days=1, hours=3, minutes=17, seconds=13)
    copy_shifted(RUN, tmp_path / "in", shift)
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    a = json.loads((out / "correlation.json").read_text())["traces"]
    b = json.loads((tmp_path / "out" / "correlation.json").read_text())["traces"]
    for k in ("spans", "requests_joined", "requests_three_layers", "traced", "attempts_with_engine"):
        assert b[k] == a[k], k
    assert b["no_engine_span"]["by_class"] == a["no_engine_span"]["by_class"]
    assert b["retried_attempts"] == a["retried_attempts"]
    moved = [
        datetime.fromisoformat(s["log_last"]) - shift
        for s in b["stops"]  # the same replica, its log's stop moved by the offset
    ]
    assert [s["replica"] for s in b["stops"]] == [s["replica"] for s in a["stops"]]
    assert moved == [datetime.fromisoformat(s["log_last"]) for s in a["stops"]]
