"""Latency and length quantiles over any time range from vLLM's Prometheus histograms.

vLLM exports each request's TTFT, queue, prefill, decode and end-to-end times, and its prompt,
generated and requested lengths, as cumulative histograms (``<name>_bucket{le=...}``, ``_sum``,
``_count``). Wherever the client or the logs give no per-request figure, a range [lo, hi] is
measured from them as Prometheus does it:

* the increase of every series over the range: its reset-corrected cumulative value (a drop is a
  restart, counted from 0 again) at the last sample at or before ``hi`` minus that at the last
  sample at or before ``lo`` (the first sample when the series starts inside the range). No
  extrapolation to the range's ends (Prometheus' ``increase`` scales every bucket alike, which leaves
  a quantile unchanged); an observation is counted when it was recorded (the first token, the
  finish), so a range holds the requests whose TTFT / finish fell in it, scrape interval included;
* the label sets of one replica (vLLM's ``engine`` label) summed per ``le``; all replicas summed
  when the range is the folder's (a ladder step), one replica's when it is a replica's episode;
* the quantile as ``histogram_quantile`` computes it (promql/quantile.go ``bucketQuantile``: buckets
  sorted and coalesced, float noise and non-monotonic counts evened out, linear interpolation in the
  bucket holding the rank, 0 as the lowest bucket's lower bound, the highest finite bound when the rank
  falls in +Inf, nothing without observations or without a +Inf bucket), returned with the bucket's
  bounds: a p95 inside the 1–2.5 s bucket is "1–2.5 s", whatever the interpolation says;
* the mean as the increase of ``_sum`` over that of ``_count`` (exact).

Sources: every ``server_metrics`` source (promtool dump, query_range answers of ``_bucket`` series,
``/metrics`` scrapes with timestamps); for each histogram and replica, the source with most samples.
Native histograms are not read: no parser stores them (none of the lab's servers exported one).
"""

from __future__ import annotations

import bisect
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..ingest.metric_stats import map_replicas, scrape_replicas
from ..resources import time_range
from . import figures

SOURCE = "metrics histogram"
# figure -> (vLLM histogram, unit); V0 and V1 name them alike
FIGURES = {
    "ttft": ("vllm:time_to_first_token_seconds", "s"),
    "e2e": ("vllm:e2e_request_latency_seconds", "s"),
    "queue": ("vllm:request_queue_time_seconds", "s"),
    "prefill": ("vllm:request_prefill_time_seconds", "s"),
    "decode": ("vllm:request_decode_time_seconds", "s"),
    "prompt_tokens": ("vllm:request_prompt_tokens", "tokens"),
    "output_tokens": ("vllm:request_generation_tokens", "tokens"),
    "max_tokens": ("vllm:request_params_max_tokens", "tokens"),
}
LATENCIES = ("ttft", "e2e", "queue", "prefill", "decode")
# requests.origin -> the source a per-request figure is named by
ORIGIN_SOURCE = {"client": "client", "gateway": "gateway", "server": "server log"}
_LE = r"(?:^|,)le=([^,]*)"
_PRECISION = 1e-12  # Prometheus' tolerance for float noise between buckets


@dataclass
class Quantile:
    value: float
    bucket_lo: float  # the bounds of the bucket the rank fell in (lo exclusive, hi inclusive)
    bucket_hi: float


def bucket_quantile(q: float, bounds: list[float], counts: list[float]) -> Quantile | None:
    """``histogram_quantile(q, ...)`` of cumulative bucket counts (one per upper bound ``le``); None where
    Prometheus answers NaN (no observation, no +Inf bucket, fewer than two buckets)."""
    if math.isnan(q) or not bounds:
        return None
    if q < 0 or q > 1:
        inf = math.inf if q > 1 else -math.inf
        return Quantile(inf, inf, inf)
    pairs = sorted(zip(bounds, counts, strict=True))
    if not math.isinf(pairs[-1][0]) or pairs[-1][0] < 0:
        return None
    b: list[float] = []
    c: list[float] = []
    for ub, n in pairs:  # coalesce equal bounds
        if b and ub == b[-1]:
            c[-1] += n
        else:
            b.append(ub)
            c.append(n)
    prev = c[0]
    for i in range(1, len(c)):  # float noise: a relative difference up to 1e-12 is none
        delta = abs(c[i] - prev)
        if delta == 0:
            continue
        # a bucket's increase can be 0 above a non-zero one (two servers' counters summed as one, a reset between
        # them): no float noise (Prometheus' almostEqual: never equal to 0), and it divided by that 0
        if c[i] != 0 and delta / c[i] <= _PRECISION:
            c[i] = prev
        else:
            prev = c[i]
    for i in range(1, len(c)):  # the envelope: a bucket never counts fewer than the one below
        c[i] = max(c[i], c[i - 1])
    if len(b) < 2 or c[-1] == 0:
        return None
    rank = q * c[-1]
    k = next((i for i in range(len(b) - 1) if c[i] >= rank), len(b) - 1)
    if k == len(b) - 1:  # in +Inf: the highest finite bound
        return Quantile(b[-2], b[-2], math.inf)
    if k == 0 and b[0] <= 0:
        return Quantile(b[0], -math.inf, b[0])
    start, end, count = 0.0, b[k], c[k]
    if k > 0:
        start = b[k - 1]
        count -= c[k - 1]
        rank -= c[k - 1]
    return Quantile(start + (end - start) * (rank / count), start, end)


