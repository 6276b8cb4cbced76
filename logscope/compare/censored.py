"""A callers' percentile over survivors is not compared: where more of a run's callers gave up than a p95 leaves
above it (diagnose/gave_up.py: 5 %), the answers they waited for hold none of the slow ones, so the p95 is a floor,
and the p50 of the fast ones alone (its rank among all the callers' is unknown). abort-ignored beside calm read
"e2e p95 (callers) 2.64 s -> 2.82 s, within noise" while 76 of its 169 callers had given up at their 3 s timeout
(vLLM's own e2e p95 went from 2-2.5 s to 5-10 s). The row is shown, never compared, and no SLO is met or missed on
it: traced-2r-kill read 'B misses it (… e2e p95 (callers) 70.09 s …)' on a figure its table marked censored. The
verdict names it as a lower bound that decides nothing, beside the figures that do decide."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..diagnose.gave_up import CENSORED_SHARE, gave_up_expr
from .precision import text

CALLERS = ("ttft_p50", "ttft_p95", "e2e_p50", "e2e_p95")  # the callers' percentiles, over their answers


def mark(meta: dict[str, dict], mine: pl.DataFrame) -> None:
    """Mark each callers' percentile of ``meta`` censored where the callers (``mine``: the requests on their
    clock) that gave up before its figure are at least ``CENSORED_SHARE`` of them."""
    if not mine.height or "outcome" not in mine.columns:
        return
    left = mine.filter(gave_up_expr(mine.columns))
    for name in CALLERS:
        if name not in meta:
            continue
        gone = left.filter(pl.col("ttft_s").is_null()).height if name.startswith("ttft") else left.height
        if gone and gone / mine.height >= CENSORED_SHARE:
            meta[name]["censored"] = {"gave_up": gone, "callers": mine.height, "share": gone / mine.height}


def noise(ma: dict, mb: dict) -> str | None:
    """Why the row is not compared, when a side's figure is censored: 'censored (B: 76 of its 169 callers gave
    up before their answer (45%)): over the answers that came, the slow ones left out: not compared'."""
    sides = [(s, m["censored"]) for s, m in (("A", ma), ("B", mb)) if m.get("censored")]
    if not sides:
        return None
    said = "; ".join(
        f"{s}: {c['gave_up']:,} of its {c['callers']:,} callers gave up before their answer ({c['share']:.0%})"
        for s, c in sides
    )
    return f"censored ({said}): over the answers that came, the slow ones left out: not compared"


def floor(meta: dict) -> bool:
    """A censored callers' figure: only a floor of the true one."""
    return bool(meta.get("censored"))


def floors(fig: Any, slo: dict, on: dict[str, str | None]) -> list[dict]:
    """The SLO's figures that are censored (``mark``), so a verdict says they decided nothing: each
    with its callers and those who gave up."""
    out = []
    for what, skey in (("ttft", "ttft_s"), ("e2e", "e2e_s")):
        key = on.get(what)
        c = fig.meta.get(key, {}).get("censored") if key and slo.get(skey) is not None else None
        if c and fig.values.get(key) is not None:
            out.append({"name": key, "gave_up": c["gave_up"], "callers": c["callers"]})
    return out


def floors_text(whole: dict, side: str) -> str:
    """'e2e p95 (callers) 70.09 s is censored (35 of 637 callers gave up: a lower bound) and decides nothing'."""
    rows = {r["name"]: r for r in whole["metrics"]}
    bits = [
        f"{rows[f['name']]['title']} {text(rows[f['name']][side], 's')} is censored ({f['gave_up']:,} of "
        f"{f['callers']:,} callers gave up: a lower bound) and decides nothing"
        for f in ((whole.get("slo_floors") or {}).get(side) or [])
        if f["name"] in rows and rows[f["name"]][side] is not None
    ]
    return "; ".join(bits)
