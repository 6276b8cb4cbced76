"""nginx configuration files found beside the logs (``nginx.conf``).

Not a log: nginx_access reads its ``log_format`` statements to learn the access-log layout.
Recognising the file keeps it out of the "unknown format" list, and accounts its lines as read.

Sample (lab nginx.conf)::

    log_format lab '$time_iso8601 msec=$msec rid=$request_id port=$server_port '
"""

from __future__ import annotations

import polars as pl

from .base import ChunkResult, ParseContext, hit_share

NAME = "nginx_conf"
KIND = "config"
MODE = "lines"
DESCRIPTION = "nginx configuration (its log_format lines tell nginx_access the access-log layout)"
SAMPLES = (
    "worker_processes 1;",
    "events { worker_connections 4096; }",
    "    log_format lab '$time_iso8601 msec=$msec rid=$request_id port=$server_port '",
    "    upstream vllm_edge {",
    "        server 127.0.0.1:8001;            # max_fails=1 fail_timeout=10s (defaults)",
    "        proxy_next_upstream error timeout http_502 http_503 non_idempotent;",
    "    }",
)

# a directive (name then arguments), a closing brace, or a quoted continuation of a multi-line
# log_format; anything else (stray text) stays unrecognised
_DIRECTIVE = r"^\s*(?:[a-z_][a-z0-9_]*(?:\s.*|;.*|\{.*)?|\}.*|'.*|\".*)$"
_STRONG = r"^\s*(?:log_format|proxy_pass|upstream\s+\S+\s*\{|worker_processes|proxy_next_upstream|server_name)\b"
_NOISE = r"^\s*(?:#.*)?$"


def detect(head: list[str]) -> float:
    lines = [h for h in head if h.strip() and not h.lstrip().startswith("#")]
    if len(lines) < 3:
        return 0.0
    strong = hit_share(lines, _STRONG)
    if strong == 0:
        return 0.0
    return 0.9 * hit_share(lines, _DIRECTIVE)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    ok = lines["line"].str.contains(_DIRECTIVE) | lines["line"].str.contains(_NOISE)
    return ChunkResult(recognized=ok)
