"""A metrics target tied to no server log: its episode beside a log replica's, not a second incident.

When a Prometheus target cannot be tied to a server log (``ingest.metric_stats.map_replicas`` and
``ingest.metric_twins`` say why in ingest.json's notes), its samples are still a server's: their episodes are kept.
But where one of its episodes coincides in time and signal with an episode of exactly one log replica (the same
family of signal: KV pressure is its KV usage or its preemptions; overlapping in time), the report told one incident
twice (traced-2r-kill without its Prometheus dump: "Sustained KV pressure" on vllm-server-a 03:27:53–03:30:17 and on
the target metrics-a.prom 03:28:24–03:30:16). That episode is then evidence beside the log replica's, saying the
target could not be tied and why; one that coincides with no log replica's, or with several, stays its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from ..ingest.metric_stats import _ADDRESS, UNTIED
from .records import Episode

FAMILY = {"preemptions": "kv", "kv_pressure": "kv"}  # signals that tell one resource running out


def reasons(out: Path) -> dict[str, str]:
    """target -> why it was tied to no server log (ingest.json's notes)."""
    try:
        notes = json.loads((Path(out) / "ingest.json").read_text(encoding="utf-8")).get("notes") or []
    except (OSError, ValueError):
        return {}
    head, tail = UNTIED.split("{}")
    out_: dict[str, str] = {}
    for n in notes:
        if isinstance(n, str) and n.startswith(head) and tail in n:
            target, why = n[len(head) :].split(tail, 1)
            out_[target] = why
    return out_


def fold(
    eps: list[Episode], targets: frozenset[str], why: dict[str, str], stats: pl.DataFrame
) -> list[Episode]:
    """``eps`` without the untied targets' episodes that stand beside one log replica's; each of those is kept in
    that episode's ``details.untied_beside`` (target, signal, start, end, count, peak, why untied). Only a target
    that could be that replica's server: one with no address (an address no log names is another server), beside
    a replica no target was tied to (``stats``: one that has one had its counters compared, and differed)."""
    if not targets:
        return eps
    scraped = set()
    if stats.height and {"replica", "origin"} <= set(stats.columns):
        scraped = set(
            stats.filter(pl.col("origin") == "prometheus")["replica"].drop_nulls().unique().to_list()
        )
    logs = [
        e for e in eps if e.get("replica") and e["replica"] not in targets | scraped and e["class"] != "crash"
    ]
    keep = []
    for e in eps:
        mine = e.get("replica") in targets and not _ADDRESS.search(e["replica"])
        host = _beside(e, logs) if mine else None
        if host is None:
            keep.append(e)
            continue
        if not isinstance(host.get("details"), dict):
            host["details"] = {}
        host["details"].setdefault("untied_beside", []).append(
            {
                "target": e["replica"],
                "signal": e["signal"],
                "start": e["start"],
                "end": e["end"],
                "count": e.get("count"),
                "peak": e.get("peak"),
                "why_untied": why.get(e["replica"], "no server log was tied to it"),
            }
        )
    return keep


def _beside(e: Episode, logs: list[Episode]) -> Episode | None:
    """The one log replica's episode of the same family that overlaps ``e`` the longest, None when none does or
    when episodes of several log replicas do (which server it was cannot be told)."""
    fam = FAMILY.get(e["signal"], e["signal"])
    hits = [
        lg
        for lg in logs
        if FAMILY.get(lg["signal"], lg["signal"]) == fam
        and lg["start"] <= e["end"]
        and e["start"] <= lg["end"]
    ]
    if len({h["replica"] for h in hits}) != 1:
        return None
    return max(hits, key=lambda h: min(h["end"], e["end"]) - max(h["start"], e["start"]))


def evidence(f, eps: list[Episode]) -> None:
    """Say, in the finding of an episode that has untied targets' episodes beside it, what they showed and why
    they could not be tied."""
    ep = next((e for e in eps if e.get("episode_id") == f.episode_id), None) if f.episode_id else None
    beside = ((ep.get("details") if ep else None) or {}).get("untied_beside") or []
    if not beside:
        return
    by: dict[str, list[dict]] = {}
    for b in beside:
        by.setdefault(b["target"], []).append(b)
    said = "; ".join(
        f"the metrics target {t} showed "
        + " and ".join(f"{_what(b)} {b['start']:%H:%M:%S}–{b['end']:%H:%M:%S}" for b in bs)
        + f", the same incident seen from its scrapes (not tied to this log: {bs[0]['why_untied']})"
        for t, bs in by.items()
    )
    f.evidence = f"{f.evidence}; beside it, {said}" if f.evidence else f"Beside it, {said}"


def _what(b: dict) -> str:
    if b["signal"] == "preemptions" and b.get("count") is not None:
        return f"{int(b['count']):,} preemptions"
    return b["signal"].replace("_", " ")
