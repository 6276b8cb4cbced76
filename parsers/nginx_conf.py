"""nginx configuration files found beside the logs (``nginx.conf``).

Not a log: nginx_access reads its ``log_format`` statements to learn the access-log layout.
Recognising the file keeps it out of the "unknown format" list, and accounts its lines as read.

Sample (lab nginx.conf)::

    log_format lab '$time_iso8601 msec=$msec rid=$request_id port=$server_port '
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ._siblings import read_small
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

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
_STRONG = (
    r"^\s*(?:log_format|proxy_pass|upstream\s+\S+\s*\{|worker_processes|proxy_next_upstream|server_name)\b"
)
_NOISE = r"^\s*(?:#.*)?$"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    lines = nonblank(frame).filter(
        ~pl.col("line").str.contains(r"^[\s\x1c-\x1f]*#")
    )  # str.lstrip()'s white space
    g = per_head(lines, n, k=pl.len(), strong=share(_STRONG), directive=share(_DIRECTIVE))
    ok = (pl.col("k") >= 3) & (pl.col("strong") > 0)
    return g.select(pl.when(ok).then(0.9 * pl.col("directive")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    ok = lines["line"].str.contains(_DIRECTIVE) | lines["line"].str.contains(_NOISE)
    return ChunkResult(recognized=ok)


# ---- the directives that decide what a caller sees (read by diagnose's advice and by compare) ----

# ngx_http_proxy_module defaults
DEFAULTS = {
    "proxy_connect_timeout": "60s", "proxy_send_timeout": "60s", "proxy_read_timeout": "60s",
    "proxy_next_upstream": "error timeout", "proxy_next_upstream_tries": "0", "proxy_next_upstream_timeout": "0",
    "proxy_ignore_client_abort": "off", "proxy_buffering": "on",
}  # fmt: skip
DIRECTIVES = tuple(DEFAULTS)
_COMMENT = re.compile(r"#[^\n]*")
_TOKEN = re.compile(r"""\{|\}|;|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s{};"']+""")
_PORT = re.compile(r"(?:^|:)(\d+)$")
MAX_BYTES = 1 << 20  # a configuration file is small; a bigger one is not read
CONF_GLOBS = ("*.conf", "*.conf.gz", "*.conf.zst", "*.conf.zstd", "*.conf.bz2", "*.conf.xz")


def read_conf(path: Path) -> str | None:
    """A configuration's text (decompressed: a collection gzips it with the logs, and ingest detects it through
    that); None when it cannot be read or holds more than ``MAX_BYTES``."""
    return read_small(path, MAX_BYTES)


def _statements(text: str) -> list[tuple[list[str], list[str]]]:
    """(block path, directive words) of every directive. A block is named by its first words and numbered
    ('server#2'), so that the directives of one server block can be told from another's."""
    out: list[tuple[list[str], list[str]]] = []
    path: list[str] = []
    words: list[str] = []
    n = 0
    for tok in _TOKEN.findall(_COMMENT.sub("", text)):
        if tok == "{":
            n += 1
            path.append(f"{' '.join(words) or '?'}#{n}")
            words = []
        elif tok == "}":
            if path:
                path.pop()
            words = []
        elif tok == ";":
            if words:
                out.append((list(path), words))
            words = []
        else:
            words.append(tok.strip("'\""))
    return out


def _name(block: str) -> str:
    return block.rsplit("#", 1)[0].split(" ", 1)[0]


def listeners(text: str) -> dict[int, dict[str, str]]:
    """Per listening port: the directives that apply to its first location (http, then server, then
    location: a deeper level overrides, as in nginx)."""
    stmts = _statements(text)

    def level(p: list[str], names: tuple[str, ...]) -> bool:
        return tuple(_name(b) for b in p) == names

    http = {w[0]: " ".join(w[1:]) for p, w in stmts if level(p, ("http",)) and w[0] in DIRECTIVES}
    servers: dict[int, dict[str, str]] = {}
    for block in dict.fromkeys(p[1] for p, _ in stmts if len(p) >= 2 and level(p[:2], ("http", "server"))):
        mine = [(p, w) for p, w in stmts if len(p) >= 2 and p[1] == block]
        ports = [
            int(m.group(1))
            for p, w in mine
            if len(p) == 2 and w[0] == "listen" and len(w) > 1
            for m in [_PORT.search(w[1])]
            if m
        ]
        srv = {w[0]: " ".join(w[1:]) for p, w in mine if len(p) == 2 and w[0] in DIRECTIVES}
        loc_path = next((p for p, _ in mine if len(p) == 3 and _name(p[2]) == "location"), None)
        loc = {w[0]: " ".join(w[1:]) for p, w in mine if p == loc_path and w[0] in DIRECTIVES}
        for port in ports:
            servers[port] = {**http, **srv, **loc}
    return servers
