"""The verdict: three short lines (what happened; when, and one-off or sustained; the first thing to test), and
the claim they state (``claims.Claim`` of kind ``verdict``): its state (crash, sustained, one-off, recurring,
ladder, finding, nothing alarming, unknown) and the facts it rests on: the headline episode and its class
claim, finding 1, the ladder's boundary claim, the calm claim. Episodes that are context (a one-sample blip)
never lead it.
"""

from __future__ import annotations

from .. import clock
from . import findings, ladder, ladder_death, latency_named, preemption_count, undated
from .claims import Claim, Fact, Registry
from .context import Context
from .episode_claim import AS_FAR, cut_by_end
from .findings import kv_admitted
from .findings.record import engines_note
from .records import Episode

CLASS_STATE = {"crash": "crash", "sustained": "sustained", "spike": "one-off", "recurring": "recurring"}


def build(ctx: Context, eps: list, fnd: list, lad: dict | None, reg: Registry) -> list[str]:
    """The verdict's lines; its claim is added to ``reg`` (id 'verdict')."""
    shown = [e for e in eps if e["class"] != "context"]
    lines, state, main = _verdict(ctx, shown, fnd, lad, reg)
    aside = [e for e in eps if e["class"] == "context"]
    if aside and not shown and len(lines) == 3 and lines[1].endswith("."):
        # 'no episode' beside a level the episodes table lists: say what was set aside, and why
        lines[1] = f"{lines[1][:-1]}; {set_aside(aside)}."
    top = fnd[0] if fnd else None
    calm = reg.get("calm")
    bound = reg.get("ladder.boundary")
    facts = [
        Fact("episode", main["episode_id"] if main is not None else None),
        Fact("episode_class", main["class"] if main is not None else None),
        Fact("class_claim", main.get("claim_id") if main is not None else None),
        Fact("episodes", len(shown)),
        Fact("context_episodes", len(aside)),
        Fact("finding", top["finding_id"] if top is not None else None),
        Fact("finding_severity", top["severity"] if top is not None else None),
        Fact("steps", len(lad["steps"]) if lad else None),
        Fact("boundary_claim", bound.id if bound is not None else None),
        Fact("calm", calm.state if calm is not None and calm.state == "nothing alarming" else None),
    ]
    missing = list(calm.missing) if state == "unknown" and calm is not None else []
    if state == "unknown" and not missing:
        missing = ["any server, gateway or client record"]
    reg.add(Claim("verdict", "verdict", "what happened", state, facts, {}, missing, "\n".join(lines)))
    return lines


# what a one-sample level of each signal was (episode_class.BLIP_SIGNALS)
_LEVEL = {
    "kv_pressure": lambda e: f"KV {e['peak'] * 100:.1f} %",
    "queue": lambda e: f"{e['peak']:.0f} waiting",
    "stall": lambda e: "requests running with no progress",
}
SHOWN_ASIDE = 3  # levels named; more are counted


def set_aside(aside: list) -> str:
    """'1 one-sample level set aside as context: KV 93.8 % at 09:53:24' (episode_class.mark_context's rule)."""
    named = [
        f"{_LEVEL.get(e['signal'], lambda e: e['signal'])(e)} at {clock.hms(e['start'])}"
        + (f" on {e['replica']}" if e.get("replica") and len({a.get("replica") for a in aside}) > 1 else "")
        for e in aside[:SHOWN_ASIDE]
    ]
    more = f", and {len(aside) - SHOWN_ASIDE} more" if len(aside) > SHOWN_ASIDE else ""
    n = len(aside)
    return f"{n} one-sample level{'s' if n != 1 else ''} set aside as context: {', '.join(named)}{more}"


