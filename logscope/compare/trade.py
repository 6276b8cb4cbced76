"""The trade a change makes: what got better, what got worse and where the time went, step by step, each figure
on its clock, beyond the sampling noise or not.

The seeds' trap is the case to catch: fewer admitted sequences make preemptions vanish while the wait moves
into vLLM's queue (the engine's clock sees it) or in front of the engine (only the callers' clock sees it).
When preemptions fall, every clock that could show where the time went is read at every matched step; a clock
missing from the folders is said to be missing, never taken as "no rise".
"""

from __future__ import annotations

from ..report.fmt import fnum, pct
from .sources import CLOCK_TEXT, SOURCE_TEXT, titled

PREEMPT_MIN = 10  # fewer preemptions in the run that had more: not a change worth a trade
PREEMPT_FALL = 0.25  # ... nor a fall (or rise) of less than this share, even beyond the noise
# the latencies where the time a change saves on preemptions can go, in the order a reader should check them
WATCH = ("queue_p95", "queue_mean_s", "ttft_p95", "engine_ttft_p95", "ttft_outside_s", "e2e_p95",
         "gateway_e2e_p95", "engine_e2e_p95")  # fmt: skip
SHOWN_STEPS = 3  # steps named per figure (the largest rises)
LOOK = "when preemptions vanish, look at the new queue"


def _row(rows: list[dict], name: str) -> dict | None:
    return next((r for r in rows if r["name"] == name), None)


def _s(x) -> str:
    return "unknown" if x is None else f"{fnum(x)} s"


def _v(m: dict, side: str) -> str:
    """A side's figure: a histogram's quantile as its bucket ('2.5–5 s'; the interpolated 4.375 s inside it is no
    figure the histogram holds), an exact one in seconds."""
    b = (m.get("bucket") or {}).get(side)
    return f"the {b} bucket" if b else _s(m[side])


def _where(r: dict) -> str:
    """'engine's clock, engine metrics histogram' for a row."""
    clock = CLOCK_TEXT.get(r.get("clock") or "", r.get("clock") or "")
    src = {v for v in (r.get("source") or {}).values() if v}
    srcs = ", ".join(SOURCE_TEXT.get(s, s) for s in sorted(src))
    return ", ".join(x for x in (clock, srcs) if x)


def _noise_word(r: dict) -> str:
    if r["beyond_noise"]:
        return "beyond the sampling noise"
    if r["beyond_noise"] is False:
        return "within the noise"
    return "noise not estimated"


def preemption_change(whole: list[dict]) -> dict | None:
    """Preemptions fell (or rose) between the runs beyond the noise, by a quarter or more of enough of them."""
    p = _row(whole, "preemptions")
    if p is None or p["a"] is None or p["b"] is None or not p["beyond_noise"]:
        return None
    hi, lo = max(p["a"], p["b"]), min(p["a"], p["b"])
    if hi < PREEMPT_MIN or lo > hi * (1 - PREEMPT_FALL):
        return None
    return {"a": p["a"], "b": p["b"], "fell": p["b"] < p["a"]}


def rises(
    scopes: list[tuple[str, list[dict]]], names: tuple[str, ...], up: bool = True
) -> dict[str, list[dict]]:
    """Per watched figure, the scopes where it rose (``up``) or fell, with A, B, the change, its noise and clock;
    the moves beyond the noise first, then by size."""
    out: dict[str, list[dict]] = {}
    for scope, rows in scopes:
        for name in names:
            r = _row(rows, name)
            if r is None or r["change"] is None or r["change"] == 0 or (r["change"] > 0) != up:
                continue
            if r["direction"] == "same bucket":  # two interpolations inside one bucket: no rise to show
                continue
            out.setdefault(name, []).append(
                {
                    "scope": scope,
                    "title": r["title"],
                    "a": r["a"],
                    "b": r["b"],
                    "change": r["change"],
                    "beyond_noise": r["beyond_noise"],
                    "where": _where(r),
                    "bucket": r.get("bucket"),
                }
            )
    for moves in out.values():
        moves.sort(key=lambda m: (not m["beyond_noise"], -abs(m["change"])))
    return out


# how a sentence names each watched figure: its clock in its words (callers', gateway's, engine's)
SAID = {
    "queue_p95": "{owner} queue time p95",
    "queue_mean_s": "{owner} mean queue time",
    "ttft_p95": "the callers' TTFT p95",
    "engine_ttft_p95": "the engine's TTFT p95",
    "ttft_outside_s": "the callers' TTFT beyond the engine's (means)",
    "e2e_p95": "the callers' e2e p95",
    "gateway_e2e_p95": "the gateway's e2e p95",
    "engine_e2e_p95": "the engine's e2e p95",
}
SAID_MAX = 3  # figures one sentence names


