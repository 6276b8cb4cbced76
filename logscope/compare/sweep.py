"""A sweep: three or more runs of one traffic that differ in one setting (``--max-num-seqs`` 8 / 16 / 32 / 64),
compared as the experiment they are: per run its working boundary, preemptions and throughput, and at each
matched step its TTFT, e2e and output tokens/s, against the setting; and which value met the SLO at the
highest load.

Every run is judged on one clock at each step (the first the runs all have: the callers', else the gateway's,
else the engine's), so that no value wins by being read off another clock. The trade between the sweep's two
ends (its first and last value) is read as a pair's is (logscope.compare.trade).
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..report.fmt import clean, fnum, num
from . import gateway, moves, reach, settings, sources, trade, traffic, verdict
from .pair import METHOD, SCHEMA_VERSION, run_doc, slo_for
from .runs import Run

STEP_FIGURES = ("ttft_p95", "engine_ttft_p95", "e2e_p95", "gateway_e2e_p95", "engine_e2e_p95", "queue_p95",
                "throughput_tps", "preemptions")  # fmt: skip
WHOLE_FIGURES = ("preemptions", "completed", "throughput_tps", "queue_mean_s", "ttft_p95", "e2e_p95")


def settings_rows(runs: list[Run]) -> tuple[list[dict], list[str]]:
    """One row per setting known in any run: its value in each, and whether it is the same, varies or is
    unknown somewhere (derived and observed settings never count as the swept one)."""
    rows, notes = [], []
    for layer, fn, first in (
        ("server", settings.server, settings.SERVER_ORDER),
        ("gateway", gateway.settings, ("gateway_listener",)),
        ("client", settings.client, ()),
    ):
        got = [fn(r) for r in runs]
        for r, (_, _, ns) in zip(runs, got, strict=True):
            notes += [f"{r.label}: {n}" for n in ns]
        keys = set().union(*(set(v) for v, _, _ in got))
        for k in [k for k in first if k in keys] + sorted(k for k in keys if k not in first):
            vals = {r.label.lower(): v.get(k) for r, (v, _, _) in zip(runs, got, strict=True)}
            known = [settings.normalized(x) for x in vals.values() if x is not None]
            status = (
                "unknown"
                if len(known) < len(runs)
                else ("same" if len(set(map(str, known))) == 1 else "varies")
            )
            counted = status == "varies" and k not in settings.DERIVED and k not in settings.OBSERVED
            src = next(
                (s_.get(k) for _, s_, _ in got if s_.get(k)), None
            )  # where it was read (reach says it)
            rows.append({"layer": layer, "name": k, "values": vals, "status": status, "counted": counted,
                         "source": src})  # fmt: skip
    return rows, notes


def _order(runs: list[Run], swept: dict | None) -> list[Run]:
    """The runs by the swept setting's value, in the direction they were given (64 → 8 stays so)."""
    if swept is None:
        return runs
    vals = swept["values"]
    try:
        key = {r.label: float(vals[r.label.lower()]) for r in runs}
    except (TypeError, ValueError):
        return runs
    desc = key[runs[0].label] > key[runs[-1].label]
    return sorted(runs, key=lambda r: key[r.label], reverse=desc)


