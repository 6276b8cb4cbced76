"""The comparison in a few sentences: can the effect be put on one change (settings, traffic, engines), did B
meet the SLO where A did not (or the reverse), on which clock, did the working boundary move, and what moved.
The trade (preemptions gone, the wait moved; retries gone, the failures reaching the callers) is
logscope.compare.trade's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..report.fmt import fnum, pct
from . import censored, precision

# the SLO's figures, by clock in the order they judge it: the callers' own first (the SLO is theirs), then the
# gateway's (its request time holds the callers' wait but the network), then the engine's
JUDGED_BY = {
    "ttft": (("ttft_p95", "client"), ("engine_ttft_p95", "engine")),
    "e2e": (("e2e_p95", "client"), ("gateway_e2e_p95", "gateway"), ("engine_e2e_p95", "engine")),
}


@dataclass(frozen=True)
class Criterion:
    """One condition of the SLO as the verdict judges it: the metric read (None: no clock gives it for every run),
    the SLO's field and limit, and whether the figure must stay at or below it (latencies) or reach it (success)."""

    key: str | None
    field: str
    limit: float
    upper: bool

    @property
    def words(self) -> str:
        """'e2e p95', 'success share': the condition as the SLO names it."""
        return SLO_WORDS[self.field]


def criteria(slo: dict, on: dict[str, str | None]) -> list[Criterion]:
    """The SLO's conditions the verdict judges (``meets``, ``undecided``, ``met``) and the SLO line names
    (``_judged_on``): one list, so that the line lists every condition a verdict of 'misses' can rest on."""
    checks = (
        (on.get("ttft"), "ttft_s", True),
        (on.get("e2e"), "e2e_s", True),
        ("success_share", "success", False),
    )
    return [Criterion(k, f, float(slo[f]), up) for k, f, up in checks if slo.get(f) is not None]


def judged_on(figs: list[Any]) -> dict[str, str | None]:
    """Per SLO figure, the metric every run has at this scope (one clock for all: like with like)."""
    out: dict[str, str | None] = {}
    for what, options in JUDGED_BY.items():
        out[what] = next(
            (name for name, _ in options if all(f.values.get(name) is not None for f in figs)), None
        )
    return out


def meets(fig: Any, slo: dict, on: dict[str, str | None]) -> tuple[bool | None, list[str]]:
    """Whether the figures meet the SLO, and the metric of each condition that failed (None: a figure is unknown,
    or a histogram's p95 lies in a bucket holding the limit). ``on``: the metric judging TTFT and e2e."""
    failed: list[str] = []
    unknown = False
    for c in criteria(slo, on):
        key, upper, t = c.key, c.upper, c.limit
        v = fig.values.get(key) if key else None
        if key is None or v is None:
            unknown = True
            continue
        bounds = fig.meta.get(key, {}).get("bucket_bounds") if upper else None
        if censored.floor(fig.meta.get(key, {})):
            # a figure over the answers that came decides nothing, met or missed: traced-2r-kill 'misses it
            # (… e2e p95 (callers) 70.09 s …)' while its table marked that figure censored
            unknown = True
        elif bounds is not None:  # a histogram's p95: only a whole bucket above (or below) the limit decides
            lo, hi = bounds
            if lo >= t:
                failed.append(key)
            elif hi > t:
                unknown = True
        elif (v > t) if upper else (v < t):
            failed.append(key)
        elif _uncertain(fig, key):  # met only if no ok answer it counts hides a failed stream
            unknown = True
    return (False if failed else (None if unknown else True)), failed


def _uncertain(fig: Any, key: str | None) -> int:
    """ok answers a failed stream no evidence tied may belong to, of the success share (moves._requests)."""
    return int(fig.meta.get(key, {}).get("uncertain") or 0) if key == "success_share" else 0


SLO_WORDS = {"ttft_s": "TTFT p95", "e2e_s": "e2e p95", "success": "success share"}


