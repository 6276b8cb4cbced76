"""Findings of KV pressure, preemption and queueing: the cache fills, requests are evicted and wait."""

from __future__ import annotations

import math

import polars as pl

from ... import clock
from .. import latency_named, preemption_count
from ..claims import Fact
from ..context import Context
from ..episode_claim import AS_FAR, cut_by_end
from ..records import Episode, Finding
from ..severity import Severity
from . import kv_load, queue_cause, retry_share
from .kv_admitted import preemption_words, swapped
from .record import make_finding, num, pct, requests_phrase, state_phrase
from .retries import cancel_change


def _hold(cap: dict) -> tuple[float | None, float | None]:
    h = (cap.get("concurrency_kv_can_hold") or {}).get("at_p50")
    t = (cap.get("tokens_per_request_observed") or {}).get("p50")
    if h is None:
        h = (cap.get("concurrency_kv_can_hold") or {}).get("at_reserved_p50")
        t = (cap.get("tokens_per_request_reserved") or {}).get("p50")
    return h, t


ROOM = 0.5  # free share of the KV cache above which a queue that is not admitted is not for want of blocks


def _not_admitted(ctx: Context, ep: Episode) -> str | None:
    """'no prompt prefilled on any of its N stats lines while W waited': a queue none of which was admitted, read
    from the server's own lines (prompt throughput 0.0 on every one, running flat); None otherwise."""
    if ep["signal"] != "queue":
        return None
    srv = ctx.server.filter(
        (pl.col("replica") == (ep["replica"] or "")) & pl.col("ts").is_between(ep["start"], ep["end"])
    )
    tps = srv["prompt_tps"] if srv.height else None
    if tps is None or srv.height < 2 or tps.null_count() or (tps != 0).any():
        return None
    kv_top = srv.select(pl.col("kv").max()).item()
    if srv["running"].n_unique() != 1 or (kv_top or 0) >= ctx.th.kv_full:
        return None
    return (
        f"no prompt prefilled on any of its {srv.height} stats lines (prompt throughput 0.0 tokens/s) while up to "
        f"{num(ep['waiting_max'])} waited and {num(ep['running_max'])} ran, KV at most {pct(ep['kv_max'])}: "
        "none was admitted"
    )


def ends_on_one_line(ctx: Context, ep: Episode) -> bool:
    """The episode is one stats line and the logs end inside it (05: KV 99 %, 115 waiting on the last line), on a
    server not already going down: the last line a stopped or dying server prints (sigterm-overload: KV 94.6 %
    while shutting down, 38 s after the SIGTERM) belongs to that stop, not to a level of its own."""
    comps = (ep.get("details") or {}).get("companions") or []
    if ep["duration_s"] != 0 or (ep.get("decided_by") or {}).get("rule") != "ends_abnormal":
        return False
    if any(c["start"] != ep["start"] or c["end"] != ep["end"] for c in comps):
        return False  # n19: a 0 s preemption beside a 70 s queue is not one line
    mine = ep["replica"] or None
    going = [s["ts"] for s in ctx.life.shutdowns if (s["replica"] or None) == mine]
    going += [d.ts for d in ctx.life.deaths if (d.replica or None) == mine]
    return not any(t <= ep["start"] for t in going)


def evictions(ctx: Context, ep: Episode) -> str:
    """What the folder shows of running requests evicted in the episode's range: counted, swapped out, none, or not
    known. public-2 n13 (V0 0.4.2: KV 99.7-100 %, 740-768 pending, Swapped 0, no preemption line) was told "the
    scheduler evicts running requests", which none of its lines shows."""
    d = ep["details"]
    comps = {c["signal"] for c in d.get("companions") or []}
    pre = ep["count"] if ep["signal"] == "preemptions" else d.get("preemptions")
    if pre or "preemptions" in comps or "v0_preemption_warnings" in d:
        modes = {m.upper() for m in (d.get("v0_preemption_warnings") or {}).get("modes") or []}
        if modes == {"SWAP"}:  # vllm-public 33: "preempted by PreemptionMode.SWAP mode"
            return "the scheduler evicts running requests (preemption) and swaps them out to CPU memory"
        how = "recomputes them" if modes <= {"RECOMPUTE"} else "swaps or recomputes them"
        return f"the scheduler evicts running requests (preemption) and {how}"
    if swapped(ctx, ep):
        return "the scheduler swaps running requests out to CPU memory (Swapped above 0 on V0's stats lines)"
    if pre == 0:
        return "no running request was preempted (0 counted in the range)"
    return f"whether running requests were evicted is not known: {preemption_words({'preemptions': None})}"


