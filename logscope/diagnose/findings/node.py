"""Node problems from kubectl's events (issue #40): a node that went NotReady, whose kernel killed a process
outside every container's limit (SystemOOM), or that ran short of memory or disk (the kubelet's pressure
conditions, its reclaim and its evictions); and a pod the kubelet evicted or preempted.

These events are the node's, not the server's: every pod on a NotReady node is lost with it, and the kubelet's
pressure evicts pods by how far each uses beyond its request. The finding names the node, the lines, how many times
kubectl counted each event and when, which is an age unless the folder gives the capture time.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

import polars as pl

from ..claims import facts as observed
from ..platform import Facts
from ..records import Finding
from .record import make_finding

NOT_READY = "NodeNotReady"
# the kubelet's node conditions and what it does under them, by the resource they are about
PRESSURE = {
    "memory": ("NodeHasInsufficientMemory", "memory"),
    "disk": ("NodeHasDiskPressure", "ephemeral-storage"),
    "pid": ("NodeHasInsufficientPID", "pids"),
}
DISK_GC = ("FreeDiskSpaceFailed", "ImageGCFailed")  # the kubelet could not free image space
# an eviction's message names the resource the node ran short of: 'The node was low on resource: memory.'
EVICTED_BY = {
    "memory": (
        "the node ran short of memory and the kubelet evicted the pod using the most beyond its request: the node's "
        "pressure, not the container's limit (that is OOMKilled) and not the server's device memory",
        "Set the server pod's memory request to its peak resident memory (requests = limits makes it Guaranteed, "
        "evicted last), and kubectl describe node of its node (MemoryPressure, allocatable) into the folder",
    ),
    "ephemeral-storage": (
        "the node's disk ran short (ephemeral-storage: images, container layers, logs, emptyDir) and the kubelet "
        "evicted the pod using the most beyond its request: not memory, not the server's load; a server that "
        "downloads its model into the container's layer or an emptyDir is the first one evicted",
        "Put the model cache (HF_HOME) on a persistent volume, give the pod an ephemeral-storage request, and "
        "kubectl describe node of its node (DiskPressure, the image filesystem) into the folder",
    ),
}
PREEMPTED = (
    "the kubelet preempted the pod to admit a critical pod (system-node-critical or system-cluster-critical: a "
    "DaemonSet such as the GPU device plugin, a log or metrics agent) that did not fit beside it on the node: the "
    "node's capacity, not the server",
    "Leave room on the node for its critical DaemonSets (kubectl describe node: Allocated resources), or give the "
    "server's pods a PriorityClass and requests that fit beside them",
)


def _first(g: pl.DataFrame) -> datetime | None:
    """The earliest time of these events (None when kubectl wrote only ages)."""
    t = g["ts"].drop_nulls()
    return cast(datetime, t.min()) if t.len() else None


def _n(g: pl.DataFrame) -> int:
    return int(g["count"].fill_null(1).sum()) if g.height else 0


def _at(r: dict) -> str:
    """When kubectl saw the event: its time where the folder anchored the age, else the age itself."""
    if r["ts"] is not None:
        return f"at {r['ts']:%H:%M:%S} ({r['ts_basis']})"
    if r["age_s"] is not None:
        return f"{r['age_s']:.0f} s before the capture"
    return "time unknown"


def _lines(g: pl.DataFrame, k: int = 4) -> list[str]:
    return [
        f"{r['source']} line {r['line_no']}: {r['reason']}"
        + (f" (×{r['count']})" if r["count"] else "")
        + f", {_at(r)}: {(r['message'] or '').strip()[:160]}"
        for r in g.head(k).iter_rows(named=True)
    ]


def _node_of(ev: pl.DataFrame) -> pl.DataFrame:
    """Every event of a node-condition file carries its node: the one its rows name (a describe node's Events are
    all about one node, so its rows that do not name it take the one the others name)."""
    named = ev.group_by("source").agg(pl.col("host").drop_nulls().mode().first().alias("_node"))
    return ev.join(named, on="source", how="left").with_columns(pl.coalesce("host", "_node").alias("node"))


def build(facts: Facts) -> list[Finding]:
    ev = facts.events.filter((pl.col("layer") == "kubernetes") & (pl.col("kind") == "event"))
    if not ev.height:
        return []
    ev = _node_of(ev).sort("source", "line_no")
    return _not_ready(ev) + _pressure(ev) + _evicted(ev)


def _not_ready(ev: pl.DataFrame) -> list[Finding]:
    """A node that went NotReady or whose kernel OOM-killed a process outside the containers (SystemOOM), by node:
    one finding each, the two together when the node shows both."""
    out: list[Finding] = []
    bad = ev.filter(pl.col("reason").is_in([NOT_READY, "SystemOOM"]))
    for (node,), b in bad.group_by("node", maintain_order=True):
        g, oom = b.filter(pl.col("reason") == NOT_READY), b.filter(pl.col("reason") == "SystemOOM")
        here = ev.filter(
            pl.col("node").eq_missing(node) & pl.col("source").is_in(b["source"].unique().to_list())
        )
        restart = here.filter(
            (pl.col("reason") == "Rebooted")
            | ((pl.col("reason") == "Starting") & pl.col("message").str.contains("kubelet"))
        )
        name = node or "(unnamed)"
        parts = [f"NotReady ({_n(g)}×)"] if g.height else []
        parts += (
            [f"its kernel's OOM killer outside the containers (SystemOOM {_n(oom)}×)"] if oom.height else []
        )
        causes = []
        if g.height:
            causes.append(
                "the node: its kubelet stopped posting the node's status (the kubelet or its runtime died, the node ran "
                "out of memory, rebooted or lost its network); every pod on it, the server's included, is lost or "
                "restarted with it: not the server's load"
            )
        if oom.height:
            causes.append(
                "SystemOOM is the node's kernel killing a process outside every container's limit: the node's memory "
                "was overcommitted (pods without memory limits, or system daemons)"
            )
        if restart.height:
            causes.append(f"the kubelet started on it ({_lines(restart, 1)[0]}): a kubelet or node restart")
        # a NotReady node takes every pod on it down, the server's included: as severe as a kill
        out.append(make_finding("critical" if g.height else "high", f"Node {name}: " + ", with ".join(parts), f"Kubernetes reports node {name} " + " and ".join(parts),
                      "; ".join(_lines(b.sort("line_no"))), "; ".join(causes),
                      f"kubectl describe node {name} (its Conditions with their LastTransitionTime) and the node's "
                      "kernel log for the same minutes (journalctl -k: the OOM killer's lines), into the folder; if the "
                      "server's pod ran on this node, its restart is the node's, not a fault of its own",
                      start=b["ts"].min(), end=b["ts"].max(), kind="platform",
                      facts=observed("kubectl", node=node, not_ready=_n(g), system_oom=_n(oom), first=_first(b))))  # fmt: skip
    return out


def _pressure(ev: pl.DataFrame) -> list[Finding]:
    """A node condition of pressure (NodeHasDiskPressure, NodeHasInsufficientMemory), the kubelet's reclaim
    (EvictionThresholdMet 'Attempting to reclaim memory') and its failed image collection, by node and resource."""
    out: list[Finding] = []
    reclaim = pl.col("message").str.extract(r"Attempting to reclaim (\S+)", 1)
    for what, (cond, res) in PRESSURE.items():
        cond_ev = ev.filter(pl.col("reason") == cond)
        rec = ev.filter((pl.col("reason") == "EvictionThresholdMet") & (reclaim == res))
        gc = ev.filter(pl.col("reason").is_in(DISK_GC)) if what == "disk" else ev.clear()
        allv = pl.concat([cond_ev, rec, gc]).sort("source", "line_no")
        for (node,), g in allv.group_by("node", maintain_order=True):
            c, r = g.filter(pl.col("reason") == cond), g.filter(pl.col("reason") == "EvictionThresholdMet")
            if not (c.height or r.height):
                continue  # a failed image collection alone is not pressure
            name = node or "(unnamed)"
            bits = [f"{cond} {_n(c)}×"] if c.height else []
            bits += [f"the kubelet reclaiming {res} {_n(r)}×"] if r.height else []
            title = f"Node {name} under {what} pressure ({', '.join(bits)})"
            cause = (
                f"the node ran short of {res}: under pressure the kubelet reclaims it and evicts pods, the one using "
                f"the most beyond its request first; the node's, not the server's load"
            )
            if what == "disk":
                cause += ": images, container layers, logs and emptyDir volumes share the node's disk"
            out.append(make_finding("high" if r.height else "medium", title, f"the kubelet reports {what} pressure on node {name}",
                          "; ".join(_lines(g)), cause,
                          f"kubectl describe node {name} (Conditions, Allocated resources) and the evicted pods' describe, into the "
                          f"folder; give the server's pod a {res} request at its real use so that it is not evicted first",
                          start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                          facts=observed("kubectl", node=node, resource=res, condition=_n(c), reclaim=_n(r), first=_first(g))))  # fmt: skip
    return out


def _evicted(ev: pl.DataFrame) -> list[Finding]:
    """Pods the kubelet evicted (its message names the resource) or preempted for a critical pod."""
    gone = ev.filter(pl.col("reason").is_in(["Evicted", "Preempting"]))
    res = pl.col("message").str.extract(r"low on resource: ([\w-]+)", 1)
    out: list[Finding] = []
    for (reason, r_), g in gone.with_columns(res.alias("_res")).group_by(
        "reason", "_res", maintain_order=True
    ):
        r = g.row(0, named=True)
        pod = f"pod {r['pod']}" + (f" on node {r['host']}" if r.get("host") else "") if r.get("pod") else ""
        evd = f"{r['source']} line {r['line_no']}: {r['message'][:300]}" + (f" ({pod})" if pod else "")
        cause, advice = (
            PREEMPTED
            if reason == "Preempting"
            else EVICTED_BY.get(
                r_ or "",
                (
                    f"the node ran short of {r_ or 'a resource its message does not name'} and the kubelet evicted the pod",
                    "kubectl describe node of the pod's node (its conditions and allocatable resources), into the folder",
                ),
            )
        )
        out.append(make_finding("high", f"{reason} ({_n(g)}×): {r['message'][:120].rstrip('.')}", f"Kubernetes reports {reason}",
                      evd, cause, advice, start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("kubectl", reason=reason, resource=r_, events=_n(g), first=_first(g))))  # fmt: skip
    return out
