"""compare.json, compare.md and compare.html, and the verdict for the terminal.

compare.json is deterministic (sorted orders, rounded floats, no wall-clock time): the same two runs give
the same bytes. The page is self-contained and safe as report.html is (logscope.report.html): autoescaped
templates, chart specs in JSON script blocks that no log text can close, a CSP that loads nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from .. import jsontext
from ..invisible_chars import visible
from ..report import html as page
from ..report import markdown
from ..report.fmt import fnum
from . import charts, precision
from .sources import APART, CLOCK_TEXT, SOURCE_TEXT

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
    if isinstance(x, int | float):
        return precision.text(x, unit)  # as the verdict gives it
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
    if (got := bucket_change(r)) is not None:
        return got
    if r["unit"] == "share":
        return f"{ch * 100:+.1f}\u00a0pt"
    # no-break spaces: a narrow column wraps between the change and its share, never inside either
    rel = f" ({precision.relative(r['change_rel'])})" if r.get("change_rel") is not None and ch else ""
    unit = "\u00a0s" if r["unit"] == "s" else ""
    # to the digits A and B are shown to (precision.change): 'waiting, mean 15.3 → 5.73, -9.59' claimed a hundredth
    return f"{precision.change(ch, r['a'], r['b'], r['unit'])}{unit}{rel}"


def where(r: dict) -> str:
    """'engine's clock · engine metrics histogram' under a figure's title (both sides' sources when they differ)."""
    clock = CLOCK_TEXT.get(r.get("clock") or "", r.get("clock") or "")
    src = r.get("source") or {}
    names = [SOURCE_TEXT.get(s, s) for s in dict.fromkeys(v for v in (src.get("a"), src.get("b")) if v)]
    return " · ".join(x for x in (clock, " / ".join(names)) if x)


# what the requests a figure of served answers left out ended as (moves._left_out's keys)
LEFT_OUT_WORDS = {
    "truncated, cut": "cut after the gateway's 2xx (its error log: the upstream closed mid-response)",
    "truncated, read_timeout": "cut after the gateway's 2xx by its read timeout (its error log: 'upstream timed out')",
    "truncated, failed": "failed after the gateway's 2xx (the proxy's stream-error line)",
    "timeout": "timed out (the caller gave up)",
    "error": "failed",
    "unfinished": "unfinished (the caller's log ended)",
    "unknown": "of unknown outcome",
}


def left_out(r: dict) -> str:
    """'completed requests only; not counted: B 8 cut after the gateway's 2xx (…), 199 failed' ('' when none)."""
    lo = r.get("left_out") or {}
    parts = [
        f"{side.upper()} " + ", ".join(f"{n:,} {LEFT_OUT_WORDS.get(k, k)}" for k, n in got.items())
        for side in ("a", "b")
        if (got := lo.get(side))
    ]
    return "completed requests only; not counted: " + "; ".join(parts) if parts else ""


def sweep_left_out(by_run: dict[str, dict | None]) -> str:
    """left_out's words for a sweep's row, a run by its column head ('64: 3 timed out (…)'; '' when none)."""
    parts = [
        f"{h}: " + ", ".join(f"{n:,} {LEFT_OUT_WORDS.get(k, k)}" for k, n in got.items())
        for h, got in by_run.items()
        if got
    ]
    return "completed requests only; not counted: " + "; ".join(parts) if parts else ""


def bucket(r: dict, side: str) -> str | None:
    """The histogram bucket a side's quantile lies in ('5–7.5 s'), when it is one."""
    b = (r.get("bucket") or {}).get(side)
    return b if b and r[side] is not None else None


def figure(r: dict, side: str) -> str:
    """A side's figure for a cell: a histogram's quantile is its bucket ('2.5–5 s'), never the number
    histogram_quantile interpolates inside it (4.375 s claims digits the buckets do not hold)."""
    return bucket(r, side) or value(r[side], r["unit"])


def _signed(x: float) -> str:
    return f"{'+' if x > 0 else ''}{fnum(x, 3)}"


def bucket_change(r: dict) -> str | None:
    """The change between two histogram quantiles as the buckets allow it ('+2 to +4.7 s', 'same bucket');
    None for a row of other figures."""
    if not (bucket(r, "a") and bucket(r, "b")) or r.get("change") is None:
        return None
    if r["bucket"]["a"] == r["bucket"]["b"]:
        return "same bucket"
    lo, hi = r.get("change_bounds") or (None, None)
    if lo is not None and hi is not None:
        return f"{_signed(lo)} to {_signed(hi)}\u00a0s"
    if lo is not None:
        return f"above {_signed(lo)}\u00a0s"
    return f"below {_signed(hi)}\u00a0s" if hi is not None else "another bucket"


def metric_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "title": r["title"],
            "where": " · ".join(x for x in (where(r), left_out(r)) if x),
            "a": figure(r, "a"),
            "b": figure(r, "b"),
            "change": change(r),
            "direction": r["direction"] or "",
            "css": DIRECTION_CLASS.get(r["direction"] or "", ""),
            "noise": r["noise"],
        }
        for r in rows
    ]