def _waiting_words(ep: Episode) -> str:
    w = ep["waiting_max"]
    if w is None:  # no stats line inside the range: say nothing of the queue rather than guess
        return ""
    return f" and up to {num(w)} new requests waited for free blocks" if w > 0 else " but no request waited"


def _title(ctx: Context, ep: Episode, what: str, span: str, kv_full: bool) -> str:
    kind = "KV pressure" if kv_full else "queue"
    # the finding stands for the whole pattern (build keeps its first episode only)
    if ep["class"] == "recurring":
        return f"Recurring {kind}: {ep['why']}, the first {span}"
    if ends_on_one_line(ctx, ep):  # one stats line, the last: a level at a time, not a regime of 0 s
        return f"{kind[0].upper()}{kind[1:]} when the logs end: {what} at {clock.hms(ep['start'])} (one stats line)"
    if cut_by_end(ep):  # the logs stop inside it: the verdict's qualifier, not a regime shown to last
        return f"Sustained {kind}, {AS_FAR}: {what} {span}"
    return f"{ep['class'].capitalize()} {kind}: {what} {span}"


def _of_pattern(ep: Episode, symptom: str) -> str:
    """A recurring pattern's finding stands for all its beats: their preemptions in all, then its first beat's
    (abort-ignored read "2 preemptions at 02:07:02" under a title of 3 spikes, 13 preemptions in all). Counts
    read from V0's warnings (one per 50, or a floor) are left to the beat's own words."""
    d, by = ep.get("decided_by") or {}, ep.get("details") or {}
    if ep["class"] != "recurring" or ep["signal"] != "preemptions" or d.get("beats_total") is None:
        return symptom
    if "v0_preemption_warnings" in by or "preemptions_counted_by" in by:
        return symptom
    return f"{d['beats_total']:,} preemptions in {d['spikes']} spikes; the first: {symptom}"


