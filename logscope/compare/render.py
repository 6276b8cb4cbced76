"""compare.json, compare.md and compare.html, and the verdict for the terminal.

compare.json is deterministic (sorted orders, rounded floats, no wall-clock time): the same two runs give
the same bytes. The page is self-contained and safe as report.html is (logscope.report.html): autoescaped
templates, chart specs in JSON script blocks that no log text can close, a CSP that loads nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .. import jsontext
from ..report import html as page
from ..report import markdown
from ..report.fmt import fnum, pct
from . import charts

DIRECTION_CLASS = {"better": "better", "worse": "worse"}


def dumps(doc: dict) -> str:
    return jsontext.SUMMARY.dumps(doc)


def value(x: Any, unit: str | None = None) -> str:
    """A figure or a setting for a table cell."""
    if x is None:
        return "unknown"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, list):
        return ", ".join(value(v) for v in x)
    if isinstance(x, dict):
        return ", ".join(f"{k}={value(v)}" for k, v in x.items())
    if unit == "share" and isinstance(x, int | float):
        return pct(x)
    if unit == "s" and isinstance(x, int | float):
        return f"{fnum(x, 3)} s"
    if isinstance(x, int | float):
        return fnum(x, 3)
    return str(x)


def setting(x: Any) -> str:
    """A setting as written in its config (a port or a count without a thousands separator)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return value(x)


def change(r: dict) -> str:
    ch = r.get("change")
    if ch is None:
        return "–"
    if r["unit"] == "share":
        return f"{ch * 100:+.1f} pt"
    rel = f" ({r['change_rel'] * 100:+.0f} %)" if r.get("change_rel") is not None and ch else ""
    sign = "+" if ch > 0 else ""
    return f"{sign}{fnum(ch, 3)}{' s' if r['unit'] == 's' else ''}{rel}"


def metric_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "title": r["title"],
            "a": value(r["a"], r["unit"]),
            "b": value(r["b"], r["unit"]),
            "change": change(r),
            "direction": r["direction"] or "",
            "css": DIRECTION_CLASS.get(r["direction"] or "", ""),
            "noise": r["noise"],
        }
        for r in rows
    ]


def view(doc: dict) -> dict:
    """What the templates show, pre-formatted (the same strings in the page and the ticket)."""
    return {
        "settings": [{**r, "a_txt": setting(r["a"]), "b_txt": setting(r["b"])} for r in doc["settings"]],
        "whole": metric_rows(doc["whole"]["metrics"]),
        "steps": [
            {
                "label": s["label"],
                "meets_a": s["meets_slo"]["a"],
                "meets_b": s["meets_slo"]["b"],
                "rows": metric_rows(s["metrics"]),
            }
            for s in doc["steps"]
        ],
        "traffic": [
            {"name": k, "a": value(doc["traffic"]["a"][k]), "b": value(doc["traffic"]["b"][k])}
            for k in doc["traffic"]["a"]
        ],
    }


def write(out: Path, doc: dict, extra: dict) -> dict[str, Path]:
    paths = {
        "compare_json": out / "compare.json",
        "compare_md": out / "compare.md",
        "compare_html": out / "compare.html",
    }
    jsontext.write(paths["compare_json"], doc, jsontext.SUMMARY)
    v = view(doc)
    env = page.environment()
    text = markdown.environment().get_template("compare.md.j2").render(c=doc, v=v, yesno=_yesno)
    paths["compare_md"].write_text(re.sub(r"\n{3,}", "\n\n", text), encoding="utf-8")
    ra, rb = extra["runs"]
    specs = {
        name: spec
        for name, spec in (
            ("steps", _guard(charts.steps_chart, doc["steps"])),
            ("timelines", _guard(charts.timelines, ra, rb)),
        )
        if spec
    }
    html = env.get_template("compare.html.j2").render(
        c=doc,
        v=v,
        yesno=_yesno,
        specs={k: page.script_json(s) for k, s in specs.items()},
        csp=page.CSP,
        css=page.css(),
        vega_bundle=page.vega_bundle(),
    )
    paths["compare_html"].write_text(html, encoding="utf-8")
    return paths


def _guard(fn, *args) -> dict | None:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a chart must not take the comparison down
        return None


def _yesno(x: bool | None) -> str:
    return "unknown" if x is None else ("meets" if x else "misses")


def terminal_lines(doc: dict) -> list[str]:
    """The short verdict the command prints (plain text: the caller escapes it for rich)."""
    out = list(doc["verdict"])
    changed = [r for r in doc["settings"] if r["counted"]]
    if changed:
        out.append(
            "changed: "
            + "; ".join(
                f"{r['layer']} {r['name']}: {setting(r['a'])} → {setting(r['b'])}" for r in changed[:6]
            )
            + (" …" if len(changed) > 6 else "")
        )
    return out
