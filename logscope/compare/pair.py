"""Two runs compared: compare.json's document for ``logscope compare A B``.

What changed (settings, gateway, traffic), what moved per matched step and over the whole runs (each figure
on its clock), the trade (logscope.compare.trade) and the verdict, in that order. Steps that match nothing in
the other run are an answer, not an error: the whole runs are still compared, and the verdict says why no
step is.
"""

from __future__ import annotations

from .. import __version__
from ..report.fmt import clean, fnum, iso
from . import after, gateway, lifecycle, moves, noise, profile, reach, settings, trade, traffic, verdict
from .censored import floors
from .precision import seconds
from .runs import Run
from .sources import untimed_notes

SCHEMA_VERSION = "1.1"


def slo_for(runs: list[Run], given: dict | None) -> tuple[dict, list[str]]:
    """The SLO judged by: the one given, else the first run's (summary.json), else the next's."""
    seen = [r.doc("summary").get("slo") or {} for r in runs]
    notes = []
    if not given and len({str(sorted(s.items())) for s in seen if s}) > 1:
        notes.append(f"the runs were analysed against different SLOs: {runs[0].label}'s is used for all")
    slo = {
        k: (given or {}).get(k, next((s[k] for s in seen if s.get(k) is not None), None))
        for k in ("ttft_s", "e2e_s", "success")
    }
    return slo, notes


def settings_rows(ra: Run, rb: Run) -> tuple[list[dict], list[str]]:
    rows, notes = [], []
    for layer, fn, first in (
        ("server", settings.server, settings.SERVER_ORDER),
        ("gateway", gateway.settings, ("gateway_listener",)),
        ("client", settings.client, ()),
    ):
        va, sa, na = fn(ra)
        vb, sb, nb = fn(rb)
        rows += settings.diff(layer, (va, sa), (vb, sb), first)
        notes += [f"{ra.label}: {n}" for n in na] + [f"{rb.label}: {n}" for n in nb]
    return rows, notes


def span(run: Run) -> dict:
    s = run.doc("summary").get("span") or {}
    return {"start": s.get("start"), "end": s.get("end"), "duration_s": s.get("duration_s")}


def run_doc(r: Run) -> dict:
    return {
        "given": r.given,
        "analysis": r.out.name if r.analysed_here else str(r.out),
        "analysed_here": r.analysed_here,
        "input": r.doc("ingest").get("input"),
        "span": span(r),
        "verdict": list(r.doc("summary").get("verdict") or []),
    }


def scope(label: str, rows: list[dict], fa: moves.Figures, fb: moves.Figures, slo: dict) -> dict:
    on = verdict.judged_on([fa, fb])
    ma, fail_a = verdict.meets(fa, slo, on)
    mb, fail_b = verdict.meets(fb, slo, on)
    return {
        "label": label,
        "window": {"a": [iso(x) for x in fa.window], "b": [iso(x) for x in fb.window]},
        "meets_slo": {"a": ma, "b": mb},
        "slo_failed": {"a": fail_a, "b": fail_b},
        "slo_undecided": {"a": verdict.undecided(fa, slo, on), "b": verdict.undecided(fb, slo, on)},
        "slo_met": {"a": verdict.met(fa, slo, on), "b": verdict.met(fb, slo, on)},
        "slo_floors": {"a": floors(fa, slo, on), "b": floors(fb, slo, on)},
        "slo_judged_on": on,
        "metrics": rows,
    }


def engines_apart(rows: list[dict]) -> tuple[str, str] | None:
    """(A's engine, B's) when the runs were served by different engines (vLLM, SGLang)."""
    r = next((x for x in rows if x["name"] == "server"), None)
    return (r["a"], r["b"]) if r is not None and r["status"] == "changed" else None


def _engine_rows_apart(scopes: list[dict], engines: tuple[str, str]) -> None:
    """Engines of two kinds count different things under one name (SGLang's token usage is not vLLM's KV
    usage, its retractions are not vLLM's preemptions, its queue is not vLLM's): their own figures are shown,
    never compared."""
    for sc in scopes:
        for r in sc["metrics"]:
            if r["clock"] == "engine" or r["name"] in (
                "preemptions",
                "waiting_max",
                "waiting_mean",
                "kv_max",
            ):
                if r["a"] is not None and r["b"] is not None:
                    r.update(change=None, change_rel=None, interval=None, beyond_noise=None, direction=None)
                    r["noise"] = f"the engines differ ({engines[0]} / {engines[1]}): not compared"