def pressure_finding(ctx: Context, ep: Episode, ladder: dict | None, cap: dict) -> Finding:
    cls = ep["class"]
    sev = {"sustained": "high", "recurring": "medium", "spike": "medium"}[cls]
    d = ep["details"]
    comps = {c["signal"]: c for c in d["companions"]}
    what = {
        "preemptions": preemption_count.words(ep),
        "kv_pressure": f"KV cache ≥ {pct(ctx.th.kv_full)}",
        "queue": f"a waiting queue of up to {num(ep['peak'])}",
    }[ep["signal"]]
    kv_full = (ep["kv_max"] or 0) >= ctx.th.kv_full or ep["signal"] != "queue"
    # an instant (one sample, one warning) is said at its time, not as the range 11:16:41–11:16:41
    span = (
        clock.hms_range(ep["start"], ep["end"]) if ep["end"] > ep["start"] else f"at {clock.hms(ep['start'])}"
    )
    title = _title(ctx, ep, what, span, kv_full)
    lasted = (
        f"for {ep['duration_s']:.0f} s"
        if ep["end"] > ep["start"]
        else f"at {clock.hms(ep['start'])} (one sample)"
    )
    # an instant between stats lines (a scrape's preemption count) has no server state: no empty '()'
    state = state_phrase(ep)
    symptom = f"{what} {lasted}" + (f" ({state})" if state else "")
    symptom = _of_pattern(ep, symptom)
    if "ttft" in comps:
        tt = comps["ttft"]
        ttft = latency_named.named(ctx, "ttft", tt["start"], tt["end"])
        symptom += f"; first tokens slow ({ttft} above {ctx.slo.ttft_s:g} s {clock.hms_span(tt['start'], tt['end'])})"
    ev = [ep["reason"], requests_phrase(ep)]
    if "preemptions" in d:
        ev.append(f"{d['preemptions']:,} preemptions in the range")
    if "v0_preemption_warnings" in d:
        w = d["v0_preemption_warnings"]
        cum = f", cumulative count {w['last_cumulative']}" if w["last_cumulative"] is not None else ""
        ev.append(
            f"{w['lines']} V0 preemption warning(s){cum} ({'/'.join(w['modes']) or '?'} mode; 1 line per 50)"
        )
    hold, tok = _hold(cap)
    kv_tokens = cap.get("kv_tokens")
    cause = f"the KV cache filled{_waiting_words(ep)}; {evictions(ctx, ep)}"
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
    # a cap already at or below the boundary is no change to test: what the cache holds is (seqs-16: 16 running
    # preempted with a cache of 9.3 requests)
    in_place = wb is not None and bool(mns) and mns <= math.floor(wb["concurrency"])
    nxt = (ladder or {}).get("broke_first_at_next_step")
    # a step above the boundary a server died in, not judged, is no break of the load (ladder_death)
    if wb is not None and not in_place and nxt is not None and not nxt.get("not_judged"):
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
    orphans = comps.get("orphans")
    if orphans is not None and kv_full:
        # executions still generating for callers who had left held blocks in the same range (abort-ignored, orphan:
        # proxy_ignore_client_abort on): cancelling them frees the cache at no cost to any caller, while a lower cap
        # on the sequences cuts the work of callers still waiting; which one the pressure needs is the measurement
        n, when = orphans["count"], clock.hms_range(orphans["start"], orphans["end"])
        runs = f"{n:,} execution{'s' if n != 1 else ''}"
        cause += f"; {runs} ran on for callers that had left ({when}), holding cache blocks for nobody"
        lower = (
            f"--max-num-seqs{' from ' + str(mns) if mns else ''} to {max(1, math.floor(hold))}"
            if hold is not None and hold >= 1
            else "--max-num-seqs"
        )
        nt = (
            f"{cancel_change(ctx)}; then replay the same traffic and count the preemptions again (the {runs} "
            f"for callers that had left, {when}, held cache blocks): lower {lower} only if they stay"
        )
    failed_load = kv_load.before(ctx, ep)
    if failed_load is not None:
        # the connector's failed load came first (public-2 n19): its recompute is the likely cause, not the traffic
        n, tok = failed_load["requests"], failed_load["tokens"]
        said = f"{n:,} request(s)" if n is not None else "requests"
        recompute = f" ({tok:,} tokens to compute again)" if tok is not None else ""
        ev.append(
            f"KV connector's failed load at {clock.hms(failed_load['at'])}: {said} rescheduled{recompute}"
        )
        cause = (
            f"a KV connector's failed load at {clock.hms(failed_load['at'])} sent {said} back to be computed "
            f"again{recompute.replace(' to compute again', '')}; their recompute filled the cache"
            f"{_waiting_words(ep)}; {evictions(ctx, ep)}"
        )
        nt = (
            "Find in the KV connector's own log (LMCache, NIXL, Mooncake) why the load failed at "
            f"{clock.hms(failed_load['at'])}; then replay the same traffic with the load succeeding and compare "
            "the KV usage and waiting queue after it"
        )
    unadmitted = _not_admitted(ctx, ep)
    if unadmitted is not None:
        # nothing prefilled on any line while they waited and the cache had room: none was admitted (public-2 n15:
        # 10 waiting behind 1 running at KV 22.9 %; vllm-public 07: 14 behind 1 for over an hour per its reporter)
        ev.append(unadmitted)
        free = 1 - (ep["kv_max"] or 0)
        cause = (
            "the scheduler admits none of the waiting requests although most of the cache is free: the running "
            "request(s) hold the engine (a very long generation, a wedged step) or the scheduler is stuck"
            if free >= ROOM
            else f"none of the waiting requests is admitted with {pct(free)} of the cache free: each may need more "
            "blocks than remain (long prompts behind a long running request), or the running request(s) hold the "
            "engine (a very long generation, a wedged step)"
        )
    if failed_load is not None:
        pass  # the connector's test stands
    elif ep["signal"] == "queue" and (ep["kv_max"] or 0) < ctx.th.kv_full and unadmitted is not None:
        nt = (
            "While it happens, take a stack dump of the engine (py-spy dump --pid <EngineCore pid>) and read the "
            "running request's max_tokens: a wedged step shows in the dump, one long generation in its length"
        )
    elif (why := queue_cause.explained(ctx, ep, cap, *_hold(cap))) is not None:
        cause, nt = why
    elif ep["signal"] == "queue" and (ep["kv_max"] or 0) < ctx.th.kv_full:
        nt = (
            "Run a concurrency ladder with this workload's prompt lengths to measure how many requests the KV "
            "cache really admits, then cap --max-num-seqs there"
        )
    # retries overlapped it (retry-storm, storm-b): the change follows the cause that dominates, not the cap alone
    told = (
        retry_share.advice(ctx, ep, hold, mns)
        if kv_full and not (orphans or failed_load or unadmitted)
        else None
    )
    cause, nt = (cause + told[0], told[1]) if told is not None else (cause, nt)
    f = make_finding(sev, title, symptom, "; ".join(e for e in ev if e), cause, nt, ep, kind="pressure")
    f.severity_by = Severity(sev, "class", CLASS_SAID[cls], (Fact("class", cls, "engine_log"),))
    return f


# what each class says of a pressure finding's severity before its impact is read (findings.impact)
CLASS_SAID = {
    "sustained": "a regime that did not recover while its load lasted: high",
    "recurring": "spikes that each recovered, coming back at one load: medium",
    "spike": "one spike that recovered: medium",
}