def undecided(fig: Any, slo: dict, on: dict[str, str | None]) -> list[str]:
    """Why ``meets`` could not decide: each SLO condition with no figure to judge it, named with what is missing
    (no clock gives it; the figure is unknown; a histogram's p95 bucket holds the limit)."""
    out = []
    for c in criteria(slo, on):
        key, upper, t, name = c.key, c.upper, c.limit, c.words
        v = fig.values.get(key) if key else None
        if key is None:
            out.append(f"{name}: no clock gives it for both runs")
        elif v is None:
            out.append(f"{name}: unknown ({key.replace('_', ' ')} has no figure)")
        elif upper and (b := fig.meta.get(key, {}).get("bucket_bounds")) is not None and b[0] < t < b[1]:
            out.append(
                f"{name}: between {fnum(b[0])} and {fnum(b[1])} s (a histogram bucket holding the limit)"
            )
        elif upper and (c := fig.meta.get(key, {}).get("censored")):
            out.append(
                f"{name}: unknown ({c['gave_up']:,} of {c['callers']:,} callers gave up before their answer: "
                "the answers they waited for are a floor)"
            )
        elif not upper and v >= t and (n := _uncertain(fig, key)):
            out.append(
                f"{name}: unknown ({n:,} ok answer(s) may include a stream that failed after its 200, not tied to "
                "a request)"
            )
    return out


def met(fig: Any, slo: dict, on: dict[str, str | None]) -> list[str]:
    """The SLO conditions judged and met (their words: "e2e p95"), so that a run the SLO cannot judge whole still
    says what it does meet: a histogram's p95 meets a limit only with its whole bucket below it."""
    out = []
    for c in criteria(slo, on):
        key, upper, t = c.key, c.upper, c.limit
        v = fig.values.get(key) if key else None
        if v is None:
            continue
        bounds = fig.meta.get(key, {}).get("bucket_bounds") if upper else None
        if bounds is not None:
            if bounds[1] <= t:
                out.append(c.words)
        elif censored.floor(fig.meta.get(key, {})):
            continue  # a floor over the answers that came: never met
        elif (v <= t) if upper else ((v >= t) and not _uncertain(fig, key)):
            out.append(c.words)
    return out


def slo_text(slo: dict) -> str:
    bits = []
    if slo.get("ttft_s") is not None:
        bits.append(f"TTFT p95 ≤ {fnum(slo['ttft_s'])} s")
    if slo.get("e2e_s") is not None:
        bits.append(f"e2e p95 ≤ {fnum(slo['e2e_s'])} s")
    if slo.get("success") is not None:
        bits.append(f"success ≥ {pct(slo['success'])}")
    return ", ".join(bits) or "no SLO"


value_text = precision.text  # one rounding for the tables and the verdict


def comparability(
    changed: list[dict], unknown: list[dict], traffic_rows: list[dict], alike: bool | None
) -> str:
    names = [f"{r['name']} {as_configured(r['a'])} → {as_configured(r['b'])}" for r in changed]
    shown = "; ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    traffic = (
        "; the traffic differs too (" + ", ".join(r["name"].replace("_", " ") for r in traffic_rows) + ")"
        if alike is False
        else ""
    )
    if len(changed) > 1 or (changed and alike is False) or (not changed and alike is False):
        n = (
            f"{len(changed)} settings differ ({shown})"
            if len(changed) > 1
            else (f"one setting differs ({shown})" if changed else "no setting differs")
        )
        return f"The effect cannot be put on one change: {n}{traffic}."
    unk = f" ({len(unknown)} setting(s) unknown on one side)" if unknown else ""
    tr = "the same traffic" if alike else "traffic that could not be checked"
    if changed:
        return f"One setting differs: {shown}, with {tr}{unk}."
    return f"No setting differs between the runs, as far as the logs show{unk}; {tr}."


def as_configured(v: Any) -> str:
    """A setting as written in its configuration (a port or a count without a thousands separator)."""
    if isinstance(v, bool):  # as the "changed" line and the settings table say it
        return "yes" if v else "no"
    if isinstance(v, list):
        return "[" + ", ".join(as_configured(x) for x in v) + "]"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return fnum(v) if isinstance(v, float) else str(v)


