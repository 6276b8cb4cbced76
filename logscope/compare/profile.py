"""Whether two runs were given the same load profile, so that a whole-run latency can be judged at all.

A whole-run percentile mixes the steps in the proportions each run gave them: spike's burst was 48 callers for
18 s, spike-b's 40 for 20 s, after 75 s and 90 s of calm, and 'e2e p95 14.89 -> 7.91 s, better' over the whole
runs said more about the burst than about the change. The matched steps are judged step by step (moves, reach,
after); a whole-run latency only when the profiles match: the same steps, each with its requests or its length
within traffic.TOLERANCE (a bench of a fixed number of requests per step runs longer on a slower server: its
length is a result, its requests are not), and the request shapes (and, in an open loop, the rate) within it.
Where a fact is missing the match is unknown, and the latencies are not judged either; the object names it.

The success share and the executions per logical request mix the steps the same way (retry-storm's 7/s burst
against storm-b's 6/s read 'success share 70.0 % -> 82.8 %, better'), and so does the SLO over the whole runs:
between two loads each run's result is said with its figures, never that B met it where A did not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..report.fmt import fnum
from . import censored, traffic, verdict
from .precision import seconds

LATENCY_UNIT = "s"  # a whole-run row in seconds is a latency (a volume in seconds, orphan_s, is judged apart)
# whole-run figures besides the latencies that mix the steps in each run's proportions: a burst's failures and
# the retries they set off weigh as much as the burst's share of the run
SHARES = ("success_share", "amplification")
# the directions that judge a move against the noise (moves.direction); 'none' (equal) and 'same bucket' are facts
JUDGED = ("better", "worse", "within noise", "small")


@dataclass
class Load:
    matched: bool | None  # None: a fact that would tell is missing
    how: str = ""  # how they match (when matched)
    differs: list[str] = field(default_factory=list)  # what differs, in words
    missing: list[str] = field(default_factory=list)  # what is not known
    text: str = ""
    what: list[str] = field(default_factory=list)  # what differs or is missing, in a word each ('steps')
    held: list[str] = field(default_factory=list)  # the whole-run figures that moved, shown and not judged
    slo: str = ""  # why the SLO over the whole runs is not judged between them (both runs' results known)

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
    what = [r["name"].replace("_", " ") for r in t_rows]
    missing: list[str] = []
    for sc in steps:
        na, nb = _requests(sc)
        d = sc.get("duration_s") or {}
        by_n, by_s = _within(na, nb), _within(d.get("a"), d.get("b"))
        if by_n or by_s:
            continue
        if by_n is False and by_s is False:
            differs.append(
                f"step {sc['label']} lasted {fnum(seconds(d['a']))} s in A, {fnum(seconds(d['b']))} s in B ({na:g} and "
                f"{nb:g} requests)"
            )
            what.append(f"step {sc['label']}'s length")
        else:
            missing.append(f"step {sc['label']}'s requests or length in a run")
    if alike is None:
        missing.append("the traffic's figures (prompt and max_tokens means, the arrival rate)")
    if differs:
        return Load(
            False,
            differs=differs,
            missing=missing,
            text=f"the load differs ({'; '.join(differs)})",
            what=what,
        )
    if missing:
        return Load(
            None,
            missing=missing,
            text=f"whether the load matches is unknown ({'; '.join(missing)} not in the logs)",
            what=["the load's figures"],
        )
    tol = traffic.TOLERANCE
    how = (
        f"the same steps ({_steps([s['label'] for s in steps])}), each with its requests or its length within "
        f"{tol * 100:.0f} %, and the request shapes within {tol * 100:.0f} %"
        if steps
        else f"no steps in either run, and the request shapes within {tol * 100:.0f} %"
    )
    return Load(True, how=how, text=f"the load matches: {how}")


def _mixes(r: dict, volume: tuple[str, ...]) -> bool:
    """A whole-run figure that mixes the steps in each run's proportions: a latency, the success share, the
    executions per logical request (a count of the load, ``volume``, is judged apart: pair._unjudged)."""
    return (r["unit"] == LATENCY_UNIT and r["name"] not in volume) or r["name"] in SHARES


def apply(whole: dict, ld: Load, volume: tuple[str, ...]) -> bool:
    """Whole-run latencies, success share and executions per request are shown, not judged, unless the load
    profiles match; True when one had been (``ld.held`` names them). ``ld.slo`` says why the SLO over the whole
    runs is not judged between them."""
    if not ld.matched:
        for r in whole["metrics"]:
            # 'within noise' is a judgement too: crash against kill-norestart read 'success share 62.4 % ->
            # 57.5 %: within noise' under a line saying the success share is not judged
            if _mixes(r, volume) and r["direction"] is not None:
                if r["direction"] in ("better", "worse"):
                    ld.held.append(r["name"])
                r["direction"] = None
                r["noise"] = f"{r['noise']}; not judged: {ld.text}, no better or worse over the whole runs"
        if None not in whole["meets_slo"].values():
            why = "the load differs" if ld.matched is False else "whether the load matches is unknown"
            ld.slo = f"not judged between the runs, {why} ({', '.join(ld.what)})"
    whole["load"] = ld.doc()
    return bool(ld.held)


def _side(r: dict, k: str) -> str:
    """A run's figure as the verdict says it: a histogram's quantile as its bucket."""
    b = (r.get("bucket") or {}).get(k)
    return f"in {b}" if b else verdict.value_text(r[k], r["unit"])


def line(whole: dict, ld: Load, matched_steps: int, volume: tuple[str, ...]) -> str | None:
    """The verdict's sentence when whole-run figures known in both runs are not judged: which, why, and the
    figures that moved, each run's beside the other's."""
    known = [r for r in whole["metrics"] if _mixes(r, volume) and r["a"] is not None and r["b"] is not None]
    if ld.matched or not known:
        return None
    kinds = ["latencies"] if any(r["unit"] == LATENCY_UNIT for r in known) else []
    kinds += [r["title"] for r in known if r["name"] in SHARES]
    held = [r for r in whole["metrics"] if r["name"] in ld.held]
    shown = (
        " Shown, not judged: "
        + "; ".join(f"{r['title']} {_side(r, 'a')} → {_side(r, 'b')}" for r in held)
        + "."
        if held
        else ""
    )
    return (
        f"Whole-run {_and(kinds)} are not judged: {ld.text}; a whole-run figure mixes the steps in each run's "
        f"proportions.{shown} "
        + (
            "The matched steps are judged one by one."
            if matched_steps
            else "No step matches between the runs."
        )
    )


def _and(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def slo_held(whole: dict, ld: Load) -> str | None:
    """The whole-run SLO between two loads: each run's result with its figures, and not judged between them
    (None when the loads match, or a run's result is unknown: verdict.slo_line says that)."""
    met = whole["meets_slo"]
    if not ld.slo:
        return None
    rows = {r["name"]: r for r in whole["metrics"]}
    on = whole.get("slo_judged_on") or {}
    keys = [k for k in (on.get("ttft"), on.get("e2e"), "success_share") if k in rows]

    def said(
        side: str,
    ) -> str:  # a run that misses it: the figures that failed; one that meets it: all of them
        got = keys if met[side] else whole["slo_failed"][side]
        figs = ", ".join(
            f"{rows[n]['title']} {_side(rows[n], side)}"
            for n in got
            if n in rows and rows[n][side] is not None
        )
        figs = "; ".join(x for x in (figs, censored.floors_text(whole, side)) if x)  # a floor decides nothing
        return f"{side.upper()} {'meets' if met[side] else 'misses'} it" + (f" ({figs})" if figs else "")

    return f"{said('a')}; {said('b')}: {ld.slo}."


def still_judged(whole: dict, ld: Load) -> str:
    """The verdict's last line when the load profiles do not match and nothing judged moved: which figures were
    still judged, or that none was (crash against kill-norestart read 'Of the figures judged over the whole runs,
    none moved' where only counts of 0 against 0 were left to judge)."""
    judged = [r["title"] for r in whole["metrics"] if r["direction"] is not None]
    why = "the load differs" if ld.matched is False else "whether the load matches is unknown"
    if not judged:
        return f"No figure is judged over the whole runs: {why}."
    more = f" and {len(judged) - 4} more" if len(judged) > 4 else ""
    return (
        f"Of the figures still judged over the whole runs ({'; '.join(judged[:4])}{more}), none moved beyond "
        "the sampling noise."
    )
