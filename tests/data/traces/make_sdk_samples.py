"""Real output of the real OpenTelemetry Python SDK, for the trace parsers' tests (tests/data/traces/INDEX.md).

    pip install opentelemetry-sdk opentelemetry-exporter-zipkin-json opentelemetry-exporter-otlp-proto-http
    python make_sdk_samples.py OUTDIR [--otlp-receiver ../../../../shared/lab/otlp_receiver.py]

Writes, from the same spans (a client's logical request with two HTTP attempts, the first answered 502
and the retry 200, the second sending `traceparent` to a server span carrying vLLM's attribute names):
  OUTDIR/console.txt      the SDK's ConsoleSpanExporter on stdout, redirected (several pretty-printed objects)
  OUTDIR/zipkin-N.json    each body the SDK's Zipkin JSON exporter POSTed (v2: a list of spans; one per
                          service, batched), captured verbatim on 127.0.0.1:9411 by a tiny HTTP server here
  OUTDIR/otlp/…jsonl      with --otlp-receiver: the lab's OTLP/HTTP receiver (real program, port 9411) fed
                          by the SDK's OTLP/HTTP protobuf exporter: the Collector file exporter's JSON lines
Nothing here is written by hand: the attribute values are what this script sets, the formats what the SDK prints.
"""

import argparse
import http.server
import os
import subprocess
import sys
import threading
import time

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--otlp-receiver")
a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
PORT = 9411
bodies: list[bytes] = []


class Capture(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def spans(provider_client, provider_server):
    client = provider_client.get_tracer("lab_client_traced")
    server = provider_server.get_tracer("vllm.tracing")
    with client.start_as_current_span("lab.request", attributes={"lab.rid": "storm-r-00007", "lab.max_retries": 2}):
        with client.start_as_current_span("POST", kind=SpanKind.CLIENT) as s1:
            s1.set_attribute("http.request.method", "POST")
            s1.set_attribute("url.full", "http://127.0.0.1:8081/v1/completions")
            s1.set_attribute("server.address", "127.0.0.1")
            time.sleep(0.02)
            s1.set_attribute("http.response.status_code", 502)
            s1.set_status(Status(StatusCode.ERROR))
        time.sleep(0.05)
        with client.start_as_current_span("POST", kind=SpanKind.CLIENT) as s2:
            s2.set_attribute("http.request.method", "POST")
            s2.set_attribute("url.full", "http://127.0.0.1:8081/v1/completions")
            s2.set_attribute("server.address", "127.0.0.1")
            s2.set_attribute("http.request.resend_count", 1)
            t0 = time.time_ns()
            time.sleep(0.03)
            sp = server.start_span("llm_request", kind=SpanKind.SERVER, start_time=t0)
            sp.set_attribute("gen_ai.request.id", "cmpl-storm-r-00007-0-9f2c1a7e")
            sp.set_attribute("gen_ai.response.model", "tiny")
            sp.set_attribute("gen_ai.request.max_tokens", 64)
            sp.set_attribute("gen_ai.usage.prompt_tokens", 128)
            sp.set_attribute("gen_ai.usage.completion_tokens", 64)
            sp.set_attribute("gen_ai.latency.time_in_queue", 0.004)
            sp.set_attribute("gen_ai.latency.time_to_first_token", 0.011)
            sp.set_attribute("gen_ai.latency.e2e", 0.03)
            sp.add_event("first_token")
            sp.end()
            s2.set_attribute("http.response.status_code", 200)


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Capture)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    from opentelemetry.exporter.zipkin.json import ZipkinExporter

    pc = TracerProvider(resource=Resource.create({"service.name": "lab-client"}))
    ps = TracerProvider(resource=Resource.create({"service.name": "vllm-a"}))
    console = open(os.path.join(a.out, "console.txt"), "w")
    for prov in (pc, ps):
        prov.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console)))
        prov.add_span_processor(BatchSpanProcessor(ZipkinExporter(endpoint=f"http://127.0.0.1:{PORT}/api/v2/spans")))
    spans(pc, ps)
    for prov in (pc, ps):
        prov.shutdown()
    console.close()
    srv.shutdown()
    srv.server_close()
    for i, body in enumerate(bodies, 1):  # one POST per service (its batch), as sent
        with open(os.path.join(a.out, f"zipkin-{i}.json"), "wb") as f:
            f.write(body)
    if a.otlp_receiver:
        otlp(os.path.join(a.out, "otlp"))


def otlp(outdir):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    rec = subprocess.Popen([sys.executable, a.otlp_receiver, outdir, "--port", str(PORT)], stdout=subprocess.PIPE)
    rec.stdout.readline()  # its pid: listening
    try:
        pc = TracerProvider(resource=Resource.create({"service.name": "lab-client"}))
        ps = TracerProvider(resource=Resource.create({"service.name": "vllm-a"}))
        for prov in (pc, ps):
            prov.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{PORT}/v1/traces")))
        spans(pc, ps)
        for prov in (pc, ps):
            prov.shutdown()
    finally:
        rec.terminate()
        rec.wait()


main()
