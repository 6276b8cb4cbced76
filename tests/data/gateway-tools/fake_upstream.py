"""Tiny OpenAI-compatible upstream for gateway log recordings (loopback only).

--mode ok: 200 completion after X-Delay seconds (header, default 0.05)
--mode 500 / 429: that status with an OpenAI-style error body
A request with "stream": true gets an SSE stream (200, text/event-stream) of --chunks chunks; then, by mode:
--mode ok: [DONE]; --mode stream-cut: the connection is closed with no [DONE] (an upstream that died mid-answer);
--mode stream-error: an OpenAI-style error event (code 503, 'overloaded') and the end of the stream
"""
import argparse, json, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--mode", default="ok")
ap.add_argument("--chunks", type=int, default=3)
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
        if req.get("stream"):
            self._stream(model)
            return
        if "/chat/" in self.path:
            obj = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
                   "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello there"},
                   "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
        else:
            obj = {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                   "model": model, "choices": [{"index": 0, "text": "hello there", "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
        self._send(200, obj)

    def _stream(self, model):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")  # its end is then told from a cut connection
        self.end_headers()
        cid = "chatcmpl-" + uuid.uuid4().hex

        def chunk(data: bytes):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def event(obj):
            chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

        try:
            for i in range(args.chunks):
                event({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                       "choices": [{"index": 0, "delta": {"role": "assistant", "content": f"word{i} "} if i == 0
                                    else {"content": f"word{i} "}, "finish_reason": None}]})
                time.sleep(0.1)
            if args.mode == "stream-cut":
                self.close_connection = True
                self.connection.shutdown(2)  # no [DONE], no last chunk: the answer stops mid-stream
                return
            if args.mode == "stream-error":
                event({"error": {"message": "The model is overloaded. Please try again later.",
                                 "type": "server_error", "code": 503}})
                chunk(b"")
                return
            event({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            chunk(b"data: [DONE]\n\n")
            chunk(b"")
        except OSError:
            pass


ThreadingHTTPServer(("127.0.0.1", args.port), H).serve_forever()
