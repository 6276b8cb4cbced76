"""Findings of slow requests: slow first tokens (queue, prefill, elsewhere), slow responses, cold starts."""

from __future__ import annotations

from ... import clock
from .. import latency_named
from ..claims import Claim, Fact
from ..context import Context
from ..records import Episode, Finding
from .clocks import in_gateway
from .record import clock_time, make_finding, pct, requests_phrase, stands_for

# an episode whose engine spans put at least this share of their mean TTFT in the queue is a queue episode
SPAN_QUEUE_SHARE = 0.5
QUEUE_NEXT = (
    "Fix the queue stage: cap admission with a lower --max-num-seqs or add capacity, and compare "
    "the server's queue time with the client's TTFT"
)


def _named(ep: Episode, sig: str) -> str:
    """The episode's latency with the clock and source it was measured on (episodes.py sets them)."""
    return latency_named.words(sig, ep.get("signal_clock"), ep.get("signal_source"))


def _span_queue(ctx: Context, ep: Episode) -> tuple[bool, str] | None:
    """(queued, what vLLM's spans say of the episode's queue) when its engine spans carry queue and TTFT."""
    seg = ctx.span_segments.get(ep.get("episode_id") or "")
    if not seg:
        return None
    q, t = seg["latencies"].get("queue") or {}, seg["latencies"].get("ttft") or {}
    if not (q.get("n") and t.get("n") and t.get("mean_ms")):
        return None
    share = (q["mean_ms"] or 0) / t["mean_ms"]
    said = (
        f"vLLM's spans of {q['n']} requests: time in queue p95 {q['p95_ms'] / 1000:.2f} s, TTFT p95 "
        f"{t['p95_ms'] / 1000:.2f} s, queue {share:.0%} of the mean TTFT (clock engine, source spans)"
    )
    return share >= SPAN_QUEUE_SHARE, said


def slow_first_token_finding(ctx: Context, ep: Episode) -> Finding:
    wait = (ep["waiting_max"] or 0) >= ctx.th.waiting_min
    long_prompt = (ep["prompt_tokens_mean"] or 0) >= 1024
    sq = _span_queue(ctx, ep)
    if wait:
        cause, nt = "requests queue before they are admitted (waiting > 0)", QUEUE_NEXT
        if sq:
            cause += f"; {sq[1]}"
    elif sq and sq[0]:  # no stats line or metric said waiting, the engine's spans time the queue
        cause, nt = f"requests queue before they are admitted: {sq[1]}", QUEUE_NEXT
    elif long_prompt:
        cause, nt = (
            "prefill of long prompts delays the first token",
            "Turn on chunked prefill (--enable-chunked-prefill) so long prefills share steps with decodes",
        )
    elif sq:
        cause, nt = (
            f"little queueing in the engine: {sq[1]}",
            "Time each stage: compare the engine's TTFT with the gateway's upstream header time and the "
            "client's TTFT for the same requests",
        )
    elif gw := in_gateway(ctx.ttft_gaps.get(ep.get("episode_id") or "")):  # the gateway's own clock shows it
        cause, nt = gw
    elif ep["waiting_max"] is None:  # no stats line, metric or engine span: the queue is not known
        cause, nt = (
            "unknown: the folder holds no queue figure (no vLLM stats line, no waiting metric, no engine span "
            "with time in queue), so queueing in the engine and time outside it cannot be told apart",
            "Collect vLLM's log (its stats lines) or its /metrics with the client's records, and time each "
            "stage for the same requests",
        )
    else:
        cause, nt = _no_queue(ctx.ttft_gaps.get(ep.get("episode_id") or ""))
    return make_finding(
        "medium",
        f"Slow first token {clock.hms_range(ep['start'], ep['end'])}",
        f"{_named(ep, 'ttft')} above {ctx.slo.ttft_s:g} s for {ep['duration_s']:.0f} s",
        "; ".join([ep["reason"], requests_phrase(ep)]),
        cause,
        nt,
        ep,
        kind="latency",
    )


STAGES_NEXT = (
    "Time each stage: compare the gateway's upstream header time with the client's TTFT for the same requests"
)


