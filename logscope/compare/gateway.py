"""The gateway's settings that change what a caller sees: nginx's timeouts, its retries
(``proxy_next_upstream``) and whether a client's disconnect reaches the upstream
(``proxy_ignore_client_abort``), read from the nginx.conf found beside the logs.

Only files the ingest recognised as nginx configuration are read, from the input folder ingest.json names.
A directive the file does not set is nginx's documented default (ngx_http_proxy_module), marked so; a run
whose configuration cannot be read has unknown gateway settings.
"""

from __future__ import annotations

from logscope.parsers import nginx_conf

from ..diagnose import gateway_config
from .runs import Run

DEFAULTS, DIRECTIVES = nginx_conf.DEFAULTS, nginx_conf.DIRECTIVES


def settings(run: Run) -> tuple[dict, dict, list[str]]:
    """(settings, sources, notes) of the listener(s) the run's traffic went through."""
    servers, used, why = gateway_config.servers(run.out)
    if not servers:
        return {}, {}, [why] if why else []
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