def bucket_text(lo: float, hi: float, unit: str) -> str:
    """A bucket as the reader should see a quantile inside it: '1–2.5 s', '> 160 s', '128–256 tokens'."""
    if math.isinf(hi):
        return f"> {lo:g} {unit}"
    if math.isinf(lo):
        return f"≤ {hi:g} {unit}"
    return f"{lo:g}–{hi:g} {unit}"


@dataclass
class _Hist:
    """One histogram of one replica: sample times (epoch µs) and, per column, the reset-corrected
    cumulative value at each (the ``le`` buckets, then ``_sum`` and ``_count`` when exported)."""

    times: array
    bounds: list[float]
    cols: list[array]
    sum_col: array | None
    count_col: array | None

    def increase(
        self, lo: int | None, hi: int | None
    ) -> tuple[list[float], float | None, float | None] | None:
        """Bucket, sum and count increases over [lo, hi] (None: no sample in it)."""
        t = self.times
        j = len(t) - 1 if hi is None else bisect.bisect_right(t, hi) - 1
        if j < 0:
            return None
        i = 0 if lo is None else bisect.bisect_right(t, lo) - 1
        if i < 0:  # the series starts inside the range: from its first sample
            i = 0
        if lo is not None and t[j] < lo and i == j:  # the last sample is before the range: nothing seen in it
            return None

        def d(col: array | None) -> float | None:
            return None if col is None else col[j] - col[i]

        return [col[j] - col[i] for col in self.cols], d(self.sum_col), d(self.count_col)


@dataclass
class Histograms:
    by: dict[tuple[str, str], _Hist] = field(default_factory=dict)  # (metric, replica) -> its histogram
    notes: list[str] = field(default_factory=list)

    @property
    def replicas(self) -> set[str]:
        return {r for _, r in self.by}

    def has(self, figure: str) -> bool:
        return any(m == FIGURES[figure][0] for m, _ in self.by)

    def measure(self, figure: str, lo, hi, replica: str | None = None) -> dict | None:
        """The figure over [lo, hi] (aware datetimes, None: open) on one replica (None: all summed): n, mean,
        p50 and p95 with their buckets; None when the histogram has no sample in the range or no replica
        named so (an unknown replica is not all of them)."""
        metric, unit = FIGURES[figure]
        reps = [r for m, r in self.by if m == metric and (replica is None or r == replica)]
        a = None if lo is None else figures.epoch_us(lo)
        b = None if hi is None else figures.epoch_us(hi)
        counts: list[float] | None = None
        bounds: list[float] = []
        tot_sum, tot_n, seen = 0.0, 0.0, False
        for r in sorted(reps):
            h = self.by[(metric, r)]
            got = h.increase(a, b)
            if got is None:
                continue
            seen = True
            cs, s, n = got
            if h.bounds:
                if counts is None:
                    counts, bounds = list(cs), h.bounds
                elif h.bounds == bounds:
                    counts = [x + y for x, y in zip(counts, cs, strict=True)]
            tot_sum += s or 0.0
            tot_n += n if n is not None else (cs[-1] if cs else 0.0)
        if not seen:
            return None
        out: dict = {
            "source": SOURCE,
            "metric": metric,
            "unit": unit,
            "n": tot_n,
            "mean": tot_sum / tot_n if tot_n else None,
        }
        for name, q in (("p50", 0.5), ("p95", 0.95)):
            got_q = bucket_quantile(q, bounds, counts) if counts else None
            out[name] = None if got_q is None else got_q.value
            out[f"{name}_bucket_lo"] = None if got_q is None else got_q.bucket_lo
            out[f"{name}_bucket_hi"] = None if got_q is None else got_q.bucket_hi
            out[f"{name}_bucket"] = (
                None if got_q is None else bucket_text(got_q.bucket_lo, got_q.bucket_hi, unit)
            )
        return out

    def measure_all(self, lo, hi, replica: str | None = None) -> dict[str, dict]:
        """Every figure there is a histogram of, over the range (those with no sample left out)."""
        got = {f: self.measure(f, lo, hi, replica) for f in FIGURES if self.has(f)}
        return {f: v for f, v in got.items() if v is not None}

    def replica_for(self, replica: str | None) -> tuple[bool, str | None]:
        """(usable, replica to measure): a named replica the metrics describe, or all for None."""
        if replica is None:
            return True, None
        return (replica in self.replicas), replica