# figures that count the load a run was given (more requests, more of each): better or worse only on the same traffic
VOLUME = (
    "completed",
    "throughput_tps",
    "client_retries",
    "gateway_retries",
    "preemptions",
    "orphaned",
    "orphan_s",
)
# the engine's queue with no noise estimate (gauges, an exact mean): it grows with the load as a count does
# (ladder against ladder-b, other steps and prompts, read 'better in B: waiting, max 54 -> 39' on the 25 % rule)
QUEUE_GAUGES = ("waiting_max", "waiting_mean", "queue_mean_s")


def _unjudged(
    sc: dict, alike: bool | None, below_one: dict[str, str | None], engine: str | None, load: profile.Load
) -> None:
    """Moves whose object lacks what 'better' needs are shown, not judged. A count of the whole runs when their
    traffic differs: 186 -> 343 completed said 'better' of a calm run at 1/s against a crash at c=8. vLLM's
    executions per logical request below 1: requests that never reached it (the crash's 199 answered 502 by the
    gateway), no work saved, yet 1 -> 0.64 read 'better' (in a step too, where analyze's reason is the whole run's).
    A count or a queue of the whole runs when the traffic is alike but the load profiles differ (``load``):
    traced-1r's 2/s for 180 s against traced-2r-kill's for 360 s read 'better in B: completed ok 303 -> 582'."""
    other = sc["label"] == "whole run" and alike is not False and load.matched is False
    for r in sc["metrics"]:
        if r["direction"] not in profile.JUDGED:  # 'within noise' judges as much as 'better' does
            continue
        why = None
        if r["name"] in VOLUME and alike is False and sc["label"] == "whole run":
            why = "the traffic differs: it grows with the load each run was given, no better or worse"
        elif r["name"] in VOLUME and other:
            why = f"{load.text}: it grows with the load each run was given, no better or worse"
        elif r["name"] in QUEUE_GAUGES and other and r["beyond_noise"] is None:
            why = (
                f"{load.text}: a queue grows with the load each run was given, and its noise is not estimated"
            )
        elif r["name"] in VOLUME and r["unit"] == "count" and (lasted := _lasted_apart(sc)):
            why = f"the step lasted {lasted}: a count grows with the time it ran, no better or worse"
        elif r["name"] in QUEUE_GAUGES and alike is False and r["beyond_noise"] is None:
            why = "the traffic differs: a queue grows with the load each run was given, and its noise is not estimated"
        elif r["name"] == "amplification":
            low = [k.upper() for k in ("a", "b") if r[k] is not None and r[k] < 1]
            if low:
                told = [(k, below_one.get(k.lower())) for k in low]
                said = "; ".join(f"{k}: {t}" if len(low) > 1 else str(t) for k, t in told if t)
                never = f"requests that never reached {engine or 'the engine'}"
                why = f"below 1 in {' and '.join(low)} ({said or never}): no work saved"
        if why:
            r["direction"] = None
            r["noise"] = f"{r['noise']}; not judged: {why}"


def _apart(a: float | None, b: float | None) -> bool:
    if not a or not b:
        return False
    return abs(b - a) / max(a, b) > traffic.TOLERANCE


def _lasted_apart(sc: dict) -> str | None:
    """'75 s in A, 40 s in B' when a step ran for other lengths and so was given other numbers of requests (spike's
    last c=2 ran 75 s, spike-b's 40 s: 88 -> 44 completed read 'worse'); None when either is alike or unknown. A
    bench's step of a fixed number of requests that ran longer (seqs-8's c=2: 10 requests in both) is a result."""
    d = sc.get("duration_s") or {}
    n = next((r for r in sc["metrics"] if r["name"] == "requests"), None)
    if n is None or not _apart(n["a"], n["b"]) or not _apart(d.get("a"), d.get("b")):
        return None
    return f"{fnum(seconds(d['a']))} s in A, {fnum(seconds(d['b']))} s in B ({n['a']} and {n['b']} requests)"


def _duration(s: traffic.Step) -> float | None:
    if s.ts_start is None or s.ts_end is None:
        return None
    return round((s.ts_end - s.ts_start).total_seconds(), 1)


