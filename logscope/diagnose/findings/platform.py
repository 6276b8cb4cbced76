"""Findings from the platform around the engine (issue #40): the kernel's OOM killer, Kubernetes' OOMKilled, probe
kills, crash loops, evictions and scheduling, GPU Xid errors, GPU memory telemetry. Each names its evidence lines and
their files; a kill tied to a server death speaks for that death (``crash_finding``, called by ``crash.death_finding``).

A CUDA OOM (an exception in vLLM's log), a host OOM (the kernel's or Kubernetes' kill: vLLM prints nothing) and KV
pressure (preemptions: the server stays up) are told apart by what each leaves: the finding says which it was and
why not the others.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

import polars as pl

from ... import clock
from ...scalars import float_or_none, time_or_none, time_value
from ..capacity import startup as capacity_startup
from ..claims import facts as observed
from ..context import Context
from ..gpu_faults import BEFORE_S
from ..platform import Facts, Kill, gib, kill_for, log_ends, pod_replica
from ..records import Episode, Finding
from . import node
from .record import clock_time, make_finding

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


def _not_others(ctx: Context, k: Kill, ts: datetime) -> tuple[str, str]:
    """(title tail, evidence) telling this host OOM (at ``ts``, the kill's time) from a CUDA OOM and from KV
    pressure."""
    has_log = ctx.inputs.events.filter(pl.col("replica").fill_null("") == (k.replica or "")).height > 0
    cuda = _cuda_oom(ctx, k.replica, ts) if has_log else None
    pre = ctx.pre.filter(
        (pl.col("ts") >= ts - timedelta(seconds=60)) & (pl.col("ts") <= ts) & (pl.col("preemptions") > 0)
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
            f"vLLM's log also holds a device out-of-memory record at {clock_time(time_or_none(cuda['ts'].min()))}"
            + kv,
        )
    return (
        ", not a CUDA OOM",
        "vLLM's log holds no CUDA out-of-memory error (a device OOM is an exception there)" + kv,
    )


def _budget(cap: dict, k: Kill, cpu: bool) -> str:
    """The engine's own memory budget beside the limit the kill hit, and what the killed process held."""
    parts = []
    if cap.get("kv_memory_gib") is not None:
        parts.append(
            f"KV cache {cap['kv_memory_gib']:.2f} GiB" + (" (host memory: a CPU engine)" if cpu else "")
        )
    if cap.get("weights_gib") is not None:
        parts.append(f"weights {cap['weights_gib']:.2f} GiB")
    limit = f" of the memory limit of {gib(k.limit_bytes)}" if k.limit_bytes else ""
    held = (
        f"the killed process held {gib(k.rss_bytes)} resident{limit} (anon + file + shmem, the kernel's figures)"
        if k.rss_bytes
        else ""
    )
    if not parts:
        own = "the engine's memory budget is not in its log (no 'Available KV cache memory' / weights line)"
    else:
        own = "the engine's own budget from its start-up lines: " + ", ".join(parts)
    return "; ".join(x for x in (held, own) if x)


def _cpu(ctx: Context, replica: str | None) -> bool:
    """The engine runs on CPUs (vLLM's CPU build: its KV cache is host memory, inside the process's limit)."""
    ev = ctx.inputs.events.filter(pl.col("replica").fill_null("") == (replica or ""))
    text = pl.col("message").fill_null("") + pl.col("detail").fill_null("")
    return ev.filter(text.str.contains("device_config=cpu|GiB for KV cache on node")).height > 0


def _last_state(ctx: Context, replica: str | None, until) -> str:
    """The engine's last stats line at or before ``until`` (its own record of the death): what it was running."""
    st = ctx.inputs.stats
    if not st.height or until is None:
        return ""
    st = st.filter(
        (pl.col("replica").fill_null("") == (replica or ""))
        & (pl.col("ts") <= until)
        & pl.col("running").is_not_null()
    )
    if not st.height:
        return ""
    r = st.sort("ts").row(-1, named=True)
    waiting = f", {r['waiting']:.0f} waiting" if r.get("waiting") is not None else ""
    return f"the engine's last stats line ({clock_time(r['ts'])}, engine clock): {r['running']:.0f} running{waiting}"


def _ends(k: Kill, replica: str | None) -> str:
    """Where the killed server's log ends, beside the kill: the silent death it was tied to (its last line before a
    next start or the gateway's refusals), else the end of the server's whole log."""
    if k.tie and k.silent:
        return k.tie
    hi = k.span[1] if k.span else None
    if hi is None or k.ts is None:
        return "its log just stops"
    return log_ends(replica, hi, k.ts)


def _cost(facts: Facts, k: Kill) -> list[str]:
    """The callers' and the gateway's requests in flight at the kill and how they and the later ones ended."""
    if facts.out is None or k.ts is None:
        return []
    from ..kill_cost import at

    return [layer.words() for layer in at(facts.out, k.ts)]


def _on(k: Kill) -> str:
    return f" (read on {k.clock})" if k.clock else ""


def crash_finding(ctx: Context, ep: Episode, c: dict, when: str, half: str, cap: dict) -> Finding | None:
    """The finding of a death the platform explains (a kill by the kernel or Kubernetes), else None."""
    facts: Facts | None = getattr(ctx, "platform", None)
    k = kill_for(facts, ep["replica"], ep["start"])
    if facts is None or k is None or k.how not in HOW or k.ts is None:  # kill_for keeps timed kills only
        return None
    tail, others = _not_others(ctx, k, k.ts)
    if k.how == "kernel_oom" and k.constraint == "CONSTRAINT_NONE":
        limit = "the host ran out of memory: no cgroup limit"
    else:
        limit = f"memory limit {gib(k.limit_bytes)}"
    down = c.get("downtime_s")
    back = (
        f"back at {clock.hms_after(ep['start'], c['ready'])} ({down:.0f} s down)"
        if down is not None and c.get("ready")
        else "no restart in the logs"
    )
    who = HOW[k.how].split(" (")[0]
    what = (
        f"pid {k.pid} ({k.process or 'the server'}"
        + (f": {ep['replica'] or 'the server'}'s {k.role})" if k.role else ")")
        if k.pid is not None
        else f"container {k.process or '(unnamed)'}"  # kubectl names the container, not its pid
    )
    said = (
        f"; {ep['replica'] or 'the server'} logged the death at {clock_time(k.logged_ts)} (its own clock): {k.logged[:160]}"
        if k.logged_ts is not None and k.logged
        else "; vLLM prints nothing when killed: " + _ends(k, ep["replica"])
    )
    guess = ", tied by a guess" if k.mapping.startswith("a guess") else ""
    cpu = _cpu(ctx, ep["replica"])
    ev = [
        *k.evidence,
        f"tied to the server: {k.mapping}"
        + (f"; {k.tie}" if k.tie and not k.silent else ""),  # else in the symptom
        _budget(cap, k, cpu),
        others,
        _last_state(ctx, ep["replica"], k.logged_ts or k.ts),
        *_cost(facts, k),
    ]
    from .crash import paid

    if cost := paid(ctx, ep):
        ev.append(cost)
    kv = f", here {cap['kv_memory_gib']:.2f} GiB of KV cache" if cpu and cap.get("kv_memory_gib") else ""
    return make_finding(
        "critical",
        f"Server killed by {who} at {clock_time(k.ts)} ({limit}){tail}{guess}; {back}",
        f"{HOW[k.how]} killed {what} at {clock.hms(k.ts, ms=True)}{_on(k)}{said}",
        "; ".join(e for e in ev if e),
        "host memory ran out inside the process's memory limit and the kernel killed the process using the most: "
        "not device memory (a CUDA OOM is an exception in vLLM's log) and not KV-cache pressure (preemptions keep "
        "the server up)",
        f"Raise the memory limit ({gib(k.limit_bytes)}) above the server's peak resident memory with headroom, or "
        f"lower what it holds in host memory (CPU vLLM: VLLM_CPU_KVCACHE_SPACE{kv}; GPU: --swap-space), then replay "
        f"the same load watching the cgroup's peak (memory.peak; cgroup v1: memory.max_usage_in_bytes); if the peak "
        f"grows with load, lower --max-num-seqs{half}",
        ep,
        kind="crash",
    )


def build(ctx: Context) -> list[Finding]:
    facts: Facts | None = getattr(ctx, "platform", None)
    if facts is None or not facts.any:
        return []
    out = [
        _kill(ctx, k) for k in facts.kills if not k.attached
    ]  # an attached kill speaks in its death's finding
    out += (
        _probes(facts)
        + _pods(facts)
        + _scheduling(facts)
        + node.build(facts)
        + _xid(facts)
        + _gpu(facts, ctx)
    )
    return out


def _kill(ctx: Context, k: Kill) -> Finding:
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
    return make_finding(
        "critical",
        f"{who[0].upper() + who[1:]} killed by {HOW.get(k.how, k.how).split(' (')[0]}{at} ({title})",
        f"{HOW.get(k.how, k.how)} killed {who}{at}{_on(k) if k.ts else ''}: {why}",
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


def _probes(facts: Facts) -> list[Finding]:
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
        title = f"{head}{probe} probe {results} ({n}×)" + (", then Killing" if killed.height else "")
        title = title[:1].upper() + title[1:]  # a sentence: the verdict's first line when it leads
        lines = [
            f"{r['source']} line {r['line_no']}: {r['reason']} {r['message'][:200]}"
            for r in g.head(4).iter_rows(named=True)
        ]
        lines.append(_when(killed if killed.height else fails if fails.height else g))
        if "timeout" in results:
            advice = (
                f"the {probe} probe timed out {n} times before the kill: a probe that fails under load turns an overload "
                "into a crash. Probe /health (it answers while requests queue) with a timeoutSeconds the saturated server "
                "meets (the kubelet's default is 1 s) and failureThreshold × periodSeconds longer than its longest stall; "
                "replay the load and check the probe's latency"
            )
        elif "HTTP 404" in results:
            advice = f"the {probe} probe's path answers 404: point it at /health, the path the server answers"
        elif "connection refused" in results and probe == "startup":
            advice = (
                "nothing listened on the port when the startup probe gave up (the server was still loading its model): "
                "make the startupProbe's failureThreshold × periodSeconds longer than the load (vLLM logs its load "
                "and engine start times: 'Model loading took', 'init engine ... took')"
            )
        elif "connection refused" in results:
            advice = "nothing listened on the probe's port yet (the model was still loading): add a startupProbe that allows the load time"
        else:
            advice = f"run the {probe} probe's request by hand against the server under the same load"
        sev = "critical" if killed.height else ("high" if probe == "liveness" else "medium")
        out.append(make_finding(sev, title, f"the kubelet's {probe} probe failed ({results})" + (" and the container was killed" if killed.height else ""),
                      "; ".join(lines + ([restarts] if restarts else [])), "a probe the server did not answer in time, or at that path",
                      advice[0].upper() + advice[1:], start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("platform", probe=probe, failures=n, killings=killed.height, first=time_or_none(g["ts"].min()))))  # fmt: skip
    return out


def _when(g: pl.DataFrame) -> str:
    """When the kill (or the last failure) happened and the clock it was read on: a time kubectl's age was anchored
    to, or only the age when the folder gives no capture time."""
    r = g.row(-1, named=True)
    what = f"{r['reason']}"
    if r["ts"] is not None:
        return f"{what} at {clock.hms(r['ts'])} (read on the clock of the machine that ran kubectl: {r['ts_basis']})"
    if r["age_s"] is not None:
        return (
            f"{what} {r['age_s']:.0f} s before the capture: time unknown (kubectl printed an age and the folder "
            "gives no capture time: no `date` line before the output, no stamped rows)"
        )
    return f"{what}: time unknown (no age or time written)"


def _pods(facts: Facts) -> list[Finding]:
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
        out.append(make_finding("critical" if status == "OOMKilled" else "high",
                      f"Pod {r['pod']}: {status}, restarted {r['restarts']} times{ago}",
                      f"kubectl shows the pod {status}", f"{r['source']} line {r['line_no']}; its last termination: {why}",
                      "OOMKilled: the container's memory limit was reached" if status == "OOMKilled" else "the container exits and is restarted with a back-off",
                      "kubectl describe pod (Last State: its Reason and Exit Code) and kubectl logs --previous of the pod, into the folder",
                      kind="platform", facts=observed("kubectl", pod=r["pod"], status=status, restarts=r["restarts"])))  # fmt: skip
    return out


def _scheduling(facts: Facts) -> list[Finding]:
    """The scheduler's own reasons (a pod it could not place, or one it preempted for another); the kubelet's
    evictions, preemptions and the node's own problems are ``node.build``'s."""
    ev = facts.events.filter(pl.col("reason").is_in(["FailedScheduling", "Preempted"]))
    out = []
    for (reason,), g in ev.group_by("reason", maintain_order=True):
        r = g.row(0, named=True)
        n = int(g["count"].fill_null(1).sum())
        pod = f"pod {r['pod']}" + (f" on node {r['host']}" if r.get("host") else "") if r.get("pod") else ""
        said = f"{r['source']} line {r['line_no']}: {r['message'][:300]}" + (f" ({pod})" if pod else "")
        out.append(make_finding("high" if reason != "FailedScheduling" else "medium", f"{reason} ({n}×): {r['message'][:120]}",
                      f"Kubernetes reports {reason}", said, "the node or the scheduler, not the server",
                      "kubectl describe node of the pod's node (its conditions and allocatable resources), into the folder",
                      start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("kubectl", reason=reason, events=n, first=time_or_none(g["ts"].min()))))  # fmt: skip
    return out


def _xid(facts: Facts) -> list[Finding]:
    x = facts.events.filter(pl.col("kind").is_in(["xid", "gpu_lost"]))
    tied = {k for f in facts.faults for k in f.keys}  # its death's finding speaks for these lines
    x = x.filter(~(pl.col("source") + " line " + pl.col("line_no").cast(pl.String)).is_in(list(tied)))
    out = []
    for (gpu, code), g in x.group_by("gpu", "xid", maintain_order=True):
        what = f"Xid {code}" if code is not None else "GPU fallen off the bus"
        procs = ", ".join(sorted({f"{p}" for p in g["process"].drop_nulls().to_list()})) or "no process named"
        sev = "critical" if code is None or code in SERIOUS_XID else "high"
        out.append(make_finding(sev, f"GPU error: {what} on {gpu} ({g.height}×; {procs})", f"the NVIDIA driver reported {what}",
                      "; ".join(f"{t['source']} line {t['line_no']}: {t['message'][:200]}" for t in g.head(3).iter_rows(named=True)),
                      "a GPU fault (NVIDIA's XID catalog names the code's cause), not the server's load" + _apart(facts, g),
                      "Look the code up in NVIDIA's XID catalog; run the GPU's diagnostics (dcgmi diag) before serving on it again",
                      start=g["ts"].min(), end=g["ts"].max(), kind="platform",
                      facts=observed("kernel_log", gpu=gpu, xid=code, errors=g.height, first=time_or_none(g["ts"].min()))))  # fmt: skip
    return out


def _apart(facts: Facts, g: pl.DataFrame) -> str:
    """Why these Xid lines are context, not a death's cause, when the folder holds server deaths."""
    if not facts.death_times:
        return ""
    ts = g["ts"].drop_nulls()
    if not ts.len():
        return "; only seconds since boot were written: it cannot be placed beside the servers' deaths"
    return (
        f"; no server death within {BEFORE_S:.0f} s after it ({len(facts.death_times)} death(s) in the folder), or "
        "none its pid or the folder's only server ties it to: context, not a death's cause"
    )


GPU_VIA = {  # the series of memory in use, and of the memory left or whole, by the tool that wrote them
    "DCGM exporter": ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "the DCGM exporter's framebuffer series"),
    "nvidia-smi": (
        "nvidia_smi_memory_used_mib",
        "nvidia_smi_memory_total_mib",
        "nvidia-smi's Memory-Usage column",
    ),
}


def _budget_beside(ctx: Context, g: pl.DataFrame) -> str:
    """vLLM's own device budget (its start-up lines: weights + KV cache) beside the GPUs' memory in use, per server
    log that gives both; the two are the same server's only as far as the pod-to-server mapping says (said after)."""
    ev = ctx.inputs.events
    ev = ev.filter(pl.col("kind") == "capacity") if ev.height else ev
    said = []
    for (rep,), e in ev.group_by("replica", maintain_order=True) if ev.height else []:
        cap = capacity_startup(e)
        w, kv = cap.get("weights_gib"), cap.get("kv_memory_gib")
        if w is not None and kv is not None:
            said.append(
                f"{w + kv:.2f} GiB ({(w + kv) * 1024:,.0f} MiB: weights {w:.2f} + KV cache {kv:.2f}) in {rep or 'the server'}'s start-up lines"
            )
    if not said:
        return "; vLLM's weights + KV cache budget: not in the folder (no server log gives both its start-up lines)"
    top = float(cast(float, g["used"].max()))
    return (
        f"; vLLM's weights + KV cache budget {'; '.join(said[:3])}, beside the GPU's {top:,.0f} MiB in use: one "
        "server's only where the GPU's pod is tied to it (said next)"
    )


def _gpu(facts: Facts, ctx: Context | None = None) -> list[Finding]:
    out = []
    for via, (u, rest, what) in GPU_VIA.items():
        used = facts.gpu.filter(pl.col("name") == u)
        if not used.height:
            continue
        left = facts.gpu.filter(pl.col("name") == rest).group_by(KEY).agg(pl.col("value").min().alias("rest"))
        g = (
            used.group_by(*KEY, "pod")
            .agg(pl.col("value").max().alias("used"), pl.len().alias("n"))
            .join(left, on=KEY, how="left", nulls_equal=True)
        )
        whole = (lambda r: r["used"] + r["rest"]) if rest.endswith("FREE") else (lambda r: r["rest"])
        bits = [f"GPU {r['gpu']}{' (pod ' + r['pod'] + ')' if r['pod'] else ''}: up to {r['used']:,.0f} MiB used"
                + (f" of {whole(r):,.0f}" if r["rest"] is not None else "") for r in g.sort("gpu", "pod", nulls_last=True).iter_rows(named=True)]  # fmt: skip
        times = used["ts"].drop_nulls()
        lo, hi = time_or_none(times.min()), time_or_none(times.max())
        when = f" at {clock_time(lo)}" + (f"–{clock_time(hi)}" if hi != lo else "") if times.len() else " (no time)"  # fmt: skip
        out.append(make_finding("low", f"GPU memory ({via}): " + "; ".join(bits[:4]), what,
                      f"{used.height} sample(s){when} from {', '.join(sorted(set(used['source'])))}"
                      + (_budget_beside(ctx, g) if ctx is not None else "") + _servers_of(facts, g),
                      "telemetry: vLLM reserves its device memory at start (gpu_memory_utilization), so a full framebuffer is its budget, not a leak",
                      "Keep the GPU's memory series over the incident's time (the DCGM exporter's query_range, or nvidia-smi in a loop: nvidia-smi -l 5) beside the server's log", kind="platform",
                      facts=observed(via, samples=used.height, gpus=g.height, used_mib_max=float_or_none(g["used"].max()), first=lo)))  # fmt: skip
    return out


def _servers_of(facts: Facts, g: pl.DataFrame) -> str:
    """Which server each GPU's pod is (by the host its log names, its name, or a guess said as one)."""
    pods = sorted(set(g["pod"].drop_nulls().to_list()))
    if not pods or not facts.logs:
        return ""
    maps = [pod_replica(p, sorted(facts.logs), facts.hosts, guess=len(pods) == 1) for p in pods]
    said = [how for _, how in maps[:4]]
    only = next(iter(facts.logs)) if len(facts.logs) == 1 else None
    if (
        len(pods) > 1
        and only is not None
        and not facts.hosts.get(only)
        and not any(r is not None for r, _ in maps)
    ):
        said.append(f"{len(pods)} pods and one server log: which pod it was is not guessed")
    return "".join(f"; {how}" for how in said)


def unknown_killer(ctx: Context, ep: Episode) -> str:
    """A death no platform record explains: who killed it is unknown, and what the folder lacks (or what its platform
    records cover) is said, so that 'unknown' names what was missing."""
    facts: Facts | None = getattr(ctx, "platform", None)
    t = ep["start"]
    parts = []
    ev = facts.events if facts is not None else pl.DataFrame()
    kern = ev.filter(pl.col("layer") == "kernel") if ev.height else ev
    if not kern.height:
        parts.append("the folder holds no kernel log (dmesg -T / journalctl -k: the OOM killer's lines)")
    else:
        srcs = ", ".join(sorted(set(kern["source"])))
        ts = kern["ts"].drop_nulls()
        others = [k for k in facts.kills if k.how == "kernel_oom" and not k.attached] if facts else []
        if not ts.len():
            parts.append(
                f"the kernel log ({srcs}) gives only seconds since boot: none of its lines can be placed"
            )
        else:
            them = "; ".join(
                f"pid {k.pid} ({k.process}) at {clock_time(k.ts)}: {k.mapping}" for k in others[:2]
            )
            them = f" (its OOM kills: {them})" if them else ""
            lo, hi = time_value(ts.min()), time_value(ts.max())
            if lo - timedelta(minutes=1) <= t <= hi + timedelta(minutes=1):
                parts.append(
                    f"the kernel log ({srcs}, {clock_time(lo)}–{clock_time(hi)} on the kernel host's clock) shows no "
                    f"OOM kill of this server{them}"
                )
            else:
                parts.append(
                    f"the kernel log ({srcs}) covers {clock_time(lo)}–{clock_time(hi)} on the kernel host's clock, "
                    f"not {clock_time(t)}{them}"
                )
    k8s = ev.filter(pl.col("layer") == "kubernetes") if ev.height else ev
    if not k8s.height and not (facts is not None and facts.pods.height):
        parts.append(
            "no kubectl output (get events, describe pod: OOMKilled, a probe's Killing, an eviction)"
        )
    else:
        parts.append("kubectl's records in the folder show no OOMKilled container tied to this server")
    return "who killed it: unknown: " + "; ".join(parts)