def _no_queue(gap: Claim | None) -> tuple[str, str]:
    """(likely cause, next test) of slow first tokens with no queue and short prompts, from the range's TTFT clock
    gap: outside the engine only where the engine's own TTFT is far below the callers' (frontend-bound's c=48 burst
    read 'the time goes outside the engine' while vLLM's histogram put its TTFT p95 in 10-20 s)."""
    if gap is not None and gap.state == "large gap":
        return (
            f"no queue in the engine, and the callers' TTFT p95 is at least {gap.value('gap_s'):.2f} s above the "
            "engine's own (clock gap): the time goes in front of the engine (the API server process, tokenization, "
            "the gateway, the network)",
            STAGES_NEXT,
        )
    if gap is not None and gap.state == "small gap":
        return (
            f"no request waited, yet the engine's own TTFT p95 is {gap.value('engine_p95_bucket')} (vLLM's "
            f"histogram, engine clock) beside the callers' {gap.value('callers_p95'):.2f} s: the time is spent in "
            "the engine's steps (a large running batch, a loaded host), not in front of it",
            "Replay the same load with a lower --max-num-seqs and compare the engine's TTFT p95 "
            "(vllm:time_to_first_token_seconds): if it falls, the running batch was the cost; if not, profile one "
            "engine step",
        )
    why = (
        "; ".join(gap.missing)
        if gap is not None and gap.missing
        else "no engine TTFT (vLLM's vllm:time_to_first_token_seconds histogram) over this range"
    )
    return (
        f"no queue and short prompts, but whether the time went in the engine's steps or in front of the engine "
        f"is not known: the engine's TTFT cannot be set beside the callers' ({why})",
        STAGES_NEXT
        + ", and the engine's TTFT histogram (vllm:time_to_first_token_seconds) over the same range",
    )


def slow_e2e_finding(ctx: Context, ep: Episode) -> Finding:
    out = ep["output_tokens_mean"]
    return make_finding(
        "medium",
        f"Slow responses {clock.hms_range(ep['start'], ep['end'])}",
        f"{_named(ep, 'e2e')} above {ctx.slo.e2e_s:g} s for {ep['duration_s']:.0f} s",
        "; ".join(
            [ep["reason"], requests_phrase(ep)] + ([f"{out:.0f} output tokens on average"] if out else [])
        ),
        "long generations (output length) or a slow decode step",
        "Cap max_tokens at what the application needs (compare requested max_tokens with generated tokens)",
        ep,
        kind="latency",
    )


def _on(clock_name: str | None) -> str:
    return f"{clock_name} clock" if clock_name else "clock unknown"


def cold_start_findings(ctx: Context, cold: dict, repeats: int) -> list[Finding]:
    """First requests after a start much slower than warm ones (compilation, caches, a retried backlog);
    more than ``repeats`` (findings.REPEATS, read by the caller) are one finding."""
    warm = (cold.get("warm") or {}).get("ttft_p95")
    warm_clock = (cold.get("warm") or {}).get("ttft_clock")
    out = []
    for w in cold.get("windows", []):
        c = w["ttft_p95"]
        if c is None or warm is None or c <= ctx.slo.ttft_s or c <= 2 * warm:
            continue
        # each p95 with its clock (lab crash read "TTFT p95 3.07 s …, 0.07 s warm", on no named clock)
        on, warm_on = _on(w.get("ttft_clock")), _on(warm_clock)
        warm_said = f"{warm:.2f} s warm" + ("" if warm_on == on else f" ({warm_on})")
        out.append(
            make_finding(
                "low",
                f"Slow first tokens after the server start ({clock.hms_range(w['start'], w['end'])})",
                f"TTFT p95 ({on}) {c:.2f} s in the first {ctx.th.cold_start_s:.0f} s of traffic, {warm_said}",
                f"{w['requests']} requests from {clock_time(w['first_request'])}, success {pct(w['success_share'])}; "
                f"server ready at {clock_time(w['ready'])}",
                "a cold server (compilation, empty caches), plus whatever backlog of retried requests "
                "arrives at once when it comes up",
                "Warm the server up before it takes traffic: a readiness check that sends one real request "
                "before the gateway routes to it",
                None,
                w["start"],
                w["end"],
                kind="latency",
                facts=[
                    Fact("requests", w["requests"], "requests", unit="requests"),
                    Fact("cold_ttft_p95", c, "requests", w.get("ttft_clock"), "s"),
                    Fact("warm_ttft_p95", warm, "requests", (cold.get("warm") or {}).get("ttft_clock"), "s"),
                    Fact("server_ready", w["ready"], "engine_log"),
                ],
            )
        )
    if len(out) > repeats:  # a crash loop restarts cold every time: one finding for all the restarts
        stands_for(
            out[0],
            len(out),
            "slow restarts",
            "restarts with slow first tokens",
            out[0]["start"],
            out[-1]["start"],
        )
        out = out[:1]
    return out
