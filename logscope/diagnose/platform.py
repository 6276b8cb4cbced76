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
from ..resources import time_range
from ..scalars import time_or_none
from .lifecycle import Death, Lifecycle
from .tables import read

# a kill and the death it explains: a silent death (the log's last line) comes at most BEFORE_S before the kill; a
# death the server logged comes after it (vLLM notices a dead worker when the kernel has reaped it: seconds later)
BEFORE_S, AFTER_S = 5.0, 60.0
# the API server shutting itself down this soon after its engine's death is that death's end, not a stop
SHUTDOWN_AFTER_S = 10.0
ENGINE_PROCESS = re.compile(r"vllm|VLLM|python|pt_main_thread|EngineCore", re.IGNORECASE)
# process names that say nothing of which process it was (the kernel's comm is the executable's or the title's)
GENERIC_NAMES = {"python", "python3", "vllm", "pt_main_thread", "uvicorn", "sglang", "ray"}
GIB = 2**30
SECOND = timedelta(seconds=1)


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
    attached: bool = False  # the cause of a server death (attach): that death's finding speaks for it
    role: str | None = None  # what the server's log calls the killed pid: 'Worker', 'EngineCore', 'APIServer'
    rss_bytes: int | None = (
        None  # the killed process's resident memory (anon + file + shmem), the kernel's figure
    )
    reaped_ts: datetime | None = None  # the kernel's oom_reaper freed its memory
    # the death the server logged for it, once tied (attach): its time, message and how the two times were tied
    logged_ts: datetime | None = None
    logged: str | None = None
    tie: str | None = None
    silent: bool = (
        False  # the death tied was silent (the server wrote none): ``tie`` says where its log stops
    )
    span: tuple[datetime | None, datetime | None] | None = None  # the tied server log's first and last time
    clock: str = (
        ""  # the clock ts was read on, in words ('the kernel's clock: the time dmesg wrote on the line')
    )


@dataclass
class Server:
    """What a server's log says of its processes: each pid's name ('Worker', from the '(Worker pid=9924)' prefix)
    and its last record, and the log's first and last time."""

    pids: dict[int, tuple[str | None, datetime | None]]
    lo: datetime | None
    hi: datetime | None


@dataclass
class Facts:
    events: pl.DataFrame
    pods: pl.DataFrame
    gpu: pl.DataFrame  # DCGM and nvidia-smi series: ts, source, replica, name, gpu, uuid, pod, mig, value
    kills: list[Kill] = field(default_factory=list)
    out: Path | None = None  # the output folder: what the kill cost is read from its request tables
    # per server replica: its log files' first and last time (files.parquet: every line, not only the events)
    logs: dict[str, tuple[datetime | None, datetime | None]] = field(default_factory=dict)
    faults: list = field(default_factory=list)  # gpu_faults.Fault: a GPU fault tied to a server's death
    death_times: list = field(default_factory=list)  # every death's time (what a fault stays far from)
    hosts: dict = field(default_factory=dict)  # replica -> the hosts its log's NCCL lines name (a pod's name)

    @property
    def any(self) -> bool:
        return bool(self.events.height or self.pods.height or self.gpu.height)


def load(out: Path, rng: time_range.Range = time_range.ALL) -> Facts:
    ev = read(out, "platform_events")
    if rng:  # an event with no time (an age, seconds since boot) is kept: nothing places it outside the range
        inside = pl.lit(True)
        if rng.since is not None:
            inside = inside & (pl.col("ts") >= rng.since)
        if rng.until is not None:
            inside = inside & (pl.col("ts") <= rng.until)
        ev = ev.filter(pl.col("ts").is_null() | inside)
    gpu_series = pl.col("name").str.starts_with("DCGM_FI_") | pl.col("name").str.starts_with("nvidia_smi_")
    m = read(out, "server_metrics", where=gpu_series, rng=rng)
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
    files = read(out, "files", ("kind", "replica", "first_ts", "last_ts")).filter(pl.col("kind") == "server")
    spans = files.group_by(pl.col("replica").fill_null("")).agg(
        pl.col("first_ts").min(), pl.col("last_ts").max()
    )
    logs = {r["replica"]: (r["first_ts"], r["last_ts"]) for r in spans.iter_rows(named=True)}
    return Facts(ev, read(out, "platform_pods"), gpu, out=out, logs=logs)


