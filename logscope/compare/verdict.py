"""The comparison in a few sentences: can the effect be put on one change, did B meet the SLO where A
did not (or the reverse), did the working boundary move, and the trap when it happens: a warning that
vanished while the user's latency moved elsewhere (preemptions gone, the queue longer; retries gone, the
failures now reaching the callers)."""

from __future__ import annotations

from typing import Any

from ..report.fmt import fnum, pct

PREEMPT_MIN = 10  # fewer preemptions in A than this: not a change worth a trap
RETRIES_MIN = 10
GAUGE_MOVE = (
    0.25  # a figure without a noise estimate (waiting, queue time, throughput) counts past this change
)


def meets(values: dict, slo: dict) -> tuple[bool | None, list[str]]:
    """Whether the figures meet the SLO, and each condition that failed (None: a figure is unknown)."""
    checks = (
        ("ttft_p95", "ttft_s", "TTFT p95", lambda v, t: v <= t),
        ("e2e_p95", "e2e_s", "e2e p95", lambda v, t: v <= t),
        ("success_share", "success", "success share", lambda v, t: v >= t),
    )
    failed, unknown = [], False
    for key, skey, name, ok in checks:
        v, t = values.get(key), slo.get(skey)
        if t is None:
            continue
        if v is None:
            unknown = True
        elif not ok(v, t):
            failed.append(name)
    return (False if failed else (None if unknown else True)), failed


def slo_text(slo: dict) -> str:
    bits = []
    if slo.get("ttft_s") is not None:
        bits.append(f"TTFT p95 ≤ {fnum(slo['ttft_s'])} s")
    if slo.get("e2e_s") is not None:
        bits.append(f"e2e p95 ≤ {fnum(slo['e2e_s'])} s")
    if slo.get("success") is not None:
        bits.append(f"success ≥ {pct(slo['success'])}")
    return ", ".join(bits) or "no SLO"


def _v(x: Any, unit: str) -> str:
    if x is None:
        return "unknown"
    if unit == "share":
        return pct(x)
    if unit == "s":
        return f"{fnum(x)} s"
    return fnum(x)


def comparability(
    changed: list[dict], unknown: list[dict], traffic_rows: list[dict], alike: bool | None
) -> str:
    names = [f"{r['name']} {_plain(r['a'])} → {_plain(r['b'])}" for r in changed]
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


def _plain(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_plain(x) for x in v) + "]"
    return fnum(v) if isinstance(v, int | float) and not isinstance(v, bool) else str(v)