def load(
    out: Path, rng: time_range.Range = time_range.ALL, log_stats: pl.DataFrame | None = None
) -> Histograms:
    """The histograms of ``out``'s server_metrics (in the range), named after the log replicas they describe."""
    p = Path(out) / "server_metrics.parquet"
    if not p.exists():
        return Histograms()
    names = [m + s for m, _ in FIGURES.values() for s in ("_bucket", "_sum", "_count")]
    try:
        lf = time_range.scan(out, "server_metrics", rng).filter(pl.col("ts").is_not_null())
        m = (
            lf.filter(pl.col("name").is_in(names) & pl.col("value").is_not_nan())
            .select("source", "replica", "name", pl.col("labels").fill_null(""), "ts", "value")
            .collect()
        )
        # each target's first scrape (of any metric): a histogram series first seen later was created then
        first = lf.group_by("source", "replica").agg(pl.col("ts").min().alias("_first")).collect()
    except Exception:  # noqa: BLE001 - a half-written table must not stop the diagnosis
        return Histograms(notes=["server_metrics could not be read: no histogram figures"])
    if m.height == 0:
        return Histograms()
    m = m.join(first, on=["source", "replica"], how="left", nulls_equal=True).with_columns(
        pl.col("replica").fill_null("")
    )
    notes: list[str] = []
    if log_stats is not None and log_stats.height:
        spans = (
            log_stats.filter(pl.col("origin").ne_missing("prometheus"))
            .group_by("replica")
            .agg(pl.col("ts").min().alias("lo"), pl.col("ts").max().alias("hi"))
        )
        # each scrape time: a target whose address two logs of other times claim is split between them
        keys = m.select("replica", "ts").unique()
        mapped, _ = map_replicas(keys, out, spans)
        keys = keys.with_columns(mapped["replica"].alias("_to"))
        keys = _by_gauges(keys, lf, out, spans, log_stats)
        m = (
            m.join(keys, on=["replica", "ts"], how="left")
            .with_columns(pl.col("_to").alias("replica"))
            .drop("_to")
        )
    return Histograms(_build(m), notes)


def _by_gauges(
    keys: pl.DataFrame, lf: pl.LazyFrame, out: Path, spans: pl.DataFrame, log_stats: pl.DataFrame
) -> pl.DataFrame:
    """Scrapes the address left untied among several logs (a calm replica's log claims 127.0.0.1:8001 too, over
    the same minutes) tied as the derived stats tie them, by whose gauges follow the target's: the histograms of
    those scrapes hold none, and untied they left every episode of the log without an engine figure (its
    clock-gap claims vanished: tests/test_metamorphic_clock_gap.py)."""
    logs = set(spans["replica"].drop_nulls().to_list())
    loose = keys.filter(~pl.col("_to").is_in(list(logs)))
    if len(logs) < 2 or loose.height == 0:
        return keys
    lazy = log_stats.filter(pl.col("origin").ne_missing("prometheus")).lazy()
    tied = scrape_replicas(lf, out, spans, lazy).filter(pl.col("replica").is_in(list(logs)))
    # the nearest derived row of the same target: the stats keep one source's scrapes (a dump's), a histogram
    # another's (a query_range answer's, on its step)
    tied = (
        tied.unique(["_inst", "ts"], keep="any").sort("ts").rename({"_inst": "replica", "replica": "_tied"})
    )
    untied = ~pl.col("_to").is_in(list(logs))
    return (
        keys.sort("ts")
        .join_asof(tied, on="ts", by="replica", strategy="nearest", check_sortedness=False)
        .with_columns(pl.when(untied).then(pl.coalesce("_tied", "_to")).otherwise("_to").alias("_to"))
        .drop("_tied")
    )