def _line(r: dict) -> str:
    return f"{r['source']} line {r['line_no']}: {(r['message'] or '').strip()[:220]}"


def servers_of(events: pl.DataFrame) -> dict[str, Server]:
    """Per server replica: the pids its log names (with their names and last records), its first and last time."""
    out = {}
    ev = events.filter(pl.col("replica").is_not_null())
    for (rep,), g in ev.group_by("replica"):
        per = (
            g.filter(pl.col("pid").is_not_null())
            .group_by("pid")
            .agg(pl.col("process").drop_nulls().first(), pl.col("ts").max())
        )
        pids = {r["pid"]: (r["process"], r["ts"]) for r in per.iter_rows(named=True)}
        out[rep or ""] = Server(pids, time_or_none(g["ts"].min()), time_or_none(g["ts"].max()))
    return out


def _names_agree(comm: str | None, role: str | None) -> bool | None:
    """Whether the kernel's name of a process (its comm: 15 characters, 'VLLM::EngineCor') and the log's name of
    the same pid ('EngineCore') agree; None when either says nothing (no name, 'python3', 'vllm')."""
    c = (comm or "").lower().removeprefix("vllm::").strip()
    r = (role or "").lower().strip()
    if not c or not r or c in GENERIC_NAMES or r in GENERIC_NAMES:
        return None
    return c in r or r in c


def _replica_of(
    pid, process, ts, servers: dict[str, Server], last_seen: dict
) -> tuple[str | None, str, str | None]:
    """(replica, how it was tied or why not, the log's name of the pid)."""
    for rep, srv in servers.items():
        if pid is None or pid not in srv.pids:
            continue
        role, last = srv.pids[pid]
        name = rep or "the server"
        if ts is not None and last is not None and last >= _second(ts) + SECOND:
            return (
                None,
                (
                    f"pid {pid} is named in {name}'s log, but that pid still logs at {clock.hms(last)}, after the "
                    "kill: another process with the same number (another host or pid namespace)"
                ),
                None,
            )
        agree = _names_agree(process, role)
        if agree is False:
            return (
                None,
                (
                    f"pid {pid} is {name}'s {role} in its log, but the kernel killed '{process}': another process "
                    "with the same number (another host or pid namespace)"
                ),
                None,
            )
        named = f" (the kernel's name {process} agrees)" if agree else ""
        return rep, f"pid {pid} is {name}'s {role or 'process'}: its log names it{named}", role
    ended = [
        rep
        for rep, srv in servers.items()
        if ts is not None
        and srv.hi is not None
        and srv.lo is not None
        and srv.lo <= ts
        and srv.hi <= ts + timedelta(seconds=AFTER_S)
        and (last_seen.get(rep) or srv.hi) >= ts - timedelta(seconds=AFTER_S)
    ]
    if len(ended) == 1 and process and ENGINE_PROCESS.search(process):
        return (
            ended[0],
            (
                f"a guess: pid {pid} ({process}) is no pid {ended[0] or 'the server'}'s log names, but its log ends "
                "at the kill and it is the only server whose log does"
            ),
            None,
        )
    return None, f"pid {pid} ({process}) is no process of a server log in the folder", None


def _second(ts: datetime) -> datetime:
    return ts.replace(microsecond=0)


