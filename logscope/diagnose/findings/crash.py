"""Findings of a dead or stalled server: out of memory, engine timeout or death, silent kill, stall."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import clock
from ..claims import facts
from ..context import Context
from ..records import Episode, Finding
from .record import clock_time, make_finding, num, requests_phrase, state_phrase

if TYPE_CHECKING:
    from ..stop_errors import StopErrors


def stall_finding(ctx: Context, ep: Episode) -> Finding:
    return make_finding(
        "critical" if ep["class"] == "sustained" else "high",
        f"Engine stalled: requests running with no progress {clock.hms_range(ep['start'], ep['end'])}",
        f"{num(ep['running_max'])} request(s) running with 0 prompt and 0 generation tokens/s for "
        f"{ep['duration_s']:.0f} s",
        "; ".join(e for e in [ep["reason"], state_phrase(ep)] if e),
        "the engine makes no progress on admitted requests (a hung step, device or collective); a hung "
        "engine still answers /health and its idle-looking stats go to DEBUG, so it looks quiet",
        "Take a stack dump of the engine process during the stall (py-spy dump --pid <EngineCore pid>) to "
        "see where the step hangs",
        ep,
        kind="stall",
    )


KV_DEATH = "max_model_len needs more KV cache than there is"  # a start-up death the KV check caused


def lower_cap(mns: int | None, ep: Episode) -> str:
    """' from 64 to 4 (…)': the lower --max-num-seqs a death's next test tries, with where the figure comes from.
    A cap at or above what ran changes nothing: the lab's crash ran at most 8 of 64 and was told 'from 64 to 32'.
    Halved what ran when the server's stats give it (in the episode or the minute before it), else the setting."""
    if not mns:
        return ""
    seen = [r for r in (ep.get("running_max"), ep["details"].get("state_before", {}).get("running_max")) if r]
    ran = int(max(seen)) if seen else None
    if ran is None:
        return f" from {mns} to {max(1, mns // 2)} (half: no running count in the logs to size it from)"
    if ran <= mns // 2:
        return (
            f" from {mns} to {max(1, ran // 2)} (half the {ran} that ran at most around it: a cap at or above "
            f"{ran} changes nothing)"
        )
    return f" from {mns} to {max(1, mns // 2)} (half; up to {ran} ran around it)"


def death_finding(ctx: Context, ep: Episode, cap: dict) -> Finding:
    """A death's finding; one whose logs do not say whether it came at start-up says so in its title (public-2
    n11: six lines of an RPC timeout's traceback, no start, readiness or request line), never 'while serving'."""
    from .raised import of as raised_of

    f = _death_finding(ctx, ep, cap)
    # the titles that said more: 'while serving', or a death whose next test is a load's (not a GPU fault's, a
    # platform kill's or a silent exit's: their cause is read elsewhere)
    if ep["details"]["crash"]["at_startup"] is None and f["title"].startswith(
        ("Engine died at", "Out of memory")
    ):
        f["title"] = (
            f["title"].replace("Out of memory while serving:", "Out of memory:") + " (at start-up: unknown)"
        )
    own = raised_of(ctx, ep)
    if (
        own is not None and own.words() in f["evidence"]
    ):  # no killer: its own error, said where it is read first
        f["title"] += f" (it raised {own.error}: no killer)"
        if f["cause"] == SEE_FIRST:
            where = f" in {own.frame}" if own.frame else ""
            f["cause"] = (
                f"the process raised {own.said()[:200]}{where} and exited on it: a fault of the software, or of "
                "a setting or input it could not handle, not a kill"
            )
    return f


SEE_FIRST = "see the first error record before the death (detail in server_events)"