def _below_one(run: Run) -> str | None:
    """analyze's reason for an amplification below 1 (diagnosis.json traffic.amplification_below_1)."""
    got = (run.doc("diagnosis").get("traffic") or {}).get("amplification_below_1") or {}
    text = got.get("text") if isinstance(got, dict) else None
    return text.removeprefix("below 1: ") if isinstance(text, str) else None


def build(ra: Run, rb: Run, command_line: str, slo_given: dict | None) -> tuple[dict, dict]:
    """compare.json as a dict, and what the charts need (the per-step figures and both runs)."""
    slo, notes = slo_for([ra, rb], slo_given)
    rows, set_notes = settings_rows(ra, rb)
    notes += set_notes + untimed_notes([ra, rb])
    sa, sb = traffic.steps(ra), traffic.steps(rb)
    ta, tb = traffic.describe(ra, sa), traffic.describe(rb, sb)
    t_rows, alike = traffic.differences(ta, tb)
    pairs, only_a, only_b = traffic.match(sa, sb)
    wa, wb = traffic.windows(ra, sa), traffic.windows(rb, sb)
    changed = [r for r in rows if r["counted"]]
    eng = settings.engine_name([ra, rb])  # the rows name it ('SGLang executions per logical request')
    steps, reaches, befores = [], [], []
    for x, y in pairs:
        fa, fb = moves.figures(ra, x, wa[x.key]), moves.figures(rb, y, wb[y.key])
        sc = scope(x.label, moves.compare(fa, fb, x.key, eng), fa, fb, slo)
        lasted = {"a": _duration(x), "b": _duration(y)}  # a count over a step grows with its length
        steps.append(sc | {"key": x.key, "mode": x.mode, "value": x.value, "duration_s": lasted})
        reaches.append(reach.reach(changed, fa, fb))
        befores.append(after.after(sa, sb, x, y, fa, fb))
    fa, fb = moves.figures(ra, None), moves.figures(rb, None)
    whole = scope("whole run", moves.compare(fa, fb, "whole", eng), fa, fb, slo)
    # a whole-run latency, success share, SLO or count mixes the steps in each run's proportions
    load = profile.load(t_rows, alike, steps)
    for sc in (whole, *steps):
        _unjudged(sc, alike, {"a": _below_one(ra), "b": _below_one(rb)}, eng, load)
    for sc, r, b in zip(steps, reaches, befores, strict=True):  # a step where the one change cannot act, or
        reach.apply(
            sc, r
        )  # that follows another load in each run which ran into it, is no test of the change
        after.apply(sc, b)
    held = profile.apply(whole, load, VOLUME)
    engines = engines_apart(rows)
    if engines:
        _engine_rows_apart([whole, *steps], engines)
    unknown = [r for r in rows if r["status"] == "unknown" and r["name"] not in settings.OBSERVED]
    bd = verdict.boundary(steps)
    # a trade is read only off one change on the same traffic: between two incidents it would be a coincidence
    comparable = len(changed) <= 1 and alike is not False and not engines
    td = trade.trade(whole["metrics"], steps, engine=eng) if comparable else trade.trade([], [])
    rt = trade.retry_trade(whole["metrics"], steps) if comparable else None
    result, good, bad = verdict.movement(whole["metrics"])
    lines = [verdict.comparability(changed, unknown, t_rows, alike)]
    shared = verdict.shared(whole["metrics"])
    if not shared:
        result = "nothing to compare"
    same_load = alike is True or ra.out.resolve() == rb.out.resolve()
    identical = shared and not changed and same_load and result == "no movement" and not td["text"] and not rt
    if identical:
        lines = [
            "No change, no movement: no setting differs between the runs and no figure moved beyond the "
            "sampling noise."
        ]
    else:
        lines += [ln for ln in (verdict.engines_line(engines), verdict.steps_line(sa, sb, pairs)) if ln]
    # a death in either run is said next to what changed: every whole-run figure of that run holds it
    life = {"a": lifecycle.read(ra), "b": lifecycle.read(rb)}
    died = lifecycle.line(life["a"], life["b"])
    mixed = [ln for ln in (settings.varied_line(r.label, r) for r in (ra, rb)) if ln]
    lines[1:1] = ([died] if died else []) + mixed
    if not shared:
        lines.append(verdict.nothing_shared(whole["metrics"]))
    elif not identical:
        lines += [
            ln
            for ln in (
                verdict.slo_line(whole, steps, slo, profile.slo_held(whole, load)),
                verdict.boundary_line(bd),
            )
            if ln
        ]
        lines += [ln for ln in [verdict.control_line(steps, changed)] if ln]
        lines += [t for t in (td["text"], rt and rt["text"]) if t]
        lines += [ln for ln in [profile.line(whole, load, len(steps), VOLUME)] if ln]
        moved = verdict.movement_line(result, good, bad)
        if (held or not load.matched) and result == "no movement":  # what moved is not judged over these runs
            moved = profile.still_judged(whole, load)
        lines.append(moved)
    traps = (
        [{"kind": td["kind"], "scope": "whole run", "rise": None, "text": td["text"]}]
        if td["kind"]
        in (
            "latency_into_queue",
            "queue_into_preemptions",
        )
        else []
    )
    traps += [rt] if rt else []
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": "pair",
        "generated_by": {"tool": "logscope", "version": __version__, "command_line": command_line or None},
        "verdict": lines,
        "result": result,
        "runs": {r.label.lower(): run_doc(r) for r in (ra, rb)},
        "slo": slo,
        "comparable": {
            "settings_changed": len(changed),
            "settings_unknown": len(unknown),
            "single_change": len(changed) == 1 and alike is not False,
            "traffic_alike": alike,
            "changed": [r["name"] for r in changed],
            "engines": list(engines) if engines else None,
        },
        "settings": rows,
        "traffic": {
            "a": traffic.shown(ta),
            "b": traffic.shown(tb),
            "differences": t_rows,
            "alike": alike,
            "tolerance": traffic.TOLERANCE,
        },
        "lifecycle": {k: lifecycle.shown(v) for k, v in life.items()},
        "steps": steps,
        "unmatched_steps": {"a": [s.label for s in only_a], "b": [s.label for s in only_b]},
        "whole": whole,
        "boundary": bd,
        "trade": {k: td[k] for k in ("preemptions", "missing", "kind", "text")} | {"rose": _rose(td)},
        "traps": traps,
        "notes": notes,
        "method": METHOD,
    }
    return clean(doc), {"runs": (ra, rb), "pairs": pairs, "steps": steps}


