"""The finding of a large gap between the callers' clock and the engine's: the time went to a queue in front of
the engine (the API server process, the gateway), which vLLM's own metrics cannot see (``clockgap``)."""

from __future__ import annotations

from ..claims import Registry
from ..context import Context
from ..records import Finding
from .record import make_finding


def clock_gap_findings(ctx: Context, reg: Registry) -> list[Finding]:
    out = []
    large = [c for c in reg.all() if c.kind == "clock_gap" and c.state == "large gap"]
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
            for c in mine
        )
        out.append(
            make_finding(
                "medium",
                f"{figure} waits in front of the engine: the callers' p95 is at least {worst.value('gap_s'):.1f} s "
                f"above vLLM's own ({where})",
                f"the callers' {figure} p95 is far above the engine's: the wait happens before vLLM's engine sees "
                "the request",
                ev,
                "a queue in front of the engine: the API server process (one process tokenizes, detokenizes and "
                "streams every request) or the gateway; vLLM's metrics start when the engine receives the request, "
                "so they cannot see it",
                f"Re-run {worst.value('where')} with vLLM's API server scaled out (--api-server-count 2) and compare "
                f"the callers' {figure} p95 with the engine's: if the gap closes, the single API server process was "
                "the queue; if not, run the same step against vLLM directly to time the gateway",
                None,
                min(c.value("start") for c in mine),
                max(c.value("end") for c in mine),
                kind="latency",
                claim=worst.id,
            )
        )
    return out