def _death_finding(ctx: Context, ep: Episode, cap: dict) -> Finding:
    c = ep["details"]["crash"]
    kinds = c["kinds"]
    down = c["downtime_s"]
    ev = [ep["reason"]]
    if c.get("message"):
        ev.append(f"first record: {c['message'][:200]}")
    if c.get("gateway_first_error") is not None:
        ev.append(
            f"the gateway's error log from {clock.hms(c['gateway_first_error'], ms=True)}: "
            + ", ".join(f"{v:,} {k} lines" for k, v in c["gateway_errors_by_kind"].items())
        )
    r = requests_phrase(ep)
    if r:
        ev.append(r)
    cost = paid(ctx, ep)
    if cost:
        ev.append(cost)
    if c.get("same_server"):  # why the start after it is this server back, or another (same_server)
        ev.append(c["same_server"])
    half = lower_cap(cap.get("max_num_seqs"), ep)
    when = f"{clock_time(ep['start'])}" + (
        f", {'another server ready' if c.get('same_server_state') == 'two servers' else 'back'} at "
        f"{clock.hms_after(ep['start'], c['ready'])} ({down:.0f} s down)"
        if down is not None
        else ", no restart in the logs"
    )
    from .platform import crash_finding
    from .raised import killer_words

    if (killed := crash_finding(ctx, ep, c, when, half, cap)) is not None:  # the platform shows who killed it
        return killed
    from .gpu_fault import fault_finding

    if (fault := fault_finding(ctx, ep, c, when)) is not None:  # a GPU fault (Xid) came just before it
        return fault
    if c["at_startup"] and (refused := _kv_refused(ctx, ep)) is not None:
        # its start-up check refused the KV cache (lab kv-short-refused: 'To serve at least one request with the
        # model's max seq len (1024) …', then 'Engine core initialization failed'): that is the death's cause, and
        # no request size or --max-num-seqs had any part in it
        return make_finding(
            "critical",
            f"Engine died at start-up ({clock_time(ep['start'])}): {KV_DEATH}",
            "the engine refused to start: one sequence of max_model_len tokens does not fit in its KV cache",
            "; ".join([*ev, f"its start-up check ({clock_time(refused['ts'])}): {refused['said'][:300]}"]),
            "the memory left for the KV cache after the weights is smaller than one max-length sequence",
            "Start with a shorter --max-model-len (at most the estimated maximum vLLM printed, or the KV cache's "
            "token count), or give the KV cache more memory",
            ep,
            kind="crash",
        )
    from .startup_death import finding as startup_finding

    if (born := startup_finding(ctx, ep, c, when, ev)) is not None:  # its signal or error, not the load
        return born
    # no cause in its own log: say what the folder lacks, or that it raised its own error (no killer)
    ev += [] if {"oom", "engine_timeout"} & set(kinds) else [killer_words(ctx, ep)]
    if "oom" in kinds:
        if c["at_startup"]:
            return make_finding(
                "critical",
                f"Out of memory at startup ({clock_time(ep['start'])})",
                "the engine ran out of device memory before serving any request",
                "; ".join(ev),
                "weights plus the KV-cache reservation (and warm-up activations) do not fit on the device",
                "Start with a shorter --max-model-len (a smaller KV reservation per sequence); if the weights "
                "alone do not fit, load a supported quantization of the model",
                ep,
                kind="crash",
            )
        return make_finding(
            "critical",
            f"Out of memory while serving: engine died at {when}",
            "the engine hit a device out-of-memory error mid-serving and the server died",
            "; ".join(ev),
            "activations of the active batch (plus weights and the KV allocation) exceeded device memory; long "
            "requests make activations larger",
            f"Lower --max-num-seqs{half} (a smaller active batch) and replay the same traffic; if it still runs out, "
            "shorten --max-model-len, then consider a supported quantization",
            ep,
            kind="crash",
        )
    if "engine_timeout" in kinds:
        return make_finding(
            "critical",
            f"Engine step timed out: engine died at {when}",
            "an engine step did not return in time and the engine was declared dead",
            "; ".join(ev),
            "a model step hung (device or collective hang) or the batch made one step too slow",
            f"Replay the same traffic with --max-num-seqs{half or ' halved'}: if the timeout goes, step size was "
            "the cause; if it stays, the device hangs (run with NCCL_DEBUG=INFO to find where)",
            ep,
            kind="crash",
        )
    if kinds == ["silent"]:
        return make_finding(
            "critical",
            f"Server killed without a trace at {when}",
            f"the vLLM log stops mid-traffic (pid {c['pid']}) and a new server starts (pid {c['new_pid']})"
            if c.get("new_pid") is not None
            else f"the vLLM log stops mid-traffic (pid {c['pid']}) and the gateway's connections to it are refused",
            "; ".join(ev + c.get("notes", [])),
            "the API server was killed from outside (SIGKILL: kernel OOM killer, supervisor or operator): vLLM "
            "prints nothing when killed",
            f"Find what killed pid {c['pid']} at about {clock_time(ep['start'])} (kernel log / journalctl for the OOM "
            "killer, the supervisor's log); if it was the OOM killer, test a lower --max-num-seqs" + half,
            ep,
            kind="crash",
        )
    from .engine_exit import cause_words, next_test_words, silent_exit

    if (
        gone := silent_exit(ctx, ep, c)
    ) is not None:  # its EngineCore printed no error: killed or crashed natively
        return make_finding(
            "critical",
            f"Engine process ended with no error of its own at {when}",
            "the engine process died and the API server could not serve",
            "; ".join(ev),
            cause_words(gone),
            next_test_words(gone, clock_time(ep["start"]), half),
            ep,
            kind="crash",
        )
    return make_finding(
        "critical",
        f"Engine died at {when}",
        "the engine process died and the API server could not serve",
        "; ".join(ev),
        SEE_FIRST,
        "Reproduce with the same request sizes at a lower --max-num-seqs"
        + half
        + " to tell a load-driven death from a software fault",
        ep,
        kind="crash",
    )


