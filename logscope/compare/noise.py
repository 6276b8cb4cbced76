"""The sampling noise of a move between two runs: a bootstrap of each run's requests (a histogram's quantile from its
bucket counts: logscope.compare.engine), a Poisson count's bound, and a difference of two clocks' means
(logscope.compare.moves says which figure is which)."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, cast

import polars as pl

from ..report.fmt import num
from . import engine

if TYPE_CHECKING:  # moves builds the figures this module reads
    from .moves import Figures, Metric

RESAMPLES = 1000
MAX_SAMPLE = 20_000  # requests a bootstrap resamples (a deterministic subsample of more): memory stays small
MIN_N = {"share": 20, "p50": 10, "p95": 20, "mean": 20}  # fewer requests per run: "not enough data"


def agg(stat: str, col: str = "v") -> pl.Expr:
    """The statistic a figure is (linear quantiles, as the report's percentiles)."""
    if stat in ("p50", "p95"):
        return pl.col(col).quantile(0.5 if stat == "p50" else 0.95, interpolation="linear")
    return pl.col(col).mean()


def interval(xa: pl.Series, xb: pl.Series, stat: str, seed: int) -> tuple[float, float]:
    """95 % bootstrap interval of stat(B) − stat(A): each resample drawn with replacement from the requests
    (polars' seeded sampler, so compare.json is the same bytes on every run), all resamples in one group-by."""

    def boot(x: pl.Series) -> pl.Series:
        # each run's resamples are drawn from a seed of its own figures, not of its place in the pair: B against A
        # then states the interval of A against B negated (the same resamples), and a run against itself [0, 0]
        k = _own_seed(x)
        if x.len() > MAX_SAMPLE:
            x = x.sample(MAX_SAMPLE, with_replacement=False, seed=seed + k)
        n = x.len()
        reps = max(200, min(RESAMPLES, 20_000_000 // max(n, 1)))
        flat = x.sample(n * reps, with_replacement=True, seed=seed + 7 * k + 1)
        return (
            pl.DataFrame({"v": flat, "g": pl.int_range(n * reps, eager=True) // n})
            .group_by("g")
            .agg(agg(stat))
            .sort("g")["v"]
        )

    da, db = boot(xa), boot(xb)
    k = min(da.len(), db.len())
    d = pl.DataFrame({"d": db[:k] - da[:k]})
    lo, hi = d.select(
        pl.col("d").quantile(0.025, interpolation="linear"),
        pl.col("d").quantile(0.975, interpolation="linear").alias("h"),
    ).row(0)
    return float(lo), float(hi)


def _bound(x: float, unit: str) -> str:
    """An interval's end to the precision of the figures it compares (a bootstrap's bound holds no more): seconds
    to the millisecond, a share in percentage points to a tenth, other figures to 3 significant digits."""
    if unit == "s":
        return f"{x:+.3f} s"
    if unit == "share":
        return f"{x * 100:+.1f} pt"
    return f"{x:+.3g}"


def judge(m: Metric, fa: Figures, fb: Figures, scope: str, a, b):
    if a is None or b is None:
        return (
            "unknown in " + ("both runs" if a is None and b is None else ("A" if a is None else "B")),
            None,
            None,
        )
    if m.stat is None:
        return "not estimated (no per-request figures behind it)", None, None
    if m.stat == "means":
        return _means_noise(fa, fb, scope, a, b)
    if m.stat == "count":
        bound = 2 * (a + b) ** 0.5
        beyond = abs(b - a) > bound
        return (
            f"Poisson count: |B − A| = {abs(b - a):g} {'>' if beyond else '≤'} 2·√(A + B) = {bound:.3g}",
            None,
            beyond,
        )
    xa, xb = fa.samples.get(m.name), fb.samples.get(m.name)
    need = MIN_N[m.stat]
    if xa is None or xb is None or min(xa.len(), xb.len()) < need:
        n = min(x.len() if x is not None else 0 for x in (xa, xb))
        return f"not enough data ({n} requests; {need} needed per run)", None, None
    seed = zlib.crc32(f"{scope}/{m.name}".encode())
    lo, hi = interval(xa, xb, m.stat, seed)
    beyond = lo > 0 or hi < 0
    text = f"95 % interval of B − A: {_bound(lo, m.unit)} … {_bound(hi, m.unit)} ({RESAMPLES} resamples)"
    ba, bb = (x.meta.get(m.name, {}).get("bucket_bounds") for x in (fa, fb))
    if ba is not None or bb is not None:  # a histogram's quantile: only a move into another bucket is seen
        beyond = beyond and not engine.same_bucket(ba, bb)
        # the interval (compare.json) is of interpolations: the sentence claims no digit the buckets lack
        text = (
            f"{'beyond' if beyond else 'within'} the sampling noise of the histogram's bucket counts "
            f"(bootstrap, {RESAMPLES} resamples)"
        )
        if engine.same_bucket(ba, bb):
            text += f"; both in the {fa.meta[m.name]['bucket']} bucket: the histogram cannot tell them apart"
    return text, [num(lo), num(hi)], beyond


def _means_noise(fa: Figures, fb: Figures, scope: str, a: float, b: float):
    """The noise of a difference of two clocks' means (the callers' TTFT less the engine's): each mean's B − A
    bootstrapped from its own requests (the engine's from its histogram's bucket counts, shifted onto its exact
    _sum / _count), the two intervals combined at their extremes (the change lies beyond the noise only when
    even the widest reading of both excludes 0). Too few requests on a clock: not estimated, never the 25 % rule
    (spike against spike-b read 'better' on it over the whole runs)."""
    xs = [(f.samples.get("ttft_p50"), f.samples.get("engine_ttft_p95")) for f in (fa, fb)]
    need = MIN_N["mean"]
    n = min(x.len() if x is not None else 0 for pair in xs for x in pair)
    if n < need:
        return f"not enough data ({n} requests on a clock; {need} needed per run)", None, None
    (ca, ea), (cb, eb) = xs
    seed = zlib.crc32(f"{scope}/ttft_outside_s".encode())
    c_lo, c_hi = interval(cast(pl.Series, ca), cast(pl.Series, cb), "mean", seed)
    e_lo, e_hi = interval(cast(pl.Series, ea), cast(pl.Series, eb), "mean", seed + 1)
    ma, mb = (f.meta.get("ttft_outside_s", {}).get("engine_mean") for f in (fa, fb))
    if ma is not None and mb is not None:  # the histogram's pseudo-requests' means onto its exact ones
        shift = (mb - ma) - (float(cast(pl.Series, eb).mean()) - float(cast(pl.Series, ea).mean()))  # type: ignore[arg-type]
        e_lo, e_hi = e_lo + shift, e_hi + shift
    lo, hi = c_lo - e_hi, c_hi - e_lo
    beyond = lo > 0 or hi < 0
    text = (
        f"95 % interval of B − A: {_bound(lo, 's')} … {_bound(hi, 's')} (the callers' mean and the engine's, each "
        f"bootstrapped, {RESAMPLES} resamples, combined at their extremes)"
    )
    return text, [num(lo), num(hi)], beyond


def _own_seed(x: pl.Series) -> int:
    """A seed of the samples themselves (their number, sum and bounds): the same for the same run in either place."""
    v = x.cast(pl.Float64)
    return zlib.crc32(f"{v.len()}/{v.sum()!r}/{v.min()!r}/{v.max()!r}".encode())