def is_ladder(steps: list) -> bool:
    """Load steps that climb (a burst and its return, 2 → 48 → 2, has no working boundary)."""
    vals = [s.value for s in steps]
    return (
        len(steps) >= 2
        and all(s.mode in ("concurrency", "rate", "inflight") for s in steps)
        and None not in vals
        and vals == sorted(vals)
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _boundary(cells: list[dict]) -> tuple[float | None, bool]:
    """(highest step met with every lower step met, known): a step that cannot be judged before the first miss
    leaves the boundary unknown."""
    best = None
    for c in cells:
        if c["meets_slo"] is None:
            return None, False
        if not c["meets_slo"]:
            return best, True
        best = c["value"]
    return best, True


def build(runs: list[Run], command_line: str, slo_given: dict | None) -> tuple[dict, dict]:
    slo, notes = slo_for(runs, slo_given)
    rows, set_notes = settings_rows(runs)
    notes += set_notes + sources.untimed_notes(runs)
    varies = [r for r in rows if r["counted"]]
    swept = varies[0] if len(varies) == 1 else None
    runs = _order(runs, swept)
    st = {r.label: traffic.steps(r) for r in runs}
    desc = {r.label: traffic.describe(r, st[r.label]) for r in runs}
    base = runs[0]
    alike_all: list[bool | None] = [traffic.differences(desc[base.label], desc[r.label])[1] for r in runs[1:]]
    alike = False if False in alike_all else (True if all(alike_all) else None)
    keys = [s.key for s in st[base.label] if all(any(x.key == s.key for x in st[r.label]) for r in runs)]
    figs: dict[str, dict[str, moves.Figures]] = {}
    for r in runs:
        steps_r = st[r.label]
        win = traffic.windows(r, steps_r)
        by_key = {s.key: s for s in steps_r}
        figs[r.label] = {k: moves.figures(r, by_key[k], win[k]) for k in keys}
        figs[r.label]["whole"] = moves.figures(r, None)
    labels = {s.key: s for s in st[base.label]}
    # where the swept setting can act, over every run: the pair's rule (logscope.compare.reach)
    reaches = {k: _reach(swept, varies, runs, {r.label: figs[r.label][k] for r in runs}) for k in keys}
    judged = {k: verdict.judged_on([figs[r.label][k] for r in runs]) for k in keys}
    table = []
    for r in runs:
        cells = []
        for k in keys:
            f = figs[r.label][k]
            met, failed = verdict.meets(f, slo, judged[k])
            cells.append(
                {
                    "label": labels[k].label,
                    "key": k,
                    "value": labels[k].value,
                    "meets_slo": met,
                    "slo_failed": failed,
                    **{n: f.values.get(n) for n in STEP_FIGURES},
                    "buckets": {
                        n: f.meta[n]["bucket"] for n in STEP_FIGURES if f.meta.get(n, {}).get("bucket")
                    },
                    "bucket_bounds": {
                        n: [num(x) for x in f.meta[n]["bucket_bounds"]]
                        for n in STEP_FIGURES
                        if f.meta.get(n, {}).get("bucket") and f.meta[n].get("bucket_bounds")
                    },
                    # the requests the gateway's e2e (served answers only) did not count, by outcome (null: none)
                    "left_out": f.meta.get("gateway_e2e_p95", {}).get("left_out") or None,
                }
            )
        ladder = is_ladder([labels[k] for k in keys])
        bd, known = _boundary(cells) if ladder else (None, False)
        w = figs[r.label]["whole"]
        table.append(
            {
                "run": r.label.lower(),
                "value": swept["values"][r.label.lower()] if swept else None,
                "boundary": bd,
                "boundary_known": known,
                **{n: w.values.get(n) for n in WHOLE_FIGURES},
                "steps": cells,
            }
        )
    best = _best(table, swept, slo, keys, labels)
    control = _control(table, swept, keys, labels, reaches)
    best["evidence"] = _evidence(table, runs, figs, keys, labels, swept, best, control)
    ends = _ends(runs, figs, keys, labels, alike, swept)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "generated_by": {"tool": "logscope", "version": __version__, "command_line": command_line or None},
        "verdict": [
            ln
            for ln in (
                _head(swept, varies, runs, alike, keys, labels),
                best["text"],
                best["evidence"]["text"],
                control["text"],
                ends["text"],
            )  # fmt: skip
            if ln
        ],
        "runs": {r.label.lower(): run_doc(r) for r in runs},
        "slo": slo,
        "sweep": {
            "setting": {"layer": swept["layer"], "name": swept["name"]} if swept else None,
            "order": [r.label.lower() for r in runs],
            "varies": [r["name"] for r in varies],
            "traffic_alike": alike,
            "steps": [labels[k].label for k in keys],
            "ladder": is_ladder([labels[k] for k in keys]),
            "judged_on": {labels[k].label: judged[k] for k in keys},
            "table": table,
            "best": {k: best[k] for k in ("runs", "values", "boundary")}
            | {k: v for k, v in best["evidence"].items() if k != "text"},
            "ends": ends,
            "control": {k: v for k, v in control.items() if k != "text"},
            "reach": [{"step": labels[k].label, "reach": reaches[k].doc()} for k in keys],
        },
        "settings": rows,
        "traffic": {r.label.lower(): desc[r.label] for r in runs},
        "notes": notes,
        "method": METHOD,
    }
    return clean(doc), {"runs": runs}


