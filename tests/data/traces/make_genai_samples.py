"""Real spans of the two GenAI instrumentations callers use, for the trace parsers' tests (tests/data/traces/INDEX.md).

    pip install opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 openai==1.109.1 \
        opentelemetry-instrumentation-openai-v2==2.4b0 openinference-instrumentation-openai==0.1.66
    python make_genai_samples.py OUTDIR --otlp-receiver ../../../../shared/lab/otlp_receiver.py [--port 18931]

The real openai-python client, instrumented by (1) OpenTelemetry's own `opentelemetry-instrumentation-openai-v2`
(the GenAI semantic conventions' newer names: `gen_ai.usage.input_tokens` / `output_tokens`) and (2) Arize's
`openinference-instrumentation-openai` (OpenInference `llm.*`), calls a small OpenAI-compatible HTTP server run here
on loopback (answers in OpenAI's chat.completion JSON, a stream with a usage chunk, and one 400). Writes:
  OUTDIR/<kind>/console.txt   the SDK's ConsoleSpanExporter on stdout, redirected
  OUTDIR/<kind>/otlp-*.jsonl  the lab's OTLP/HTTP receiver fed by the SDK's OTLP/HTTP exporter (Collector
                              file-exporter lines)
Nothing is written by hand: the span names, kinds and attribute names are the instrumentations', the values what
the server answered (token counts, ids) and what the client asked (model, max_tokens).
"""

import argparse
import http.server
import json
import os
import subprocess
import sys
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--otlp-receiver", required=True)
p.add_argument("--kind", choices=["openai-v2", "openinference"], required=True)
p.add_argument("--port", type=int, default=18931)
a = p.parse_args()
API, OTLP = a.port, a.port + 1
os.makedirs(a.out, exist_ok=True)
n = iter(range(1, 1000))


class Server(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        i = next(n)
        prompt = sum(len(m["content"].split()) for m in req["messages"]) + 7
        out = min(req.get("max_tokens") or 16, 12)
        if req.get("max_tokens", 0) > 4096:
            body = json.dumps(
                {"error": {"message": "max_tokens is too large", "type": "BadRequestError", "code": 400}}
            ).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        rid = f"chatcmpl-{i:04d}a7c3e1f0"
        time.sleep(0.05 * i)
        usage = {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}
        if req.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunks = [{"role": "assistant", "content": ""}] + [{"content": f" w{k}"} for k in range(out)]
            for k, d in enumerate(chunks):
                fin = "length" if k == len(chunks) - 1 else None
                self._chunk({"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
                             "model": req["model"], "choices": [{"index": 0, "delta": d, "finish_reason": fin}]})
                time.sleep(0.01)
            self._chunk({"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": req["model"], "choices": [], "usage": usage})
            self._raw(b"data: [DONE]\n\n")
            self._raw(b"")
            return
        body = json.dumps({
            "id": rid, "object": "chat.completion", "created": int(time.time()), "model": req["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(f"w{k}" for k in range(out))},
                         "finish_reason": "length"}],
            "usage": usage,
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, obj):
        self._raw(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _raw(self, b):
        self.wfile.write(f"{len(b):x}\r\n".encode() + b + b"\r\n")

    def log_message(self, *args):
        pass


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", API), Server)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    rec = subprocess.Popen([sys.executable, a.otlp_receiver, a.out, "--port", str(OTLP)], stdout=subprocess.PIPE)
    try:
        rec.stdout.readline()
        run(srv, rec)
    finally:
        rec.terminate()
        rec.wait()
        srv.shutdown()
        srv.server_close()


def run(srv, rec):
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    console = open(os.path.join(a.out, "console.txt"), "w")
    prov = TracerProvider(resource=Resource.create({"service.name": f"chat-app-{a.kind}"}))
    prov.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console)))
    prov.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{OTLP}/v1/traces")))
    trace.set_tracer_provider(prov)
    if a.kind == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=prov)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=prov)
    import openai

    cl = openai.OpenAI(base_url=f"http://127.0.0.1:{API}/v1", api_key="none", max_retries=0, timeout=30)
    msgs = [{"role": "user", "content": "Summarise the incident in one line"}]
    try:
        cl.chat.completions.create(model="tiny", messages=msgs, max_tokens=8)
        cl.chat.completions.create(model="tiny", messages=msgs * 3, max_tokens=16)
        s = cl.chat.completions.create(
            model="tiny", messages=msgs, max_tokens=12, stream=True, stream_options={"include_usage": True}
        )
        for _ in s:
            pass
        try:
            cl.chat.completions.create(model="tiny", messages=msgs, max_tokens=100000)
        except openai.BadRequestError:
            pass
    finally:
        prov.shutdown()
        console.close()


main()