def slo_line(whole: dict, steps: list[dict], slo: dict, held: str | None = None) -> str | None:
    """The SLO over the whole run and the steps where one run met it and the other not; ``held``: each run's
    result when the loads differ (profile.slo_held), not judged between them."""
    a, b = whole["meets_slo"]["a"], whole["meets_slo"]["b"]
    flips = [
        (s["label"], s["meets_slo"]["a"], s["meets_slo"]["b"])
        for s in steps
        if s["meets_slo"]["a"] is not None
        and s["meets_slo"]["b"] is not None
        and s["meets_slo"]["a"] != s["meets_slo"]["b"]
    ]
    won = [lab for lab, x, y in flips if y and not x]
    lost = [lab for lab, x, y in flips if x and not y]
    steps_txt = ""
    if won:
        steps_txt += f" B meets it at {', '.join(won)} where A did not."
    if lost:
        steps_txt += f" B misses it at {', '.join(lost)} where A met it."
    head = f"SLO ({slo_text(slo)}) over the whole run{_judged_on(whole.get('slo_judged_on') or {}, slo)}: "
    if held:
        return head + held + steps_txt
    if a is None or b is None:
        why = whole.get("slo_undecided") or {}
        a_why, b_why = why.get("a") or [], why.get("b") or []
        named = "; ".join(
            [w for w in a_why if w in b_why]  # a reason of the pair (no common clock) is said once
            + [
                f"{r.upper()}'s {w}"
                for r, ws, other in (("a", a_why, b_why), ("b", b_why, a_why))
                for w in ws
                if w not in other
            ]
        )
        known = {r: _known(whole, r) for r in ("a", "b")}
        if a is None and b is None:
            said = (
                f" Of what can be judged, both {_known(whole, 'a', both=True)}."
                if known["a"] and known["a"] == known["b"]
                else "".join(f" {r.upper()} {known[r]}." for r in ("a", "b") if known[r])
            )
            return head + f"cannot be judged ({named or 'a figure is unknown'})." + said + steps_txt
        # one run is judged whole: say its result, and what the other one lacks
        r, u = ("a", "b") if a is not None else ("b", "a")
        res = "meets it" if whole["meets_slo"][r] else f"misses it ({_failed(whole, r)})"
        rest = f"; it {known[u]}" if known[u] else ""
        return (
            head
            + f"{r.upper()} {res}; {u.upper()} cannot be judged ({named or 'a figure is unknown'}){rest}."
            + steps_txt
        )
    if a == b:
        return (
            head
            + (
                "both runs meet it."
                if a
                else f"neither run meets it (A misses {_failed(whole, 'a')}; B misses {_failed(whole, 'b')})."
            )
            + steps_txt
        )
    return (
        head
        + ("B meets it where A did not." if b else f"B misses it ({_failed(whole, 'b')}) where A met it.")
        + steps_txt
    )


def boundary(steps: list[dict]) -> dict:
    """The highest load step meeting the SLO with every lower step meeting it too, in each run."""
    out: dict = {"a": None, "b": None, "moved": None, "unit": None}
    ladder = [s for s in steps if s["mode"] in ("concurrency", "rate", "inflight")]
    values = [s["value"] for s in ladder]
    if len(ladder) < 2 or values != sorted(values):
        return out
    for side in ("a", "b"):
        best = None
        for s in ladder:
            m = s["meets_slo"][side]
            if m is None:
                best = None
                break
            if not m:
                break
            best = s["value"]
        out[side] = best
    out["unit"] = ladder[0]["mode"]
    if all(s["meets_slo"]["a"] is not None and s["meets_slo"]["b"] is not None for s in ladder):
        out["moved"] = out["a"] != out["b"]
    return out


def boundary_line(bd: dict) -> str | None:
    if bd["moved"] is None:
        return None

    def t(v):
        if v is None:
            return "no step"
        return f"c={fnum(v)}" if bd["unit"] != "rate" else f"{fnum(v)}/s"

    if not bd["moved"]:
        return f"The working boundary did not move: {t(bd['a'])} in both runs."
    return f"The working boundary moved from {t(bd['a'])} (A) to {t(bd['b'])} (B)."