def _build(m: pl.DataFrame) -> dict[tuple[str, str], _Hist]:
    if "_first" not in m.columns:
        m = m.with_columns(pl.lit(None, dtype=m.schema["ts"]).alias("_first"))
    kind = pl.col("name").str.extract(r"_(bucket|sum|count)$")
    m = m.with_columns(
        pl.col("name").str.replace(r"_(bucket|sum|count)$", "").alias("metric"),
        kind.alias("kind"),
        pl.col("labels").str.extract(_LE).cast(pl.Float64, strict=False).alias("le"),
        pl.col("labels").str.replace_all(_LE, "").str.strip_chars(",").alias("group"),
    ).filter((pl.col("kind") != "bucket") | pl.col("le").is_not_null())
    # the source holding most of a histogram's samples (a dump beats a query_range answer of the same series),
    # among those covering the same time: sources of other times (an earlier hour's dump beside the incident's)
    # are each kept, or the one with more samples took the other's hour away (its claims vanished with it)
    spans = (
        m.group_by("metric", "replica", "source")
        .agg(pl.len().alias("_n"), pl.col("ts").min().alias("_lo"), pl.col("ts").max().alias("_hi"))
        .sort("metric", "replica", "_lo", "source")
    )
    before = pl.col("_hi").cum_max().shift(1).over("metric", "replica")
    best = (
        spans.with_columns(
            (before.is_null() | (pl.col("_lo") > before)).cum_sum().over("metric", "replica").alias("_span")
        )
        .sort(["_n", "source"], descending=[True, False])
        .unique(["metric", "replica", "_span"], keep="first")
    )
    m = m.join(best.select("metric", "replica", "source"), on=["metric", "replica", "source"])
    series = ["metric", "replica", "group", "kind", "le"]
    m = m.unique([*series, "ts"], keep="last", maintain_order=True).sort([*series, "ts"])
    # each source's samples apart: the first of one after another's last is a first sample (what happened
    # between them is not known), not an increase from the other source's counter
    own = [*series, "source"]
    prev = pl.col("value").shift(1).over(own)
    # a series first seen after its target's first scrape was created by its first observations (vLLM's
    # labelled histograms appear then): it counts from 0, at that first scrape; one there from the start, or
    # with no such scrape known, counts from its first sample (what was before is not known)
    born = pl.col("_first").is_not_null() & (pl.col("ts").min().over(own) > pl.col("_first"))
    inc = (
        pl.when(prev.is_null())
        .then(pl.when(born).then(pl.col("value")).otherwise(0.0))
        .when(pl.col("value") >= prev)
        .then(pl.col("value") - prev)
        .otherwise(pl.col("value"))
    )  # a drop is a restart: counted from 0 again
    # a born series' 0 at its target's first scrape: an increase of 0 there, before its first sample's
    zeros = (
        m.filter(born)
        .group_by(own)
        .agg(pl.col("_first").first().alias("ts"))
        .with_columns(pl.lit(0.0).alias("inc"))
    )
    m = pl.concat(
        [m.with_columns(inc.alias("inc")).select(*own, "ts", "inc"), zeros.select(*own, "ts", "inc")]
    )
    m = m.sort([*series, "ts"]).with_columns(pl.col("inc").cum_sum().over(series).alias("cum"))
    # the label sets of a replica (engines) summed per bucket, at each scrape
    m = m.group_by("metric", "replica", "kind", "le", "ts").agg(pl.col("cum").sum())
    m = m.with_columns(
        pl.when(pl.col("kind") == "bucket")
        .then(pl.col("le").cast(pl.String))
        .otherwise(pl.col("kind"))
        .alias("col")
    )
    out: dict[tuple[str, str], _Hist] = {}
    for (metric, replica), part in m.partition_by(["metric", "replica"], as_dict=True).items():
        wide = part.pivot(on="col", index="ts", values="cum").sort("ts")
        cols = [c for c in wide.columns if c != "ts"]
        wide = wide.with_columns(pl.col(cols).forward_fill()).drop_nulls()
        if wide.height == 0:
            continue
        les = sorted((float(c), c) for c in cols if c not in ("sum", "count"))
        out[(metric, replica)] = _Hist(
            times=array("q", wide["ts"].to_physical().to_list()),
            bounds=[b for b, _ in les],
            cols=[array("d", wide[c].to_list()) for _, c in les],
            sum_col=array("d", wide["sum"].to_list()) if "sum" in wide.columns else None,
            count_col=array("d", wide["count"].to_list()) if "count" in wide.columns else None,
        )
    return out
