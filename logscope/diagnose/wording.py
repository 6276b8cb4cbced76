"""The sentence of each claim (``claims.Claim``), from its state and facts alone.

Every output prints these sentences as they are (diagnosis.json carries them to summary.json, summary.md,
report.html and the terminal), so a wording change lives here and never touches a decision; tests assert a
claim's fields, and that every output shows its one sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from .. import clock
from .claims import Claim, Value

CLOCK_WORDS = {
    "client": "the callers' clock",
    "gateway": "the gateway's clock",
    "engine": "the engine's clock",
}


def n(x: Value, nd: int = 2) -> str:
    """A count or figure without false precision: '12', '0.21', '?' when unknown."""
    if x is None:
        return "?"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, datetime):  # as the report writes a time (not Python's '…:42.500000+00:00')
        return clock.hms(x, ms=bool(x.microsecond))
    if not isinstance(x, int | float):
        return str(x)
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:.{nd}f}".rstrip("0").rstrip(".")


def secs(x: Value) -> str:
    """A duration: '3 ms', '0.42 s', '12.5 s', '?' when unknown (anything else as ``n`` writes it). Under 0.1 s in
    whole milliseconds: '0.00 s' read as no time at all (public-2 g04: Envoy's 503 UF in 2-3 ms)."""
    if x is None or isinstance(x, bool) or not isinstance(x, int | float):
        return n(x)
    if x < 0.1:
        return f"{x * 1000:.0f} ms"
    return f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _cancellation(c: Claim) -> str:
    v = c.value
    if v("abandoned") is None:
        return "cancellation not observed: the folder holds no " + "; ".join(c.missing)
    if not v("abandoned"):
        return "cancellation not observed: no caller left before its answer, so it was not put to the test"
    if v("aborted") is None:  # callers left, but no engine record says what became of their attempts
        return (
            f"cancellation not observed: {n(v('abandoned'))} attempt(s) abandoned by their callers, but the folder "
            "holds no " + "; ".join(c.missing)
        )
    parts = [f"vLLM aborted {n(v('aborted'))}"]
    if v("finished_in_race"):
        parts.append(
            f"{n(v('finished_in_race'))} finished within {n(v('race_s'))} s of the caller leaving (a race, "
            "no evidence either way)"
        )
    ran = f"{n(v('ran_on'))} ran on for nobody"
    if v("ran_on") and v("ran_on_s") is not None:
        ran += f" ({v('ran_on_s'):,.0f} s of generation after their callers left)"
    parts.append(ran)
    head = {
        "not observed": "cancellation not observed (vLLM aborted none of them, so no abort was seen to propagate)",
        "not propagated by configuration": (
            f"cancellation not propagated, by configuration (nginx.conf: proxy_ignore_client_abort on at "
            f"{v('listeners')}, so nginx keeps the upstream request open when the caller leaves)"
        ),
    }.get(c.state, f"cancellation {c.state}")
    return f"{head}: of {n(v('abandoned'))} attempts abandoned by their callers, " + ", ".join(parts)


def _slo_step(c: Claim) -> str:
    v = c.value
    at = f"step {v('step')} ({v('mode') or 'concurrency'} {n(v('concurrency'))})"
    clocks = sorted({f.clock for f in c.facts if f.clock and f.value is not None and f.name.endswith("_p95")})
    by = " by " + " and ".join(CLOCK_WORDS[k] for k in clocks) if clocks else ""
    aside = ""
    if v("cold_set_aside"):
        aside = f"; {n(v('cold_set_aside'))} request(s) set aside as cold start ({v('cold_why')})"
    elif v("cold_whole"):
        aside = f"; judged on cold-start requests only ({v('cold_why')})"
    if (
        v("not_judged") and c.state != "censored"
    ):  # missed all the same: its figures are floors (ladder_gave_up)
        aside = f"; {v('not_judged')}{aside}"
    if v("died"):  # a server died in the step (ladder_death): when, and the requests around it
        died = str(v("died"))
        aside += f"; {died.split('; ', 1)[-1]}" if c.state == "censored" else f"; {died}"
    if c.state == "met":
        tail = (
            "; the callers' TTFT is not in this folder" if clocks == ["engine"] else ""
        )  # met on the engine's histogram only
        return f"{at}: SLO met{by}{tail}{aside}"
    if c.state == "not met":
        return f"{at}: SLO not met{by} ({v('broke')}){aside}"
    if c.state == "undecided":
        return f"{at}: undecided{by}: {v('undecided_bucket')}{aside}"
    if c.state == "censored":  # the callers who gave up leave its figures floors (ladder_gave_up)
        return f"{at}: not judged{by}: {v('not_judged')}{aside}"
    return f"{at}: unknown (no {', '.join(c.missing)}){aside}"


def _boundary(c: Claim) -> str:
    v = c.value
    if c.state == "met":
        eng = (
            "; met by the engine's clock only: the callers' TTFT is not in this folder"
            if v("engine_only")
            else ""
        )
        return (
            f"working boundary: {v('mode')} {n(v('boundary_concurrency'))} (step {v('boundary_step')}){eng}"
        )
    if c.state == "not met":
        return "no ladder step met the SLO"
    return f"working boundary unknown: {'; '.join(c.missing)}"


def _episode_class(c: Claim) -> str:
    v = c.value
    what = f"{v('episode')} ({str(v('signal')).replace('_', ' ')})"
    return {
        "crash": f"{what}: a crash ({v('death_kinds')} at {clock.hms(death)})"
        if (death := c.time("death_ts")) is not None
        else f"{what}: a crash",
        "recurring": f"{what}: recurring, one of {n(v('spikes'))} spikes "
        + (
            f"{n(v('spacing_min_s'), 0)}–{n(v('spacing_max_s'), 0)} s apart"
            if v("regular") is False
            else f"about every {n(v('spacing_s'), 0)} s"
        ),
        "context": f"{what}: context, one sample ({n(v('samples'))}) back at baseline after it: not a finding",
        "one-off": f"{what}: one-off, back to baseline while still serving",
        "sustained": f"{what}: sustained ({v('rule_words')})",
    }.get(c.state, f"{what}: {c.state}")


def _calm(c: Claim) -> str:
    v = c.value
    if c.state == "nothing alarming":
        served = f"{n(v('served'))} request(s) served"
        return f"nothing alarming: {served}, no preemption, crash, queue or error episode"
    lead = f"{n(v('served'))} request(s) served, but " if v("served") else ""
    return f"nothing alarming cannot be said: {lead}the folder holds no " + "; ".join(
        m.removeprefix("a ").removeprefix("an ") for m in c.missing
    )


def _clock_gap(c: Claim) -> str:
    v = c.value
    if c.state == "unknown":
        return (
            f"{v('where')}: the {v('figure')} gap between the callers' and the engine's clock is unknown: "
            + "; ".join(c.missing)
        )
    eng = v("engine_p95_bucket") or secs(v("engine_p95"))
    clocks = CLOCK_WORDS.get(str(v("callers_clock")), f"the {v('callers_clock')} clocks")
    left = _gave_up(c)
    if c.state == "censored":
        below = isinstance(v("engine_p95_lo"), int | float) and v("callers_p95") < v("engine_p95_lo")  # type: ignore[operator]
        return (
            f"{v('where')}: the {v('figure')} gap is not known, the callers' figure is censored: their p95 "
            f"{secs(v('callers_p95'))} on {clocks} is only a floor: {left}, so their slow ones are not in it; "
            f"the engine's p95 is {eng}" + (", above the callers' figure" if below else "")
        )
    if c.state == "callers below engine":
        return (
            f"{v('where')}: {v('figure')} p95 {secs(v('callers_p95'))} on {clocks} is below the engine's {eng}: "
            "the two count different requests (vLLM's histogram those that finished in the range, the callers' "
            "those they started in it), no gap is read from them"
        )
    gap = (
        f"at least {secs(v('gap_s'))} spent in front of the engine"
        if v("gap_s")
        else "no gap beyond the histogram bucket's width"
    )
    return (
        f"{v('where')}: {v('figure')} p95 {secs(v('callers_p95'))} on {clocks}, {eng} on the engine's clock: "
        + gap
        + (" (a queue in front of the engine)" if c.state == "large gap" else "")
        + (f" (the callers' p95 a floor: {left})" if c.state == "large gap" and v("gave_up") else "")
    )


def _gave_up(c: Claim) -> str:
    """'76 of the 169 callers left before their answer (45%; client timeout 3 s an attempt; they left after
    3.00 s–3.27 s)'."""
    v = c.value
    share = v("gave_up_share")
    how = [f"{share:.0%}" if share >= 0.1 else f"{share:.1%}"] if isinstance(share, float) else []
    if v("client_timeout") is not None:
        how.append(f"client timeout {n(v('client_timeout'))} s an attempt")
    if v("gave_up_wait_min") is not None:
        lo, hi = secs(v("gave_up_wait_min")), secs(v("gave_up_wait_max"))
        how.append(f"they left after {lo if lo == hi else f'{lo}–{hi}'}")
    what = "first token" if v("figure") == "TTFT" else "answer"
    return f"{n(v('gave_up'))} of the {n(v('callers'))} callers left before their {what}" + (
        f" ({'; '.join(how)})" if how else ""
    )


def _overload(c: Claim) -> str:
    v = c.value
    return (
        f"offered load above what was completed for {n(v('duration_s'), 0)} s: {n(v('arrival_rate'))}/s arrived, "
        f"{n(v('completion_rate'))}/s completed; {n(v('backlog_growth'))} more requests in flight at its end "
        "than at its start"
    )


def _kv_fit(c: Claim) -> str:
    v = c.value
    return (
        f"one request of {n(v('max_concurrency_tokens'))} tokens does not fit in the KV cache: vLLM's start-up "
        f"arithmetic gives {n(v('max_concurrency'))}x concurrency at that length"
    )


def _retries_reach(c: Claim) -> str:
    v = c.value
    return (
        f"of the {n(v('attempts'))} attempts of {n(v('retried_requests'))} retried requests, {n(v('reached'))} "
        f"reached vLLM and {n(v('not_reached'))} did not"
    )


def _retries_stated(c: Claim) -> str:
    v = c.value
    return (
        f"the gateway log states {n(v('retries'))} retries of {n(v('retried'))} of its {n(v('requests'))} requests "
        f"(up to {n(v('max_attempts'))} attempts) in {v('statement')}, none of them a line of its own"
    )


def _upstream_down(c: Claim) -> str:
    v = c.value
    return (
        f"{n(v('failed_requests'))} request(s) failed at the gateway with no upstream to take them "
        f"({clock.hms_range(c.time('first'), c.time('last'))})"
    )


def _failed_requests(c: Claim) -> str:
    v = c.value
    return (
        f"{n(v('failed'))} of {n(v('requests'))} requests failed ({v('statuses')}): success "
        f"{v('success_share'):.1%} below the SLO's {c.thresholds.get('slo_success', 0):.1%}"
    )


def _stream_failed(c: Claim) -> str:
    v = c.value
    st = v("upstream_statuses")
    lo, hi = c.time("first"), c.time("last")
    when = (
        (clock.hms(lo) if lo == hi else clock.hms_range(lo, hi)) if lo is not None else "at an unknown time"
    )
    return (
        f"{n(v('failed_streams'))} stream(s) failed after the access log's 200 ({when}; "
        f"{'upstream status ' + str(st) if st else 'no upstream status named'}): {n(v('tied'))} tied to a request "
        f"by the file's order, {n(v('untied'))} not ({v('first_record')} first)"
    )


def _verdict(c: Claim) -> str:
    return c.sentence  # the verdict's lines are written with its episodes (verdict.lines)


def _observed(c: Claim) -> str:
    def said(f) -> str:
        if f.unit != "s":
            return n(f.value)
        on = CLOCK_WORDS.get(f.clock or "", f.clock)  # a latency names its clock
        return secs(f.value) + (f" ({on})" if on else "")

    return "; ".join(f"{f.name.replace('_', ' ')} {said(f)}" for f in c.facts if f.value is not None)


RENDER: dict[str, Callable[[Claim], str]] = {
    "cancellation": _cancellation,
    "slo_step": _slo_step,
    "boundary": _boundary,
    "episode_class": _episode_class,
    "calm": _calm,
    "clock_gap": _clock_gap,
    "overload": _overload,
    "kv_fit": _kv_fit,
    "retries_reach": _retries_reach,
    "retries_stated": _retries_stated,
    "upstream_down": _upstream_down,
    "failed_requests": _failed_requests,
    "stream_failed": _stream_failed,
    "verdict": _verdict,
    "severity": _verdict,  # written with its decision (severity.Severity.sentence)
}


def render(c: Claim) -> Claim:
    """Set the claim's sentence (and return it)."""
    c.sentence = RENDER.get(c.kind, _observed)(c)
    return c
