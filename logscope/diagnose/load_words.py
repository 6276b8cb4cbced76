"""The arrivals around an episode as its class's reason words them (``episode_class.classify``): the rates before, as it
began, during and after it, and what came before a one-off (a surge of arrivals or of prompt lengths, or none)."""

from __future__ import annotations

from .records import Episode
from .thresholds import Thresholds

# the shortest span an arrival rate is said over: frontend-bound's 24 requests started in a 0.1 s stretch are no
# '223.7/s' (a second's arrivals are all a rate can say, whatever the clock's resolution); below it, their count
RATE_SPAN_S = 1.0


def short(ep: Episode | dict) -> bool:
    """An episode too short for an arrival rate of its own (``arrival_rate_during`` None; one sample's instant has
    none either, and says no rate)."""
    dur = ep.get("duration_s")
    return dur is not None and 0 < dur < RATE_SPAN_S


def during(ep: Episode | dict) -> str:
    """The arrivals during an episode: their rate, or within a span under ``RATE_SPAN_S`` their count."""
    n = ((ep.get("details") or {}).get("requests_during") or {}).get("requests")
    if short(ep) and n is not None:
        return f"{n:,} requests within {ep['duration_s']:.1f} s"
    x = ep["arrival_rate_during"]
    return "no baseline" if x is None else f"{x:.1f}/s"


def rates(ep: Episode) -> str:
    """Arrivals before, during and after an episode, as the evidence names them."""

    def r(x: float | None) -> str:
        return "no baseline" if x is None else f"{x:.1f}/s"

    return f"arrivals {r(ep['arrival_rate_before'])} before, {during(ep)} during, {r(ep['arrival_rate_after'])} after"


SURGES = (
    "arrivals",
    "start",
    "prompts",
)  # what came before a one-off that is a rise of its load; else 'steady'


def came_after(before: dict, lead: dict, th: Thresholds) -> str:
    """What came before a one-off: a surge of 'arrivals' (``rise_ratio`` times the rate before as it began), the
    'start' of traffic, a surge of 'prompts' (their mean length), or none: 'steady' ('unknown' with no rate before
    it or as it began)."""
    b, a = before.get("arrival_rate"), lead.get("arrival_rate")
    if b is not None and a is not None and b > 0 and a >= th.rise_ratio * b:
        return "arrivals"
    if b == 0 and a:
        return "start"
    bp, ap = before.get("prompt_tokens_mean"), lead.get("prompt_tokens_mean")
    if bp and ap and ap >= th.rise_ratio * bp:
        return "prompts"
    return "unknown" if b is None or a is None else "steady"


def rise(ep: Episode, before: dict, lead: dict, th: Thresholds) -> str:
    """What came before a one-off, with the arrivals before, as it began, during and after it."""

    def r(x: float | None) -> str:
        return "no baseline" if x is None else f"{x:.1f}/s"

    b, a = before.get("arrival_rate"), lead.get("arrival_rate")
    rates = f"{r(b)} before, {r(a)} as it began, {during(ep)} during, {r(ep['arrival_rate_after'])} after"
    kind = came_after(before, lead, th)
    if kind == "arrivals":
        return f"after a surge of arrivals ({rates})"
    if kind == "start":
        return f"after the start of traffic ({rates})"
    if kind == "prompts":
        bp, ap = before["prompt_tokens_mean"], lead["prompt_tokens_mean"]
        return f"after a surge of prompt lengths ({bp:.0f} → {ap:.0f} tokens; arrivals {rates})"
    return (
        f"no surge of arrivals or prompt lengths before it (arrivals {rates}): a transient at a steady load"
    )
