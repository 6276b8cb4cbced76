"""A tiny OpenAI-compatible test server (stdlib only) used to produce the real client outputs here.

It is a test server, not a log format. Behaviour per request, chosen by the request counter so runs
are repeatable: ``--fail-every N`` answers every Nth request with 502, ``--slow-every N`` sleeps
``--slow-s`` before answering every Nth (to make clients time out), ``--drop-every N`` closes the
connection without an answer. Streams SSE chunks when the body says ``"stream": true``.
Loopback only; it stops by itself after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_COUNTER = itertools.count(1)
_LOCK = threading.Lock()
ARGS = argparse.Namespace(fail_every=0, slow_every=0, slow_s=0.0, drop_every=0, tokens=8, token_delay=0.005)


def _next() -> int:
    with _LOCK:
        return next(_COUNTER)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep stderr quiet
        pass

    def _json(self, code: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "tiny", "object": "model", "created": 0,
                                                         "owned_by": "test", "root": "tiny"}]})
        elif self.path.startswith("/health"):
            self._json(200, {})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self):  # noqa: N802
        n = _next()
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        a = ARGS
        if a.drop_every and n % a.drop_every == 0:
            self.close_connection = True
            self.connection.close()
            return
        if a.slow_every and n % a.slow_every == 0:
            time.sleep(a.slow_s)
        if a.fail_every and n % a.fail_every == 0:
            self._json(502, {"error": {"message": "bad gateway (test server)", "type": "server_error"}})
            return
        chat = "chat" in self.path
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or a.tokens)
        ntok = min(max_tokens, a.tokens)
        prompt_tokens = 5
        rid = self.headers.get("X-Request-Id") or f"fake-{n}"
        obj = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": ntok, "total_tokens": prompt_tokens + ntok}
        if not body.get("stream"):
            time.sleep(a.token_delay * ntok)
            choice = ({"index": 0, "message": {"role": "assistant", "content": " tok" * ntok}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": " tok" * ntok, "finish_reason": "length"})
            self._json(200, {"id": rid, "object": obj, "created": int(time.time()), "model": body.get("model", "tiny"),
                             "choices": [choice], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for i in range(ntok):
            time.sleep(a.token_delay)
            delta = ({"index": 0, "delta": {"content": " tok"} if i else {"role": "assistant", "content": " tok"},
                      "finish_reason": None} if chat else {"index": 0, "text": " tok", "finish_reason": None})
            chunk = {"id": rid, "object": obj + (".chunk" if chat else ""), "created": int(time.time()),
                     "model": body.get("model", "tiny"), "choices": [delta]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        last = {"id": rid, "object": obj + (".chunk" if chat else ""), "created": int(time.time()),
                "model": body.get("model", "tiny"), "choices": [], "usage": usage}
        self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that hung up mid-stream is expected here
        pass


def serve(port: int = 0) -> ThreadingHTTPServer:
    """Start on 127.0.0.1 in a daemon thread; returns the server (``server.server_address[1]`` is the port)."""
    srv = _Server(("127.0.0.1", port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=18731)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--slow-every", type=int, default=0)
    p.add_argument("--slow-s", type=float, default=0.0)
    p.add_argument("--drop-every", type=int, default=0)
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--token-delay", type=float, default=0.005)
    p.add_argument("--max-seconds", type=float, default=300)
    args = p.parse_args()
    for k, v in vars(args).items():
        setattr(ARGS, k, v)
    srv = serve(args.port)
    try:
        time.sleep(args.max_seconds)
    finally:
        srv.shutdown()


if __name__ == "__main__":
    main()
