"""The gateway's settings that change what a caller sees: nginx's timeouts, its retries
(``proxy_next_upstream``) and whether a client's disconnect reaches the upstream
(``proxy_ignore_client_abort``), read from the nginx.conf found beside the logs.

Only files the ingest recognised as nginx configuration are read, from the input folder ingest.json names.
A directive the file does not set is nginx's documented default (ngx_http_proxy_module), marked so; a run
whose configuration cannot be read has unknown gateway settings.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from parsers import nginx_conf

from .runs import Run

DEFAULTS, DIRECTIVES, listeners = nginx_conf.DEFAULTS, nginx_conf.DIRECTIVES, nginx_conf.listeners
MAX_BYTES = nginx_conf.MAX_BYTES


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
