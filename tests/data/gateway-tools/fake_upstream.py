"""Tiny OpenAI-compatible upstream for gateway log recordings (loopback only).

--mode ok: 200 completion after X-Delay seconds (header, default 0.05)
--mode 500 / 429: that status with an OpenAI-style error body
"""
import argparse, json, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--mode", default="ok")
args = ap.parse_args()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            self._send(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
        else:
            self._send(200, {"ok": True})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = {}
        delay = float(self.headers.get("X-Delay") or 0.05)
        time.sleep(delay)
        if args.mode in ("500", "429", "503"):
            code = int(args.mode)
            self._send(code, {"error": {"message": f"fake upstream error {code}", "type": "server_error", "code": code}})
            return
        model = req.get("model", "tiny")
        if "/chat/" in self.path:
            obj = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                   "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello there"},
                   "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
        else:
            obj = {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                   "model": model, "choices": [{"index": 0, "text": "hello there", "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
        self._send(200, obj)


ThreadingHTTPServer(("127.0.0.1", args.port), H).serve_forever()