def _clock_missing(whole: list[dict], names: tuple[str, str] = ("A", "B")) -> list[str]:
    """What cannot be compared for want of a clock (in neither run, or in one only)."""
    out = []
    for name, what, then in (
        ("ttft_p95", "the callers' TTFT", "the wait before the engine cannot be compared"),
        ("queue_p95", "{owner} queue-time histogram", "the engine's queue cannot be compared"),
    ):
        r = _row(whole, name)
        if r is None:
            continue
        a, b = r["a"] is not None, r["b"] is not None
        if name == "queue_p95" and not (a and b):
            q = _row(whole, "queue_mean_s")
            if q is not None and q["a"] is not None and q["b"] is not None:
                continue  # its mean (_sum / _count) still shows the queue
            what = "{owner} queue time"
        if not a and not b:
            out.append(f"{what} is not in either folder: {then}")
        elif a != b:
            out.append(f"{what} is only in {names[0] if a else names[1]}'s folder: {then}")
    return out


def _at(m: dict) -> str:
    return "over the whole run" if m["scope"] == "whole run" else "at " + m["scope"].removeprefix("step ")


def _said(name: str, moves: list[dict], order: dict[str, int]) -> str:
    """'vLLM's queue time p95 (engine metrics histogram) rose at c=16 from 1.4 s to 2.4 s (beyond the
    run-to-run noise)': the steps beyond the noise (the whole run only when no step is), largest first."""
    steps = [m for m in moves if m["scope"] != "whole run"] or moves
    shown = sorted(steps[:SHOWN_STEPS], key=lambda m: order.get(m["scope"], 0))  # the largest, in load order
    src = moves[0]["where"].split(", ", 1)[1] if ", " in moves[0]["where"] else ""
    where = ", ".join(f"{_at(m)} from {_v(m, 'a')} to {_v(m, 'b')}" for m in shown)
    rest = sorted(steps[SHOWN_STEPS:], key=lambda m: order.get(m["scope"], 0))
    more = f", and by less at {', '.join(_at(m).removeprefix('at ') for m in rest)}" if rest else ""
    verb = "rose" if moves[0]["change"] > 0 else "fell"
    return f"{SAID.get(name, moves[0]['title'])}{f' ({src})' if src else ''} {verb} {where}{more}"


def _front(scopes: list[tuple[str, list[dict]]], rose: dict[str, list[dict]]) -> str | None:
    """Where the callers' extra wait was, where the engine's clock can say: inside the engine (its own TTFT or
    queue rose at those steps) or in front of it (it did not)."""
    at = [m["scope"] for m in rose.get("ttft_p95", []) if m["beyond_noise"] and m["scope"] != "whole run"]
    if not at:
        return None
    inside: list[str] = []
    outside: list[str] = []
    for scope, rows in scopes:
        if scope not in at:
            continue
        e = _row(rows, "engine_ttft_p95")
        if e is None or e["a"] is None or e["b"] is None:
            continue
        (inside if e["beyond_noise"] and (e["change"] or 0) > 0 else outside).append(
            scope.removeprefix("step ")
        )
    if outside and not inside:
        return (
            f"the engine's own TTFT did not rise beyond the noise there, at {', '.join(outside)}: the wait is in "
            "front of the engine, where only the callers' clock sees it"
        )
    if inside and not outside:
        return f"the engine's own TTFT rose there too, at {', '.join(inside)}: the wait is inside the engine"
    return None


def trade(
    whole: list[dict], steps: list[dict], names: tuple[str, str] = ("A", "B"), engine: str | None = None
) -> dict:
    """The trade object the verdict and the pages render: preemptions' change, the latencies that moved the
    other way (by scope), the clocks missing, and the sentence. ``names``: the two runs as the sentence calls
    them (a sweep's ends are its values, not A and B); ``engine``: the runs' one engine, named in the sentence."""
    out = _trade(whole, steps, names)
    out["missing"] = [titled(m, engine) for m in out["missing"]]
    out["text"] = titled(out["text"], engine) if out["text"] else out["text"]
    return out


