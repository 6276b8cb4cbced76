"""Findings of slow requests: slow first tokens (queue, prefill, elsewhere), slow responses, cold starts."""

from __future__ import annotations

from ... import clock
from ..claims import Fact
from ..context import Context
from .record import _f, _pct, _req, _stands_for, _t


def _slow_first_token(ctx: Context, ep: dict) -> dict:
    wait = (ep["waiting_max"] or 0) >= ctx.th.waiting_min
    long_prompt = (ep["prompt_tokens_mean"] or 0) >= 1024
    if wait:
        cause, nt = (
            "requests queue before they are admitted (waiting > 0)",
            "Fix the queue stage: cap admission with a lower --max-num-seqs or add capacity, and compare "
            "the server's queue time with the client's TTFT",
        )
    elif long_prompt:
        cause, nt = (
            "prefill of long prompts delays the first token",
            "Turn on chunked prefill (--enable-chunked-prefill) so long prefills share steps with decodes",
        )
    else:
        cause, nt = (
            "no queue and short prompts: the time goes outside the engine (tokenization, gateway, network)",
            "Time each stage: compare the gateway's upstream header time with the client's TTFT for the "
            "same requests",
        )
    return _f(
        "medium",
        f"Slow first token {clock.hms_range(ep['start'], ep['end'])}",
        f"TTFT p95 above {ctx.slo.ttft_s:g} s for {ep['duration_s']:.0f} s",
        "; ".join([ep["reason"], _req(ep)]),
        cause,
        nt,
        ep,
        kind="latency",
    )


def _slow_e2e(ctx: Context, ep: dict) -> dict:
    out = ep["output_tokens_mean"]
    return _f(
        "medium",
        f"Slow responses {clock.hms_range(ep['start'], ep['end'])}",
        f"e2e p95 above {ctx.slo.e2e_s:g} s for {ep['duration_s']:.0f} s",
        "; ".join([ep["reason"], _req(ep)] + ([f"{out:.0f} output tokens on average"] if out else [])),
        "long generations (output length) or a slow decode step",
        "Cap max_tokens at what the application needs (compare requested max_tokens with generated tokens)",
        ep,
        kind="latency",
    )


def _cold(ctx: Context, cold: dict, repeats: int) -> list[dict]:
    """First requests after a start much slower than warm ones (compilation, caches, a retried backlog);
    more than ``repeats`` (findings.REPEATS, read by the caller) are one finding."""
    warm = (cold.get("warm") or {}).get("ttft_p95")
    out = []
    for w in cold.get("windows", []):
        c = w["ttft_p95"]
        if c is None or warm is None or c <= ctx.slo.ttft_s or c <= 2 * warm:
            continue
        out.append(
            _f(
                "low",
                f"Slow first tokens after the server start ({clock.hms_range(w['start'], w['end'])})",
                f"TTFT p95 {c:.2f} s in the first {ctx.th.cold_start_s:.0f} s of traffic, {warm:.2f} s warm",
                f"{w['requests']} requests from {_t(w['first_request'])}, success {_pct(w['success_share'])}; "
                f"server ready at {_t(w['ready'])}",
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
        _stands_for(
            out[0],
            len(out),
            "slow restarts",
            "restarts with slow first tokens",
            out[0]["start"],
            out[-1]["start"],
        )
        out = out[:1]
    return out