def _reach(
    swept: dict | None, varies: list[dict], runs: list[Run], figs: dict[str, moves.Figures]
) -> reach.Reach:
    """Whether the swept setting can act over these runs' figures (the ones given, by run label)."""
    if swept is None:
        return reach.reach(varies, *[figs[r.label] for r in runs][:2])  # none or several: it says why
    vals = {r.label.lower(): swept["values"][r.label.lower()] for r in runs if r.label in figs}
    return reach.across(swept, vals, {r.label.lower(): figs[r.label] for r in runs if r.label in figs},
                        swept.get("source"))  # fmt: skip


def _name(swept: dict | None, run: dict) -> str:
    return f"{run['value']}" if swept else run["run"].upper()


def _step_text(v: float | None, mode_of: Any) -> str:
    return "no step" if v is None else mode_of(v)


def _head(swept, varies, runs, alike, keys, labels) -> str:
    n = len(runs)
    if swept is None:
        what = (
            f"{len(varies)} settings vary ({', '.join(r['name'] for r in varies[:5])})"
            if varies
            else "no setting varies as far as the logs show"
        )
        return f"A sweep of {n} runs that cannot be put on one setting: {what}."
    vals = ", ".join(verdict.as_configured(swept["values"][r.label.lower()]) for r in runs)
    tr = {True: "the same traffic", False: "traffic that differs", None: "traffic that could not be checked"}[
        alike
    ]
    steps = f" ({labels[keys[0]].label} … {labels[keys[-1]].label})" if len(keys) > 1 else ""
    return f"A sweep of {swept['name']} over {vals} ({n} runs), with {tr}{steps}."


def _best(table: list[dict], swept, slo: dict, keys: list[str], labels: dict) -> dict:
    out: dict = {"runs": [], "values": [], "boundary": None, "text": None}
    if len(keys) < 2:
        out["text"] = (
            "No load step is common to every run: the working boundaries cannot be set side by side."
        )
        return out
    if not is_ladder([labels[k] for k in keys]):
        out["text"] = (
            "The runs' common steps do not climb (no ladder): no working boundary to set side by side."
        )
        return out
    mode_of = _label_of(labels[keys[0]].mode)
    unknown = [t for t in table if not t["boundary_known"]]
    each = "; ".join(
        f"{_name(swept, t)}: {_step_text(t['boundary'], mode_of) if t['boundary_known'] else 'unknown'}"
        for t in table
    )
    slo_t = verdict.slo_text(slo)
    known = [t for t in table if t["boundary_known"] and t["boundary"] is not None]
    if not known:
        why = "no run met it at its lightest step" if not unknown else "a step could not be judged"
        out["text"] = f"No value met the SLO ({slo_t}) up to a load step: {why} ({each})."
        return out
    top = max(t["boundary"] for t in known)
    win = [t for t in known if t["boundary"] == top]
    out.update(runs=[t["run"] for t in win], values=[t["value"] for t in win], boundary=top)
    who = _and([_name(swept, t) for t in win])
    setting = f"{swept['name']} " if swept else ""
    higher = [t for t in unknown]
    caveat = (
        f"; {', '.join(_name(swept, t) for t in higher)} could not be judged at every step, and may do better"
        if higher
        else ""
    )
    out["text"] = (
        f"{setting}{who} met the SLO ({slo_t}) at the highest load: up to {mode_of(top)} ({each}){caveat}."
    )
    return out


def _label_of(mode: str):
    def f(v: float) -> str:
        return f"c={fnum(v)}" if mode in ("concurrency", "inflight") else f"{fnum(v)}/s"

    return f


