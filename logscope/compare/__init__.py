"""``logscope compare A B``: did the one change help? Two runs of the same traffic, side by side.

Each run is an analyze output folder (an input folder is analysed first). The comparison says what
changed between the runs (logscope.compare.settings, .gateway, .traffic), what moved per matched step and
over the whole runs, beyond the run-to-run noise or not (.moves), and the verdict (.verdict); .render writes
compare.json (schema: logscope/compare.schema.json), compare.md and compare.html.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..report.fmt import clean, iso
from . import gateway, moves, settings, traffic, verdict
from .runs import Run, resolve

SCHEMA_VERSION = "1.0"


@dataclass
class CompareOptions:
    command_line: str = ""
    slo: dict | None = None  # {"ttft_s", "e2e_s", "success"}; None: A's (summary.json), else B's


def load_runs(a: Path, b: Path, out: Path, analyse: Callable[[Path, Path], Any]) -> tuple[Run, Run]:
    ra = resolve("A", Path(a), Path(out), analyse)
    if Path(b).resolve() == Path(a).resolve():  # a run compared with itself: one analysis
        return ra, Run("B", str(b), ra.out, ra.analysed_here)
    return ra, resolve("B", Path(b), Path(out), analyse)


def _slo(ra: Run, rb: Run, given: dict | None) -> tuple[dict, list[str]]:
    sa, sb = ra.doc("summary").get("slo") or {}, rb.doc("summary").get("slo") or {}
    notes = []
    if not given and sa and sb and sa != sb:
        notes.append("the two runs were analysed against different SLOs: A's is used for both")
    slo = {k: (given or {}).get(k, sa.get(k, sb.get(k))) for k in ("ttft_s", "e2e_s", "success")}
    return slo, notes


def _settings(ra: Run, rb: Run) -> tuple[list[dict], list[str]]:
    rows, notes = [], []
    for layer, fn, first in (
        ("server", settings.server, settings.SERVER_ORDER),
        ("gateway", gateway.settings, ("gateway_listener",)),
        ("client", settings.client, ()),
    ):
        va, sa, na = fn(ra)
        vb, sb, nb = fn(rb)
        rows += settings.diff(layer, (va, sa), (vb, sb), first)
        notes += [f"A: {n}" for n in na] + [f"B: {n}" for n in nb]
    return rows, notes


def _span(run: Run) -> dict:
    s = run.doc("summary").get("span") or {}
    return {"start": s.get("start"), "end": s.get("end"), "duration_s": s.get("duration_s")}


def build(ra: Run, rb: Run, options: CompareOptions) -> tuple[dict, dict]:
    """compare.json as a dict, and what the charts need (the per-step figures and both runs)."""
    slo, notes = _slo(ra, rb, options.slo)
    rows, set_notes = _settings(ra, rb)
    notes += set_notes
    sa, sb = traffic.steps(ra), traffic.steps(rb)
    ta, tb = traffic.describe(ra, sa), traffic.describe(rb, sb)
    t_rows, alike = traffic.differences(ta, tb)
    pairs, only_a, only_b = traffic.match(sa, sb)
    nxt_a = {s.key: n.ts_start for s, n in zip(sa, sa[1:], strict=False)}
    nxt_b = {s.key: n.ts_start for s, n in zip(sb, sb[1:], strict=False)}
    steps = []
    for x, y in pairs:
        fa, fb = moves.figures(ra, x, nxt_a.get(x.key)), moves.figures(rb, y, nxt_b.get(y.key))
        rows_s = moves.compare(fa, fb, x.key)
        steps.append(_scope(x.label, rows_s, fa, fb, slo) | {"key": x.key, "mode": x.mode, "value": x.value})
    fa, fb = moves.figures(ra, None), moves.figures(rb, None)
    whole = _scope("whole run", moves.compare(fa, fb, "whole"), fa, fb, slo)
    changed = [r for r in rows if r["counted"]]
    unknown = [r for r in rows if r["status"] == "unknown" and r["name"] not in settings.OBSERVED]
    bd = verdict.boundary(steps)
    scopes = [("whole run", whole["metrics"])] + [(f"step {s['label']}", s["metrics"]) for s in steps]
    found = verdict.traps(scopes)
    result, good, bad = verdict.movement(whole["metrics"])
    lines = [verdict.comparability(changed, unknown, t_rows, alike)]
    identical = not changed and alike is not False and result == "no movement"
    if identical:
        lines = [
            "No change, no movement: no setting differs between the runs and no figure moved beyond the "
            "run-to-run noise."
        ]
    else:
        lines += [ln for ln in (verdict.slo_line(whole, steps, slo), verdict.boundary_line(bd)) if ln]
        lines += [ln for ln in [verdict.control_line(steps)] if ln]
        lines += verdict.headline_traps(found) or [ln for ln in [verdict.relief_line(scopes)] if ln]
        lines.append(verdict.movement_line(result, good, bad))
    doc = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": {
            "tool": "logscope",
            "version": __version__,
            "command_line": options.command_line or None,
        },
        "verdict": lines,
        "result": result,
        "runs": {
            r.label.lower(): {
                "given": r.given,
                "analysis": r.out.name if r.analysed_here else str(r.out),
                "analysed_here": r.analysed_here,
                "input": r.doc("ingest").get("input"),
                "span": _span(r),
                "verdict": list(r.doc("summary").get("verdict") or []),
            }
            for r in (ra, rb)
        },
        "slo": slo,
        "comparable": {
            "settings_changed": len(changed),
            "settings_unknown": len(unknown),
            "single_change": len(changed) == 1 and alike is not False,
            "traffic_alike": alike,
            "changed": [r["name"] for r in changed],
        },
        "settings": rows,
        "traffic": {"a": ta, "b": tb, "differences": t_rows, "alike": alike, "tolerance": traffic.TOLERANCE},
        "steps": steps,
        "unmatched_steps": {"a": [s.label for s in only_a], "b": [s.label for s in only_b]},
        "whole": whole,
        "boundary": bd,
        "traps": found,
        "notes": notes,
        "method": [
            "Settings: vLLM's banner, 'non-default args' and engine config lines, the KV cache size line; "
            "nginx.conf beside the logs (nginx defaults where a directive is not set); the client's own records.",
            "Steps: ladder steps (or the client's phases) matched by mode, value and order; a step's server "
            "figures run from its start to the next step's start.",
            f"Noise: per-request figures by bootstrap ({moves.RESAMPLES} resamples, 95 % interval of B − A); "
            "event counts as Poisson counts (|B − A| > 2·√(A + B)); server gauges not estimated.",
            f"Traffic: alike when the steps are the same and prompt / max_tokens means (and, in an open loop, "
            f"the arrival rate) are within {traffic.TOLERANCE * 100:.0f} %.",
        ],
    }
    return clean(doc), {"runs": (ra, rb), "pairs": pairs, "steps": steps}


def _scope(label: str, rows: list[dict], fa: moves.Figures, fb: moves.Figures, slo: dict) -> dict:
    ma, fail_a = verdict.meets(fa.values, slo)
    mb, fail_b = verdict.meets(fb.values, slo)
    return {
        "label": label,
        "window": {"a": [iso(x) for x in fa.window], "b": [iso(x) for x in fb.window]},
        "meets_slo": {"a": ma, "b": mb},
        "slo_failed": {"a": fail_a, "b": fail_b},
        "metrics": rows,
    }


def run(a: Path, b: Path, out: Path, options: CompareOptions, analyse: Callable[[Path, Path], Any]) -> dict:
    """Compare, write the three files into ``out``, and return the document and the files' paths."""
    from .render import write

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ra, rb = load_runs(a, b, out, analyse)
    doc, extra = build(ra, rb, options)
    return {"doc": doc, "paths": write(out, doc, extra)}
