"""The finding of a large gap between the callers' clock and the engine's: the time went to a queue in front of
the engine (the API server process, the gateway), which vLLM's own metrics cannot see (``clockgap``). Where the
gateway's access log times the same requests and most of the gap is time spent in the gateway outside its
upstream, the finding names the gateway (and its rate limit, when its error log shows requests held back)."""

from __future__ import annotations

from ..claims import Claim, Registry
from ..context import Context
from ..records import Finding
from .record import make_finding

# the share of the gap the gateway's own clock must account for to name the gateway as where the time went
GATEWAY_SHARE = 0.5


def _in_gateway(c: Claim) -> bool:
    """The gateway's request time, less its upstream's response time, holds most of the gap (gateway clock)."""
    outside, gap = c.value("gateway_outside_upstream_p95"), c.value("gap_s")
    if not isinstance(outside, int | float) or not isinstance(gap, int | float) or not gap:
        return False
    return outside >= GATEWAY_SHARE * gap


def _gateway_words(c: Claim) -> str:
    held = c.value("gateway_rate_limit_delayed") or 0
    refused = c.value("gateway_rate_limit_rejected") or 0
    limit = ""
    if held or refused:
        limit = f"; its error log shows its request-rate limit (limit_req) delaying {held:,} request(s)" + (
            f" and refusing {refused:,}" if refused else ""
        )
    return (
        f"the gateway: over the {c.value('gateway_requests'):,} requests of {c.value('where')} it logged, its "
        f"request time p95 is {c.value('gateway_request_time_p95'):.2f} s against {c.value('gateway_upstream_p95'):.2f} s "
        f"for vLLM to answer it (gateway clock): {c.value('gateway_outside_upstream_p95'):.2f} s p95 spent in the "
        f"gateway before or around the upstream{limit}"
    )


def _limit_test(c: Claim, figure: str) -> str:
    """The one change to measure when the gateway held the time."""
    if c.value("gateway_rate_limit_delayed") or c.value("gateway_rate_limit_rejected"):
        return (
            f"Re-run {c.value('where')} with the gateway's request-rate limit (limit_req rate and burst) above the "
            f"offered load, or the load below it, and compare the callers' {figure} p95 with the engine's: the gap "
            "should close"
        )
    return (
        f"Re-run {c.value('where')} against vLLM directly (bypassing the gateway) and compare the callers' {figure} "
        "p95 with the engine's: if the gap closes, the gateway's queue (its limits, connections or workers) was the "
        "wait"
    )


def in_gateway(c: Claim | None) -> tuple[str, str] | None:
    """(likely cause, next test) of a range's slow first tokens when its large TTFT gap is time in the gateway."""
    if c is None or c.state != "large gap" or not _in_gateway(c):
        return None
    return (
        "no queue in the engine: the time goes to a queue in front of it, in " + _gateway_words(c),
        _limit_test(c, "TTFT"),
    )


def clock_gap_findings(ctx: Context, reg: Registry) -> list[Finding]:
    out = []
    large = [c for c in reg.all() if c.kind == "clock_gap" and c.state == "large gap"]
    # an episode's or a step's gap first; the load's phases (clockgap_run) when none is large: a queue in front of
    # the engine that no episode shows (a lax SLO) is still found
    ranged = [c for c in large if c.value("scope") is None]
    large = ranged or large
    for figure in ("TTFT", "e2e"):
        mine = [c for c in large if c.value("figure") == figure]
        if not mine:
            continue
        worst = max(mine, key=lambda c: c.value("gap_s") or 0)
        where = ", ".join(str(c.value("where")) for c in mine)
        ev = "; ".join(
            f"{c.value('where')}: {c.value('callers_p95'):.2f} s on {c.value('callers_clock')}'s clock, "
            f"{c.value('engine_p95_bucket')} on the engine's (vLLM's histogram), at least "
            f"{c.value('gap_s'):.2f} s apart"
            + (
                f"; the gateway's request time p95 {c.value('gateway_request_time_p95'):.2f} s, its upstream's "
                f"{c.value('gateway_upstream_p95'):.2f} s (gateway clock)"
                if c.value("gateway_request_time_p95") is not None
                else ""
            )
            for c in mine
        )
        if _in_gateway(worst):
            title = f"{figure} waits in the gateway, in front of the engine"
            cause = "a queue in front of the engine, in " + _gateway_words(worst)
            test = _limit_test(worst, figure)
        else:
            title = f"{figure} waits in front of the engine"
            cause = (
                "a queue in front of the engine: the API server process (one process tokenizes, detokenizes and "
                "streams every request) or the gateway; vLLM's metrics start when the engine receives the request, "
                "so they cannot see it"
            )
            test = (
                f"Re-run {worst.value('where')} with vLLM's API server scaled out (--api-server-count 2) and compare "
                f"the callers' {figure} p95 with the engine's: if the gap closes, the single API server process was "
                "the queue; if not, run the same step against vLLM directly to time the gateway"
            )
        out.append(
            make_finding(
                "medium",
                f"{title}: the callers' p95 is at least {worst.value('gap_s'):.1f} s above vLLM's own ({where})",
                f"the callers' {figure} p95 is far above the engine's: the wait happens before vLLM's engine sees "
                "the request",
                ev,
                cause,
                test,
                None,
                min(t for c in mine if (t := c.time("start")) is not None),
                max(t for c in mine if (t := c.time("end")) is not None),
                kind="latency",
                claim=worst.id,
            )
        )
    return out