def _ends(runs, figs, keys, labels, alike, swept) -> dict:
    """The trade between the sweep's two ends, as a pair's (only on the same traffic)."""
    a, b = runs[0], runs[-1]
    eng = settings.engine_name(runs)
    steps = []
    for k in keys:
        fa, fb = figs[a.label][k], figs[b.label][k]
        sc = {"label": labels[k].label, "metrics": moves.compare(fa, fb, k, eng)}
        # the two ends as a pair: a step where the setting cannot act between them is no test of it
        reach.apply(sc, _reach(swept, [], [a, b], {a.label: fa, b.label: fb}))
        steps.append(sc)
    whole = moves.compare(figs[a.label]["whole"], figs[b.label]["whole"], "whole", eng)
    ends = ("A", "B")
    if swept:
        ends = (
            f"{swept['name']} {verdict.as_configured(swept['values'][a.label.lower()])}",
            f"{swept['name']} {verdict.as_configured(swept['values'][b.label.lower()])}",
        )
    td = trade.trade(whole, steps, ends, eng) if alike is not False and swept else trade.trade([], [])
    text = td["text"]
    if text and swept:
        text = f"From {ends[0]} to {ends[1].removeprefix(swept['name'] + ' ')}: {text[0].lower()}{text[1:]}"
    return {
        "a": a.label.lower(),
        "b": b.label.lower(),
        "kind": td["kind"],
        "missing": td["missing"],
        "text": text,
    }


def _shown(c: dict, key: str) -> str:
    """A cell's figure in a sentence: a histogram's quantile as its bucket ('in 2.5–5 s'), as the table gives it."""
    b = (c.get("buckets") or {}).get(key) if c.get(key) is not None else None
    return f"in {b}" if b else verdict.value_text(c.get(key), moves.BY_NAME[key].unit)


def _fig(key: str, c: dict) -> str:
    return f"{moves.BY_NAME[key].title} {_shown(c, key)}"


def _control(
    table: list[dict], swept, keys: list[str], labels: dict, reaches: dict[str, reach.Reach]
) -> dict:
    """The steps where the swept setting cannot act in any run (logscope.compare.reach: a cap no run's running
    count reached): the same work in every run, so the spread of the judged figures there is the host's
    run-to-run noise, which no bootstrap of one run sees."""
    out: dict = {"steps": [], "spread": {}, "text": None}
    steps = [{"label": labels[k].label, "mode": labels[k].mode, "value": labels[k].value} for k in keys]
    below = [s for s, k in zip(steps, keys, strict=True) if reaches[k].acts is False]
    if not below:
        return out
    idx = [i for i, s in enumerate(steps) if s in below]
    out["steps"] = [s["label"] for s in below]
    said = []
    for key in ("ttft_p95", "e2e_p95"):
        per = {steps[i]["label"]: [t["steps"][i][key] for t in table] for i in idx}
        per = {lab: vs for lab, vs in per.items() if None not in vs and min(vs) > 0}
        if not per:
            continue
        lab = max(per, key=lambda x: max(per[x]) / min(per[x]))
        lo, hi = min(per[lab]), max(per[lab])
        out["spread"][key] = {"step": lab, "lo": lo, "hi": hi, "ratio": num(hi / lo)}
        said.append(
            f"{moves.BY_NAME[key].title} {verdict.value_text(lo, 's')} to {verdict.value_text(hi, 's')} at {lab}"
        )
    if said:
        out["text"] = (
            f"Where {swept['name']} does not bind ({', '.join(out['steps'])}: {_why(reaches[keys[idx[0]]])}), "
            f"the same load still gave {'; '.join(said)} across the runs: the host's run-to-run noise, which the "
            "bootstrap does not see; no value is called better here by less than that spread, and any trade "
            "is to be weighed against it."
        )
    return out


def _why(r: reach.Reach) -> str:
    """reach's reason, without the setting's name: 'no run's running count reached the smallest cap, 8'."""
    return r.text.split(" here: ", 1)[-1].split(": the engine admitted", 1)[0].split(" (", 1)[0]