def _load_words(doc: dict) -> str | None:
    """Where the traffic is alike but the load profiles are not (compare.profile): traced-1r's 2/s for 180 s
    against traced-2r-kill's for 360 s read 'The loads match' above a verdict saying the load differs."""
    load = (doc.get("whole") or {}).get("load") or {}
    if doc["traffic"].get("alike") and load.get("matched") is not True and load.get("text"):
        return f"The request shapes match, but {load['text']}."
    return None


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
                # a step where the one change cannot act (logscope.compare.reach): why its rows are not judged
                "reach": (s.get("reach") or {}).get("text")
                if (s.get("reach") or {}).get("acts") is False
                else None,
                # a step after another load in each run, which ran into it (logscope.compare.after)
                "after": (s.get("after") or {}).get("text")
                if (s.get("after") or {}).get("same") is False
                and (s.get("after") or {}).get("carried") is not False
                else None,
                # a step's figures unknown in both runs are left out (the whole runs' table lists every one)
                "rows": metric_rows([r for r in s["metrics"] if r["a"] is not None or r["b"] is not None]),
            }
            for s in doc["steps"]
        ],
        "load": _load_words(doc),
        "traffic": [
            {"name": k, "a": _traffic(doc["traffic"]["a"], k), "b": _traffic(doc["traffic"]["b"], k)}
            for k in doc["traffic"]["a"]
            if k != "untimed_requests"  # said in the requests' cell
        ],
        "rose": [
            {
                "title": m["title"],
                "where": m["where"],
                "scope": m["scope"],
                # a histogram's quantile is said as its bucket, as the trade's sentence says it
                "a": figure(m | {"unit": "s"}, "a"),
                "b": figure(m | {"unit": "s"}, "b"),
                "beyond": "yes"
                if m["beyond_noise"]
                else ("no" if m["beyond_noise"] is False else "not estimated"),
            }
            for m in _by_load(doc)
        ],
    }


def _traffic(t: dict, k: str) -> str:
    """A run's load figure for the traffic table: its requests with those no time places beside them ('1 (+1 with
    no time, counted apart, as analyze counts them)')."""
    said = value(t[k], "s" if k == "load_s" else None)
    if k == "requests" and (n := t.get("untimed_requests")):
        said += f" (+{n:,} with no time, {APART})"
    return said


def _by_load(doc: dict) -> list[dict]:
    """The trade's moves figure by figure (in the trade's order), each figure's steps by load, the whole run last."""
    order = {f"step {s['label']}": i for i, s in enumerate(doc["steps"])}
    names = list(dict.fromkeys(m["name"] for m in doc["trade"]["rose"]))
    return sorted(
        doc["trade"]["rose"], key=lambda m: (names.index(m["name"]), order.get(m["scope"], len(order)))
    )


# a command-line option ('--max-num-seqs'), or a range of figures ('5–10', a histogram bucket's bounds)
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*|\d[\d.,]*–\d[\d.,]*)")


def whole_options(text: str) -> Markup:
    """Text with each command-line option ('--max-num-seqs') and each range of figures ('5–10 s') kept on one line:
    a narrow column broke an option after its first hyphen ('-' / '-max-num-seqs'), and a line ended after a bucket's
    dash ('5–' / '10 s'). Escaped here, as the template would."""
    parts = _OPTION.split(visible(str(text)))
    return Markup("").join(
        Markup('<span class="nowrap">{}</span>').format(p) if i % 2 else escape(p)
        for i, p in enumerate(parts)
    )


def write(out: Path, doc: dict, extra: dict) -> dict[str, Path]:
    paths = {
        "compare_json": out / "compare.json",
        "compare_md": out / "compare.md",
        "compare_html": out / "compare.html",
    }
    jsontext.write(paths["compare_json"], doc, jsontext.SUMMARY)
    sweep = doc.get("kind") == "sweep"
    v = sweep_view(doc) if sweep else view(doc)
    md_name, html_name = (
        ("compare-sweep.md.j2", "compare-sweep.html.j2") if sweep else ("compare.md.j2", "compare.html.j2")
    )
    text = markdown.environment().get_template(md_name).render(c=doc, v=v, side=_side)
    paths["compare_md"].write_text(re.sub(r"\n{3,}", "\n\n", text), encoding="utf-8")
    charts_: tuple[tuple[str, dict | None], ...]
    if sweep:
        charts_ = (("sweep", _guard(charts.sweep_chart, doc)),)
    else:
        ra, rb = extra["runs"]
        charts_ = (
            ("steps", _guard(charts.steps_chart, doc["steps"])),
            ("timelines", _guard(charts.timelines, ra, rb)),
        )
    specs = {name: spec for name, spec in charts_ if spec}
    html = (
        page.environment()
        .get_template(html_name)
        .render(
            c=doc,
            v=v,
            side=_side,
            whole=whole_options,
            specs={k: page.script_json(s) for k, s in specs.items()},
            csp=page.CSP,
            css=page.css(),
            vega_bundle=page.vega_bundle(),
        )
    )
    paths["compare_html"].write_text(html, encoding="utf-8")
    return paths


