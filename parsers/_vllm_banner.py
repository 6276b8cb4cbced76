"""The address a vLLM server listens on, from its start-up banner: ingest tells two servers' logs in one folder apart
by it (logscope/ingest/replicas.py). A restart or a rotation keeps its address; two servers of one host cannot share one.
"""

from __future__ import annotations

import re

# vllm/entrypoints/utils.py (0.9+: only the arguments given), vllm/entrypoints/openai/api_server.py (older: all)
# (a host of the characters a host holds: the address goes into file messages, and log text is untrusted)
_DICT_ARGS = re.compile(r"non-default args: \{(?P<args>.{0,4000})")
_DICT_HOST = re.compile(r"'host': '(?P<host>[\w.:\[\]-]{1,255})'")
_DICT_PORT = re.compile(r"'port': (?P<port>\d{1,5})\b")
_NS_ARGS = re.compile(r"\bargs: Namespace\((?P<args>.{0,8000})")
_NS_HOST = re.compile(r"\bhost=(?:'(?P<host>[\w.:\[\]-]{1,255})'|None)")
_NS_PORT = re.compile(r"\bport=(?P<port>\d{1,5})\b")
_STARTING = re.compile(
    r"Starting vLLM (?:API )?server(?: \d+)? on https?://(?P<host>[\w.:\[\]-]{1,255}):(?P<port>\d{1,5})"
)
_DEFAULT_PORT = "8000"  # vLLM's --port default
_ANY_HOST = "0.0.0.0"  # --host unset: every interface


def listen_address(lines: list[str]) -> str | None:
    """HOST:PORT the first start-up banner in ``lines`` names (None: no banner seen)."""
    for ln in lines:
        m = _DICT_ARGS.search(ln)
        if m:
            host, port = _DICT_HOST.search(m["args"]), _DICT_PORT.search(m["args"])
            return f"{host['host'] if host else _ANY_HOST}:{port['port'] if port else _DEFAULT_PORT}"
        m = _NS_ARGS.search(ln)
        if m:
            host, port = _NS_HOST.search(m["args"]), _NS_PORT.search(m["args"])
            return f"{(host['host'] or _ANY_HOST) if host else _ANY_HOST}:{port['port'] if port else _DEFAULT_PORT}"
        m = _STARTING.search(ln)
        if m:
            return f"{m['host']}:{m['port']}"
    return None
