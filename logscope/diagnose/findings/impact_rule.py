"""The rule that sets a pressure finding's severity by what its callers felt, decided once (evid27).

``impact.by_impact`` counted the callers and then picked low / medium / high through nested conditionals while
it wrote words about the rule beside them: the level, the rule's name and the sentence were three answers to one
question. Here ``decide`` reads the facts (``Felt``) against the thresholds and returns the ``Severity`` (level,
rule, facts, thresholds); its sentence and the evidence's words are rendered from that object alone (``said``,
``evidence``), switching on the rule it names, never re-testing the conditions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..claims import Fact
from ..severity import Severity

THRESHOLDS = ("impact_high_share", "impact_high_min_s", "impact_latency_ratio")


@dataclass(frozen=True)
class Felt:
    """What the callers of one pressure finding felt: the facts the rule reads."""

    failed: int
    slowed: int
    requests: int  # in flight during it (during any beat of a pattern)
    under_pressure_s: float  # its range, or its beats' together
    class_level: str  # the severity its class gave it (high or medium): impact never raises it
    beats: bool = False  # a recurring pattern ('them', 'they')
    by: str = ""  # how the callers were judged when not by their TTFT (' (judged by the callers' e2e: …)')
    rise: dict | None = None  # impact.latency_rise: the callers' p95 against their baseline, when it rose
    rose: bool = False  # a pattern's callers' latency rose impact_latency_ratio× (beat_impact.Pattern.rose)
    open_end: bool = False  # still on when the observation stopped: under_pressure_s is a lower bound

    @property
    def hit(self) -> int:
        return self.failed + self.slowed


@dataclass(frozen=True)
class Decided(Severity):
    """A Severity set by the impact rule, with the facts it read (``felt``) for its words."""

    felt: Felt | None = None


def decide(felt: Felt, th: Any, more: tuple[Fact, ...] = (), missing: tuple[str, ...] = ()) -> Decided:
    """The level and the rule of ``impact.RULES``' impact ones that set it: a latency rise is felt (medium);
    none slowed or failed is low; a share of at least impact_high_share for at least impact_high_min_s is high
    (kept at its class's medium when that is lower: class_kept), for less long medium (impact_short), unless it was
    still on when the observation stopped: how long it lasted is not known, so it keeps its class's (impact_open);
    under the share medium (impact_share)."""
    share, min_s = th.impact_high_share, th.impact_high_min_s
    if (
        felt.rise is not None or felt.rose
    ):  # under the SLO, but the callers waited several times their baseline
        level, rule = "medium", "impact_latency"
    elif felt.hit == 0:
        level, rule = "low", "impact_none"
    elif felt.hit >= share * felt.requests:
        if felt.under_pressure_s < min_s and felt.open_end:
            level, rule = felt.class_level, "impact_open"
        elif felt.under_pressure_s < min_s:
            level, rule = "medium", "impact_short"
        elif felt.class_level == "medium":  # felt more than its class says: impact never raises it
            level, rule = "medium", "class_kept"
        else:
            level, rule = "high", "impact_high"
    else:
        level, rule = "medium", "impact_share"
    sev = Decided(
        level, rule, "", (*facts(felt), *more), {k: getattr(th, k) for k in THRESHOLDS}, missing, felt
    )
    return replace(sev, said=said(sev))


def facts(felt: Felt) -> list[Fact]:
    """What the rule read, as the claim's facts: counts of the logical requests (the callers' records, else the
    gateway's: no one source to name), the time under pressure, the class's severity (class_kept keeps it) and,
    when their latency rose, the callers' p95s on their clock."""
    n = felt.requests
    out = [
        Fact("failed", felt.failed, None, None, "requests"),
        Fact("slowed", felt.slowed, None, None, "requests"),
        Fact("requests_in_flight", n, None, None, "requests"),
        Fact("slowed_or_failed_share", round(felt.hit / n, 4) if n else None, None, None, "share"),
        Fact("under_pressure_s", round(felt.under_pressure_s, 3), None, None, "seconds"),
        Fact("open_end", felt.open_end),
        Fact("class_severity", felt.class_level),
    ]
    if (rise := felt.rise) is not None:
        c = rise["clock"]
        out += [
            Fact(f"{rise['figure']}_p95_during", rise["p95_s"], "client_records", c, "s"),
            Fact(f"{rise['figure']}_p95_before", rise["baseline_p95_s"], "client_records", c, "s"),
        ]
    return out


def said(sev: Decided) -> str:
    """The facts in words, as the rule named by ``sev`` reads them."""
    c, th = sev.felt, sev.thresholds
    assert c is not None
    them = "them" if c.beats else "it"
    if sev.rule == "impact_latency":
        if c.rise is not None:
            return (
                f"none of the {c.requests:,} requests in flight during it failed or broke the SLO, but the "
                f"callers' {c.rise['words']}"
            )
        return (
            f"none of the {c.requests:,} requests in flight during {them} failed or broke the SLO, but the "
            f"callers' latency rose {th['impact_latency_ratio']:g}× or more"
        )
    out = f"{c.hit:,} of the {c.requests:,} requests in flight during {them} were slowed or failed{c.by}"
    if sev.rule == "impact_short":
        # the rule that kept it medium, named: '176 of the 177 … slowed' read as a reason for high where the 22 s
        # it lasted (under impact_high_min_s) was what did (lab seqs-16)
        out += (
            f", but {'they' if c.beats else 'it'} lasted {c.under_pressure_s:.0f} s, under the "
            f"{th['impact_high_min_s']:g} s a high one must last (impact_high_min_s)"
        )
    elif sev.rule == "impact_open":
        # not 'it lasted 13 s, under the 30 s': the same page said it was still abnormal when the range ended
        out += (
            f"; it was still abnormal when the logs analysed end, {c.under_pressure_s:.0f} s in, so whether it "
            f"lasted the {th['impact_high_min_s']:g} s a high one must is not known (impact_high_min_s): kept at "
            f"its class's {c.class_level}"
        )
    elif sev.rule == "impact_share":
        out += f", under {th['impact_high_share']:.0%} of them (impact_high_share)"
    elif sev.rule in ("impact_high", "class_kept"):
        out += f" over {c.under_pressure_s:.0f} s"
    if sev.rule == "class_kept":
        out += f": the impact of a high one, kept at its class's {c.class_level}"
    return out


def evidence(sev: Decided) -> str:
    """What the finding's evidence adds of it: '; severity <level> by its impact: …', or '' where its class
    already says it (a medium one kept medium by its share or length) or impact would have raised it."""
    c = sev.felt
    assert c is not None
    if sev.rule == "class_kept":
        return ""
    if sev.rule == "impact_open":
        return f"; severity {sev.level} by its class, its length unknown: {sev.said}"
    if sev.level == c.class_level == "medium" and sev.rule in ("impact_short", "impact_share"):
        return ""
    return f"; severity {sev.level} by its impact: {sev.said}"
