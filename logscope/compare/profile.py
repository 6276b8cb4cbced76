"""Whether two runs were given the same load profile, so that a whole-run latency can be judged at all.

A whole-run percentile mixes the steps in the proportions each run gave them: spike's burst was 48 callers for
18 s, spike-b's 40 for 20 s, after 75 s and 90 s of calm, and 'e2e p95 14.89 -> 7.91 s, better' over the whole
runs said more about the burst than about the change. The matched steps are judged step by step (moves, reach,
after); a whole-run latency only when the profiles match: the same steps, each with its requests or its length
within traffic.TOLERANCE (a bench of a fixed number of requests per step runs longer on a slower server: its
length is a result, its requests are not), and the request shapes (and, in an open loop, the rate) within it.
Where a fact is missing the match is unknown, and the latencies are not judged either; the object names it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..report.fmt import fnum
from . import traffic

LATENCY_UNIT = "s"  # a whole-run row in seconds is a latency (a volume in seconds, orphan_s, is judged apart)


@dataclass
class Load:
    matched: bool | None  # None: a fact that would tell is missing
    how: str = ""  # how they match (when matched)
    differs: list[str] = field(default_factory=list)  # what differs, in words
    missing: list[str] = field(default_factory=list)  # what is not known
    text: str = ""

    def doc(self) -> dict:
        return asdict(self)


def _steps(labels: list[str]) -> str:
    return ", ".join(labels) if labels else "none"


def _traffic_row(r: dict) -> str:
    if r["name"] == "steps":
        return f"steps {_steps(r['a'])} in A, {_steps(r['b'])} in B"
    unit = "/s" if r["name"] == "arrival_rate" else ""
    apart = traffic._rel(r["a"], r["b"])
    said = f", {apart * 100:.0f} % apart" if apart is not None else ""
    return f"{r['name'].replace('_', ' ')} {fnum(r['a'])}{unit} in A, {fnum(r['b'])}{unit} in B{said}"


def _requests(sc: dict) -> tuple[float | None, float | None]:
    n = next((r for r in sc["metrics"] if r["name"] == "requests"), None)
    return (n["a"], n["b"]) if n is not None else (None, None)


def _within(a: float | None, b: float | None) -> bool | None:
    d = traffic._rel(a, b)
    return None if d is None else d <= traffic.TOLERANCE


def load(t_rows: list[dict], alike: bool | None, steps: list[dict]) -> Load:
    """The load profiles of two runs: traffic.differences' rows and verdict (``alike``), and the matched steps'
    scopes (their requests row and ``duration_s``)."""
    differs = [_traffic_row(r) for r in t_rows]
    missing: list[str] = []
    for sc in steps:
        na, nb = _requests(sc)
        d = sc.get("duration_s") or {}
        by_n, by_s = _within(na, nb), _within(d.get("a"), d.get("b"))
        if by_n or by_s:
            continue
        if by_n is False and by_s is False:
            differs.append(
                f"step {sc['label']} lasted {fnum(d['a'])} s in A, {fnum(d['b'])} s in B ({na:g} and {nb:g} requests)"
            )
        else:
            missing.append(f"step {sc['label']}'s requests or length in a run")
    if alike is None:
        missing.append("the traffic's figures (prompt and max_tokens means, the arrival rate)")
    if differs:
        return Load(False, differs=differs, missing=missing, text=f"the load differs ({'; '.join(differs)})")
    if missing:
        return Load(
            None,
            missing=missing,
            text=f"whether the load matches is unknown ({'; '.join(missing)} not in the logs)",
        )
    tol = traffic.TOLERANCE
    how = (
        f"the same steps ({_steps([s['label'] for s in steps])}), each with its requests or its length within "
        f"{tol * 100:.0f} %, and the request shapes within {tol * 100:.0f} %"
        if steps
        else f"no steps in either run, and the request shapes within {tol * 100:.0f} %"
    )
    return Load(True, how=how, text=f"the load matches: {how}")


def apply(whole: dict, ld: Load, volume: tuple[str, ...]) -> bool:
    """Whole-run latencies are shown, not judged, unless the load profiles match; True when one had been."""
    whole["load"] = ld.doc()
    if ld.matched:
        return False
    held = False
    for r in whole["metrics"]:
        if r["unit"] == LATENCY_UNIT and r["name"] not in volume and r["direction"] in ("better", "worse"):
            r["direction"] = None
            r["noise"] = f"{r['noise']}; not judged: {ld.text}, no better or worse over the whole runs"
            held = True
    return held


def line(whole: dict, ld: Load, matched_steps: int) -> str | None:
    """The verdict's sentence when the whole-run latencies known in both runs are not judged."""
    if ld.matched or not any(
        r["unit"] == LATENCY_UNIT and r["a"] is not None and r["b"] is not None for r in whole["metrics"]
    ):
        return None
    return (
        f"Whole-run latencies are not judged: {ld.text}; a whole-run percentile mixes the steps in each run's "
        "proportions. "
        + (
            "The matched steps are judged one by one."
            if matched_steps
            else "No step matches between the runs."
        )
    )
