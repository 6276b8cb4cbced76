"""A callers' percentile over survivors is not compared: where more of a run's callers gave up than a p95 leaves
above it (diagnose/gave_up.py: 5 %), the answers they waited for hold none of the slow ones, so the p95 is a floor,
and the p50 of the fast ones alone (its rank among all the callers' is unknown). abort-ignored beside calm read "e2e p95 (callers) 2.64 s -> 2.82 s, within
noise" while 76 of its 169 callers had given up at their 3 s timeout (vLLM's own e2e p95 went from 2-2.5 s to
5-10 s). The row is shown, never compared, and no SLO is met on it (a floor above the limit still misses it)."""

from __future__ import annotations

import polars as pl

from ..diagnose.gave_up import CENSORED_SHARE, gave_up_expr

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
