"""Who killed it, and why: the platform's records (the kernel's OOM killer, Kubernetes' kills and restarts, GPU Xid
errors and telemetry) joined to the servers the logs show.

``load`` reads platform_events, platform_pods and the DCGM exporter's series of server_metrics; ``kills`` lists the
kills the platform shows, each with the server it is tied to and how (``Kill.mapping``: 'pid' when the server's log
names the killed pid, a guess said as one otherwise); ``attach`` gives a death the lifecycle found its cause, or adds
the death the server's log cannot show (a process killed while nothing restarts it: its log just stops).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from .. import clock
from ..resources import scope
from .lifecycle import Death, Lifecycle
from .tables import read

# a kill and the death it explains: the log's last line comes at most this long before the kill (vLLM stamps whole
# seconds; the engine's death is logged by the API server a little after)
BEFORE_S, AFTER_S = 5.0, 60.0
ENGINE_PROCESS = re.compile(r"vllm|VLLM|python|pt_main_thread|EngineCore", re.IGNORECASE)
GIB = 2**30


@dataclass
class Kill:
    """One kill the platform shows."""

    how: str  # kernel_oom | oom_killed | probe
    ts: datetime | None
    replica: str | None
    mapping: str  # how the kill was tied to the replica (or why it was not)
    pid: int | None = None
    process: str | None = None
    limit_bytes: int | None = None
    constraint: str | None = None
    memcg: str | None = None
    exit_code: int | None = None
    evidence: list[str] = field(
        default_factory=list
    )  # 'kernel.log line 12: Memory cgroup out of memory: ...'


@dataclass
class Facts:
    events: pl.DataFrame
    pods: pl.DataFrame
    gpu: pl.DataFrame  # DCGM series: ts, source, replica, name, gpu, pod, value
    kills: list[Kill] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.events.height or self.pods.height or self.gpu.height)


def load(out: Path, rng: scope.Range = scope.ALL) -> Facts:
    ev = read(out, "platform_events")
    if rng:  # an event with no time (an age, seconds since boot) is kept: nothing places it outside the range
        inside = pl.lit(True)
        if rng.since is not None:
            inside = inside & (pl.col("ts") >= rng.since)
        if rng.until is not None:
            inside = inside & (pl.col("ts") <= rng.until)
        ev = ev.filter(pl.col("ts").is_null() | inside)
    m = read(out, "server_metrics", where=pl.col("name").str.starts_with("DCGM_FI_"), rng=rng)
    label = pl.col("labels")
    gpu = m.select(
        "ts",
        "source",
        "replica",
        "name",
        label.str.extract(r"(?:^|,)gpu=([^,]*)", 1).alias("gpu"),
        label.str.extract(r"(?:^|,)UUID=([^,]*)", 1).alias("uuid"),
        pl.coalesce(
            label.str.extract(r"(?:^|,)pod=([^,]+)", 1), label.str.extract(r"exported_pod=([^,]+)", 1)
        ).alias("pod"),
        label.str.extract(r"GPU_I_ID=([^,]*)", 1).alias("mig"),
        "value",
    )
    return Facts(ev, read(out, "platform_pods"), gpu)


def _line(r: dict) -> str:
    return f"{r['source']} line {r['line_no']}: {(r['message'] or '').strip()[:220]}"


def _servers(events: pl.DataFrame) -> dict[str, tuple[set[int], datetime | None, datetime | None]]:
    """Per server replica: the pids its log names, its first and last time."""
    out = {}
    ev = events.filter(pl.col("replica").is_not_null())
    for (rep,), g in ev.group_by("replica"):
        out[rep or ""] = (set(g["pid"].drop_nulls().to_list()), g["ts"].min(), g["ts"].max())
    return out


def _replica_of(pid, process, ts, servers: dict, last_seen: dict) -> tuple[str | None, str]:
    for rep, (pids, _, _) in servers.items():
        if pid is not None and pid in pids:
            return rep, f"pid {pid} is a process of {rep or 'the server'}: its log names it"
    ended = [
        rep
        for rep, (_, lo, hi) in servers.items()
        if ts is not None
        and hi is not None
        and lo is not None
        and lo <= ts
        and hi <= ts + timedelta(seconds=AFTER_S)
        and (last_seen.get(rep) or hi) >= ts - timedelta(seconds=AFTER_S)
    ]
    if len(ended) == 1 and process and ENGINE_PROCESS.search(process):
        return ended[0], (
            f"a guess: pid {pid} ({process}) is no pid {ended[0] or 'the server'}'s log names, but its log ends "
            "at the kill and it is the only server whose log does"
        )
    return None, f"pid {pid} ({process}) is no process of a server log in the folder"


def _kernel_kills(ev: pl.DataFrame, servers: dict, last_seen: dict) -> list[Kill]:
    k = ev.filter(pl.col("layer") == "kernel")
    out = []
    for r in k.filter(pl.col("kind") == "oom_kill").iter_rows(named=True):
        same = k.filter((pl.col("source") == r["source"]) & (pl.col("line_no") <= r["line_no"]))
        near = same.filter(pl.col("line_no") >= r["line_no"] - 80)  # the kill's report: dump_header's lines
        con = near.filter((pl.col("kind") == "oom_constraint") & (pl.col("pid") == r["pid"]))
        use = near.filter(pl.col("kind") == "memcg_usage")
        c = con.row(-1, named=True) if con.height else None
        u = use.row(-1, named=True) if use.height else None
        rep, how = _replica_of(r["pid"], r["process"], r["ts"], servers, last_seen)
        evidence = [_line(x) for x in (u, c, r) if x is not None]
        out.append(
            Kill(
                "kernel_oom",
                r["ts"],
                rep,
                how,
                r["pid"],
                r["process"],
                u["memory_limit_bytes"] if u else None,
                c["constraint"]
                if c
                else ("CONSTRAINT_MEMCG" if "Memory cgroup" in (r["message"] or "") else None),
                c["memcg"] if c else None,
                evidence=evidence,
            )
        )
    return out


def pod_replica(pod: str | None, replicas: list[str]) -> tuple[str | None, str]:
    """The server replica a pod is: its name, a replica named inside the pod's (or the pod's inside it); with one
    server and one pod in the folder, a guess said as one."""
    if not pod:
        return None, "the pod is not named"
    for rep in replicas:
        if rep and (rep == pod or pod in rep or rep in pod):
            return rep, f"pod {pod} is replica {rep} (the names match)"
    if len(replicas) == 1:
        return replicas[
            0
        ], f"a guess: pod {pod} is taken for the folder's only server ({replicas[0] or 'server'})"
    return None, f"pod {pod} matches no server log's replica"


def _k8s_kills(facts: Facts, replicas: list[str]) -> list[Kill]:
    ev, pods = facts.events.filter(pl.col("layer") == "kubernetes"), facts.pods
    out = []
    for r in ev.filter((pl.col("kind") == "terminated") & (pl.col("reason") == "OOMKilled")).iter_rows(
        named=True
    ):
        lim = pods.filter((pl.col("pod") == r["pod"]) if r["pod"] else pl.lit(True))[
            "memory_limit_bytes"
        ].drop_nulls()
        rep, how = pod_replica(r["pod"], replicas)
        out.append(
            Kill("oom_killed", r["finished"], rep, how, limit_bytes=lim[0] if lim.len() else None,
                 exit_code=r["exit_code"], process=r["container"], evidence=[_line(r)])
        )  # fmt: skip
    return out


def kills(facts: Facts, server_events: pl.DataFrame, last_seen: dict | None = None) -> list[Kill]:
    servers = _servers(server_events)
    found = _kernel_kills(facts.events, servers, last_seen or {}) + _k8s_kills(facts, sorted(servers))
    facts.kills = found
    return found


def attach(life: Lifecycle, found: list[Kill]) -> None:
    """A kill tied to a server is the cause of its death near that time: the lifecycle's death takes the kill's
    kind (a silent death becomes 'kernel_oom'); a kill with no death near it is a death the log could not show
    (killed, not restarted: the log just stops)."""
    for k in found:
        if k.replica is None or k.ts is None:
            continue
        near = [
            d
            for d in life.deaths
            if (d.replica or "") == k.replica
            and k.ts - timedelta(seconds=AFTER_S) <= d.ts <= k.ts + timedelta(seconds=AFTER_S)
        ]
        if near:
            d = min(near, key=lambda d: abs((d.ts - k.ts).total_seconds()))
            d.kinds = sorted({*(x for x in d.kinds if x != "silent"), k.how})
            d.notes.append(f"the platform shows the kill: {k.evidence[-1]}")
            continue
        life.deaths.append(
            Death(k.replica, k.ts, [k.how], k.pid, k.evidence[-1] if k.evidence else None, k.ts,
                  notes=[f"killed at {clock.hms(k.ts)} ({k.mapping})"])
        )  # fmt: skip
    life.deaths.sort(key=lambda d: (d.ts, d.replica))


def kill_for(facts: Facts | None, replica: str | None, ts: datetime) -> Kill | None:
    """The kill that explains a death of ``replica`` at ``ts``."""
    if facts is None:
        return None
    near = [
        k
        for k in facts.kills
        if k.ts is not None
        and (k.replica or "") == (replica or "")
        and abs((k.ts - ts).total_seconds()) <= AFTER_S
    ]
    return min(near, key=lambda k: abs((k.ts - ts).total_seconds())) if near else None


def gib(b: int | float | None) -> str:
    if b is None:
        return "unknown"
    return f"{b / GIB:.2f} GiB" if b >= GIB / 4 else f"{b / 2**20:.0f} MiB"
