"""A server whose log stops while the gateway's connections to its address are refused: killed with no word of its
own (a SIGKILL of its process group, its container or node gone) and not started again in the logs.

lifecycle reads a silent death only from the next start (a new banner with no shutdown between); a server that never
came back left none, and its kill read as no death at all (lab traced-ladder-kill: the log stops at 11:15:58, nginx's
181 'connect() failed (111: Connection refused)' to its address follow from 11:15:59; the headline was the ladder's).
The facts a death so read rests on are in its note: the last line, the address, the refused connections.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import polars as pl

from .. import clock
from ..scalars import time_or_none
from .lifecycle import Death, Lifecycle
from .same_server import ADDRESS

REFUSED = "connect_failed"  # nginx_error's kind of 'connect() failed (…) while connecting to upstream'
AFTER_S = 60.0  # the first refusal within this of the log's last line: the refusals are that stop's
STAMP_S = 1.0  # vLLM stamps whole seconds: a refusal this much before the last line is still after it
_HOSTPORT = re.compile(r"^(?:[a-z]+://)?(\[[^\]]+\]|[^/:]+):(\d+)")
_WILDCARD = {"0.0.0.0", "[::]", "::"}


def _hostport(url: str | None) -> tuple[str, str] | None:
    m = _HOSTPORT.match(url or "")
    return (m.group(1), m.group(2)) if m else None


def _same(server: tuple[str, str], upstream: tuple[str, str] | None) -> bool:
    """The gateway's upstream is the server: the same host and port, or the port where the server listens on every
    address (0.0.0.0)."""
    if upstream is None or upstream[1] != server[1]:
        return False
    return server[0] in _WILDCARD or upstream[0] == server[0]


def deaths(life: Lifecycle, events: pl.DataFrame, own: pl.DataFrame, gateway: pl.DataFrame) -> list[Death]:
    """``own``: every time each server wrote a line of its own (``lifecycle.activity``: its stamped lines, not a
    Prometheus scrape of its API server nor a time inferred for an unstamped line), for where each log stops."""
    if not gateway.height or "upstream" not in gateway.columns:
        return []
    refused = gateway.filter((pl.col("kind") == REFUSED) & pl.col("ts").is_not_null())
    if not refused.height:
        return []
    ups = [_hostport(u) for u in refused["upstream"].to_list()]
    ts = refused["ts"].to_list()
    last_of = _last_lines(own)
    out = []
    for start in _last_starts(life):
        rep = start["replica"]
        after = [d for d in life.deaths if d.replica == rep and d.ts >= start["ts"]]
        stopped = [s for s in life.shutdowns if s["replica"] == rep and s["ts"] >= start["ts"]]
        last = last_of.get(rep)
        addr = _address(events, rep, start["ts"])
        if after or stopped or last is None or addr is None:
            continue
        mine = [t for t, u in zip(ts, ups, strict=True) if _same(addr, u)]
        before = [t for t in mine if start["ts"] <= t < last - timedelta(seconds=STAMP_S)]
        later = [t for t in mine if t >= last - timedelta(seconds=STAMP_S)]
        if before or not later or (min(later) - last).total_seconds() > AFTER_S:
            continue  # refused while it served (another cause), or no refusal that follows its stop
        out.append(
            Death(
                rep,
                last,
                ["silent"],
                start["pid"],
                None,
                last,
                notes=[
                    f"the log of pid {start['pid']} stops at {clock.hms(last)} with no shutdown line, and the "
                    f"gateway's connections to {addr[0]}:{addr[1]} are refused from {clock.hms(min(later))} "
                    f"({len(later)} 'connect() failed' line(s) to {clock.hms(max(later))}); no start after it in the logs"
                ],
            )
        )
    return out


def _last_starts(life: Lifecycle) -> list[dict]:
    last: dict[str, dict] = {}
    for s in sorted(life.starts, key=lambda s: s["ts"]):
        last[s["replica"]] = s
    return list(last.values())


def _last_lines(own: pl.DataFrame) -> dict[str, datetime]:
    if not own.height:
        return {}
    g = own.group_by("replica").agg(pl.col("ts").max())
    return {r: t for r, t in g.iter_rows() if time_or_none(t) is not None}


def _address(events: pl.DataFrame, replica: str, since: datetime) -> tuple[str, str] | None:
    """Where the server of this start listens ('Starting vLLM server on http://127.0.0.1:8001')."""
    said = events.filter(
        (pl.col("replica").fill_null("") == replica)
        & (pl.col("kind") == "server_listen")
        & (pl.col("ts") >= since)
    )["message"].to_list()
    for msg in said:
        m = ADDRESS.search(msg or "")
        if m:
            return _hostport(m.group(1))
    return None