def _verdict(
    ctx: Context, eps: list, fnd: list, lad: dict | None, reg: Registry
) -> tuple[list[str], str, Episode | None]:
    """Three short lines: what happened; when, and one-off or sustained; the first thing to test."""
    top = fnd[0] if fnd else None
    test = f"First thing to test: {top['next_test']}" if top else "Nothing to test."
    if not eps and top is not None and top["title"].startswith("Nothing to diagnose"):
        return [top["title"] + ".", "No time range could be examined.", test], "unknown", None
    lo, hi = ctx.span_lo, ctx.span_hi
    # logs that cover one second (one stats line, one request) are a moment, not a range it was calm over; a file
    # timed only by its modification time gives no time of the incident: it is named, never given a time
    rng = (
        f"{undated.named(ctx.inputs.undated)}, which state{'s' if len(ctx.inputs.undated) == 1 else ''} no time"
        if not lo and ctx.inputs.undated
        else "the logs"
        if not lo
        else f"the one moment the logs cover ({clock.hms(lo)})"
        if hi is None or (hi - lo).total_seconds() < 1
        else clock.hms_range(lo, hi)
    )
    if not eps:
        if top is not None and top["severity"] != "info":
            kind = (
                "the death's record carries no time, so when it died and what came after are not in the logs"
                if top["kind"] == "crash" and top["start"] is None and top["episode_id"] is None
                else "a start-up failure, not a load regime"
                if top["kind"] in ("startup", "crash")
                else "a load above capacity, with no episode of server pressure"
                if top["kind"] == "capacity" and top["episode_id"] is None and top["start"] is not None
                else "what the platform's records show (no server time series places it in a load regime)"
                if top["kind"] == "platform"
                else _stall_words(top)
                if top["kind"] == "stall" and top["start"] is not None
                else "nothing that spikes or lasts over time"
            )
            # records with no time (a pasted table, a log without asctime): no range to hold episodes; a platform
            # kill or an event has its time, so this is said only of a finding with none
            untimed = getattr(ctx.inputs, "untimed", None)
            if lo is None and top["start"] is None and untimed is not None and not untimed.empty:
                line = "No time range could be examined: its records carry no time."
                return [f"{top['title']}.", line, test], "finding", None
            return [f"{top['title']}.", f"No episode in {rng}: {kind}.", test], "finding", None
        if lad is not None and lad.get("working_boundary"):
            return (
                [
                    f"Ladder: every step up to {ladder.nice(lad['working_boundary']['concurrency'])} met the SLO"
                    f"{_engine_only(reg)}.",
                    "No episode: no one-off spike, no sustained regime.",
                    test,
                ],
                "ladder",
                None,
            )
        calm = reg.get("calm")
        if calm is None or calm.state != "nothing alarming":
            what = calm.sentence if calm is not None else "nothing shows how the server served"
            return [f"{what[0].upper()}{what[1:]}.", f"No episode in {rng}.", test], "unknown", None
        return (
            [
                f"Nothing alarming in {rng}: no preemption, crash, queue or error episode.",
                "Calm throughout: no one-off spike, no sustained regime."
                if "one moment" not in rng and not (not lo and ctx.inputs.undated)
                else "One moment shows no spike and no regime: what came before and after is not in the logs.",
                test,
            ],
            "nothing alarming",
            None,
        )
    if lad is not None and "crash" not in {e["class"] for e in eps}:
        return [*_ladder_verdict(eps, lad, reg), test], "ladder", None
    # the headline is finding 1's: its episode, or (a run-level finding) the episode that weighs most
    by_id = {e["episode_id"]: e for e in eps}
    main = by_id.get(top["episode_id"]) if top is not None and top.get("episode_id") else None
    main = (
        main
        or next((e for e in eps if e["class"] == "crash"), None)
        or max(
            eps,
            key=lambda e: ({"sustained": 3, "recurring": 2, "spike": 1}.get(e["class"], 0), e["duration_s"]),
        )
    )
    felt = next((f for f in fnd if f.get("episode_id") == main["episode_id"]), None)
    if (
        top is not None
        and top.get("episode_id") is None
        and top["severity"] in ("critical", "high", "medium")
        and main["class"] != "crash"
        and felt is not None
        and felt["severity"] in ("low", "info")
        and felt.get("failed_requests") == 0
        and felt.get("slowed_requests") == 0
    ):
        # finding 1 is run-level and the weightiest episode touched no caller (traced-1r: a 0 s burst of 5
        # preemptions, no request slowed or failed): the finding leads, the episode is named as not felt
        return (
            [
                f"{top['title']} ({top['finding_id']}).",
                f"No episode the callers felt: {main['episode_id']} ({_what(main)}, {_span(main)}) slowed or "
                f"failed none of the requests in flight ({len(eps)} episode{'s' if len(eps) != 1 else ''} in all).",
                test,
            ],
            "finding",
            None,
        )
    head = _headline(main, findings.replica_count(ctx, eps) > 1)
    if top is not None and top.claim_id == "capacity.overload" and main["class"] != "crash":
        # the load above capacity is the cause; the episode (preemptions, a queue) is its symptom
        head = f"{top['title']} ({top['finding_id']}); its symptom: {head[0].lower()}{head[1:]}"
    elif (
        top is not None
        and top["kind"] not in ("pressure", "crash", "stall", "latency", "errors", "platform")
        and top["severity"] in ("critical", "high", "medium")
    ):
        # finding 1 is about the traffic (retries, orphaned work) during it: say so in the same line
        head = head.rstrip(".") + f"; {top['title'][0].lower()}{top['title'][1:]} ({top['finding_id']})."
    elif (
        top is not None
        and top["kind"] == "crash"
        and main["class"] != "crash"
        and top.get("episode_id") == main["episode_id"]
    ):
        head = head.rstrip(".") + f"; {top['title'][0].lower()}{top['title'][1:]} ({top['finding_id']})."
    like = [e for e in eps if findings.pattern_key(e) == findings.pattern_key(main)]
    if main["class"] == "crash" and len(like) > 1:
        # several deaths: a crash loop as far as each start between them is the same server (death_run)
        from .death_run import of as death_run

        which = (
            "the first" if main["start"] == like[0]["start"] else "the longest"
        )  # main: the longest episode
        head = f"{death_run(ctx, like).words()}; {which}: {head[0].lower()}{head[1:]}"
    # the same trouble starting at the same time elsewhere: a node, a rollout or the traffic took them together
    together = sorted(
        {
            e["replica"]
            for e in eps
            if e["replica"]
            and e["replica"] != main["replica"]
            and (e["class"], e["signal"], e["start"]) == (main["class"], main["signal"], main["start"])
        }
    )
    if together:
        head += f" The same at the same time on {len(together)} other replica(s): {findings.named(together)}."
    return [head, _when(ctx, main, eps), test], CLASS_STATE[main["class"]], main


