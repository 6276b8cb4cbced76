"""The engine's clock over a step or a whole run: vLLM's Prometheus histograms (TTFT, queue, e2e), read as each
run's own analysis reads them (logscope.diagnose.histograms: Prometheus' histogram_quantile, the bucket a
quantile falls in, the exact mean of _sum / _count).

A histogram holds no per-request figures to resample, but its bucket counts are the distribution it saw:
the run-to-run noise of its p95 is estimated by a bootstrap of pseudo-requests spread evenly through each
bucket (the same linear interpolation histogram_quantile makes). A move is beyond the noise only when that
interval excludes 0 and the two p95s lie in different buckets: inside one bucket the histogram cannot tell
where either lies.
"""

from __future__ import annotations

import math
from datetime import datetime

import polars as pl

from ..diagnose import figures as diag_figures
from ..diagnose.histograms import FIGURES, Histograms
from ..diagnose.histograms import load as load_histograms
from ..report.fmt import num
from .runs import Run

PSEUDO_MAX = 20_000  # pseudo-requests per histogram range (counts scaled down past it)


def histograms(run: Run) -> Histograms:
    """The run's histograms, read once."""
    h = run.cache.get("histograms")
    if h is None:
        try:
            h = load_histograms(run.out)
        except Exception:  # noqa: BLE001 - unreadable metrics: the engine's clock is unknown, never a stop
            h = Histograms(notes=["server_metrics could not be read"])
        run.cache["histograms"] = h
    return h


def has(run: Run, figure: str) -> bool:
    return histograms(run).has(figure)


def measure(run: Run, figure: str, lo: datetime | None, hi: datetime | None) -> dict | None:
    """n, mean, p50 / p95 (with their buckets) of ``figure`` over [lo, hi], all replicas; None without samples
    or without observations."""
    h = histograms(run)
    if not h.has(figure):
        return None
    got = h.measure(figure, lo, hi)
    return got if got is not None and got["n"] else None


def bucket_counts(run: Run, figure: str, lo, hi) -> tuple[list[float], list[float]] | None:
    """(upper bounds, per-bucket counts) of ``figure`` over [lo, hi], replicas summed (non-cumulative)."""
    h = histograms(run)
    metric = FIGURES[figure][0]
    a = None if lo is None else diag_figures.epoch_us(lo)
    b = None if hi is None else diag_figures.epoch_us(hi)
    bounds: list[float] = []
    cum: list[float] | None = None
    for (m, _rep), hist in sorted(h.by.items()):
        if m != metric or not hist.bounds:
            continue
        got = hist.increase(a, b)
        if got is None:
            continue
        if cum is None:
            cum, bounds = list(got[0]), hist.bounds
        elif hist.bounds == bounds:
            cum = [x + y for x, y in zip(cum, got[0], strict=True)]
    if cum is None or not bounds:
        return None
    env: list[float] = []
    for c in cum:  # the envelope: a bucket never counts fewer than the one below
        env.append(max(c, env[-1]) if env else max(c, 0.0))
    per = [env[0]] + [env[i] - env[i - 1] for i in range(1, len(env))]
    return bounds, per


def pseudo_samples(bounds: list[float], counts: list[float]) -> pl.Series:
    """Pseudo-requests spread evenly through each bucket (lower bound 0; the +Inf bucket at the highest finite
    bound, as histogram_quantile places it): their quantiles are the histogram's interpolated ones."""
    total = sum(counts)
    scale = min(1.0, PSEUDO_MAX / total) if total else 1.0
    finite = [b for b in bounds if not math.isinf(b)]
    top = finite[-1] if finite else 0.0
    parts: list[pl.Series] = []
    lo = 0.0
    for hi, c in zip(bounds, counts, strict=True):
        k = int(round(c * scale))
        if k > 0:
            if math.isinf(hi):
                parts.append(pl.repeat(top, k, eager=True, dtype=pl.Float64))
            else:
                base = min(lo, hi)
                parts.append((pl.int_range(1, k + 1, eager=True).cast(pl.Float64) / k) * (hi - base) + base)
        if not math.isinf(hi):
            lo = hi
    return pl.concat(parts) if parts else pl.Series("v", [], dtype=pl.Float64)


def p95_bucket(fig: dict | None) -> tuple[float, float] | None:
    if not fig or fig.get("p95_bucket_lo") is None:
        return None
    return float(fig["p95_bucket_lo"]), float(fig["p95_bucket_hi"])


def same_bucket(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a == b


def change_bounds(a: tuple[float, float], b: tuple[float, float]) -> list[float | None]:
    """The range B − A lies in when each side is known only to its bucket (lo exclusive, hi inclusive): B's lower
    bound less A's upper to B's upper less A's lower (0.3–0.5 s -> 2.5–5 s: +2 to +4.7 s, whatever the
    interpolations say); an open bucket (≤ 0, above the top bound) leaves its end unbounded (None)."""
    return [num(b[0] - a[1]), num(b[1] - a[0])]


def generated_tps(run: Run, lo, hi) -> float | None:
    """Generated tokens per second over [lo, hi] from vLLM's counter (the engine's own count)."""
    from .counters import increase

    m = run.table("server_metrics")
    if m.height == 0 or lo is None or hi is None:
        return None
    got = increase(m, "vllm:generation_tokens_total", lo, hi)
    span = (hi - lo).total_seconds()
    return got / span if got is not None and span > 0 else None
