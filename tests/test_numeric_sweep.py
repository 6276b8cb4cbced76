"""Numbers no field can hold cost only themselves (issue #44, item 2): set null and counted, never a stopped run.

One Prometheus sample of 1e19 in a running or waiting gauge, or in ``num_preemptions_total``, gave exit 70 (a
strict cast to Int64 in ``ingest/metric_stats.py``); a 20-digit count or an ``inf`` duration stopped a whole
file's parse in most parsers (vLLM, nginx, Envoy, LiteLLM, openai-python, client JSONL, AIPerf, GuideLLM, vllm
bench, SGLang). The sweep puts 1e19, -1e19, 1e308, NaN, inf and 2**64 in digits into every number of real lines
of two real files of every format (``tests/fuzz/mutations.py``: ``sweep_numbers``, ``sweep_document``) and
checks that each file is still read, every line accounted for, and no table holds such a number."""

from __future__ import annotations

import math
import re
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
from mutations import SWEEP_VALUES, sweep_document, sweep_numbers  # noqa: E402

from clirun import cli  # noqa: E402
from conftest import DATA, LAB, PUBLIC, need  # noqa: E402
from logscope.api import AnalyzeOptions, ingest  # noqa: E402
from logscope.numbers import MAX_ABS  # noqa: E402