def _kernel_kills(ev: pl.DataFrame, servers: dict, last_seen: dict) -> list[Kill]:
    k = ev.filter(pl.col("layer") == "kernel")
    out = []
    for r in k.filter(pl.col("kind") == "oom_kill").iter_rows(named=True):
        same = k.filter((pl.col("source") == r["source"]) & (pl.col("line_no") <= r["line_no"]))
        # the kill's report: from 'X invoked oom-killer' (dump_header) to the kill; 80 lines when it was cut
        heads = same.filter(
            pl.col("kind").is_in(["oom_invoked", "oom_kill"]) & (pl.col("line_no") < r["line_no"])
        )
        first = heads["line_no"].max() if heads.height else None
        lo = (
            first
            if first is not None and heads.filter(pl.col("line_no") == first)["kind"][0] == "oom_invoked"
            else r["line_no"] - 80
        )
        near = same.filter(pl.col("line_no") >= lo)
        con = near.filter((pl.col("kind") == "oom_constraint") & (pl.col("pid") == r["pid"]))
        use = near.filter(pl.col("kind") == "memcg_usage")
        c = con.row(-1, named=True) if con.height else None
        u = use.row(-1, named=True) if use.height else None
        # the reaper's line follows the kill's report (seconds later, other lines between)
        reap = k.filter(
            (pl.col("source") == r["source"])
            & (pl.col("line_no") > r["line_no"])
            & (pl.col("kind") == "oom_reaped")
            & (pl.col("pid") == r["pid"])
        )
        p = reap.row(0, named=True) if reap.height else None
        rep, how, role = _replica_of(r["pid"], r["process"], r["ts"], servers, last_seen)
        evidence = [_line(x) for x in (u, c, r, p) if x is not None]
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
                role=role,
                rss_bytes=r["rss_bytes"],
                reaped_ts=p["ts"] if p else None,
                clock=kernel_clock(r.get("ts_basis")),
            )
        )
    return out


def kernel_clock(basis: str | None) -> str:
    """The clock a kernel line's time was read on, in words (platform_events.ts_basis)."""
    if basis == "written":
        return "the kernel host's clock: the wall time dmesg / journalctl wrote on the line"
    if basis == "boot-anchored":
        return "the kernel host's clock: seconds since boot anchored on the wall times of its syslog lines"
    return "no clock: only the seconds since boot were written"


def pod_replica(
    pod: str | None, replicas: list[str], hosts: dict[str, set[str]] | None = None, guess: bool = True
) -> tuple[str | None, str]:
    """The server replica a pod is: the host its log names (NCCL's lines: a pod's hostname is its name), its name,
    a replica named inside the pod's (or the pod's inside it); with one server in the folder (and ``guess``: one
    pod in question), a guess said as one, unless that server's log names another host."""
    hosts = hosts or {}
    if not pod:  # a container block pasted alone: with one server (naming no host of its own), a guess
        if guess and len(replicas) == 1 and not hosts.get(replicas[0]):
            return replicas[0], (
                "a guess: the kubectl output names no pod (a container block pasted alone); taken for the folder's "
                f"only server ({replicas[0] or 'server'})"
            )
        return None, "the pod is not named"
    for rep in replicas:
        if pod in hosts.get(rep, ()):
            return (
                rep,
                f"pod {pod} is {rep or 'the server'}: its log's NCCL lines name host {pod} (a pod's hostname)",
            )
    for rep in replicas:
        if rep and (rep == pod or pod in rep or rep in pod):
            return rep, f"pod {pod} is replica {rep} (the names match)"
    if len(replicas) == 1:
        if named := hosts.get(replicas[0]):
            return None, (
                f"pod {pod} is not {replicas[0] or 'the server'}: its log's NCCL lines name host "
                f"{', '.join(sorted(named))}, not that pod"
            )
        if guess:
            return replicas[
                0
            ], f"a guess: pod {pod} is taken for the folder's only server ({replicas[0] or 'server'})"
    return None, f"pod {pod} matches no server log's replica" + (
        f" nor a host their logs name ({', '.join(sorted(set().union(*hosts.values())))})" if hosts else ""
    )


def _hosts(events: pl.DataFrame) -> dict[str, set[str]]:
    """Per server replica: the hosts its log's NCCL lines name (server_events kind 'host')."""
    if "kind" not in events.columns:
        return {}
    h = events.filter(pl.col("kind") == "host").select(
        pl.col("replica").fill_null(""),
        pl.col("message").str.extract(r"^([^:\s]+):\d+:\d+ ", 1).alias("host"),
    )
    out: dict[str, set[str]] = {}
    for r in h.drop_nulls("host").iter_rows(named=True):
        out.setdefault(r["replica"], set()).add(r["host"])
    return out