def slo_line(whole: dict, steps: list[dict], slo: dict) -> str | None:
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
    head = f"SLO ({slo_text(slo)}) over the whole run: "
    if a is None or b is None:
        return head + "cannot be judged (a figure is unknown)." + steps_txt
    if a == b:
        return (
            head
            + (
                "both runs meet it."
                if a
                else "neither run meets it "
                f"(A misses {', '.join(whole['slo_failed']['a'])}; B misses "
                f"{', '.join(whole['slo_failed']['b'])})."
            )
            + steps_txt
        )
    return (
        head
        + (
            "B meets it where A did not."
            if b
            else f"B misses it ({', '.join(whole['slo_failed']['b'])}) where A met it."
        )
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


def _row(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["name"] == name)


def traps(scopes: list[tuple[str, list[dict]]]) -> list[dict]:
    """Each trap found: preemptions fell but TTFT p95 rose beyond the noise (the latency moved into the
    queue); client retries fell but the success share fell beyond the noise (the failures reach the callers)."""
    found = []
    for scope, rows in scopes:
        p, t, q = _row(rows, "preemptions"), _row(rows, "ttft_p95"), _row(rows, "queue_mean_s")
        if p["a"] is not None and p["b"] is not None and p["a"] >= PREEMPT_MIN and p["b"] <= p["a"] / 2:
            rose = t["beyond_noise"] and (t["change"] or 0) > 0
            if rose:
                q_txt = (
                    f"; vLLM's mean queue time went from {_v(q['a'], 's')} to {_v(q['b'], 's')}"
                    if q["a"] is not None and q["b"] is not None and q["b"] > q["a"]
                    else ""
                )
                found.append(
                    {
                        "kind": "latency_into_queue",
                        "scope": scope,
                        "rise": t["change"],
                        "text": f"Preemptions fell from {fnum(p['a'])} to {fnum(p['b'])}, but TTFT p95 rose from "
                        f"{_v(t['a'], 's')} to {_v(t['b'], 's')}{q_txt}: the latency moved into the queue"
                        f"{'' if scope == 'whole run' else f' ({scope})'}.",
                    }
                )
        r, s = _row(rows, "client_retries"), _row(rows, "success_share")
        if r["a"] is not None and r["b"] is not None and r["a"] >= RETRIES_MIN and r["b"] <= r["a"] / 2:
            if s["beyond_noise"] and (s["change"] or 0) < 0:
                found.append(
                    {
                        "kind": "failures_reach_callers",
                        "scope": scope,
                        "rise": -s["change"],
                        "text": f"Client retries fell from {fnum(r['a'])} to {fnum(r['b'])}, but the success share "
                        f"fell from {_v(s['a'], 'share')} to {_v(s['b'], 'share')}: the failures the retries "
                        f"absorbed now reach the callers{'' if scope == 'whole run' else f' ({scope})'}.",
                    }
                )
    return found


def relief_line(scopes: list[tuple[str, list[dict]]]) -> str | None:
    """Preemptions gone without the queue taking the latency: said, since the check was made."""
    scope, rows = scopes[0]
    p, t = _row(rows, "preemptions"), _row(rows, "ttft_p95")
    if p["a"] is None or p["b"] is None or p["a"] < PREEMPT_MIN or p["b"] > p["a"] / 2 or t["a"] is None:
        return None
    if t["beyond_noise"] and (t["change"] or 0) > 0:
        return None
    how = "fell" if t["direction"] == "better" else "did not rise beyond the noise"
    return (
        f"Preemptions fell from {fnum(p['a'])} to {fnum(p['b'])} and TTFT p95 {how} "
        f"({_v(t['a'], 's')} → {_v(t['b'], 's')}): the queue did not take the latency."
    )


def movement(rows: list[dict]) -> tuple[str, list[str], list[str]]:
    """better / worse / mixed / no movement over the whole runs, and the figures behind it."""

    def say(r):
        return f"{r['title']} {_v(r['a'], r['unit'])} → {_v(r['b'], r['unit'])}"

    def moved(r):  # beyond the noise; or, where it cannot be estimated (gauges), by more than GAUGE_MOVE
        return r["beyond_noise"] or (r["beyond_noise"] is None and abs(r["change_rel"] or 0) > GAUGE_MOVE)

    good = [say(r) for r in rows if r["direction"] == "better" and moved(r)]
    bad = [say(r) for r in rows if r["direction"] == "worse" and moved(r)]
    result = "mixed" if good and bad else ("better" if good else ("worse" if bad else "no movement"))
    return result, good, bad


def movement_line(result: str, good: list[str], bad: list[str]) -> str:
    if result == "no movement":
        return "No figure moved beyond the run-to-run noise."
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


def headline_traps(found: list[dict]) -> list[str]:
    """One sentence per kind of trap: the whole run's, else the step where it is largest."""
    out = []
    for kind in ("latency_into_queue", "failures_reach_callers"):
        mine = [t for t in found if t["kind"] == kind]
        if mine:
            whole = [t for t in mine if t["scope"] == "whole run"]
            out.append((whole or sorted(mine, key=lambda t: -(t["rise"] or 0)))[0]["text"])
    return out


def control_line(steps: list[dict]) -> str | None:
    """The lightest matched step as a control: when B is slower (or faster) there too, beyond the noise, the
    change matters even at light load, or something else differed between the recordings."""
    if len(steps) < 2 or any(s["value"] is None for s in steps):
        return None
    light = min(steps, key=lambda s: s["value"])
    if light["value"] >= max(s["value"] for s in steps):
        return None
    moved = [r for r in light["metrics"] if r["name"] in ("ttft_p50", "e2e_p50") and r["beyond_noise"]]
    if not moved:
        return None
    r = moved[-1]
    way = "slower" if (r["change"] or 0) > 0 else "faster"
    return (
        f"At the lightest step ({light['label']}) B is {way} too ({r['title']} {_v(r['a'], 's')} → "
        f"{_v(r['b'], 's')}): either the change matters even at light load, or something else differed "
        "between the recordings (machine load, noise); weigh the heavier steps' moves with that in mind."
    )
