"""Claims: every verdict, finding title and 'met / propagated / sustained / nothing alarming' as a record of
the facts it rests on.

A ``Claim`` says what is claimed (``subject``), its ``state`` (met, not met, undecided, unknown, not
observed, propagated, not propagated by configuration, sustained, one-off, nothing alarming, ...), the facts
it rests on (``Fact``: a value with its source and, for a latency, its clock), the thresholds that decided
it, and ``missing``: the facts whose absence left it unknown, undecided or not observed. The analysis builds
claims and decides their state; ``wording`` turns each into its sentence, so a change of wording never
touches a decision, and tests assert fields rather than prose.

``REQUIRED`` is the rule every claim obeys, checked by ``problems()`` (and by the property test over every
fixture): the facts a state needs are present and not null; a state that decides nothing (unknown, not
observed, undecided) names what was missing. Every latency fact names its clock (``CLOCKS``): figures on two
clocks are never one figure, their gap is a fact of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..scalars import time_or_none

# the clock a latency was measured on (COORD.md's shared vocabulary) and the sources that give each. 'spans' is a
# source, not a clock: a client span's latency is on the client's clock, the engine's llm_request span's on the
# engine's, so a figure from spans names its clock from its rows (requests.latency_clock), never from 'spans'.
CLOCKS = ("client", "gateway", "engine")
SOURCE_CLOCK = {
    "client_records": "client",
    "load_test": "client",
    "gateway_log": "gateway",
    "engine_histogram": "engine",
    "engine_log": "engine",
}
# requests.latency_clock (correlate.assemble: the clock of each row's ttft_s / e2e_s) -> the layer figures name
CLOCK_LAYER = {"client": "client", "gateway": "gateway", "engine": "server log"}
# requests.origin / the figures' source names (from_histograms) -> the shared source vocabulary
ORIGIN_SOURCE = {"client": "client_records", "gateway": "gateway_log", "server": "engine_log"}
NAMED_SOURCE = {
    "client": "client_records",
    "gateway": "gateway_log",
    "server log": "engine_log",
    "metrics histogram": "engine_histogram",
    "spans": "spans",
}

# states that decide nothing: they must name what was missing (a clock gap 'censored' by the callers who gave up,
# or 'callers below engine': two figures over different requests, no gap read from them)
UNDECIDED = ("unknown", "not observed", "undecided", "censored", "callers below engine")

# (kind, state) -> the facts that state needs, each present and not null. A state not listed needs none
# beyond its facts being what they say; UNDECIDED states need ``missing`` instead.
REQUIRED: dict[tuple[str, str], tuple[str, ...]] = {
    ("cancellation", "propagated"): ("abandoned", "aborted", "ran_on"),
    ("cancellation", "partly"): ("abandoned", "aborted", "ran_on"),
    ("cancellation", "not propagated"): ("abandoned", "aborted", "ran_on"),
    ("cancellation", "not propagated by configuration"): (
        "abandoned",
        "aborted",
        "proxy_ignore_client_abort",
    ),
    ("slo_step", "met"): ("ttft_p95", "e2e_p95", "success_share"),
    ("slo_step", "not met"): ("broke",),
    ("slo_step", "undecided"): ("undecided_bucket",),
    # not judged: its callers gave up (ladder_gave_up: callers, gave_up on the claim) or a server died in it
    ("slo_step", "censored"): ("requests", "not_judged"),
    ("boundary", "met"): ("boundary_step", "boundary_concurrency"),
    ("episode_class", "sustained"): ("recovered", "end"),
    ("episode_class", "one-off"): ("recovered", "arrival_rate_after"),
    ("episode_class", "recurring"): ("spikes", "spacing_s"),
    ("episode_class", "crash"): ("death_kinds", "death_ts"),
    ("episode_class", "context"): ("samples",),
    ("calm", "nothing alarming"): ("served", "engine_seen"),
    ("clock_gap", "large gap"): ("callers_p95", "engine_p95_hi", "gap_s"),
    ("clock_gap", "small gap"): ("callers_p95", "engine_p95_hi", "gap_s"),
    ("clock_gap", "censored"): ("callers_p95", "engine_p95_hi", "callers", "gave_up", "gave_up_share"),
    ("clock_gap", "callers below engine"): ("callers_p95", "engine_p95_lo", "engine_p95_bucket"),
    ("overload", "over capacity"): ("arrival_rate", "completion_rate", "duration_s", "backlog_growth"),
    ("kv_fit", "not met"): ("max_concurrency", "max_concurrency_tokens"),
    ("retries_reach", "observed"): ("retried_attempts", "reached", "not_reached"),
    ("retries_stated", "observed"): ("retries", "retried", "requests", "statement"),
    ("upstream_down", "observed"): ("first", "last", "failed_requests", "refused", "timed_out"),
    ("failed_requests", "not met"): ("failed", "requests", "success_share"),
    ("verdict", "crash"): ("episode",),
    ("verdict", "sustained"): ("episode",),
    ("verdict", "one-off"): ("episode",),
    ("verdict", "recurring"): ("episode",),
    ("verdict", "ladder"): ("steps",),
    ("verdict", "finding"): ("finding",),
    ("verdict", "nothing alarming"): ("calm",),
    # a finding's severity (severity.Severity): the rule that set it, always named
    **{("severity", level): ("rule",) for level in ("critical", "high", "medium", "low", "info")},
}

Value = float | int | str | bool | datetime | None


@dataclass(frozen=True)
class Fact:
    """One figure a claim rests on: its value, where it was read (``source``), and for a latency the clock it
    was measured on."""

    name: str
    value: Value
    source: str | None = None
    clock: str | None = None
    unit: str | None = None  # "s" for a latency, "requests", "tokens", "/s", "share"...

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "value": self.value,
            "source": self.source,
            "clock": self.clock,
            "unit": self.unit,
        }


def latency(name: str, value: float | None, source: str | None, unit: str = "s") -> Fact:
    """A latency fact: its clock follows from its source ('client + gateway' when the range's requests were
    measured at two layers); a latency without a known source has none, which ``problems`` reports."""
    parts = [NAMED_SOURCE.get(p.strip(), p.strip()) for p in (source or "").split("+") if p.strip()]
    clocks = sorted({SOURCE_CLOCK[p] for p in parts if p in SOURCE_CLOCK})
    ok = parts and len(clocks) and all(p in SOURCE_CLOCK for p in parts)
    return Fact(name, value, " + ".join(parts) or None, " + ".join(clocks) if ok else None, unit)


def clock_of(source: str | None) -> str | None:
    """The clock(s) a figure of these sources was measured on ('client', 'engine', 'client + gateway'), from its
    source as the figures name it ('client + gateway', 'metrics histogram', 'server log')."""
    if not source:
        return None
    got = {SOURCE_CLOCK.get(NAMED_SOURCE.get(s.strip(), s.strip())) for s in source.split("+")}
    return " + ".join(sorted(c for c in got if c)) or None


def clock_named(clock: str | None) -> bool:
    """A clock of CLOCKS, or several joined by ' + '."""
    return bool(clock) and all(c in CLOCKS for c in str(clock).split(" + "))


@dataclass
class Claim:
    id: str  # unique in a diagnosis: 'cancellation', 'ladder.step.3', 'episode.E1', 'verdict'
    kind: str  # which rule decided it (REQUIRED's first key; wording's dispatch)
    subject: str  # what is claimed about, in words
    state: str
    facts: list[Fact] = field(default_factory=list)
    thresholds: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    sentence: str = ""  # set by wording.render

    def fact(self, name: str) -> Fact | None:
        return next((f for f in self.facts if f.name == name), None)

    def value(self, name: str) -> Value:
        f = self.fact(name)
        return None if f is None else f.value

    def time(self, name: str) -> datetime | None:
        """A time fact's value (None: absent or null); a value of another type is raised (``scalars``)."""
        return time_or_none(self.value(name))

    def problems(self) -> list[str]:
        """What makes this claim unfounded: a fact its state needs that is absent or null, an undecided state
        that names nothing missing, a latency fact without a clock."""
        out = []
        for name in REQUIRED.get((self.kind, self.state), ()):
            if self.value(name) is None:
                out.append(f"{self.id}: '{self.state}' needs {name}, which is null")
        if self.state in UNDECIDED and not self.missing:
            out.append(f"{self.id}: '{self.state}' names nothing missing")
        for f in self.facts:
            if f.unit == "s" and f.value is not None and not clock_named(f.clock):
                out.append(f"{self.id}: the latency {f.name} names no clock")
        return out

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "subject": self.subject,
            "state": self.state,
            "sentence": self.sentence,
            "facts": [f.to_dict() for f in self.facts],
            "thresholds": dict(self.thresholds),
            "missing": list(self.missing),
        }


def from_dict(d: dict) -> Claim:
    """A claim read back from diagnosis.json / summary.json."""
    return Claim(
        d["id"],
        d["kind"],
        d["subject"],
        d["state"],
        [Fact(**f) for f in d.get("facts") or []],
        dict(d.get("thresholds") or {}),
        list(d.get("missing") or []),
        d.get("sentence") or "",
    )


def facts(source: str | None = None, unit: str | None = None, **values: Value) -> list[Fact]:
    """Facts of one source (and unit) from keyword values, in the order given."""
    return [Fact(k, v, source, None, unit) for k, v in values.items()]


class Registry:
    """The claims of one diagnosis, by id, in the order they were made."""

    def __init__(self) -> None:
        self.by_id: dict[str, Claim] = {}

    def add(self, claim: Claim) -> Claim:
        self.by_id[claim.id] = claim
        return claim

    def get(self, cid: str | None) -> Claim | None:
        return self.by_id.get(cid or "")

    def all(self) -> list[Claim]:
        return list(self.by_id.values())
