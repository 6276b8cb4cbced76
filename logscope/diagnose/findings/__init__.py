"""Findings: symptom, evidence, likely cause and the ONE change to test next.

The cause → change table this follows:

* OOM → weights, KV allocation, activations, request lengths → a smaller active batch
  (``--max-num-seqs``), a shorter ``--max-model-len``, a supported quantization.
* latency rising without errors → KV usage, preemptions, waiting → fewer admitted requests (a lower
  ``--max-num-seqs``) or measured capacity (run the ladder).
* slow first token → queue, prefill, tokenization, network → fix the slow stage (chunked prefill).
* load growing after timeouts → retries and work still running → bounded retries with jittered
  backoff at ONE layer, and cancellation (client disconnects reaching vLLM:
  ``proxy_ignore_client_abort off``).
* retries at several layers → retries at one layer only.

Never a bare 'increase memory'. Severity: critical (the server died), high (a sustained regime,
work done for nobody, retries multiplying load), medium (spikes, SLO breaches), low (latent
problems), info (context). A calm run gets one info finding and nothing above it.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

import polars as pl

from ... import clock
from .. import capacity
from ..episodes import Context

SEVERITY = ("critical", "high", "medium", "low", "info")
# the line of a start-up failure's record that says what did not fit (V0 message, V1 ValueError)
_KV_SAID = re.compile(r"max seq len|max_model_len|KV cache", re.IGNORECASE)


def _t(ts: datetime | None) -> str:
    return clock.hms(ts) if ts is not None else "?"


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.1f} %"


def _n(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:.{nd}f}"


# Inside one severity, the finding whose change helps most comes first: a dead server before
# anything else, then work done for nobody, then retries (they feed the overload), then capacity.
KIND_ORDER = ("crash", "startup", "stall", "orphans", "retries", "pressure", "errors", "latency", "ladder", "other")


def _f(severity: str, title: str, symptom: str, evidence: str, cause: str, next_test: str, ep: dict | None = None,
       start=None, end=None, kind: str = "other") -> dict:
    return {"severity": severity, "title": title, "symptom": symptom, "evidence": evidence, "cause": cause,
            "next_test": next_test, "episode_id": ep["episode_id"] if ep else None,
            "start": ep["start"] if ep else start, "end": ep["end"] if ep else end, "kind": kind}


def build(ctx: Context, eps: list[dict], ladder_rows: list[dict], ladder: dict | None, cap: dict,
          traffic: dict, cold: dict) -> list[dict]:
    out: list[dict] = []
    per_replica: list[tuple[str, dict]] = []  # (replica, finding) of one replica's episodes
    # a folder of several servers (by their stats lines, or their episodes): each finding names its own
    replicas = {r for r in ctx.server["replica"].drop_nulls().unique().to_list() if r} \
        if "replica" in ctx.server.columns else set()
    several = len(replicas | {e["replica"] for e in eps if e.get("replica")}) > 1
    for ep, group in _one_per_pattern(eps):
        found = _episode(ctx, ep, ladder, cap)
        if ep["class"] == "recurring":
            # one pattern per signal, whichever replicas it beats on: in a folder of several, the title names them
            names = list(dict.fromkeys(e["replica"] for e in group if e.get("replica"))) if several else []
            for f in found:
                if f["kind"] != "pressure":  # pressure titles name the pattern themselves
                    f["title"] = f"{f['title']} — the first of {ep['why']}"
                if names:
                    f["title"] = f"{_replicas(names)}: {f['title']}"
        elif len(group) > 1:
            ids = named([e["episode_id"] for e in group])
            what = ep["class"] if ep["class"] == ep["signal"] else f"{ep['class']} {ep['signal'].replace('_', ' ')}"
            on = f" on {ep['replica']}" if ep["replica"] else ""
            for f in found:
                _stands_for(f, len(group), "like it", f"{what} episodes{on}", group[0]["start"], group[-1]["start"],
                            f" ({ids})")
        if several and ep.get("replica") and ep["class"] != "recurring":
            per_replica += [(ep["replica"], f) for f in found]
        else:
            out += found
    out += _across_replicas(per_replica)
    out += _traffic(ctx, eps, traffic)
    if ladder is not None:
        out.append(_ladder(ladder, ladder_rows))
    out += _events(ctx)
    out += _gateway(ctx)
    out += _cold(ctx, cold)
    if not any(f["severity"] in ("critical", "high", "medium") for f in out):
        out += _calm(ctx, eps, cap)
    order = {s: i for i, s in enumerate(SEVERITY)}
    kind = {k: i for i, k in enumerate(KIND_ORDER)}
    far = datetime.max
    out.sort(key=lambda f: (order[f["severity"]], kind[f["kind"]],
                            f["start"].replace(tzinfo=None) if f["start"] else far, f["title"]))
    for i, f in enumerate(out, 1):
        f["finding_id"], f["rank"] = f"F{i}", i
    return out


# ------------------------------------------------------------------ per episode

REPEATS = 3  # more episodes than this of one class, signal and replica are one finding (a crash loop...)
REPEATS_NAMED = 6


def named(items: list[str]) -> str:
    """The first REPEATS_NAMED of ``items``, comma-separated, with '…' when there are more."""
    return ", ".join(items[:REPEATS_NAMED]) + (", …" if len(items) > REPEATS_NAMED else "")


def _replicas(names: list[str]) -> str:
    """What a title says a finding is on: 'replica-0', or '2 replicas (replica-0, replica-2)'."""
    return names[0] if len(names) == 1 else f"{len(names)} replicas ({named(names)})"


def pattern_key(e: dict) -> tuple:
    """Episodes one finding may stand for: a recurring pattern is one per signal, others share class,
    signal and replica (the verdict's crash loop uses the same key)."""
    return (e["signal"],) if e["class"] == "recurring" else (e["class"], e["signal"], e["replica"])


def _across_replicas(found: list[tuple[str, dict]]) -> list[dict]:
    """Findings of one replica's episodes in a folder of several: the title names the replica, and the
    findings that would say the same of several replicas (the same kind of trouble at the same times: a
    node or a rollout taking them down together) are one finding naming them all."""
    groups: dict[tuple, list[tuple[str, dict]]] = {}
    for replica, f in found:
        groups.setdefault((f["severity"], f["kind"], f["title"]), []).append((replica, f))
    out = []
    for (_, _, title), members in groups.items():
        replica, f = members[0]
        names = [r for r, _ in members]
        f["title"] = f"{_replicas(names)}: {title}"
        if len(members) > 1:
            f["evidence"] = (f"the same on {len(names)} replicas ({', '.join(names)}: episodes "
                             f"{', '.join(g['episode_id'] for _, g in members)}); on {replica}: {f['evidence']}")
            f["start"] = min(g["start"] for _, g in members if g["start"]) if f["start"] else f["start"]
            f["end"] = max((g["end"] for _, g in members if g["end"]), default=f["end"])
        out.append(f)
    return out


def _stands_for(f: dict, n: int, title_noun: str, what: str, first: datetime, last: datetime,
                names: str = "") -> None:
    """Turn the finding of the first of ``n`` like episodes into the finding of all of them."""
    f["title"] = f"{f['title']} — the first of {n} {title_noun}"
    f["evidence"] = f"{n} {what} from {_t(first)} to {clock.hms_after(first, last)}{names}; the first: {f['evidence']}"


def _one_per_pattern(eps: list[dict]) -> list[tuple[dict, list[dict]]]:
    """The episodes that get findings, each with the episodes it stands for: every episode on its own,
    except a recurring pattern (one finding per signal) and more than REPEATS episodes of one class,
    signal and replica (hundreds of restarts or pressure spells in a day-long incident are one finding
    naming them all, not hundreds)."""
    groups: dict[tuple, list[dict]] = {}
    for e in eps:
        groups.setdefault(pattern_key(e), []).append(e)
    out = []
    for e in eps:
        g = groups[pattern_key(e)]
        if e["class"] != "recurring" and len(g) <= REPEATS:
            out.append((e, [e]))
        elif e is g[0]:
            out.append((e, g))
    return out


def _episode(ctx: Context, ep: dict, ladder: dict | None, cap: dict) -> list[dict]:
    sig = ep["signal"]
    cap = capacity.for_replica(cap, ep["replica"])  # this replica's cache and config
    if sig == "crash":
        return [_crash(ctx, ep, cap)]
    if sig == "stall":
        return [_stall(ctx, ep)]
    if sig in ("preemptions", "kv_pressure", "queue"):
        return [_pressure(ctx, ep, ladder, cap)]
    if sig == "ttft":
        return [_slow_first_token(ctx, ep)]
    if sig == "e2e":
        return [_slow_e2e(ctx, ep)]
    if sig == "errors":
        return [_errors(ctx, ep)]
    return []  # retries / orphans are reported once for the run (_traffic)


def _state(ep: dict) -> str:
    parts = []
    if ep["running_max"] is not None:
        parts.append(f"running up to {_n(ep['running_max'])} (mean {_n(ep['running_mean'])})")
    if ep["waiting_max"] is not None:
        parts.append(f"waiting up to {_n(ep['waiting_max'])}")
    if ep["kv_max"] is not None:
        parts.append(f"KV up to {_pct(ep['kv_max'])}")
    return ", ".join(parts)


def _req(ep: dict) -> str:
    parts = []
    if ep["arrival_rate_during"] is not None:
        before, during = _n(ep["arrival_rate_before"], 2), _n(ep["arrival_rate_during"], 2)
        parts.append(f"arrivals {before}/s before → {during}/s during")
    if ep["ttft_p95"] is not None:
        parts.append(f"TTFT p95 {_n(ep['ttft_p95'], 2)} s")
    if ep["e2e_p95"] is not None:
        parts.append(f"e2e p95 {_n(ep['e2e_p95'], 2)} s")
    if ep["success_share"] is not None:
        parts.append(f"success {_pct(ep['success_share'])}")
    return ", ".join(parts)


def _hold(cap: dict) -> tuple[float | None, float | None]:
    h = (cap.get("concurrency_kv_can_hold") or {}).get("at_p50")
    t = (cap.get("tokens_per_request_observed") or {}).get("p50")
    if h is None:
        h = (cap.get("concurrency_kv_can_hold") or {}).get("at_reserved_p50")
        t = (cap.get("tokens_per_request_reserved") or {}).get("p50")
    return h, t


def _pressure(ctx: Context, ep: dict, ladder: dict | None, cap: dict) -> dict:
    cls = ep["class"]
    sev = {"sustained": "high", "recurring": "medium", "spike": "medium"}[cls]
    d = ep["details"]
    comps = {c["signal"]: c for c in d["companions"]}
    what = {"preemptions": f"{ep['count']} preemption{'s' if ep['count'] != 1 else ''}",
            "kv_pressure": f"KV cache ≥ {_pct(ctx.th.kv_full)}",
            "queue": f"a waiting queue of up to {_n(ep['peak'])}"}[ep["signal"]]
    kv_full = (ep["kv_max"] or 0) >= ctx.th.kv_full or ep["signal"] != "queue"
    title = f"{cls.capitalize()} {'KV pressure' if kv_full else 'queue'}: {what} {clock.hms_range(ep['start'], ep['end'])}"
    if cls == "recurring":  # the finding stands for the whole pattern (build keeps its first episode only)
        title = f"Recurring {'KV pressure' if kv_full else 'queue'}: {ep['why']}, the first {clock.hms_range(ep['start'], ep['end'])}"
    symptom = f"{what} for {ep['duration_s']:.0f} s ({_state(ep)})"
    if "ttft" in comps:
        tt = comps["ttft"]
        symptom += f"; first tokens slow (TTFT p95 above {ctx.slo.ttft_s:g} s {clock.hms_range(tt['start'], tt['end'])})"
    ev = [ep["reason"], _req(ep)]
    if "preemptions" in d:
        ev.append(f"{d['preemptions']} preemptions in the range")
    if "v0_preemption_warnings" in d:
        w = d["v0_preemption_warnings"]
        cum = f", cumulative count {w['last_cumulative']}" if w["last_cumulative"] is not None else ""
        ev.append(f"{w['lines']} V0 preemption warning(s){cum} ({'/'.join(w['modes']) or '?'} mode; 1 line per 50)")
    hold, tok = _hold(cap)
    kv_tokens = cap.get("kv_tokens")
    cause = "the KV cache filled: the scheduler evicts running requests (preemption) and recomputes them, " \
            "and new requests wait"
    if hold is not None and kv_tokens:
        cause += (f"; the cache holds {kv_tokens:,} tokens ≈ {hold:.1f} requests of {tok:.0f} tokens, "
                  f"while up to {_n(ep['running_max'] or cap.get('running_observed_max'))} ran at once")
    if ep["signal"] == "queue" and (ep["kv_max"] or 0) < ctx.th.kv_full:
        cause = ("requests wait although KV usage stays below "
                 f"{_pct(ctx.th.kv_full)}: each waiting request needs more free blocks than remain (long prompts), "
                 "or the engine is stalled on the running ones")
    mns = cap.get("max_num_seqs")
    wb = (ladder or {}).get("working_boundary")
    if wb is not None and (ladder or {}).get("broke_first_at_next_step") is not None:
        nt = (f"Cap admitted concurrency at the measured working boundary: --max-num-seqs "
              f"{max(1, math.floor(wb['concurrency']))} "
              f"(step {wb['step']} of the ladder met the SLO; the next one broke), then replay the same traffic")
    elif hold is not None and hold >= 1:
        target = max(1, math.floor(hold))
        nt = (f"Lower --max-num-seqs{' from ' + str(mns) if mns else ''} to {target} (what the KV cache holds at "
              f"the observed request size) and replay the same traffic: preemptions should stop, queueing moves to "
              "the waiting list")
    else:
        nt = ("Measure capacity: run a concurrency ladder (vllm bench serve --max-concurrency 1,2,4,8,…) with this "
              "traffic's prompt and output lengths and cap --max-num-seqs at the last step that meets the SLO")
    if ep["signal"] == "queue" and (ep["kv_max"] or 0) < ctx.th.kv_full:
        nt = ("Run a concurrency ladder with this workload's prompt lengths to measure how many requests the KV "
              "cache really admits, then cap --max-num-seqs there")
    return _f(sev, title, symptom, "; ".join(e for e in ev if e), cause, nt, ep, kind="pressure")


def _stall(ctx: Context, ep: dict) -> dict:
    return _f("critical" if ep["class"] == "sustained" else "high",
              f"Engine stalled: requests running with no progress {clock.hms_range(ep['start'], ep['end'])}",
              f"{_n(ep['running_max'])} request(s) running with 0 prompt and 0 generation tokens/s for "
              f"{ep['duration_s']:.0f} s", "; ".join(e for e in [ep["reason"], _state(ep)] if e),
              "the engine makes no progress on admitted requests (a hung step, device or collective); a hung "
              "engine still answers /health and its idle-looking stats go to DEBUG, so it looks quiet",
              "Take a stack dump of the engine process during the stall (py-spy dump --pid <EngineCore pid>) to "
              "see where the step hangs", ep, kind="stall")


def _crash(ctx: Context, ep: dict, cap: dict) -> dict:
    c = ep["details"]["crash"]
    kinds = c["kinds"]
    down = c["downtime_s"]
    ev = [ep["reason"]]
    if c.get("message"):
        ev.append(f"first record: {c['message'][:200]}")
    if c.get("gateway_first_error") is not None:
        ev.append(f"gateway's first error at {clock.hms(c['gateway_first_error'], ms=True)} " +
                  f"({', '.join(f'{k}: {v}' for k, v in c['gateway_errors_by_kind'].items())})")
    r = _req(ep)
    if r:
        ev.append(r)
    d = ep["details"]
    if d.get("gateway_5xx"):
        ev.append(f"{d['gateway_5xx']} gateway 5xx")
    mns = cap.get("max_num_seqs")
    half = f" from {mns} to {max(1, mns // 2)}" if mns else ""
    when = f"{_t(ep['start'])}" + (f", back at {clock.hms_after(ep['start'], c['ready'])} ({down:.0f} s down)"
                                   if down is not None else
                                   ", no restart in the logs")
    if "oom" in kinds:
        if c["at_startup"]:
            return _f("critical", f"Out of memory at startup ({_t(ep['start'])})",
                      "the engine ran out of device memory before serving any request", "; ".join(ev),
                      "weights plus the KV-cache reservation (and warm-up activations) do not fit on the device",
                      "Start with a shorter --max-model-len (a smaller KV reservation per sequence); if the weights "
                      "alone do not fit, load a supported quantization of the model", ep, kind="crash")
        return _f("critical", f"Out of memory while serving: engine died at {when}",
                  "the engine hit a device out-of-memory error mid-serving and the server died", "; ".join(ev),
                  "activations of the active batch (plus weights and the KV allocation) exceeded device memory; long "
                  "requests make activations larger",
                  f"Lower --max-num-seqs{half} (a smaller active batch) and replay the same traffic; if it still runs out, "
                  "shorten --max-model-len, then consider a supported quantization", ep, kind="crash")
    if "engine_timeout" in kinds:
        return _f("critical", f"Engine step timed out: engine died at {when}",
                  "an engine step did not return in time and the engine was declared dead", "; ".join(ev),
                  "a model step hung (device or collective hang) or the batch made one step too slow",
                  f"Replay the same traffic with --max-num-seqs{half or ' halved'}: if the timeout goes, step size was "
                  "the cause; if it stays, the device hangs (run with NCCL_DEBUG=INFO to find where)", ep, kind="crash")
    if kinds == ["silent"]:
        return _f("critical", f"Server killed without a trace at {when}",
                  f"the vLLM log stops mid-traffic (pid {c['pid']}) and a new server starts (pid {c['new_pid']})",
                  "; ".join(ev + c.get("notes", [])),
                  "the API server was killed from outside (SIGKILL: kernel OOM killer, supervisor or operator): vLLM "
                  "prints nothing when killed",
                  f"Find what killed pid {c['pid']} at about {_t(ep['start'])} (kernel log / journalctl for the OOM "
                  "killer, the supervisor's log); if it was the OOM killer, test a lower --max-num-seqs" + half,
                  ep, kind="crash")
    return _f("critical", f"Engine died at {when}", "the engine process died and the API server could not serve",
              "; ".join(ev), "see the first error record before the death (detail in server_events)",
              "Reproduce with the same request sizes at a lower --max-num-seqs" + half +
              " to tell a load-driven death from a software fault", ep, kind="crash")


def _slow_first_token(ctx: Context, ep: dict) -> dict:
    wait = (ep["waiting_max"] or 0) >= ctx.th.waiting_min
    long_prompt = (ep["prompt_tokens_mean"] or 0) >= 1024
    if wait:
        cause, nt = ("requests queue before they are admitted (waiting > 0)",
                     "Fix the queue stage: cap admission with a lower --max-num-seqs or add capacity, and compare "
                     "the server's queue time with the client's TTFT")
    elif long_prompt:
        cause, nt = ("prefill of long prompts delays the first token",
                     "Turn on chunked prefill (--enable-chunked-prefill) so long prefills share steps with decodes")
    else:
        cause, nt = ("no queue and short prompts: the time goes outside the engine (tokenization, gateway, network)",
                     "Time each stage: compare the gateway's upstream header time with the client's TTFT for the "
                     "same requests")
    return _f("medium", f"Slow first token {clock.hms_range(ep['start'], ep['end'])}",
              f"TTFT p95 above {ctx.slo.ttft_s:g} s for {ep['duration_s']:.0f} s", "; ".join([ep["reason"], _req(ep)]),
              cause, nt, ep, kind="latency")


def _slow_e2e(ctx: Context, ep: dict) -> dict:
    out = ep["output_tokens_mean"]
    return _f("medium", f"Slow responses {clock.hms_range(ep['start'], ep['end'])}",
              f"e2e p95 above {ctx.slo.e2e_s:g} s for {ep['duration_s']:.0f} s",
              "; ".join([ep["reason"], _req(ep)] + ([f"{out:.0f} output tokens on average"] if out else [])),
              "long generations (output length) or a slow decode step",
              "Cap max_tokens at what the application needs (compare requested max_tokens with generated tokens)", ep,
              kind="latency")


def _errors(ctx: Context, ep: dict) -> dict:
    d = ep["details"]
    kinds = ", ".join(f"{k.replace('_', ' ')} {d[k]}" for k in ("gateway_5xx", "gateway_499", "timeouts", "errors")
                      if d.get(k))
    sev = "high" if ep["class"] == "sustained" else "medium"
    return _f(sev, f"Errors {clock.hms_range(ep['start'], ep['end'])}: {ep['count']} failed",
              f"{ep['count']} failed requests in {ep['duration_s']:.0f} s", "; ".join([ep["reason"], kinds, _req(ep)]),
              "failures at the gateway or client with no pressure sign on the server: upstream unreachable or timeouts",
              "Look at the gateway's error log for this range: if it marks the upstream down (no live upstreams), "
              "add an active health check so one slow reply does not take the upstream out", ep, kind="errors")


# ------------------------------------------------------------------ run level

# retries "multiply the load" when the server ran at least this many executions per logical request; below
# it the retried attempts were failed before vLLM (by the gateway, or timed out in front of it)
MULTIPLY_MIN = 1.1


def _traffic(ctx: Context, eps: list[dict], tr: dict) -> list[dict]:
    out = []
    amp = tr.get("amplification")
    retries = (tr.get("client_retries") or 0) + (tr.get("gateway_retries") or 0)
    ep_r = next((e for e in eps if e["signal"] == "retries" or
                 any(c["signal"] == "retries" for c in e["details"]["companions"])), None)
    per_logical = (tr["client_attempts"] / tr["logical_requests"]) if tr.get("client_attempts") and \
        tr.get("logical_requests") else None
    # retries are a finding when they stand out in time (an episode), or when they multiply the work at the
    # server or at the client, whatever their timing (a regime of retries that lasts all day is no outlier)
    if retries and (ep_r is not None or (amp or 0) >= ctx.th.amplification_high
                    or (per_logical or 0) >= ctx.th.amplification_high):
        layers = [n for n, k in (("client", "client_retries"), ("gateway", "gateway_retries")) if tr.get(k)]
        multi = len(layers) > 1
        ev = (f"{tr.get('logical_requests')} logical requests made {tr.get('client_attempts') or '?'} client attempts; "
              f"vLLM received {tr.get('server_requests')} ({_n(amp, 2)} per logical request); "
              f"client retries {tr.get('client_retries') or 0}, gateway retries {tr.get('gateway_retries') or 0}")
        if tr.get("timeouts"):
            ev += f"; {tr['timeouts']} client timeouts"
        if ep_r is not None:
            ev += f"; mostly during {ep_r['episode_id']} ({clock.hms_range(ep_r['start'], ep_r['end'])})"
        canc = tr.get("cancellation")
        if canc:
            ev += f"; {canc}"
        nt = ("Retry at one layer only: turn gateway retries off for POST (drop non_idempotent from "
              "proxy_next_upstream) and keep the client's bounded retries with jittered backoff") if multi else \
             ("Bound retries to one or two with jittered exponential backoff, and set the client timeout above "
              "the server's p95 latency under load so a slow answer is not abandoned and re-sent")
        heavy = (amp or 0) >= ctx.th.amplification_high
        multiplies = amp is not None and amp >= MULTIPLY_MIN
        if multiplies:
            title = f"Retries multiply the load ({_n(amp, 2)}× executions per request at the server)"
            symptom = ("timeouts and errors are retried while the server is already overloaded, so load grows "
                       "when capacity is short")
            cause = ("retries" + (" at several layers (" + " and ".join(layers) + ")" if multi else "") +
                     " re-send work the overloaded server has already queued, prefilled or preempted")
        elif amp is not None:
            # about one execution per request (or fewer): the extra attempts died before vLLM
            reached = " (most never reached the server)" if amp < 1 else \
                f" ({_n(amp, 2)}× executions at the server: the extra attempts never reached it)"
            title = (f"Retries: {_n(per_logical, 2)} attempts per request" if per_logical else "Retries") + reached
            symptom = "requests were retried against a gateway that failed them before they reached vLLM"
            cause = "the gateway answered errors itself (upstream marked down) and every layer retried them"
        else:
            title = f"Retries: {_n(per_logical, 2)} attempts per request" if per_logical else "Retries"
            symptom = "timeouts and errors were retried; the server log is not here to tell how much reached it"
            cause = ("retries" + (" at several layers (" + " and ".join(layers) + ")" if multi else "") +
                     " re-send requests that timed out or failed, adding load when capacity is short")
        out.append(_f("high" if heavy or (multi and multiplies) else "medium", title, symptom, ev, cause, nt,
                      ep_r, kind="retries"))
    orph = tr.get("orphaned_executions")
    if orph and orph >= ctx.th.orphans_share * (tr.get("server_requests") or orph):
        ep_o = next((e for e in eps if e["signal"] == "orphans" or
                     any(c["signal"] == "orphans" for c in e["details"]["companions"])), None)
        ev = f"{orph} server executions kept running after their caller gave up"
        if tr.get("orphan_s"):
            ev += f" ({tr['orphan_s']:.0f} s of generation for nobody)"
        ev += f"; vLLM logged {tr.get('server_aborts') or 0} aborts; gateway 499: {tr.get('gateway_499') or 0}"
        out.append(_f("high", f"Orphaned work: {orph} executions ran for callers that had left",
                      "requests abandoned by their callers keep generating on the server, keeping it saturated",
                      ev, "client disconnects do not reach vLLM (the gateway keeps the upstream request open, "
                      "e.g. nginx proxy_ignore_client_abort on), so abandoned work is never cancelled",
                      "Propagate client disconnects: set proxy_ignore_client_abort off (or the gateway's equivalent) "
                      "so a client that leaves makes vLLM abort its request", ep_o, kind="orphans"))
    return out


def _ladder(ladder: dict, rows: list[dict]) -> dict:
    wb, nxt = ladder["working_boundary"], ladder["broke_first_at_next_step"]
    slo = ladder["slo"]
    slo_txt = f"TTFT p95 ≤ {slo['ttft_p95_s']:g} s, e2e p95 ≤ {slo['e2e_p95_s']:g} s, success ≥ {slo['success']:.0%}"
    steps = ", ".join(f"{_n(r['concurrency'])}" for r in rows)
    if wb is None:
        title = f"No ladder step met the SLO (first step {_n(rows[0]['concurrency'])})"
    else:
        title = f"Working boundary: {rows[0]['mode']} {_n(wb['concurrency'])}"
    if nxt is not None:
        title += f"; at {_n(nxt['concurrency'])} {nxt['first']} broke first"
    ev = f"steps {steps} ({ladder['source']}); SLO: {slo_txt}"
    if nxt is not None:
        ev += "; at step " + str(nxt["step"]) + ": " + "; ".join(r["text"] for r in nxt["reasons"])
    below = ladder.get("failed_below_boundary") or []
    if below:
        ev += "; below the boundary, step(s) " + ", ".join(f"{_n(b['concurrency'])} ({b['broke']})" for b in below) + \
            " missed the SLO once: not a trend, the steps above them met it"
    nt = (f"Cap admitted concurrency at {math.floor(wb['concurrency'])} (--max-num-seqs) and re-run the next step "
          "to confirm"
          if wb is not None and nxt is not None else
          "Extend the ladder upwards to find where it breaks" if nxt is None else
          "Re-run the ladder starting lower")
    return _f("low", title, "traffic climbed in steps", ev,
              "the step where KV pressure or latency first exceeds the SLO is the server's measured capacity for "
              "this request size", nt, None, rows[0]["ts_start"], rows[-1]["ts_end"], kind="ladder")


def _kv_said(detail: str) -> str:
    """What a start-up failure's record says did not fit: from its first line naming it (a V1 traceback
    opens with 'File ...' lines), lines of a hard-wrapped paste (80 characters and more) joined back."""
    lines = detail.split("\n")
    at = next((i for i, ln in enumerate(lines) if _KV_SAID.search(ln)), None)
    if at is None:
        return detail
    out: list[str] = []
    for prev, ln in zip([None, *lines[at:]], lines[at:], strict=False):
        if prev is not None and len(prev) >= 80:  # the paste's wrap: the line goes on
            out[-1] += ln
        else:
            out.append(ln.strip())
    return " ".join(out)


def _events(ctx: Context) -> list[dict]:
    ev = ctx.inputs.events
    out = []
    # in time order (then file and line): which line a finding quotes must not hang on the files' order
    ev = ev.sort(["ts", "source", "line_no"], nulls_last=True, maintain_order=True)
    itl = ev.filter(pl.col("kind") == "input_too_long")
    if itl.height:
        out.append(_f("low", f"{itl.height} request(s) rejected as longer than the model's context",
                      "requests rejected with 400 because prompt + max_tokens exceed max_model_len",
                      f"first at {_t(itl['ts'].min())}: {(itl['message'][0] or '')[:200]}",
                      "the client sends prompts (plus max_tokens) longer than --max-model-len",
                      "Cap prompt + max_tokens at the client to max_model_len (truncate or summarise long inputs)",
                      None, itl["ts"].min(), itl["ts"].max()))
    kvi = ev.filter(pl.col("kind") == "kv_insufficient")
    if kvi.height:
        r = kvi.row(kvi.height - 1, named=True)  # the latest
        text = _kv_said(r["detail"] or r["message"] or "")
        if kvi.height > 1:
            text = f"{kvi.height} failed start-ups; the latest ({r['source']}): {text}"
        cap = ev.filter(pl.col("kind") == "capacity")
        ok = cap.filter(pl.col("max_concurrency") >= 1)["max_concurrency_tokens"].drop_nulls()
        hint = f"; a run with max_model_len {ok.max()} did start" if ok.len() else ""
        mml = r["max_model_len"]
        out.append(_f("critical", "The server cannot start: max_model_len needs more KV cache than there is",
                      f"start-up failed: one sequence of max_model_len{' ' + str(mml) if mml else ''} tokens does "
                      "not fit in the KV cache", f"{text[:300]}{hint}",
                      "the memory left for the KV cache after the weights is smaller than one max-length sequence",
                      "Start with a shorter --max-model-len (at most the estimated maximum vLLM printed, or the KV "
                      "cache's token count)", None, r["ts"], r["ts"], kind="startup"))
    untimed = ev.filter((pl.col("kind") == "preemption") & pl.col("ts").is_null())
    if untimed.height and not ctx.pre.height and not ctx.warnings.height:
        cum = untimed["cumulative_preemptions"].max()
        out.append(_f("low", f"Preemption warning without a time ({untimed.height} line(s))",
                      "vLLM V0 reported preemptions: the KV cache ran out for running requests",
                      f"total_num_cumulative_preemption={cum} (V0 prints one warning per 50 preemptions, so at least "
                      f"{cum} preemptions since the server started); the line carries no timestamp, so no episode "
                      "can be placed", "the KV cache is too small for the admitted requests at some point",
                      "Keep the full log lines (timestamps) and measure capacity with a concurrency ladder",
                      None, kind="pressure"))
    return out


def _cold(ctx: Context, cold: dict) -> list[dict]:
    """First requests after a start much slower than warm ones (compilation, caches, a retried backlog)."""
    warm = (cold.get("warm") or {}).get("ttft_p95")
    out = []
    for w in cold.get("windows", []):
        c = w["ttft_p95"]
        if c is None or warm is None or c <= ctx.slo.ttft_s or c <= 2 * warm:
            continue
        out.append(_f("low", f"Slow first tokens after the server start ({clock.hms_range(w['start'], w['end'])})",
                      f"TTFT p95 {c:.2f} s in the first {ctx.th.cold_start_s:.0f} s of traffic, {warm:.2f} s warm",
                      f"{w['requests']} requests from {_t(w['first_request'])}, success {_pct(w['success_share'])}; "
                      f"server ready at {_t(w['ready'])}",
                      "a cold server (compilation, empty caches), plus whatever backlog of retried requests "
                      "arrives at once when it comes up",
                      "Warm the server up before it takes traffic: a readiness check that sends one real request "
                      "before the gateway routes to it", None, w["start"], w["end"], kind="latency"))
    if len(out) > REPEATS:  # a crash loop restarts cold every time: one finding for all the restarts
        _stands_for(out[0], len(out), "slow restarts", "restarts with slow first tokens", out[0]["start"],
                    out[-1]["start"])
        out = out[:1]
    return out


def _gateway(ctx: Context) -> list[dict]:
    ga = ctx.inputs.gateway
    if ga.height == 0 or ga["upstream"].null_count() == ga.height:
        return []
    per = (ga.group_by("upstream")  # a category (diagnose.tables): grouped first, its few values then read as text
           .agg(pl.len().alias("n"), (pl.col("upstream_status").is_between(200, 399)).sum().alias("ok"),
                pl.col("ts_end").min().alias("lo"), pl.col("ts_end").max().alias("hi"))
           .with_columns(pl.col("upstream").cast(pl.String))
           .filter(pl.col("upstream").str.contains(":") & (pl.col("ok") == 0) & (pl.col("n") >= 3)).sort("upstream"))
    return [_f("low", f"Upstream {r['upstream']} never answered ({r['n']} attempts)",
               "the gateway kept sending attempts to an upstream that never returned a response",
               f"{r['n']} attempts {clock.hms_range(r['lo'], r['hi'])}, none answered; each costs a connect failure "
               "and a gateway retry", "a dead member of the upstream group",
               "Remove it from the upstream group (or give the gateway an active health check)", None, r["lo"], r["hi"],
               kind="other")
            for r in per.iter_rows(named=True)]


def _calm(ctx: Context, eps: list[dict], cap: dict) -> list[dict]:
    srv = ctx.server
    bits = []
    n = ctx.inputs.requests.height
    if n:
        oc = ctx.inputs.requests.group_by("outcome").len().sort("outcome")
        known = ", ".join(f"{c} {o}" for o, c in oc.iter_rows() if o != "unknown")
        bits.append(f"{n} request{'s' if n != 1 else ''}" + (f" ({known})" if known else ""))
        ab = ctx.inputs.server_requests["aborted_ts"].is_not_null().sum()
        if ab:
            bits.append(f"{ab} aborted by the caller (vLLM 'Aborted request')")
    if srv.height:
        if srv["running"].drop_nulls().len():
            bits.append(f"running at most {int(srv['running'].max())}")
        if srv["waiting"].drop_nulls().len():
            bits.append(f"waiting at most {int(srv['waiting'].max())}")
        if srv["kv"].drop_nulls().len():
            bits.append(f"KV at most {_pct(srv['kv'].max())}")
    if ctx.pre.height:
        bits.append(f"{int(ctx.pre['preemptions'].sum())} preemptions")
    if cap.get("kv_tokens"):
        bits.append(f"KV cache {cap['kv_tokens']:,} tokens")
    if cap.get("max_concurrency_startup"):
        bits.append(f"start-up capacity {cap['max_concurrency_startup']:g}× requests of "
                    f"{cap.get('max_concurrency_tokens') or '?'} tokens")
    n_events = ctx.inputs.events.height + ctx.inputs.access_lines
    if not bits and n_events:
        bits.append(f"{n_events} server event(s) recognised, no stats line or request")
    title = "Nothing alarming" + ("" if not eps else f" ({len(eps)} minor episode(s))")
    note = _shape_note(ctx)
    if not bits and not note and n_events == 0:
        return [_f("info", "Nothing to diagnose: no server, gateway or client records were recognised",
                   "no stats line, request, event or access line was recognised in the input", "",
                   "the input is in a format logscope does not read (see files.parquet / unrecognized.parquet)",
                   "Add the vLLM server log (stdout of vllm serve) to the folder", None, kind="other")]
    return [_f("info", title, "no episode of pressure, errors, retries or crash" if not eps else "only minor episodes",
               "; ".join(bits) + (f"; {note}" if note else ""), "the load stayed within what the server handles",
               "Nothing to change; to know the headroom, run a concurrency ladder", None, ctx.span_lo, ctx.span_hi,
               kind="other")]


GAP_NOTE_S = 30.0  # vLLM logs stats every 5-10 s by default; a longer silence is an idle (DEBUG) stretch


def _shape_note(ctx: Context) -> str:
    srv = ctx.server
    if srv.height < 2:
        return ""
    gaps = srv.select((pl.col("ts").diff().dt.total_seconds()).alias("g"))["g"].drop_nulls()
    notes = []
    regular = gaps.max() <= max(3 * gaps.median(), 1) and gaps.max() <= GAP_NOTE_S
    if gaps.max() > GAP_NOTE_S:
        notes.append(f"stats lines are irregular: gaps of {gaps.min():.0f}–{gaps.max():.0f} s between them (vLLM "
                     "logs stats every few seconds while busy; idle intervals are logged at DEBUG, so the gaps "
                     "are idle time, not missing data)")
    one = srv["running"].max() == 1 and srv["waiting"].fill_null(0).max() == 0
    no_new = (srv["prompt_tps"].fill_null(0).slice(1) == 0).all()
    if one and no_new and regular and (srv["gen_tps"].fill_null(0) > 0).all():
        span = (srv["ts"].max() - srv["ts"].min()).total_seconds()
        notes.append(f"one request generating through the whole {span:.0f} s (about {srv['gen_tps'].mean():.0f} "
                     "tokens/s, no new prompt): a single long generation, not an incident (cap max_tokens if "
                     "unintended)")
    return "; ".join(notes)