def one_line(e: Episode) -> bool:
    """One stats line holds the episode and every companion of it (public-2 n19's 0 s preemption had a 70 s queue
    beside it: not one line)."""
    comps = (e.get("details") or {}).get("companions") or []
    return e["duration_s"] == 0 and all(c["start"] == e["start"] and c["end"] == e["end"] for c in comps)


def _span(e: Episode) -> str:
    return clock.hms_span(e["start"], e["end"])


def _headline(e: Episode, several: bool = False) -> str:
    """What happened, in one line: the episode's signal with its numbers and the server state. In a folder of
    several replicas it names the one it happened on (traced-2r-kill read 'The vLLM server was killed' of b alone)."""
    on = e["replica"] if several and e.get("replica") else ""
    if e["signal"] == "crash":
        c = e["details"]["crash"]
        eng = ENGINE_NAMES.get(c.get("engine") or "vllm", "vLLM")  # whose records say it died
        how = (
            (
                "was killed silently (its log stops, a new server starts)"
                if c.get("new_pid") is not None or c.get("restart_ts") is not None
                else "was killed silently (its log stops, the gateway's connections to it are refused)"
            )
            if c["kinds"] == ["silent"]
            else "was killed by the kernel OOM killer"
            if "kernel_oom" in c["kinds"]
            else "was OOMKilled (its container's memory limit)"
            if "oom_killed" in c["kinds"]
            else "died after a GPU fault (the kernel's NVIDIA Xid)"
            if "gpu_xid" in c["kinds"]
            else "died (" + ", ".join(DEATH_WORDS.get(k, k) for k in c["kinds"]) + ")"
        )
        if c["at_startup"]:
            return (
                f"The {eng} engine{' of ' + on if on else ''} {how} at start-up, {clock.hms(e['start'])}, "
                "before serving any request."
            )
        back = (
            # another server in the same log stream is no return of this one (same_server)
            f"; another server in its log stream was ready at {clock.hms_after(e['start'], c['ready'])}"
            if c["ready"] and c.get("same_server_state") == "two servers"
            else f" and was ready again at {clock.hms_after(e['start'], c['ready'])}"
            if c["ready"]
            else ", with no restart in the logs"
        )
        guess = next((n for n in c.get("notes") or [] if n.startswith("a guess: ")), None)
        tied = f"; the kill is tied to it by {guess}" if guess else ""  # platform.attach: said as a guess
        return f"The {eng} server{' ' + on if on else ''} {how} at {clock.hms(e['start'])}{back}{tied}."
    what = _what(e)
    state = []
    if e["kv_max"] is not None:
        state.append(f"KV up to {e['kv_max'] * 100:.1f} %")
    if e["running_max"] is not None:
        state.append(f"{e['running_max']:.0f} running")
    if e["waiting_max"] or (e["waiting_max"] == 0 and e["signal"] == "kv_pressure"):
        state.append(f"{e['waiting_max']:.0f} waiting")
    if state and engines_note(e):
        state[-1] += engines_note(e)
    # a level read on one stats line has no duration: it is said at its time, not 'over 0 s (a–a)'
    comps = [c for c in (e.get("details") or {}).get("companions") or [] if c["end"] > c["start"]]
    when = (
        f"at {clock.hms(e['start'])} (one stats line)"
        if one_line(e) and e["signal"] in ("kv_pressure", "queue", "stall")
        else f"over {e['duration_s']:.0f} s ({clock.hms_range(e['start'], e['end'])})"
        if e["duration_s"] or not comps
        # timed by a signal of one instant, its companions lasting (n19: 1 preemption, beside a 70 s queue)
        else f"at {clock.hms(e['start'])}, beside "
        + " and ".join(f"{COMPANION.get(c['signal'], c['signal'])} {_span(c)}" for c in comps)
    )
    head = f"{what[0].upper() + what[1:]} {when}" + (f": {', '.join(state)}." if state else ".")
    return f"On {on}: {head}" if on else head


ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI"}  # server_events.engine_kind in words
# a death's kinds (lifecycle.DEATH_KINDS) in the headline's words
DEATH_WORDS = {
    "engine_dead": "its engine process is gone",
    "oom": "out of device memory",
    "engine_timeout": "an engine step timed out",
}