def _k8s_kills(facts: Facts, replicas: list[str]) -> list[Kill]:
    ev, pods = facts.events.filter(pl.col("layer") == "kubernetes"), facts.pods
    out = []
    for r in ev.filter((pl.col("kind") == "terminated") & (pl.col("reason") == "OOMKilled")).iter_rows(
        named=True
    ):
        lim = pods.filter((pl.col("pod") == r["pod"]) if r["pod"] else pl.lit(True))[
            "memory_limit_bytes"
        ].drop_nulls()
        rep, how = pod_replica(r["pod"], replicas, facts.hosts)
        out.append(
            Kill("oom_killed", r["finished"], rep, how, limit_bytes=lim[0] if lim.len() else None,
                 exit_code=r["exit_code"], process=r["container"], evidence=[_line(r)],
                 clock="the node's clock: the Finished time kubectl describe wrote (the kubelet's record)")
        )  # fmt: skip
    return out


def kills(facts: Facts, server_events: pl.DataFrame, last_seen: dict | None = None) -> list[Kill]:
    servers = servers_of(server_events)
    for rep, (
        lo,
        hi,
    ) in facts.logs.items():  # the logs' own first and last lines, where the files table has them
        if rep in servers:
            srv = servers[rep]
            srv.lo = min(x for x in (lo, srv.lo) if x is not None) if (lo or srv.lo) else None
            srv.hi = max(x for x in (hi, srv.hi) if x is not None) if (hi or srv.hi) else None
    facts.hosts = _hosts(server_events)
    found = _kernel_kills(facts.events, servers, last_seen or {}) + _k8s_kills(facts, sorted(servers))
    for k in found:
        if k.replica is not None and k.replica in servers:
            k.span = (servers[k.replica].lo, servers[k.replica].hi)
    facts.kills = found
    return found


def attach(life: Lifecycle, found: list[Kill]) -> None:
    """A kill tied to a server is the cause of its death near that time: the lifecycle's death takes the kill's
    kind (a silent death becomes 'kernel_oom') and the kill's time (the kernel's, to the microsecond: the server
    notices a killed worker seconds later and stamps whole seconds), the server's own record kept in its notes; a
    kill with no death near it is a death the log could not show (killed, not restarted: the log just stops)."""
    for k in found:
        if k.replica is None or k.ts is None:
            continue
        d = _death_of(life, k)
        if d is None and not _inside(k):
            lo, hi = k.span or (None, None)
            k.mapping += (
                f"; but the kill ({clock.hms(k.ts)}) lies outside that log ({clock.hms(lo) if lo else '?'}–"
                f"{clock.hms(hi) if hi else '?'}) and no death of it is near: the kernel's clock and the log's "
                "disagree (a time zone, another host's clock), so no death is added"
            )
            continue
        if d is None:
            life.deaths.append(
                Death(k.replica, k.ts, [k.how], k.pid, k.evidence[-1] if k.evidence else None, k.ts,
                      notes=[f"killed at {clock.hms(k.ts)} ({k.mapping})"])
            )  # fmt: skip
            k.attached = True
            continue
        k.logged_ts, k.logged, k.tie, k.silent = d.ts, d.message, _tie(k, d), d.kinds == ["silent"]
        d.kinds = sorted({*(x for x in d.kinds if x != "silent"), k.how})
        d.notes.append(f"the platform shows the kill: {k.evidence[-1]}; {k.tie}")
        if k.mapping.startswith("a guess: "):  # the headline says so (verdict._headline)
            d.notes.append("a guess: " + k.mapping.removeprefix("a guess: ").split(";")[0])
        _own_shutdown(life, d)
        d.ts, k.attached = k.ts, True
    life.deaths.sort(key=lambda d: (d.ts, d.replica))


