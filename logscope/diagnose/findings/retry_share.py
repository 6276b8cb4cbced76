"""Which cause a KV pressure's change should test when retries overlap it: the retries or the load itself.

Lab retry-storm and storm-b were told to lower --max-num-seqs while the callers' retries ran 1.56× and 2.92×
executions per request at the server in the same range: a lower cap moves the pressure into the waiting queue,
longer waits past a 5 s client timeout are more abandoned attempts and more retries. The facts that decide it are
held here: the executions per logical request in the episode's range (``details.amplification``), the retries by
layer, the most that ran at once, and what the KV cache holds. The load alone is estimated as the most that ran
divided by the amplification (each execution taking as long as it did): within what the cache holds, the retries
are what filled it and their change is the one to test; above it, the load alone fills the cache and the cap is,
measured with the retries' share beside it. A missing fact leaves it ``unknown`` and names that fact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..context import Context
from ..records import Episode
from .record import num
from .retries import MULTIPLY_MIN, _retry_change


@dataclass(frozen=True)
class RetryShare:
    amplification: float  # executions at the server per logical request that arrived in the episode
    client_retries: int
    gateway_retries: int
    running_max: float | None  # the most that ran at once in the episode
    hold: float | None  # requests the KV cache holds at the observed request size
    dominant: str  # 'retries', 'load' or 'unknown'
    missing: str | None  # the fact whose absence left it unknown

    @property
    def alone(self) -> float | None:
        """The most that would have run at once without the retries' executions (same time per execution)."""
        return None if self.running_max is None else self.running_max / self.amplification

    def words(self) -> str:
        """The facts, said in the cause."""
        who = " and ".join(
            f"{n:,} {layer} retries"
            for layer, n in (("client", self.client_retries), ("gateway", self.gateway_retries))
            if n
        )
        said = f"retries overlapped it: {num(self.amplification, 2)}× executions per request at the server in its range ({who})"
        if self.dominant == "unknown":
            return f"{said}; whether the load alone would fill the cache is unknown: {self.missing}"
        alone = (
            f"the {num(self.running_max)} that ran at once would be about {num(self.alone)} without them (the same "
            f"time per execution), {'within' if self.dominant == 'retries' else 'above'} the {num(self.hold)} "
            "requests the cache holds"
        )
        return f"{said}; {alone}"


def share(ep: Episode, hold: float | None) -> RetryShare | None:
    """The retries' share of a pressure episode, or None when its range holds no retried executions (below
    ``retries.MULTIPLY_MIN`` executions per request, or no retry counted)."""
    d = ep.get("details") or {}
    amp = d.get("amplification")
    cr, gr = int(d.get("client_retries") or 0), int(d.get("gateway_retries") or 0)
    if amp is None or amp < MULTIPLY_MIN or not (cr or gr):
        return None
    run = ep.get("running_max")
    if run is None:
        return RetryShare(
            amp, cr, gr, None, hold, "unknown", "no stats line in its range gives the running count"
        )
    if hold is None:
        return RetryShare(
            amp, cr, gr, run, None, "unknown", "what the KV cache holds is not known (no capacity line)"
        )
    return RetryShare(amp, cr, gr, run, hold, "retries" if run / amp <= hold else "load", None)


def next_test(ctx: Context, rs: RetryShare, lower: str) -> str:
    """The one change the dominant cause points to, and what to measure after it."""
    again = (
        "replay the same traffic and count the preemptions and the executions per request again "
        f"({num(rs.amplification, 2)}× here)"
    )
    if rs.dominant == "load":
        return (
            f"Lower {lower} (the load alone, about {num(rs.alone)} at once, fills the cache) and {again}: the "
            "longer waiting queue must not turn into more client timeouts and retries; if it does, change the "
            "retries first"
        )
    change = _retry_change(ctx, bool(rs.client_retries and rs.gateway_retries), {})
    then = (
        f"lower {lower} only if they stay"
        if rs.dominant == "retries"
        else f"if they stay, measure what the cache holds (a concurrency ladder) before changing {lower}"
    )
    return f"{change}; then {again}: {then}"


def advice(ctx: Context, ep: Episode, hold: float | None, mns: int | None) -> tuple[str, str] | None:
    """(what to add to the cause, the next test) of a pressure the retries overlapped; None when none did."""
    rs = share(ep, hold)
    if rs is None:
        return None
    lower = f"--max-num-seqs{' from ' + str(mns) if mns else ''}" + (
        f" to {max(1, math.floor(hold))}" if hold is not None and hold >= 1 else ""
    )
    return f"; {rs.words()}", next_test(ctx, rs, lower)