CUT = 150_000  # bytes of a source kept: a sample runs in about a second
# two real files of each line format (one where the repository carries only one)
LINES = [
    ("vllm_server", LAB / "spike/vllm-server.log"),
    ("vllm_server", LAB / "v0-ladder/vllm-server.log"),
    ("vllm_server", PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log"),
    ("sglang_server", DATA / "sglang/11970-prefill-queue-draining.log"),
    ("sglang_server", DATA / "sglang/23049-diffusion-request-lines-text-and-json.log"),
    ("prometheus_tsdb_dump", LAB / "spike/prometheus/tsdb-dump.txt"),
    ("prometheus_tsdb_dump", LAB / "v0-ladder/prometheus/tsdb-dump.txt"),
    ("prometheus_text", DATA / "prometheus/curl-metrics-2scrapes.txt"),
    ("prometheus_text", DATA / "prometheus/scrape-loop-metrics.prom.log"),
    ("nginx_access", LAB / "spike/nginx-access.log"),
    ("nginx_access", DATA / "ingress-nginx/access.log"),
    ("nginx_error", LAB / "crash/nginx-error.log"),
    ("nginx_error", LAB / "spike/nginx-error.log"),
    ("envoy_access", DATA / "envoy/envoy-access.log"),
    ("envoy_access", DATA / "envoy/envoy-access.json"),
    ("envoy_access", DATA / "envoy/envoy-istio-access.log"),
    ("haproxy", DATA / "haproxy/haproxy.log"),
    ("haproxy", DATA / "haproxy/haproxy-id.log"),
    ("traefik", DATA / "traefik/traefik-access.json"),
    ("litellm", DATA / "litellm/litellm-proxy.log"),
    ("litellm", DATA / "litellm/litellm-proxy-json.log"),
    ("vllm_router", DATA / "vllm-router/issue706-router-not-forwarding.log"),
    ("vllm_router", DATA / "vllm-router/pr428-static-router-health.log"),
    ("openai_client", LAB / "spike/client-spike.log"),
    ("openai_client", DATA / "clients/openai-v1-threads.log"),
    ("client_jsonl", LAB / "spike/client-spike.jsonl"),
    ("client_jsonl", DATA / "clients/generic-attempts.jsonl"),
    ("aiperf", DATA / "clients/aiperf-profile_export.jsonl"),
    # the formats of issue #39/#40/#38, each on its public excerpts (lm_eval has one)
    ("vllm_bench", DATA / "load-tests/vllm-33743-bench-serve-2026.log"),
    ("vllm_bench", DATA / "load-tests/sglang-8285-bench-serving-cut.log"),
    ("lm_eval", DATA / "clients-public/instructlab-197-lm-eval-500-retrying.log"),
    ("llama_swap", DATA / "llama-swap/issue75-old-format-timestamped-with-llama-server.log"),
    ("llama_swap", DATA / "llama-swap/pr155-200s-then-backend-crash-then-502s.log"),
    ("access_generic", DATA / "gateway-generic/engarde-8-istio-json-pretty-printed.log"),
    ("access_generic", DATA / "gateway-generic/envoy-9242-key-value-ut-200.log"),
    ("kernel_log", DATA / "platform/kernel-dmesg-ctime-xid-akash-244.log"),
    ("kernel_log", DATA / "platform/kernel-journal-memcg-limit-dpservice-74.log"),
    ("k8s_kubectl", DATA / "platform/k8s-describe-pod-pending-gpu-limits-device-plugin-33.txt"),
    ("k8s_kubectl", DATA / "platform/k8s-describe-last-state-oomkilled-gimlet-649.txt"),
    ("otel_console", DATA / "traces/console/opentelemetry-bash-hello.txt"),
    ("otel_console", DATA / "traces/sdk/console.txt"),
    ("otel_debug", DATA / "traces/debug/apisix-docs.txt"),
    ("otel_debug", DATA / "traces/debug/otel-io-python-2022.txt"),
]
# documents: every number of each in turn, in EVERY copies (Prometheus' JSON cannot hold a bare NaN)
EVERY = len(SWEEP_VALUES)
DOCS = [
    ("prometheus_query_range", LAB / "spike/prometheus/query_range-num_requests_running.json"),
    ("prometheus_query_range", LAB / "calm/prometheus/query_range-vllm_num_preemptions_total.json"),
    ("vllm_bench", LAB / "ladder/bench/ladder-c8.json"),
    ("vllm_bench", LAB / "ladder/bench/ladder-c64.json"),
    ("guidellm", DATA / "clients/guidellm-benchmarks.json"),
    # a console table is one document: its cells swept in copies, each copy still a table (AIPerf's second
    # excerpt, trtllm-11708, is no longer told once a cell is 'nan': a detection, not a stopped parse)
    ("k8s_kubectl", DATA / "platform/k8s-get-pods-restarts-kubernetes-54491.txt"),
    ("aiperf_console", DATA / "load-tests/aiperf/aiperf-535-rows-2025-12.log"),
    ("otlp_json", DATA / "traces/sdk/otlp-vllm-a.jsonl"),
    ("otlp_json", DATA / "traces/sdk/otlp-lab-client.jsonl"),
    ("zipkin_json", DATA / "traces/sdk/zipkin-1.json"),
    ("zipkin_json", DATA / "traces/zipkin/kafka-consumer-blog.txt"),
    ("jaeger_json", DATA / "traces/jaeger/jaeger-ui_01.json"),
    ("nvidia_smi", DATA / "platform/nvidia-smi-rtx3090-club-3090-96.txt"),
    ("nvidia_smi", DATA / "platform/nvidia-smi-rtx4090-rlinf-255.txt"),
    ("k8s_events_doc", DATA / "platform/k8s-events-json-started-pachyderm-1372.json"),
    ("k8s_events_doc", DATA / "platform/k8s-events-yaml-node-kubernetes-17899.yaml"),
]


def _cut(p: Path) -> bytes:
    data = need(p).read_bytes()[:CUT]
    return data[: data.rfind(b"\n") + 1]


def _swept(tmp: Path, fmt: str, src: Path) -> Path:
    """A folder holding ``src`` swept (with the nginx.conf beside an access log, which gives its layout)."""
    d = tmp / f"{fmt}-{src.parent.parent.name}-{src.parent.name}-{src.name}".replace(".", "_")
    d.mkdir(parents=True)
    if fmt == "nginx_access" and (src.parent / "nginx.conf").exists():
        shutil.copy(src.parent / "nginx.conf", d)
    if (fmt, src) in DOCS:
        data = need(src).read_bytes()
        for k in range(EVERY):
            (d / f"{k}-{src.name}").write_bytes(
                sweep_document(data, EVERY, k, fmt != "prometheus_query_range")
            )
    else:
        (d / src.name).write_bytes(sweep_numbers(_cut(src)))
    return d


def _beyond(out: Path) -> list[str]:
    """Every numeric column of every table holding a number no field can: NaN, an infinity, past 2**53
    (Prometheus' own NaN and infinities are sample values: only finite ones past 2**53 count there)."""
    bad = []
    for p in sorted(out.glob("*.parquet")):
        df = pl.read_parquet(p)
        for c, t in df.schema.items():
            if not t.is_numeric():
                continue
            s = df[c].cast(pl.Float64)
            if p.stem == "server_metrics" and c == "value":
                n = int((s.is_finite() & (s.abs() > MAX_ABS)).sum())
            else:  # NaN is no number <= anything
                n = int((s.is_not_null() & ~(s.abs() <= MAX_ABS)).sum())
            if n:
                bad.append(f"{p.stem}.{c}: {n}")
    return bad


@pytest.mark.parametrize(("fmt", "src"), LINES + DOCS, ids=lambda v: v if isinstance(v, str) else v.name)
def test_every_number_of_every_format(tmp_path, fmt, src):
    d = _swept(tmp_path, fmt, src)
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    files = res.files.filter(pl.col("format") != "nginx_conf")
    said = [m for ms in files["messages"].to_list() for m in ms or []]
    assert not [m for m in said if m.startswith("parser ")], said  # no parser stopped: the rest is read
    if (fmt, src) not in DOCS:  # a line format is still recognised, and reads its own lines as before
        (row,) = files.iter_rows(named=True)
        assert row["format"] == fmt and row["lines_parsed"] > 0
    else:  # a damaged number may cost a document its signature or its JSON, never a parse that stops
        assert (files["format"] == fmt).any()
    assert (files["lines_parsed"] + files["lines_unrecognized"] == files["lines_total"]).all()
    assert not _beyond(tmp_path / "out"), _beyond(tmp_path / "out")


def test_the_values_set_null_are_counted(tmp_path):
    """The client JSONL sweep: every value set null is counted in its file's message, with an example."""
    d = _swept(tmp_path, "client_jsonl", LAB / "spike/client-spike.jsonl")
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    (msgs,) = res.files["messages"].to_list()
    (said,) = [m for m in msgs if "out of range" in m]
    n = int(re.match(r"([\d,]+) value", said).group(1).replace(",", ""))
    assert n > 100 and "set null" in said and "e.g. " in said


# -------------------------------------------------------------------------------- the issue's own cases

METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_preemptions_total")
COLUMN = {METRICS[0]: "running", METRICS[1]: "waiting", METRICS[2]: "preemptions"}


def _query_range(src: Path, value: str, k: int) -> tuple[bytes, float]:
    """The answer with its ``k``-th sample's value set to ``value``; the sample's time."""
    text = need(src).read_text()
    hits = list(re.finditer(r'\[([0-9.]+),"([^"]*)"\]', text))
    m = hits[k]
    return (text[: m.start(2)] + value + text[m.end(2) :]).encode(), float(m.group(1))


def _dump(src: Path, value: str, k: int) -> tuple[bytes, float]:
    """The promtool dump with the ``k``-th sample of each of METRICS set to ``value``; the last one's time (s)."""
    lines = need(src).read_text().split("\n")
    seen: dict[str, int] = {}
    t = 0.0
    for i, ln in enumerate(lines):
        name = next((n for n in METRICS if ln.startswith(f'{{__name__="{n}"')), None)
        if name is None:
            continue
        seen[name] = seen.get(name, -1) + 1
        if seen[name] == k:
            labels, _, ts = ln.rsplit(" ", 2)
            lines[i], t = f"{labels} {value} {ts}", int(ts) / 1000
    return "\n".join(lines).encode(), t


@pytest.mark.parametrize("value", ["1e19", "-1e19", "1e308"])
@pytest.mark.parametrize("run", ["spike", "v0-ladder"])
def test_a_prometheus_sample_past_int64(tmp_path, run, value):
    """The issue's case, in both Prometheus formats: the run goes on, the sample is null and counted, and every
    other sample still becomes its stats row."""
    base = LAB / run
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(need(base / "vllm-server.log"), d)
    prom = base / "prometheus"
    name = next(p.name for p in prom.glob("query_range-*num_requests_running.json"))
    data, t_qr = _query_range(prom / name, value, 7)
    (d / name).write_bytes(data)
    data, t_dump = _dump(prom / "tsdb-dump.txt", value, 11)
    (d / "tsdb-dump.txt").write_bytes(data)
    res = ingest(d, tmp_path / "out", AnalyzeOptions())
    msgs = dict(zip(res.files["path"], res.files["messages"], strict=True))
    for f, n in ((name, 1), ("tsdb-dump.txt", 3)):
        (said,) = [m for m in msgs[f] if "out of range" in m]
        assert said.startswith(f"{n} value(s) out of range") and f"value={float(value):g}" in said
    stats = pl.read_parquet(tmp_path / "out" / "server_stats.parquet").filter(
        pl.col("origin") == "prometheus"
    )
    assert stats.height > 50 and not _beyond(tmp_path / "out")
    at = stats.filter((pl.col("ts").dt.epoch("ms") / 1000 - t_dump).abs() < 0.001)
    assert at.height == 1 and at["running"].item() is None and at["waiting"].item() is None
    assert at["preemptions"].item() is None
    others = stats.filter((pl.col("ts").dt.epoch("ms") / 1000 - t_dump).abs() >= 0.001)
    assert others["running"].null_count() < others.height and math.isfinite(t_qr)


def test_analyze_of_every_swept_file_at_once(tmp_path):
    """The whole pipeline (correlation, diagnosis, the report) over every swept file in one folder ends in exit
    0, as ``python -m logscope`` does for a user."""
    root = tmp_path / "in"
    for fmt, src in LINES + DOCS:
        d = _swept(tmp_path / "parts", fmt, src)
        shutil.copytree(d, root / d.name)
    r = cli("analyze", root, "-o", tmp_path / "out", "-q", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "out" / "report.html").is_file()
    assert not _beyond(tmp_path / "out"), _beyond(tmp_path / "out")