def _evidence(table, runs, figs, keys, labels, swept, best, control) -> dict:
    """Why the winners won: where each other value missed (and on which figure); and, when several values share
    the boundary, whether the next step separates them beyond the sampling noise (the judged figure nearest the
    SLO there, against each other winner's by bootstrap), or that the ladder does not."""
    out: dict = {"missed": [], "tie": None, "text": None}
    if best["boundary"] is None:
        return out
    bits = []
    for t in table:
        c = next((c for c in t["steps"] if c["meets_slo"] is False), None)
        if t["run"] in best["runs"] or c is None or not t["boundary_known"]:
            continue
        out["missed"].append({"run": t["run"], "step": c["label"], "failed": c["slo_failed"]})
        figs_ = ", ".join(_fig(k, c) for k in c["slo_failed"])
        bits.append(f"{_name(swept, t)} missed at {c['label']}: {figs_}")
    win = [t for t in table if t["run"] in best["runs"]]
    names = _and([_name(swept, t) for t in win])
    i = next((j for j, k in enumerate(keys) if labels[k].value == best["boundary"]), len(keys) - 1) + 1
    if len(win) > 1 and i >= len(keys):
        bits.append(f"{names} met every step: the ladder's top step does not separate them")
    elif len(win) > 1:
        tie = _tie(win, runs, figs, keys[i], i, labels[keys[i]].label, swept, control)
        if tie is not None:
            out["tie"], text = tie
            bits.append(text)
    out["text"] = (". ".join(bits) + ".") if bits else None
    return out


def _tie(win, runs, figs, k, i, label, swept, control) -> tuple[dict, str] | None:
    """The winners at the step after their common boundary: the figure that missed there (else the callers' or the
    engine's TTFT p95), the lowest against each other by the pair's bootstrap."""
    cells = [t["steps"][i] for t in win]
    failed = [f for c in cells for f in c["slo_failed"]]
    key = (
        failed[0]
        if failed
        else next((f for f in ("ttft_p95", "engine_ttft_p95") if cells[0].get(f) is not None), None)
    )
    if key is None or any(c.get(key) is None for c in cells):
        return None
    by_run = {r.label.lower(): r.label for r in runs}
    lo = min(win, key=lambda t: t["steps"][i][key])
    others = [t for t in win if t is not lo]
    fl = figs[by_run[lo["run"]]][k]
    beyond = [
        next(r for r in moves.compare(fl, figs[by_run[t["run"]]][k], k) if r["name"] == key)["beyond_noise"]
        for t in others
    ]
    vals = ", ".join(f"{_shown(t['steps'][i], key)} ({_name(swept, t)})" for t in win)
    title = moves.BY_NAME[key].title
    # beyond the bootstrap's noise but within the spread the control steps show: not told apart either
    floor = (control["spread"].get(key) or {}).get("ratio")
    lo_v = lo["steps"][i][key]
    beyond = [
        False if b and floor is not None and lo_v > 0 and t["steps"][i][key] / lo_v <= floor else b
        for t, b in zip(others, beyond, strict=True)
    ]
    runs_of: dict[bool | None, list[dict]] = {True: [], False: [], None: []}
    for t, b in zip(others, beyond, strict=True):
        runs_of[b].append(t)
    apart = {b: [_name(swept, t) for t in ts] for b, ts in runs_of.items()}
    doc = {"step": label, "figure": key, "closest": lo["run"], "separated": all(beyond),
           "within_noise": [t["run"] for t in runs_of[False]],
           "not_estimated": [t["run"] for t in runs_of[None]]}  # fmt: skip
    parts = (
        [
            f"beyond the sampling noise and the spread where the setting does not bind against {_and(apart[True])}"
        ]
        if apart[True]
        else []
    )
    parts += [f"not beyond the noise against {_and(apart[False])}"] if apart[False] else []
    parts += [f"the noise not estimated against {_and(apart[None])}"] if apart[None] else []
    text = (
        f"At {label}, the next step, {title} was {vals}: {_name(swept, lo)} came lowest, {', '.join(parts)}"
    )
    if not all(beyond):
        text += f"; the sweep does not tell {_and([_name(swept, lo)] + apart[False] + apart[None])} apart"
    return doc, text