def movement(rows: list[dict]) -> tuple[str, list[str], list[str]]:
    """better / worse / mixed / no movement over the whole runs, and the figures behind it."""

    def side(r, k):  # a histogram's quantile is its bucket, not the number interpolated inside it
        b = (r.get("bucket") or {}).get(k)
        return f"in {b}" if b else value_text(r[k], r["unit"])

    def say(r):  # a figure that left requests out says so (the gateway's e2e: served answers only)
        only = " (served answers only)" if r.get("left_out") else ""
        return f"{r['title']}{only} {side(r, 'a')} → {side(r, 'b')}"

    # a direction is better / worse only beyond the noise or, where it cannot be estimated, past moves.GAUGE_MOVE
    good = [say(r) for r in rows if r["direction"] == "better"]
    bad = [say(r) for r in rows if r["direction"] == "worse"]
    result = "mixed" if good and bad else ("better" if good else ("worse" if bad else "no movement"))
    return result, good, bad


def movement_line(result: str, good: list[str], bad: list[str]) -> str:
    if result == "no movement":
        return "No figure moved beyond the sampling noise."
    parts = []
    if good:
        parts.append(
            "better in B: " + "; ".join(good[:4]) + (f" (+{len(good) - 4} more)" if len(good) > 4 else "")
        )
    if bad:
        parts.append(
            "worse in B: " + "; ".join(bad[:4]) + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
        )
    return "Over the whole runs, " + "; ".join(parts) + "."


CAPS = ("max_num_seqs", "max_running_requests")  # caps on the sequences run at once: idle below their value
CONTROL_FIGURES = ("ttft_p50", "ttft_p95", "e2e_p50", "e2e_p95")


def cap_below(name: str | None, values: list, steps: list[dict]) -> list[dict]:
    """The concurrency steps where a changed cap on the sequences run at once (``--max-num-seqs``) does not bind:
    the load stays below every value it was given. Empty for any other setting."""
    if name not in CAPS:
        return []
    try:
        lo = min(float(v) for v in values)
    except (TypeError, ValueError):
        return []
    out = []
    for s in steps:  # the leading steps only: after a heavier one, its backlog can still fill the cap
        if s.get("mode") not in ("concurrency", "inflight") or s.get("value") is None or s["value"] >= lo:
            break
        out.append(s)
    return out


def control_line(steps: list[dict], changed: list[dict] | None = None) -> str | None:
    """A control: the steps where the one change does not bind (a concurrency cap above the step's load), else the
    lightest step. When B differs there beyond the bootstrap's noise, either the change matters even at light
    load or something else differed between the recordings (the host's load): the bootstrap resamples one
    run's requests and cannot see that noise."""
    if len(steps) < 2 or any(s["value"] is None for s in steps):
        return None
    one = changed[0] if changed and len(changed) == 1 else None
    below = cap_below(one["name"], [one["a"], one["b"]], steps) if one else []
    # the steps where the one change cannot act by reach's rule (KV: neither run preempted or queued; a gateway
    # setting: the gateway did not act): controls as well, never "the change matters even at light load"
    idle = [s for s in steps if (s.get("reach") or {}).get("acts") is False] if one and not below else []
    light = below or idle or [min(steps, key=lambda s: s["value"])]
    if not below and light[0]["value"] >= max(s["value"] for s in steps):
        return None
    figs = CONTROL_FIGURES if below or idle else ("ttft_p50", "e2e_p50")
    moved = [(s, r) for s in light for r in s["metrics"] if r["name"] in figs and r["beyond_noise"]]
    if not moved:
        return None
    s, r = max(moved, key=lambda x: abs(x[1]["change_rel"] or 0))
    way = "slower" if (r["change"] or 0) > 0 else "faster"
    said = f"{r['title']} {value_text(r['a'], 's')} → {value_text(r['b'], 's')}"
    if below and one is not None:  # below is none without one changed setting
        where = ", ".join(x["label"] for x in below)
        more = f"; {len(moved)} such moves in all" if len(moved) > 1 else ""
        return (
            f"Where {one['name']} does not bind ({where}: the load stays below both its values), B is still {way} "
            f"beyond the sampling noise at {s['label']} ({said}{more}): something other than the setting differed "
            "between the recordings (most likely the host's load), which the bootstrap does not see; weigh the "
            "heavier steps' moves against these."
        )
    if idle and one is not None:
        why = (s.get("reach") or {}).get("text") or f"{one['name']} cannot act there"
        more = f"; {len(moved)} such moves in all" if len(moved) > 1 else ""
        return (
            f"Where {one['name']} cannot act ({s['label']}: {why.split(': ', 1)[-1]}), B is still {way} beyond "
            f"the sampling noise ({said}{more}): something other than the setting differed between the recordings "
            "(most likely the host's load), which the bootstrap does not see; weigh the heavier steps' moves "
            "against these."
        )
    return (
        f"At the lightest step ({s['label']}) B is {way} too ({said}): either the change matters even at light "
        "load, or something else differed between the recordings (machine load, noise); weigh the heavier "
        "steps' moves with that in mind."
    )


