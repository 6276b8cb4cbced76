"""A finding's severity as a decision: the rule that set it and the facts it read (evid25).

Lab abort-ignored read "[medium] Recurring KV pressure: 3 preemption spikes …" with nothing saying what made it
medium: its class, or what the callers felt. A pressure finding's severity is set by its class (sustained: high;
a spike or a recurring pattern: medium), then by its impact on the callers (``findings.impact``), or capped when
that impact is unknown; the rule that had the last word and its facts are kept here, registered as the claim
``severity.<finding id>``, and every output renders that claim's sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .claims import Claim, Fact

# rule -> what it says, in words ('medium by its impact (impact_high_share): …')
RULES = {
    "class": "its class",  # no impact read: the class alone (a regime, a spike, a pattern of spikes)
    "class_kept": "its class, which impact never raises",  # felt more than the class: kept at the class's
    "impact_none": "its impact",  # no request in flight slowed or failed, latency under impact_latency_ratio
    "impact_share": "its impact (impact_high_share)",  # some slowed or failed, under the share a high one needs
    "impact_short": "its impact (impact_high_min_s)",  # the share of a high one, too short to be one
    "impact_open": "its class, its length unknown",  # the share of a high one, still on when the logs end
    "impact_high": "its impact (impact_high_share, impact_high_min_s)",  # the share, for long enough
    "impact_latency": "its impact (impact_latency_ratio)",  # none slowed, their latency rose all the same
    "impact_unknown": "its class, capped as its impact is unknown",  # no record of the callers in flight
    "one_sample": "its length",  # a level on one stats sample: no regime, whatever its class
    "logs_end": "its length, unknown",  # the logs end on its one line: not seen to last, not seen to pass
}


@dataclass(frozen=True)
class Severity:
    """The severity a finding was given, the rule of ``RULES`` that set it, what it read (``facts``: counts,
    each latency with its clock), the thresholds it compared them with, and what was missing."""

    level: str
    rule: str
    said: str  # the facts in words, as the finding's evidence gives them
    facts: tuple[Fact, ...] = ()
    thresholds: dict[str, Any] = field(default_factory=dict)
    missing: tuple[str, ...] = ()

    def sentence(self) -> str:
        return f"{self.level} by {RULES[self.rule]}: {self.said}"

    def claim(self, finding_id: str, title: str) -> Claim:
        """The claim every output renders: ``severity.<finding id>``, its state the level."""
        facts = [Fact("rule", self.rule), *self.facts]
        return Claim(
            f"severity.{finding_id}",
            "severity",
            f"the severity of {finding_id} ({title[:120]})",
            self.level,
            facts,
            dict(self.thresholds),
            list(self.missing),
            self.sentence(),
        )
