"""The gateway's settings that change what a caller sees: nginx's timeouts, its retries
(``proxy_next_upstream``) and whether a client's disconnect reaches the upstream
(``proxy_ignore_client_abort``), read from the nginx.conf found beside the logs.

Only files the ingest recognised as nginx configuration are read, from the input folder ingest.json names.
A directive the file does not set is nginx's documented default (ngx_http_proxy_module), marked so; a run
whose configuration cannot be read has unknown gateway settings.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .runs import Run

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


def _statements(text: str) -> list[tuple[list[str], list[str]]]:
    """(block path, directive words) of every directive. A block is named by its first words and numbered
    ('server#2'), so that the directives of one server block can be told from another's."""
    out, path, words, n = [], [], [], 0
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
        ports = [int(m.group(1)) for p, w in mine if len(p) == 2 and w[0] == "listen" and len(w) > 1
                 for m in [_PORT.search(w[1])] if m]
        srv = {w[0]: " ".join(w[1:]) for p, w in mine if len(p) == 2 and w[0] in DIRECTIVES}
        loc_path = next((p for p, _ in mine if len(p) == 3 and _name(p[2]) == "location"), None)
        loc = {w[0]: " ".join(w[1:]) for p, w in mine if p == loc_path and w[0] in DIRECTIVES}
        for port in ports:
            servers[port] = {**http, **srv, **loc}
    return servers


def settings(run: Run) -> tuple[dict, dict, list[str]]:
    """(settings, sources, notes) of the listener(s) the run's traffic went through."""
    files = run.table("files")
    confs = files.filter(pl.col("format") == "nginx_conf")["path"].to_list() if files.height else []
    if not confs:
        return {}, {}, []
    root = run.input_root()
    if root is None:
        return {}, {}, ["the nginx configuration was seen at analysis time, but its input folder is gone: the "
                        "gateway's settings are unknown"]
    servers: dict[int, dict[str, str]] = {}
    for rel in sorted(confs):
        p = Path(root) / rel if Path(root).is_dir() else Path(root)
        try:
            if p.stat().st_size <= MAX_BYTES:
                servers.update(listeners(p.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    if not servers:
        return {}, {}, ["no listener found in the nginx configuration"]
    ga = run.table("gateway_attempts")
    used = sorted({int(x) for x in ga["port"].drop_nulls().unique().to_list()}) if ga.height else []
    used = [p for p in used if p in servers] or sorted(servers)
    vals: dict = {}
    src: dict = {}
    if len(used) == 1:
        vals["gateway_listener"], src["gateway_listener"] = used[0], "access log port= and nginx.conf"
    for port in used:
        pre = "" if len(used) == 1 else f":{port} "
        for d in DIRECTIVES:
            v = servers[port].get(d)
            vals[pre + d] = v if v is not None else DEFAULTS[d]
            src[pre + d] = "nginx.conf" if v is not None else "nginx default (not set in nginx.conf)"
    return vals, src, []