def engines_line(engines: tuple[str, str] | None) -> str | None:
    """What cannot be compared between two engines."""
    if not engines:
        return None
    a, b = engines
    return (
        f"A runs {a}, B runs {b}: their own figures count different things under one name (token usage and KV "
        "usage, retractions and preemptions, their queues), so the engine's clock is shown, never compared; the "
        "callers' and the gateway's clocks compare like with like."
    )


def steps_line(sa: list, sb: list, pairs: list) -> str | None:
    """Steps that match nothing in the other run: the whole runs are still compared."""
    if pairs or not (sa or sb):
        return None

    def shown(st: list) -> str:
        if not st:
            return "none (no ladder or client phases)"
        labels = [s.label for s in st]
        return ", ".join(labels) if len(labels) <= 4 else f"{labels[0]} … {labels[-1]} ({len(labels)} steps)"

    return (
        f"The traffic differs: no load step of one run matches a step of the other (A: {shown(sa)}; B: "
        f"{shown(sb)}); whole-run figures only."
    )


def _judged_on(on: dict, slo: dict) -> str:
    """', judged on TTFT p95 (engine), e2e p95 (callers) and success share': every figure the verdict judged the
    SLO on (``criteria``, as ``meets`` reads them), each latency with the clock it was read on, since a run without
    the callers' TTFT is judged on the engine's histogram and the two are not one figure. The line named the two
    latencies, then said a run 'misses it (success share)'."""
    from .moves import BY_NAME

    used = [BY_NAME[c.key].title if c.key in BY_NAME else c.key for c in criteria(slo, on) if c.key]
    return f", judged on {_and(used)}" if used else ""


def _and(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def _known(whole: dict, r: str, both: bool = False) -> str:
    """What one run's SLO figures do say when the whole cannot be judged: 'misses e2e p95 (callers)',
    'meets e2e p95 and success share'."""
    failed = (whole.get("slo_failed") or {}).get(r) or []
    ok = (whole.get("slo_met") or {}).get(r) or []
    miss, meet = ("miss", "meet") if both else ("misses", "meets")
    bits = ([f"{miss} {_titles(failed)}"] if failed else []) + (
        [f"{meet} {' and '.join(ok) if len(ok) < 3 else ', '.join(ok[:-1]) + ' and ' + ok[-1]}"] if ok else []
    )
    return " and ".join(bits)


def _failed(whole: dict, r: str) -> str:
    """The figures a run missed the SLO on, and its censored ones that decided nothing."""
    return "; ".join(x for x in (_titles(whole["slo_failed"][r]), censored.floors_text(whole, r)) if x)


def _titles(keys: list[str]) -> str:
    from .moves import BY_NAME

    return ", ".join(BY_NAME[k].title if k in BY_NAME else k for k in keys)


CONTEXT = {"requests"}  # a count shown beside the figures, not one that compares two runs


def shared(rows: list[dict]) -> list[dict]:
    """The figures both runs give on one clock (and so can be compared)."""
    return [
        r
        for r in rows
        if r["name"] not in CONTEXT and r["a"] is not None and r["b"] is not None and r["change"] is not None
    ]


def nothing_shared(rows: list[dict]) -> str:
    """Two folders that share no figure (a vLLM log against a gateway's): what each gives, and that nothing compares."""

    from .sources import SOURCE_TEXT

    def named(r: dict, side: str) -> str:
        src = (r.get("source") or {}).get(side)
        return f"{r['title']} ({SOURCE_TEXT.get(src, src)})" if src else r["title"]

    def given(side: str) -> str:
        names = [named(r, side) for r in rows if r[side] is not None and r["name"] not in CONTEXT]
        return (
            ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            if names
            else "none"
        )

    return (
        f"No figure is known in both runs on one clock, so nothing can be compared: A gives {given('a')}; B gives "
        f"{given('b')}."
    )
