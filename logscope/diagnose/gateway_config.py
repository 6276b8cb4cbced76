"""The gateway configuration the folder holds, for advice that names a setting only where it is set.

The nginx.conf files ingest recognised (files.parquet, format ``nginx_conf``) are read again from the input
folder ingest.json names (a configuration is small: ``nginx_conf.MAX_BYTES``), each listener's directives
taken as nginx applies them (``parsers.nginx_conf.listeners``), and narrowed to the ports the access log
shows traffic on. ``None``: no configuration in the folder (or its folder is gone), so advice says what to
look for instead of what to change.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from logscope.parsers import nginx_conf

GONE = (
    "the nginx configuration was seen at analysis time, but its input folder is gone: the gateway's settings "
    "are unknown"
)


def servers(
    out: Path, during: tuple | None = None
) -> tuple[dict[int, dict[str, str]], list[int], str | None]:
    """(listeners by port, as the folder's nginx.conf files set them; the ports the gateway's traffic went
    through (``during``: a (lo, hi) time range it is narrowed to, when it had traffic then), else all; why there
    are none, or None when none was in the folder). What diagnose's advice and compare's settings both read."""
    files, meta = out / "files.parquet", out / "ingest.json"
    if not files.exists() or not meta.exists():
        return {}, [], None
    confs = pl.read_parquet(files, columns=["path", "format"]).filter(pl.col("format") == "nginx_conf")[
        "path"
    ]
    if not confs.len():
        return {}, [], None
    root = json.loads(meta.read_text(encoding="utf-8")).get("input")
    if not isinstance(root, str) or not Path(root).exists():
        return {}, [], GONE
    found: dict[int, dict[str, str]] = {}
    for rel in sorted(confs.to_list()):
        p = Path(root) / rel if Path(root).is_dir() else Path(root)
        text = nginx_conf.read_conf(p)  # through its compression, as ingest detected it
        if text is not None:
            found.update(nginx_conf.listeners(text))
    if not found:
        return {}, [], "no listener found in the nginx configuration"
    ports = sorted(found)
    ga = out / "gateway_attempts.parquet"
    if ga.exists():
        at = pl.read_parquet(ga, columns=["port", "ts_start"])
        if during is not None and during[0] is not None and during[1] is not None:
            then = at.filter(pl.col("ts_start").is_between(*during))
            at = then if then["port"].drop_nulls().len() else at
        used = at["port"].drop_nulls().unique().to_list()
        ports = sorted(int(p) for p in used if int(p) in found) or ports
    return found, ports, None


def read(out: Path, during: tuple | None = None) -> dict | None:
    """``{"ports": [...], "listeners": {port: {directive: value}}, "set": {port: {directive, ...}}}`` of the
    listeners the gateway's traffic went through (in ``during``, when given and it had traffic then), or None."""
    found, ports, _ = servers(out, during)
    if not found:
        return None
    return {
        "ports": ports,
        "listeners": {
            p: {d: found[p].get(d, nginx_conf.DEFAULTS[d]) for d in nginx_conf.DIRECTIVES} for p in ports
        },
        "set": {p: sorted(d for d in nginx_conf.DIRECTIVES if d in found[p]) for p in ports},
    }


def retries_post(conf: dict | None) -> list[int] | None:
    """The listeners whose nginx re-sends a POST that reached the upstream (``non_idempotent`` in
    ``proxy_next_upstream``); None when the configuration is not in the folder."""
    if conf is None:
        return None
    return [
        p for p in conf["ports"] if "non_idempotent" in conf["listeners"][p]["proxy_next_upstream"].split()
    ]
