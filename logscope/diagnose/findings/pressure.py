"""Findings of KV pressure, preemption and queueing: the cache fills, requests are evicted and wait."""

from __future__ import annotations

import math

from ... import clock
from ..context import Context
from .record import make_finding, num, pct, requests_phrase, state_phrase


def _hold(cap: dict) -> tuple[float | None, float | None]:
    h = (cap.get("concurrency_kv_can_hold") or {}).get("at_p50")
    t = (cap.get("tokens_per_request_observed") or {}).get("p50")
    if h is None:
        h = (cap.get("concurrency_kv_can_hold") or {}).get("at_reserved_p50")
        t = (cap.get("tokens_per_request_reserved") or {}).get("p50")
    return h, t


def pressure_finding(ctx: Context, ep: dict, ladder: dict | None, cap: dict) -> dict:
    cls = ep["class"]
    sev = {"sustained": "high", "recurring": "medium", "spike": "medium"}[cls]
    d = ep["details"]
    comps = {c["signal"]: c for c in d["companions"]}
    what = {
        "preemptions": f"{ep['count']} preemption{'s' if ep['count'] != 1 else ''}",
        "kv_pressure": f"KV cache ≥ {pct(ctx.th.kv_full)}",
        "queue": f"a waiting queue of up to {num(ep['peak'])}",
    }[ep["signal"]]
    kv_full = (ep["kv_max"] or 0) >= ctx.th.kv_full or ep["signal"] != "queue"
    title = f"{cls.capitalize()} {'KV pressure' if kv_full else 'queue'}: {what} {clock.hms_range(ep['start'], ep['end'])}"
    if cls == "recurring":  # the finding stands for the whole pattern (build keeps its first episode only)
        title = f"Recurring {'KV pressure' if kv_full else 'queue'}: {ep['why']}, the first {clock.hms_range(ep['start'], ep['end'])}"
    symptom = f"{what} for {ep['duration_s']:.0f} s ({state_phrase(ep)})"
    if "ttft" in comps:
        tt = comps["ttft"]
        symptom += f"; first tokens slow (TTFT p95 above {ctx.slo.ttft_s:g} s {clock.hms_range(tt['start'], tt['end'])})"
    ev = [ep["reason"], requests_phrase(ep)]
    if "preemptions" in d:
        ev.append(f"{d['preemptions']} preemptions in the range")
    if "v0_preemption_warnings" in d:
        w = d["v0_preemption_warnings"]
        cum = f", cumulative count {w['last_cumulative']}" if w["last_cumulative"] is not None else ""
        ev.append(
            f"{w['lines']} V0 preemption warning(s){cum} ({'/'.join(w['modes']) or '?'} mode; 1 line per 50)"
        )
    hold, tok = _hold(cap)
    kv_tokens = cap.get("kv_tokens")
    cause = (
        "the KV cache filled: the scheduler evicts running requests (preemption) and recomputes them, "
        "and new requests wait"
    )
    if hold is not None and kv_tokens:
        cause += (
            f"; the cache holds {kv_tokens:,} tokens ≈ {hold:.1f} requests of {tok:.0f} tokens, "
            f"while up to {num(ep['running_max'] or cap.get('running_observed_max'))} ran at once"
        )
    if ep["signal"] == "queue" and (ep["kv_max"] or 0) < ctx.th.kv_full:
        cause = (
            "requests wait although KV usage stays below "
            f"{pct(ctx.th.kv_full)}: each waiting request needs more free blocks than remain (long prompts), "
            "or the engine is stalled on the running ones"
        )
    mns = cap.get("max_num_seqs")
    wb = (ladder or {}).get("working_boundary")
    if wb is not None and (ladder or {}).get("broke_first_at_next_step") is not None:
        nt = (
            f"Cap admitted concurrency at the measured working boundary: --max-num-seqs "
            f"{max(1, math.floor(wb['concurrency']))} "
            f"(step {wb['step']} of the ladder met the SLO; the next one broke), then replay the same traffic"
        )
    elif hold is not None and hold >= 1:
        target = max(1, math.floor(hold))
        nt = (
            f"Lower --max-num-seqs{' from ' + str(mns) if mns else ''} to {target} (what the KV cache holds at "
            f"the observed request size) and replay the same traffic: preemptions should stop, queueing moves to "
            "the waiting list"
        )
    else:
        nt = (
            "Measure capacity: run a concurrency ladder (vllm bench serve --max-concurrency 1,2,4,8,…) with this "
            "traffic's prompt and output lengths and cap --max-num-seqs at the last step that meets the SLO"
        )
    if ep["signal"] == "queue" and (ep["kv_max"] or 0) < ctx.th.kv_full:
        nt = (
            "Run a concurrency ladder with this workload's prompt lengths to measure how many requests the KV "
            "cache really admits, then cap --max-num-seqs there"
        )
    return make_finding(sev, title, symptom, "; ".join(e for e in ev if e), cause, nt, ep, kind="pressure")