def _rose(td: dict) -> list[dict]:
    return [{"name": k, **m} for k, moves_ in td["rose"].items() for m in moves_]


METHOD = [
    "Settings: vLLM's banner, 'non-default args' and engine config lines, the KV cache size line; "
    "nginx.conf beside the logs (nginx defaults where a directive is not set); the client's own records.",
    "Steps: ladder steps (or the client's phases) matched by mode, value and order; a step's server "
    "figures are read from a second before its first send to 5 s after its last answer (up to the next step's "
    "range when the load runs on; the last step's to the run's end).",
    "Clocks: each latency is read on one clock and compared only with the same clock: the callers' (client "
    "records, a load test's per-request results), the gateway's (its span of each completed request: a 2xx "
    "whose answer broke off after it, or that the caller gave up on, is left out and named), the engine's "
    "(vLLM's Prometheus histograms as histogram_quantile reads them, its spans); the callers' TTFT beyond the "
    "engine's is a difference of means. The SLO is judged on the callers' figures, else the gateway's, else "
    "the engine's, the same clock for both runs.",
    f"Noise: per-request figures by bootstrap ({noise.RESAMPLES} resamples, 95 % interval of B − A); a "
    "histogram's p95 by a bootstrap of its bucket counts, beyond the noise only in another bucket; event counts "
    "as Poisson counts (|B − A| > 2·√(A + B)); server gauges and exact means not estimated.",
    f"Traffic: alike when the steps are the same and prompt / max_tokens means (and, in an open loop, "
    f"the arrival rate) are within {traffic.TOLERANCE * 100:.0f} %.",
    "Whole runs: a whole-run latency, success share, executions per request, count or SLO mixes the steps in each "
    "run's proportions, so it is judged only when the load profiles match (the same steps, each with its requests "
    f"or its length within {traffic.TOLERANCE * 100:.0f} %, and the traffic alike); else it is shown, not judged, "
    "and the verdict says what differs.",
]