def _trade(whole: list[dict], steps: list[dict], names: tuple[str, str]) -> dict:
    scopes = [("whole run", whole)] + [(f"step {s['label']}", s["metrics"]) for s in _reached(steps)]
    order = {scope: i for i, (scope, _) in enumerate(scopes)}
    pre = preemption_change(whole)
    missing = _clock_missing(whole, names)
    out: dict = {"preemptions": pre, "rose": {}, "missing": missing, "kind": None, "text": None}
    if pre is None:
        return out
    # the time the fewer preemptions saved went somewhere: latencies that rose in the run with fewer
    rose = rises(scopes, WATCH, up=pre["fell"])
    out["rose"] = rose
    beyond = {k: [m for m in v if m["beyond_noise"]] for k, v in rose.items()}
    beyond = {k: v for k, v in beyond.items() if v}
    if "queue_p95" in beyond:
        beyond.pop("queue_mean_s", None)
    verb = "fell" if pre["fell"] else "rose"
    head = f"Preemptions {verb} from {fnum(pre['a'])} to {fnum(pre['b'])}"
    tail = "".join(f"; {m}" for m in missing)
    if beyond:
        front = _front(scopes, rose) if pre["fell"] else None
        if front:  # said beside the callers' TTFT: the engine's own TTFT is not listed again
            beyond.pop("engine_ttft_p95", None)
        said = "; ".join(
            _said(k, beyond[k], order) + (f" ({front})" if k == "ttft_p95" and front else "")
            for k in [k for k in WATCH if k in beyond][:SAID_MAX]  # the queue first, then the callers' TTFT
        )
        if pre["fell"]:
            out["kind"] = "latency_into_queue"
            out["text"] = (
                f"{head}, but the wait moved (beyond the sampling noise): {said}{tail}. The trade: {LOOK}."
            )
        else:
            out["kind"] = "queue_into_preemptions"
            out["text"] = (
                f"{head}, while the wait fell (beyond the sampling noise): {said}{tail}. The trade runs the "
                f"other way: {names[1]} preempts where {names[0]} queued."
            )
        return out
    checked = [k for k in ("queue_p95", "queue_mean_s", "ttft_p95", "engine_ttft_p95") if _known(whole, k)]
    if not checked:
        out["text"] = f"{head}; whether the wait moved cannot be told{tail or ': no latency is known'}."
        return out
    watched = ", ".join(SAID[k] for k in checked)
    out["kind"] = "relief" if pre["fell"] else None
    at = "at any step" if steps else "over the whole run"
    out["text"] = (
        f"{head} and no latency moved beyond the sampling noise {at} ({watched}): "
        f"{'the queue did not take the latency' if pre['fell'] else 'the preemptions cost no latency'}{tail}."
    )
    return out


def _reached(steps: list[dict]) -> list[dict]:
    """The steps where the one change can act (logscope.compare.reach): a move where it cannot is the host's noise
    or load, not the change's trade (seqs-64 -> seqs-16 named the callers' TTFT at c=8, where no run ran more than
    8 sequences under a cap of 16)."""
    return [s for s in steps if (s.get("reach") or {}).get("acts") is not False]


def _known(rows: list[dict], name: str) -> bool:
    r = _row(rows, name)
    return r is not None and r["a"] is not None and r["b"] is not None


RETRIES_MIN = 10  # fewer client retries in A: not a change worth a trade


def retry_trade(whole: list[dict], steps: list[dict]) -> dict | None:
    """Client retries fell but the success share fell beyond the noise: the failures the retries absorbed now
    reach the callers (the whole run's, else the step where the share fell most)."""
    r = _row(whole, "client_retries")
    if r is None or r["a"] is None or r["b"] is None or r["a"] < RETRIES_MIN or r["b"] > r["a"] / 2:
        return None
    scopes = [("whole run", whole)] + [(f"step {s['label']}", s["metrics"]) for s in _reached(steps)]
    fell = rises(scopes, ("success_share",), up=False).get("success_share", [])
    fell = [m for m in fell if m["beyond_noise"]]
    if not fell:
        return None
    m = next((x for x in fell if x["scope"] == "whole run"), fell[0])
    where = "" if m["scope"] == "whole run" else f" ({_at(m)})"
    return {
        "kind": "failures_reach_callers",
        "scope": m["scope"],
        "rise": -m["change"],
        "text": f"Client retries fell from {fnum(r['a'])} to {fnum(r['b'])}, but the success share fell from "
        f"{pct(m['a'])} to {pct(m['b'])}{where}, beyond the sampling noise: the failures the retries absorbed "
        "now reach the callers.",
    }
