"""The beats of a pattern of spikes (``recurring.mark``): the load at each, whether each recovered, their counts.

'Recurring' says the same load brings the pressure back. Lab abort-ignored read "[medium] Recurring KV pressure: 3
preemption spikes" with nothing held of the load at each beat: one client phase (Poisson 0.9 requests/s, 180 s),
arrivals 1.0, 1.2 and 1.2/s as each began against 0.8-0.9/s before (under ``rise_ratio``), each back to 0 while
still serving. Spikes that each follow a surge of their own load (a ladder's steps, bursts sent one after another)
are the load recurring, not the pressure at one load: each is a one-off of its surge, and no pattern is made of
them. A beat whose load is unknown (no request log) or cut short by the logs' end leaves the pattern as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from .load_words import SURGES
from .records import Episode
from .thresholds import Thresholds


@dataclass(frozen=True)
class Beats:
    counts: tuple[int, ...]  # each beat's count, by start (preemptions; stats samples of a level)
    recovered: int  # beats back to baseline while the server kept serving
    surge: int  # beats after a surge of their own load (arrivals, prompt lengths, the start of traffic)
    steady: int  # beats at a steady load (no surge before them)
    phase: str | None  # the one client phase every beat lies in, as the client set its load; None otherwise

    @property
    def unknown(self) -> int:
        """Beats whose load is not known: no request log, no rate before or as it began."""
        return len(self.counts) - self.surge - self.steady

    def one_offs(self) -> bool:
        """Each beat followed a surge of its own load: one-offs of their surges, not a pattern at one load (a
        beat cut short by the logs' end stays what its rule says: not shown to recover)."""
        return self.surge == len(self.counts)

    def words(self) -> str:
        n = len(self.counts)
        back = "each back to baseline" if self.recovered == n else f"{self.recovered} of {n} back to baseline"
        if self.steady == n:
            load = "at a steady load" + (f" (one client phase, {self.phase})" if self.phase else "")
        else:
            parts = [
                f"{k} {what}"
                for k, what in (
                    (self.surge, "after a surge of load"),
                    (self.steady, "at a steady load"),
                    (self.unknown, "at a load not known"),
                )
                if k
            ]
            load = ", ".join(parts)
        return f"{back}, {load}"


def _phase(e: Episode) -> tuple | None:
    ph = (e.get("details") or {}).get("phases") or []
    return (ph[0]["phase"], ph[0]["start"], ph[0]["mode"], ph[0]["value"]) if len(ph) == 1 else None


def _level(mode: str | None, value: float | None) -> str:
    if value is None:
        return f"{mode or 'a level'}"
    return f"{value:g} requests/s" if mode == "rate" else f"{mode or 'level'} {value:g}"


def of(group: list[Episode]) -> Beats:
    """The beats of a pattern's episodes (sorted by start)."""
    # a beat cut short by the logs' end counts by what came before it too: a surge of its own, or none
    after = [(e.get("decided_by") or {}).get("came_after") for e in group]
    phases = {_phase(e) for e in group}
    one = next(iter(phases)) if len(phases) == 1 else None
    return Beats(
        counts=tuple(int(e["count"]) for e in group),
        recovered=sum(1 for e in group if e["class"] == "spike" and e["recovered"]),
        surge=sum(1 for k in after if k in SURGES),
        steady=sum(1 for k in after if k == "steady"),
        phase=_level(one[2], one[3]) if one is not None else None,
    )


def regular(gaps: list[float], th: Thresholds) -> bool:
    """The gaps between a pattern's starts all within ``recurring_regular_share`` of their median: a rhythm."""
    med = sorted(gaps)[len(gaps) // 2]
    return all(abs(g - med) <= th.recurring_regular_share * med for g in gaps)


def spacing_words(gaps: list[float], th: Thresholds) -> str:
    """'about every 25 s' for a rhythm; '7–58 s apart' when the gaps are not one (traced-2r-kill's 8 spikes were
    'about every 25 s', 7 to 58 s apart; abort-ignored's 3 'about every 66 s', 66 and 34 s apart)."""
    gaps = sorted(gaps)
    if regular(gaps, th):
        return f"about every {gaps[len(gaps) // 2]:.0f} s"
    return f"{gaps[0]:.0f}–{gaps[-1]:.0f} s apart"