UNTIL = {
    "ready": "the server was ready again",
    "restart": "the new server's banner (its readiness is not logged)",
    "logs_end": "the gateway's last answer: the server was not back before its log ends",
}


def paid(ctx: Context, ep: Episode) -> str:
    """The gateway's 5xx from the death until the server was back: stop_errors.errors_after's count, the one the
    timeline's label and diagnosis.json's server_lifecycle give."""
    e = ctx.stop_errors.get((ep["start"], ep["replica"] or None))
    if e is None or not e.total:
        return ""
    return f"the gateway answered {_answered(e, 'from it ')}"


def _answered(e: StopErrors, since: str = "") -> str:
    """'700 requests with 502 [since]until 08:35:31 (why it ends there)'; each status's count when there were
    several. The one phrasing of stop_errors.errors_after's count for a death and for a stop."""
    from ..stop_errors import STOP_ERRORS_S

    with_ = (
        str(next(iter(e.by_status)))
        if len(e.by_status) == 1
        else ", ".join(f"{v:,} × {k}" for k, v in e.by_status.items())
    )
    why = UNTIL.get(e.bound, f"{STOP_ERRORS_S:.0f} s after it, with no return in that time")
    return f"{e.total:,} requests with {with_} {since}until {clock.hms(e.until)} ({why})"


def stop_findings(ctx: Context, eps: list[Episode]) -> list[Finding]:
    """A server stopped (gracefully: SIGTERM, a deploy, a probe) while an episode was under way: what happened
    is a stop in the middle of an incident, and the errors the callers saw after it (stop_errors.errors_after:
    the count diagnosis.json and the timeline give too)."""
    from ..load_ends import stop_in

    out = []
    for ep in eps:
        t = stop_in(ctx, ep) if not ep["recovered"] else None
        if t is None:
            continue
        e = ctx.stop_errors.get((t, ep["replica"] or None))
        n5 = e.total if e else 0
        errs = f"; then the gateway answered {_answered(e)}" if e and n5 else ""
        title = f"Server stopped during {ep['episode_id']} at {clock_time(t)} (graceful shutdown)" + (
            f"; {n5:,} gateway 5xx after it" if n5 else ""
        )
        ev = (
            f"a graceful shutdown of {ep['replica'] or 'the server'} began at {clock_time(t)} while {ep['episode_id']} "
            f"({ep['signal'].replace('_', ' ')}, {clock.hms_range(ep['start'], ep['end'])}) was under way{errs}"
        )
        out.append(
            make_finding(
                "high",
                title,
                "the server went away in the middle of an overload, and callers saw errors "
                "instead of slow answers",
                ev,
                "something stopped the server under load: a liveness probe that times out while the server "
                "is saturated (the orchestrator then restarts it), a deploy or an autoscaler",
                "Find who sent the stop at that time (the orchestrator's events, the deploy log); if a "
                "liveness probe did it, give the probe a timeout the saturated server meets (or probe "
                "/health, which answers while requests queue) and replay the load",
                ep,
                kind="crash",
                facts=facts("engine_log", stopped_at=t, gateway_5xx_after=n5, during=ep["episode_id"]),
            )
        )
        out[-1].claim_id = None  # the stop is the claim here, not the episode's class
    return out


def _kv_refused(ctx: Context, ep: Episode) -> dict | None:
    """The engine's start-up KV check that failed (kind kv_insufficient) on the dead replica, at or before its death."""
    import polars as pl

    ev = ctx.inputs.events
    if ev.height == 0:
        return None
    kv = ev.filter((pl.col("kind") == "kv_insufficient") & (pl.col("ts") <= ep["start"]))
    if ep.get("replica") and "replica" in kv.columns:
        kv = kv.filter(pl.col("replica").fill_null(ep["replica"]) == ep["replica"])
    if kv.height == 0:
        return None
    r = kv.sort("ts").row(kv.height - 1, named=True)
    from .events import _kv_said

    return {"ts": r["ts"], "said": _kv_said(r["detail"] or r["message"] or "")}