SWEEP_ROWS = (("ttft_p95", "TTFT p95 (callers)", "s"), ("engine_ttft_p95", "TTFT p95 (engine)", "s"),
              ("e2e_p95", "e2e p95 (callers)", "s"), ("gateway_e2e_p95", "e2e p95 (gateway)", "s"),
              ("queue_p95", "queue time p95 (engine)", "s"), ("throughput_tps", "output tokens/s", "tps"),
              ("preemptions", "preemptions", "count"))  # fmt: skip


def sweep_view(doc: dict) -> dict:
    """The sweep's one table: a column per run (by the setting's value), the whole runs' figures, then each
    step's, a cell marked when the step missed the SLO."""
    sw = doc["sweep"]
    table = sw["table"]
    heads = [str(t["value"]) if sw["setting"] else t["run"].upper() for t in table]

    def cell(c: dict, key: str, unit: str) -> str:  # a histogram's quantile: its bucket alone
        b = c["buckets"].get(key) if c[key] is not None else None
        return b or value(c[key], unit)

    whole = [
        {
            "title": "working boundary",
            "cells": [_boundary_text(t, sw) for t in table],
            "css": ["" for _ in table],
        },
        {
            "title": "preemptions",
            "cells": [value(t["preemptions"]) for t in table],
            "css": ["" for _ in table],
        },
        {
            "title": "completed ok",
            "cells": [value(t["completed"]) for t in table],
            "css": ["" for _ in table],
        },
        {
            "title": "output tokens/s",
            "cells": [value(t["throughput_tps"], "tps") for t in table],
            "css": ["" for _ in table],
        },
        {
            "title": "queue time, mean (engine)",
            "cells": [value(t["queue_mean_s"], "s") for t in table],
            "css": ["" for _ in table],
        },
    ]
    steps = []
    for i, label in enumerate(sw["steps"]):
        rows = []
        for key, title, unit in SWEEP_ROWS:
            cs = [t["steps"][i] for t in table]
            if all(c[key] is None for c in cs):
                continue
            lo = (
                {h: c.get("left_out") for h, c in zip(heads, cs, strict=True)}
                if key == "gateway_e2e_p95"
                else {}
            )
            rows.append(
                {
                    # the gateway's e2e counts served answers only: the row names what it left out, as a pair's does
                    "title": title + (" (served answers only)" if any(lo.values()) else ""),
                    "cells": [cell(c, key, unit) for c in cs],
                    "css": ["missed" if key in c["slo_failed"] else "" for c in cs],
                    "note": sweep_left_out(lo),
                }
            )
        meets = [_yesno(t["steps"][i]["meets_slo"]) for t in table]
        # a step where the swept setting cannot act in any run (the pair's reach): why no value is better there
        got: dict = next((x["reach"] for x in sw.get("reach") or [] if x["step"] == label), {})
        steps.append(
            {
                "label": label,
                "rows": rows,
                "meets": meets,
                "reach": got.get("text") if got.get("acts") is False else None,
            }
        )
    settings = [
        {**r, "cells": [setting(r["values"].get(k)) for k in sw["order"]]}
        for r in doc["settings"]
        if r["status"] != "same"
    ]
    return {"heads": heads, "whole": whole, "steps": steps, "settings": settings,
            "same": sum(r["status"] == "same" for r in doc["settings"])}  # fmt: skip


def _boundary_text(t: dict, sw: dict) -> str:
    if not sw["ladder"]:
        return "no ladder"
    if not t["boundary_known"]:
        return "unknown"
    if t["boundary"] is None:
        return "no step"
    return next((c["label"] for c in t["steps"] if c["value"] == t["boundary"]), fnum(t["boundary"]))


def _guard(fn, *args) -> dict | None:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a chart must not take the comparison down
        return None


def _yesno(x: bool | None) -> str:
    return "unknown" if x is None else ("meets" if x else "misses")


def _side(x: bool | None) -> str:
    """One run against the SLO, in a sentence: 'meets it', 'misses it', 'cannot be judged' (never 'unknown it')."""
    return "cannot be judged" if x is None else ("meets it" if x else "misses it")


def terminal_lines(doc: dict) -> list[str]:
    """The short verdict the command prints (plain text: the caller escapes it for rich)."""
    out = list(doc["verdict"])
    changed = [r for r in doc["settings"] if r["counted"]]
    if doc.get("kind") == "sweep":
        if changed:
            order = doc["sweep"]["order"]
            out.append(
                "varies: "
                + "; ".join(
                    f"{r['layer']} {r['name']}: " + ", ".join(setting(r["values"].get(k)) for k in order)
                    for r in changed[:6]
                )
            )
        return out
    if changed:
        out.append(
            "changed: "
            + "; ".join(
                f"{r['layer']} {r['name']}: {setting(r['a'])} → {setting(r['b'])}" for r in changed[:6]
            )
            + (" …" if len(changed) > 6 else "")
        )
    return out