def _inside(k: Kill) -> bool:
    """The kill falls while its server's log runs (from its first line to AFTER_S past its last): a server killed
    before its log begins, or long after it ended, is a clock disagreement, not a death."""
    if k.ts is None or k.span is None or k.span[0] is None or k.span[1] is None:
        return True
    return k.span[0] - timedelta(seconds=BEFORE_S) <= k.ts <= k.span[1] + timedelta(seconds=AFTER_S)


def _death_of(life: Lifecycle, k: Kill) -> Death | None:
    """The death of k's server the kill explains: the first the server logged from the kill's second on (vLLM
    stamps whole seconds, cut down: a record stamped in the kill's second may follow it; one stamped before that
    second came before the kill, and the kill did not cause it) up to AFTER_S later; or a silent death (its time is
    the log's last line, written before the kill) up to BEFORE_S before it."""
    at = k.ts
    assert at is not None

    def fits(d: Death) -> bool:
        if (d.replica or "") != k.replica:
            return False
        if d.kinds == ["silent"]:
            return at - timedelta(seconds=BEFORE_S) <= d.ts <= at + timedelta(seconds=AFTER_S)
        return _second(at) <= d.ts <= at + timedelta(seconds=AFTER_S)

    near = [d for d in life.deaths if fits(d)]
    return min(near, key=lambda d: d.ts) if near else None


def _tie(k: Kill, d: Death) -> str:
    """How the kill and the server's own record of the death were tied, in words: the lag between them (a range
    when the server stamps whole seconds) and the kernel's reaping, which is when the server can notice."""
    assert k.ts is not None
    lag = (d.ts - k.ts).total_seconds()
    if d.kinds == ["silent"]:  # the server wrote no death: where its log stops, beside the kill
        return log_ends(d.replica, d.ts, k.ts)
    whole = d.ts.microsecond == 0  # a whole-second stamp: the record was written in [ts, ts + 1 s)
    when = f"{max(lag, 0):.1f}–{lag + 1:.1f} s" if whole else f"{lag:.1f} s"
    reaped = (
        f", and the kernel reaped pid {k.pid} at {clock.hms(k.reaped_ts, ms=True)}"
        if k.reaped_ts is not None
        else ""
    )
    return (
        f"its death record at {clock.hms(d.ts)}{' (whole seconds)' if whole else ''} is the first from the kill's "
        f"second on: {when} after the kill{reaped}"
    )


def log_ends(replica: str | None, last: datetime, kill: datetime) -> str:
    """Where a killed server's log stops, beside the kill: the server writes nothing when killed, so its last line is
    the only record of the death it has (its other processes may write on a little after the kill)."""
    lag = (last - kill).total_seconds()
    when = (
        f"{lag:.1f} s after the kill"
        if lag >= 0.05
        else f"{-lag:.1f} s before the kill"
        if lag <= -0.05
        else "at the kill"
    )
    return f"{replica or 'the server'}'s log logs no death and ends at {clock.hms(last)}, {when}"


def _own_shutdown(life: Lifecycle, d: Death) -> None:
    """The API server shutting itself down right after its engine died (uvicorn's 'Shutting down') is the end of
    that death, not a stop of its own: taken out of the graceful shutdowns, said in the death's notes."""
    own = [
        s
        for s in life.shutdowns
        if (s["replica"] or "") == (d.replica or "")
        and 0 <= (s["ts"] - d.ts).total_seconds() <= SHUTDOWN_AFTER_S
    ]
    for s in own:
        life.shutdowns.remove(s)
        d.notes.append(f"the API server shut down at {clock.hms(s['ts'])}, after the death")


def kill_for(facts: Facts | None, replica: str | None, ts: datetime) -> Kill | None:
    """The kill that explains a death of ``replica`` at ``ts``."""
    if facts is None:
        return None
    near = [
        (gap, k)
        for k in facts.kills
        if k.ts is not None
        and (k.replica or "") == (replica or "")
        and (gap := abs((k.ts - ts).total_seconds())) <= AFTER_S
    ]
    return min(near, key=lambda p: p[0])[1] if near else None


def gib(b: int | float | None) -> str:
    if b is None:
        return "unknown"
    return f"{b / GIB:.2f} GiB" if b >= GIB / 4 else f"{b / 2**20:.0f} MiB"
