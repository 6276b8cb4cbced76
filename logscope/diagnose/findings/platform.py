"""Findings from the platform around the engine (issue #40): the kernel's OOM killer, Kubernetes' OOMKilled, probe
kills, crash loops, evictions and scheduling, GPU Xid errors, GPU memory telemetry. Each names its evidence lines and
their files; a kill tied to a server death speaks for that death (``crash_finding``, called by ``crash._crash``).

A CUDA OOM (an exception in vLLM's log), a host OOM (the kernel's or Kubernetes' kill: vLLM prints nothing) and KV
pressure (preemptions: the server stays up) are told apart by what each leaves: the finding says which it was and
why not the others.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from ... import clock
from ..claims import facts as observed
from ..context import Context
from ..platform import Facts, Kill, gib, kill_for
from .record import _f, _t

HOW = {
    "kernel_oom": "the kernel OOM killer",
    "oom_killed": "Kubernetes (OOMKilled: the container's memory limit)",
}
KEY = ["source", "gpu", "uuid"]  # one device (a GPU index repeats on every node)
SERIOUS_XID = {
    48,
    62,
    63,
    64,
    74,
    79,
    92,
    94,
    95,
    119,
    120,
}  # NVIDIA's XID catalog: ECC, fallen off the bus, GSP


def _cuda_oom(ctx: Context, replica: str | None, ts) -> pl.DataFrame:
    ev = ctx.inputs.events
    return ev.filter(
        (pl.col("kind") == "oom")
        & (pl.col("replica").fill_null("") == (replica or ""))
        & (pl.col("ts") >= ts - timedelta(seconds=120))
        & (pl.col("ts") <= ts + timedelta(seconds=60))
    )


def _not_others(ctx: Context, k: Kill) -> tuple[str, str]:
    """(title tail, evidence) telling this host OOM from a CUDA OOM and from KV pressure."""
    has_log = ctx.inputs.events.filter(pl.col("replica").fill_null("") == (k.replica or "")).height > 0
    cuda = _cuda_oom(ctx, k.replica, k.ts) if has_log else None
    pre = ctx.pre.filter(
        (pl.col("ts") >= k.ts - timedelta(seconds=60)) & (pl.col("ts") <= k.ts) & (pl.col("preemptions") > 0)
    ) if ctx.pre.height and "preemptions" in ctx.pre.columns else pl.DataFrame()  # fmt: skip
    kv = (
        f"; {int(pre['preemptions'].sum())} preemption(s) in the minute before: KV pressure, which slows the "
        "server but does not kill it"
        if pre.height
        else "; no preemption in the minute before (no KV pressure)"
    )
    if cuda is None:
        return (
            "",
            "the server's log is not in the folder: a CUDA OOM before the kill cannot be ruled out" + kv,
        )
    if cuda.height:
        return (
            ", after a CUDA OOM in its log",
            f"vLLM's log also holds a device out-of-memory record at {_t(cuda['ts'].min())}" + kv,
        )
    return (
        ", not a CUDA OOM",
        "vLLM's log holds no CUDA out-of-memory error (a device OOM is an exception there)" + kv,
    )


def _budget(cap: dict) -> str:
    parts = []
    if cap.get("kv_memory_gib") is not None:
        parts.append(f"KV cache {cap['kv_memory_gib']:.2f} GiB")
    if cap.get("weights_gib") is not None:
        parts.append(f"weights {cap['weights_gib']:.2f} GiB")
    if not parts:
        return "the engine's memory budget is not in its log (no 'Available KV cache memory' / weights line)"
    return "the engine's own budget from its start-up lines: " + ", ".join(parts)


def crash_finding(ctx: Context, ep: dict, c: dict, when: str, half: str, cap: dict) -> dict | None:
    """The finding of a death the platform explains (a kill by the kernel or Kubernetes), else None."""
    facts: Facts | None = getattr(ctx, "platform", None)
    k = kill_for(facts, ep["replica"], ep["start"])
    if k is None or k.how not in HOW:
        return None
    tail, others = _not_others(ctx, k)
    if k.how == "kernel_oom" and k.constraint == "CONSTRAINT_NONE":
        limit = "the host ran out of memory: no cgroup limit"
    else:
        limit = f"memory limit {gib(k.limit_bytes)}"
    ev = [*k.evidence, f"tied to the server: {k.mapping}", others, _budget(cap)]
    if c.get("message") and k.how not in (c.get("message") or ""):
        ev.append(f"the server's log: {c['message'][:160]}")
    from .crash import _paid

    if cost := _paid(ctx, ep):
        ev.append(cost)
    return _f(
        "critical",
        f"Server killed by {HOW[k.how].split(' (')[0]} at {when} ({limit}){tail}",
        f"{HOW[k.how]} killed pid {k.pid or '?'} ({k.process or 'the server'}) at {clock.hms(k.ts, ms=True)}; "
        "vLLM prints nothing when killed: its log just stops",
        "; ".join(e for e in ev if e),
        "host memory ran out inside the process's memory limit and the kernel sent SIGKILL: not device memory "
        "(a CUDA OOM is an exception in vLLM's log) and not KV-cache pressure (preemptions keep the server up)",
        f"Raise the container's memory limit above the server's peak resident memory with headroom, or lower what "
        f"it holds in host memory (CPU vLLM: VLLM_CPU_KVCACHE_SPACE is host memory; GPU: --swap-space), then "
        f"replay the same load watching the cgroup's memory.peak; if the peak grows with load, lower "
        f"--max-num-seqs{half}",
        ep,
        kind="crash",
    )


def build(ctx: Context) -> list[dict]:
    facts: Facts | None = getattr(ctx, "platform", None)
    if facts is None or not facts.any:
        return []
    deaths = {(d.replica or "", d.ts) for d in ctx.life.deaths}
    out = [_kill(ctx, k) for k in facts.kills if k.ts is None or (k.replica or "", k.ts) not in deaths]
    out += _probes(facts) + _pods(facts) + _scheduling(facts) + _xid(facts) + _gpu(facts)
    return out


def _kill(ctx: Context, k: Kill) -> dict:
    at = (
        f" at {clock.hms(k.ts)}"
        if k.ts
        else " (time unknown: only seconds since boot or an age were written)"
    )
    who = (
        f"process {k.process or '?'} (pid {k.pid})"
        if k.pid
        else (f"container {k.process}" if k.process else "a container")
    )
    if k.how == "kernel_oom" and k.constraint == "CONSTRAINT_NONE":
        why, title = "the host ran out of memory (global OOM: no cgroup limit)", "host out of memory"
    else:
        why, title = (
            f"its memory limit ({gib(k.limit_bytes)}) was reached",
            f"memory limit {gib(k.limit_bytes)}",
        )
    return _f(
        "critical",
        f"{who[0].upper() + who[1:]} killed by {HOW.get(k.how, k.how).split(' (')[0]}{at} ({title})",
        f"{HOW.get(k.how, k.how)} killed {who}{at}: {why}",
        "; ".join([*k.evidence, k.mapping]),
        "host memory, not device memory: a kill leaves no error in the killed program's log",
        "Put the server's log of that time beside this one (to see what it served when killed) and give the "
        "process a memory limit above its peak resident memory with headroom",
        start=k.ts,
        end=k.ts,
        kind="platform",
        facts=observed(
            "platform", killed_by=k.how, at=k.ts, pid=k.pid, process=k.process, limit_bytes=k.limit_bytes
        ),
    )


def _pod_restarts(facts: Facts, pod: str | None) -> str:
    p = facts.pods.filter(pl.col("restarts").is_not_null())
    if pod:
        p = p.filter(pl.col("pod") == pod)
    elif p["pod"].n_unique() != 1:
        return ""
    if not p.height:
        return ""
    r = p.sort("restarts").row(-1, named=True)
    ago = f", the last {r['last_restart_age_s']:.0f} s before the capture" if r["last_restart_age_s"] else ""
    guess = "" if pod else " (the folder's only pod: a guess)"
    return f"pod {r['pod']} restarted {r['restarts']} times{ago}{guess}"


def _probes(facts: Facts) -> list[dict]:
    ev = facts.events.filter(pl.col("probe").is_not_null())
    out = []
    for (_source, probe), g in ev.group_by("source", "probe", maintain_order=True):
        fails = g.filter(pl.col("reason") == "Unhealthy")
        killed = g.filter(pl.col("reason") == "Killing")
        n = int(fails["count"].fill_null(1).sum()) if fails.height else 0
        results = ", ".join(sorted(set(fails["probe_result"].drop_nulls().to_list()))) or "failed"
        pod = next(iter(g["pod"].drop_nulls().to_list()), None)
        restarts = _pod_restarts(facts, pod)
        head = f"{restarts}: " if restarts else ""
        title = f"{head[:1].upper() + head[1:]}{probe} probe {results} ({n}×)" + (
            ", then Killing" if killed.height else ""
        )
        lines = [
            f"{r['source']} line {r['line_no']}: {r['reason']} {r['message'][:200]}"
            for r in g.head(4).iter_rows(named=True)
        ]
        if "timeout" in results:
            advice = (
                f"the {probe} probe timed out {n} times before the kill: a probe that fails under load turns an overload "
                "into a crash. Probe /health (it answers while requests queue) with a timeoutSeconds the saturated server "
                "meets (the kubelet's default is 1 s) and failureThreshold × periodSeconds longer than its longest stall; "
                "replay the load and check the probe's latency"
            )
        elif "HTTP 404" in results:
            advice = f"the {probe} probe's path answers 404: point it at /health, the path the server answers"
        elif "connection refused" in results:
            advice = "nothing listened on the probe's port yet (the model was still loading): add a startupProbe that allows the load time"
        else:
            advice = f"run the {probe} probe's request by hand against the server under the same load"
        sev = "critical" if killed.height else ("high" if probe == "liveness" else "medium")
        out.append(_f(sev, title, f"the kubelet's {probe} probe failed ({results})" + (" and the container was killed" if killed.height else ""),
                      "; ".join(lines + ([restarts] if restarts else [])), "a probe the server did not answer in time, or at that path",
                      advice[0].upper() + advice[1:], start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("platform", probe=probe, failures=n, killings=killed.height, first=g["ts"].min())))  # fmt: skip
    return out


def _pods(facts: Facts) -> list[dict]:
    """Pods whose status says they crash (CrashLoopBackOff, OOMKilled, Error) with no other finding naming them."""
    bad = facts.pods.filter(
        pl.col("status").is_in(["CrashLoopBackOff", "OOMKilled", "Error"])
        | (pl.col("state_reason") == "CrashLoopBackOff")
    )
    named = set(facts.events.filter(pl.col("probe").is_not_null())["pod"].drop_nulls().to_list())
    out = []
    for r in bad.iter_rows(named=True):
        if r["pod"] in named:
            continue
        status = r["status"] or r["state_reason"]
        ago = (
            f" (the last {r['last_restart_age_s']:.0f} s before the capture)"
            if r["last_restart_age_s"]
            else ""
        )
        term = facts.events.filter((pl.col("kind") == "terminated") & pl.col("reason").is_not_null())
        why = (
            ", ".join(f"{t['reason']} (exit {t['exit_code'] or '?'})" for t in term.iter_rows(named=True))
            or "not in the folder"
        )
        out.append(_f("critical" if status == "OOMKilled" else "high",
                      f"Pod {r['pod']}: {status}, restarted {r['restarts']} times{ago}",
                      f"kubectl shows the pod {status}", f"{r['source']} line {r['line_no']}; its last termination: {why}",
                      "OOMKilled: the container's memory limit was reached" if status == "OOMKilled" else "the container exits and is restarted with a back-off",
                      "kubectl describe pod (Last State: its Reason and Exit Code) and kubectl logs --previous of the pod, into the folder",
                      kind="platform", facts=observed("kubectl", pod=r["pod"], status=status, restarts=r["restarts"])))  # fmt: skip
    return out


def _scheduling(facts: Facts) -> list[dict]:
    ev = facts.events.filter(
        pl.col("reason").is_in(["Evicted", "FailedScheduling", "Preempting", "Preempted", "NodeNotReady"])
    )
    out = []
    for (reason,), g in ev.group_by("reason", maintain_order=True):
        r = g.row(0, named=True)
        n = int(g["count"].fill_null(1).sum())
        out.append(_f("high" if reason != "FailedScheduling" else "medium", f"{reason} ({n}×): {r['message'][:120]}",
                      f"Kubernetes reports {reason}", f"{r['source']} line {r['line_no']}: {r['message'][:300]}",
                      "the node or the scheduler, not the server", "kubectl describe node of the pod's node (its conditions and allocatable resources), into the folder",
                      start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("kubectl", reason=reason, events=n, first=g["ts"].min())))  # fmt: skip
    return out


def _xid(facts: Facts) -> list[dict]:
    x = facts.events.filter(pl.col("kind").is_in(["xid", "gpu_lost"]))
    out = []
    for (gpu, code), g in x.group_by("gpu", "xid", maintain_order=True):
        what = f"Xid {code}" if code is not None else "GPU fallen off the bus"
        procs = ", ".join(sorted({f"{p}" for p in g["process"].drop_nulls().to_list()})) or "no process named"
        sev = "critical" if code is None or code in SERIOUS_XID else "high"
        out.append(_f(sev, f"GPU error: {what} on {gpu} ({g.height}×; {procs})", f"the NVIDIA driver reported {what}",
                      "; ".join(f"{t['source']} line {t['line_no']}: {t['message'][:200]}" for t in g.head(3).iter_rows(named=True)),
                      "a GPU fault (NVIDIA's XID catalog names the code's cause), not the server's load",
                      "Look the code up in NVIDIA's XID catalog; run the GPU's diagnostics (dcgmi diag) before serving on it again",
                      start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("kernel_log", gpu=gpu, xid=code, errors=g.height, first=g["ts"].min())))  # fmt: skip
    return out


def _gpu(facts: Facts) -> list[dict]:
    used = facts.gpu.filter(pl.col("name") == "DCGM_FI_DEV_FB_USED")
    if not used.height:
        return []
    free = (
        facts.gpu.filter(pl.col("name") == "DCGM_FI_DEV_FB_FREE")
        .group_by(KEY)
        .agg(pl.col("value").min().alias("free"))
    )
    g = (
        used.group_by(*KEY, "pod")
        .agg(pl.col("value").max().alias("used"), pl.len().alias("n"))
        .join(free, on=KEY, how="left", nulls_equal=True)
    )
    bits = [f"GPU {r['gpu']}{' (pod ' + r['pod'] + ')' if r['pod'] else ''}: up to {r['used']:,.0f} MiB used"
            + (f" of {r['used'] + r['free']:,.0f}" if r["free"] is not None else "") for r in g.sort("gpu").iter_rows(named=True)]  # fmt: skip
    return [_f("low", "GPU memory (DCGM exporter): " + "; ".join(bits[:4]), "the DCGM exporter's framebuffer series",
               f"{used.height} FB_USED sample(s) from {', '.join(sorted(set(used['source'])))}",
               "telemetry: vLLM reserves its device memory at start (gpu_memory_utilization), so a full framebuffer is its budget, not a leak",
               "Keep the exporter's series over the incident's time (query_range) beside the server's log", kind="platform",
               facts=observed("dcgm", samples=used.height, gpus=g.height, used_mib_max=g["used"].max()))]  # fmt: skip
