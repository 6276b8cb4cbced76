"""What came before a matched step: a step that follows a different load in each run is no like-for-like test.

Steps are matched by mode, value and order (traffic.match), but the load before them is not checked: spike's last
c=2 phase follows a burst of 48 callers in A, spike-b's a burst of 40 in B, and what a burst leaves behind (a queue
draining, preempted requests resumed) runs into the calm phase after it. spike against spike-b read 'e2e p50
(callers) 1.45 s -> 1.67 s, worse' there: the drain of another burst, not the change. Where the step before differs
and the server shows that load still in the step (a request waiting, a preemption, in either run), its rows are
shown, not judged; where that fact is missing in both runs it cannot be ruled out, and the rows are not judged
either (the object names what is missing); where neither run queued or preempted, the step is judged as before.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # moves reads the facts through this module's caller
    from .moves import Figures
    from .traffic import Step

SIGNS = ("waiting_max", "preemptions")  # the load before still in the step: a queue, a preempted request


@dataclass
class After:
    before: dict[str, str | None]  # the step before in each run ({"a": "c=48", "b": "c=40"}; None: none)
    same: bool  # the same step (mode, value, order) before in both runs
    carried: (
        bool | None
    )  # the load before still in this step (a queue or a preemption in a run); None: unknown
    facts: dict = field(default_factory=dict)  # {"a": {"waiting_max": 37, "preemptions": 56}, "b": {...}}
    missing: list[str] = field(default_factory=list)
    text: str = ""

    def doc(self) -> dict:
        return asdict(self)


def _previous(steps: list[Step], s: Step) -> Step | None:
    i = next((i for i, x in enumerate(steps) if x.key == s.key), 0)
    return steps[i - 1] if i > 0 else None


def after(sa: list[Step], sb: list[Step], x: Step, y: Step, fa: Figures, fb: Figures) -> After:
    """The step before ``x`` (A's) and ``y`` (B's), and whether a different load before left itself in the step."""
    pa, pb = _previous(sa, x), _previous(sb, y)
    before = {"a": pa.label if pa else None, "b": pb.label if pb else None}
    if (pa.key if pa else None) == (pb.key if pb else None):
        said = "no step before it in either run" if pa is None else f"{pa.label} before it in both runs"
        return After(before, True, None, text=said)
    facts = {side: {k: f.values.get(k) for k in SIGNS} for side, f in (("a", fa), ("b", fb))}
    known = [v for side in facts.values() for v in side.values() if v is not None]
    missing = [f"{k} in {s.upper()}" for s, v in facts.items() for k in SIGNS if v[k] is None]
    carried = any(v > 0 for v in known) if known else None
    if len(known) < len(SIGNS) * 2 and not carried:
        carried = None  # a sign missing in a run may be the one that shows the load still there
    was = f"after {_said(before['a'])} in A, {_said(before['b'])} in B"
    said = "; ".join(f"{k.replace('_', ' ')} A {_n(facts['a'][k])}, B {_n(facts['b'][k])}" for k in SIGNS)
    if carried is None:
        text = (
            f"{was}: whether that load ran into this step is unknown ({', '.join(missing)} not in the logs)"
        )
    elif carried:
        text = (
            f"{was}, whose load ran into this step ({said}): its figures carry a different load in each run"
        )
    else:
        text = f"{was}, but neither run queued or preempted here ({said}): the load before did not reach it"
    return After(before, False, carried, facts, missing, text)


def _said(label: str | None) -> str:
    return "no step" if label is None else label


def _n(x: float | int | None) -> str:
    return "unknown" if x is None else f"{x:g}"


def apply(sc: dict, a: After) -> None:
    """A step after a different load that ran into it (or may have): its better / worse say so instead."""
    sc["after"] = a.doc()
    if a.same or a.carried is False:
        return
    for row in sc["metrics"]:
        if row["direction"] in ("better", "worse"):
            row["direction"] = None
            row["noise"] = f"{row['noise']}; not judged: {a.text}, no better or worse"