COMPANION = {
    "kv_pressure": "a near-full KV cache",
    "queue": "a queue",
    "stall": "a stall",
    "errors": "errors",
}


def _what(e: Episode) -> str:
    """The episode's signal with its numbers."""
    return {
        "preemptions": preemption_count.words(e),
        "kv_pressure": "KV cache near full",
        "queue": f"a queue of up to {e['peak']:.0f} waiting",
        "stall": "requests running with no progress (0 tokens/s)",
        "errors": f"{e['count']:,} failed requests",
        "retries": f"{e['count']:,} retries",
        "orphans": f"{e['count']:,} executions for callers that had left",
        # a latency names its clock and source: the engine's TTFT is not the callers'
        "ttft": f"{latency_named.words('ttft', e.get('signal_clock'), e.get('signal_source'))} up to {e['peak']:.1f} s",
        "e2e": f"{latency_named.words('e2e', e.get('signal_clock'), e.get('signal_source'))} up to {e['peak']:.1f} s",
    }.get(e["signal"], f"{e['signal']} above normal")


# a crash's companion signals, as the verdict's second line says them (n10 read 'not back before the logs end with
# stall meanwhile', traced-2r-kill 'with e2e and errors and kv_pressure and preemptions and … meanwhile')
_MEANWHILE = {
    "stall": "a stall",
    "errors": "errors",
    "retries": "retries",
    "orphans": "orphaned work",
    "kv_pressure": "KV pressure",
    "preemptions": "preemptions",
    "queue": "a queue",
    "ttft": "slow first tokens",
    "e2e": "slow answers",
}


def _stall_words(top) -> str:
    """A slow engine with no episode: it lasted (vllm-slow-decode, public-2 n14: 0.2-0.8 tokens/s on every stats line
    of the range once read 'nothing that spikes or lasts over time' beside a finding over 30 s)."""
    said = {f.name: f.value for f in top.facts or []}
    lines, to_end = said.get("samples"), said.get("to_the_end")
    on = f" on {lines} stats lines in a row" if lines else ""
    if to_end:
        return (
            f"no pressure, error or latency episode; the slowness held{on} to the end of the logs, so how long it "
            "lasted is not in them"
        )
    return (
        f"no pressure, error or latency episode; the slowness held{on}, then the engine sped up or went idle"
    )


def _when(ctx: Context, e: Episode, eps: list[Episode]) -> str:
    others = f" ({len(eps)} episodes in all)" if len(eps) > 1 else ""
    if e["class"] == "crash":
        c = e["details"]["crash"]
        comp = {x["signal"] for x in e["details"]["companions"]}
        said = [_MEANWHILE.get(x, x.replace("_", " ")) for x in sorted(comp)]
        extra = f", with {', '.join(said[:-1])} and {said[-1]} meanwhile" if len(said) > 1 else ""
        extra = extra or (f", with {said[0]} meanwhile" if said else "")
        down = (
            # another server's readiness is no return of this one (same_server)
            f"not back in its log stream, where another server was ready {c['downtime_s']:.0f} s after it"
            if c["downtime_s"] is not None and c.get("same_server_state") == "two servers"
            else f"down {c['downtime_s']:.0f} s"
            if c["downtime_s"] is not None
            else f"not back before {ctx.inputs.rng.end_words}"
        )
        n = findings.replica_count(ctx, eps)
        of = (
            f" of 1 of the {n} replicas" if n > 1 and e.get("replica") else ""
        )  # the others may have served on
        return f"A crash{of}, {down}{extra}{others}."
    why = e["why"]
    level = kv_admitted.admitted(ctx, e)
    if level is not None:  # a full cache every request got into: its class says how long, not that it hurt
        return (
            f"{'Sustained' if e['class'] == 'sustained' else e['class'].capitalize()} as a level ("
            f"{why.strip().rstrip('.')}), not as pressure: no request waited in it (0 on every stats line); "
            f"{kv_admitted.preemption_words(level)}{others}."
        )
    if cut_by_end(e):
        # the logs stop inside it: no recovery was seen, and none could be (s01: a 4 s excerpt of a benchmark's start)
        if one_line(e):
            return f"One stats line, still abnormal when the logs end: how long it lasted is not in the logs{others}."
        return (
            f"Sustained {AS_FAR}: {why.strip().rstrip('.')}, so its recovery, if any, is not in them{others}."
        )
    label = {
        "sustained": "Sustained regime, not a one-off",
        "recurring": "Recurring, not a one-off",
        "spike": "One-off",
    }[e["class"]]
    return f"{label}: {why.strip().rstrip('.')}{others}."


def _engine_only(reg: Registry) -> str:
    b = reg.get("ladder.boundary")
    return (
        " by the engine's clock (the callers' TTFT is not in this folder)"
        if b and b.value("engine_only")
        else ""
    )


def _ladder_verdict(eps: list, lad: dict, reg: Registry) -> list[str]:
    rows = lad["steps"]
    wb, nxt, pf = lad["working_boundary"], lad["broke_first_at_next_step"], lad.get("pressure_from_step")
    levels = "→".join(ladder.nice(r["concurrency"]) for r in rows)
    unk = lad.get("unknown_at_next_step")
    held = (
        f"the SLO held up to {ladder.nice(wb['concurrency'])}{_engine_only(reg)}"
        if wb
        else "no step was judged below it"
        if unk
        else "no step met the SLO"
    )
    broke = (
        ladder_death.words(nxt, ladder.nice(nxt["concurrency"]))
        if nxt
        else f"; at {ladder.nice(unk['concurrency'])} undecided: {unk['undecided']}"
        if unk and unk.get("status") == "undecided"
        else f"; at {ladder.nice(unk['concurrency'])} not judged: {unk['not_judged']}"
        if unk and unk.get("status") == "censored"
        else f"; at {ladder.nice(unk['concurrency'])} unknown (no {', '.join(unk['missing'])})"
        if unk
        else ""
    )
    pressure = f"from {ladder.nice(pf['concurrency'])}" if pf else "above the boundary"
    return [
        f"Ladder {levels}: {held}{broke}.",
        f"Not a one-off: pressure comes with the load, {pressure} up ({len(eps)} episode"
        f"{'s' if len(eps) != 1 else ''}), and ends with it.",
    ]
