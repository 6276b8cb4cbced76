"""What moved between the runs: the figures of each matched step and of the whole runs, A beside B, with
whether the change is beyond the run-to-run noise.

The noise of a figure computed from requests (success share, TTFT / e2e percentiles, amplification) is a
bootstrap: each run's requests are resampled with replacement, the figure computed again, and the 95 %
interval of B − A taken over the resamples; a change is beyond the noise when that interval excludes 0.
Event counts (preemptions, retries, completions, orphaned executions) are judged as Poisson counts: a
change is beyond the noise when |B − A| > 2·√(A + B) (about 95 %; bursty events such as preemptions vary
more, so this is a floor). Server gauges (waiting, KV usage, the queue-time mean from vLLM's metrics) have no
per-request figures to resample: their noise is not estimated, and they say so.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from ..report.fmt import num
from .counters import increase
from .runs import Run
from .traffic import Step, requests_of

RESAMPLES = 1000
MAX_SAMPLE = 20_000  # requests a bootstrap resamples (a deterministic subsample of more): memory stays small
MIN_N = {"share": 20, "p50": 10, "p95": 20, "mean": 20}  # fewer requests per run: "not enough data"
QUEUE = "vllm:request_queue_time_seconds"


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    better: str | None  # "lower" | "higher" | None (neither: context)
    unit: str  # count | share | s | tps | x
    stat: str | None = None  # how per-request samples give it: share | p50 | p95 | mean | count (Poisson)


METRICS = (
    Metric("requests", "logical requests", None, "count"),
    Metric("completed", "completed ok", "higher", "count", "count"),
    Metric("success_share", "success share", "higher", "share", "share"),
    Metric("ttft_p50", "TTFT p50", "lower", "s", "p50"),
    Metric("ttft_p95", "TTFT p95", "lower", "s", "p95"),
    Metric("queue_mean_s", "queue time, mean (vLLM metrics)", "lower", "s"),
    Metric("span_ttft_p95", "TTFT p95 (vLLM's spans, clock engine)", "lower", "s", "p95"),
    Metric("span_queue_p95", "queue time p95 (vLLM's spans, clock engine)", "lower", "s", "p95"),
    Metric("e2e_p50", "e2e p50", "lower", "s", "p50"),
    Metric("e2e_p95", "e2e p95", "lower", "s", "p95"),
    Metric("preemptions", "preemptions", "lower", "count", "count"),
    Metric("waiting_max", "waiting, max", "lower", "count"),
    Metric("waiting_mean", "waiting, mean", "lower", "count"),
    Metric("kv_max", "KV usage, max", None, "share"),
    Metric("throughput_tps", "output tokens/s", "higher", "tps"),
    Metric("client_retries", "client retries", "lower", "count", "count"),
    Metric("gateway_retries", "gateway retries", "lower", "count", "count"),
    Metric("amplification", "vLLM executions per logical request", "lower", "x", "mean"),
    Metric("orphaned", "orphaned executions", "lower", "count", "count"),
    Metric("orphan_s", "orphaned generation (s)", "lower", "s"),
)  # fmt: skip
BY_NAME = {m.name: m for m in METRICS}


@dataclass
class Figures:
    """One run's figures over one step (or the whole run), with the per-request samples behind some."""

    values: dict[str, float | int | None]
    samples: dict[str, pl.Series]
    window: tuple[datetime | None, datetime | None]


def _arr(s: pl.Series) -> pl.Series:
    return s.drop_nulls().cast(pl.Float64)


def _agg(stat: str, col: str = "v") -> pl.Expr:
    """The statistic a figure is (linear quantiles, as the report's percentiles)."""
    if stat in ("p50", "p95"):
        return pl.col(col).quantile(0.5 if stat == "p50" else 0.95, interpolation="linear")
    return pl.col(col).mean()


def _stat(x: pl.Series, stat: str) -> float:
    return pl.DataFrame({"v": x}).select(_agg(stat)).item()


def figures(run: Run, step: Step | None, until: datetime | None = None) -> Figures:
    """The figures of ``step`` (None: the whole run). Server gauges and counters are read from the step's
    start to ``until`` (the next step's start: what a step's load leaves behind drains into it)."""
    r = requests_of(run, step)
    ok = r.filter(pl.col("outcome") == "ok") if r.height else r
    whole = step is None
    if not whole and step.ts_start is not None:
        lo, hi = step.ts_start, until or step.ts_end
    else:  # the whole run: every window, every sample
        w = run.table("windows")
        lo, hi = (
            (w["ts"].min(), w["ts"].max())
            if w.height
            else ((r["ts_start"].min(), r["ts_end"].max()) if r.height else (None, None))
        )
    v: dict = {m.name: None for m in METRICS}
    smp: dict[str, pl.Series] = {}
    if r.height:
        v["requests"] = r.height
        v["completed"] = ok.height
        smp["success_share"] = (r["outcome"] == "ok").cast(pl.Float64)
        smp["ttft_p50"] = smp["ttft_p95"] = _arr(ok["ttft_s"])
        smp["e2e_p50"] = smp["e2e_p95"] = _arr(ok["e2e_s"])
        if r["server_requests"].drop_nulls().len():
            smp["amplification"] = r["server_requests"].fill_null(0).cast(pl.Float64)
        v["client_retries"] = _retries(r["client_attempts"])
        v["gateway_retries"] = _retries(r["gateway_attempts"])
        orph = r["orphaned_executions"]
        v["orphaned"] = int(orph.fill_null(0).sum()) if orph.drop_nulls().len() else None
        v["orphan_s"] = num(r["orphan_s"].sum()) if r["orphan_s"].drop_nulls().len() else None
        v["throughput_tps"] = _throughput(ok)
        smp.update(_span_samples(run, r))
        for name, x in smp.items():
            if x.len():
                v[name] = num(float(_stat(x, BY_NAME[name].stat)))
    if lo is not None and hi is not None:
        w = run.table("windows")
        if not whole:  # a window belongs to the step its middle falls in
            mid = pl.col("ts") + pl.duration(milliseconds=(pl.col("window_s") * 500).cast(pl.Int64))
            w = w.filter((mid >= lo) & (mid < hi))
        if w.height:
            for name, col, how in (
                ("preemptions", "preemptions", "sum"),
                ("waiting_max", "waiting_max", "max"),
                ("waiting_mean", "waiting_mean", "mean"),
                ("kv_max", "kv_max", "max"),
            ):
                s = w[col].drop_nulls()
                if s.len():
                    v[name] = int(s.sum()) if how == "sum" else num(getattr(s, how)())
        m = run.table("server_metrics")
        if m.height:
            span = (None, None) if whole else (lo, hi)
            ds, dc = increase(m, QUEUE + "_sum", *span), increase(m, QUEUE + "_count", *span)
            v["queue_mean_s"] = num(ds / dc) if ds is not None and dc else None
        if v["throughput_tps"] is None:
            st = run.table("server_stats")
            st = st if whole else st.filter((pl.col("ts") >= lo) & (pl.col("ts") < hi))
            g = st["gen_tps"].drop_nulls()
            v["throughput_tps"] = num(g.mean()) if g.len() else None
    return Figures(v, smp, (lo, hi))


def _span_samples(run: Run, r: pl.DataFrame) -> dict[str, pl.Series]:
    """Per-request figures of vLLM's spans for these requests (request_spans: clock engine, source spans), every
    request whose engine span has them, whatever the caller got: the engine's own TTFT and time in queue."""
    rs = run.table("request_spans")
    if rs.height == 0 or "span_ttft_s" not in rs.columns:
        return {}
    mine = rs.join(r.select("logical_request_id"), on="logical_request_id", how="semi")
    out = {"span_ttft_p95": _arr(mine["span_ttft_s"]), "span_queue_p95": _arr(mine["span_queue_s"])}
    return {k: x for k, x in out.items() if x.len()}


def _retries(attempts: pl.Series) -> int | None:
    a = attempts.drop_nulls()
    return int((a - 1).clip(0).sum()) if a.len() else None


def _throughput(ok: pl.DataFrame) -> float | None:
    """Output tokens of the completed requests over the time they ran."""
    t = ok["output_tokens"].drop_nulls() if ok.height else None
    if t is None or t.len() < max(1, ok.height // 2):
        return None
    span = (ok["ts_end"].max() - ok["ts_start"].min()).total_seconds()
    return num(float(t.sum()) / span) if span > 0 else None


def interval(xa: pl.Series, xb: pl.Series, stat: str, seed: int) -> tuple[float, float]:
    """95 % bootstrap interval of stat(B) − stat(A): each resample drawn with replacement from the requests
    (polars' seeded sampler, so compare.json is the same bytes on every run), all resamples in one group-by."""

    def boot(x: pl.Series, k: int) -> pl.Series:
        if x.len() > MAX_SAMPLE:
            x = x.sample(MAX_SAMPLE, with_replacement=False, seed=seed + k)
        n = x.len()
        reps = max(200, min(RESAMPLES, 20_000_000 // max(n, 1)))
        flat = x.sample(n * reps, with_replacement=True, seed=seed + 7 * k + 1)
        return (
            pl.DataFrame({"v": flat, "g": pl.int_range(n * reps, eager=True) // n})
            .group_by("g")
            .agg(_agg(stat))
            .sort("g")["v"]
        )

    da, db = boot(xa, 1), boot(xb, 2)
    k = min(da.len(), db.len())
    d = pl.DataFrame({"d": db[:k] - da[:k]})
    lo, hi = d.select(
        pl.col("d").quantile(0.025, interpolation="linear"),
        pl.col("d").quantile(0.975, interpolation="linear").alias("h"),
    ).row(0)
    return float(lo), float(hi)


def compare(fa: Figures, fb: Figures, scope: str) -> list[dict]:
    """One row per figure: A, B, the change, whether it is beyond the noise, and which way is better."""
    rows = []
    for m in METRICS:
        a, b = fa.values[m.name], fb.values[m.name]
        row: dict = {
            "name": m.name,
            "title": m.title,
            "unit": m.unit,
            "better": m.better,
            "a": a,
            "b": b,
            "change": None,
            "change_rel": None,
            "interval": None,
            "beyond_noise": None,
            "noise": "",
            "direction": None,
        }
        if a is not None and b is not None:
            row["change"] = num(b - a)
            row["change_rel"] = num((b - a) / abs(a)) if a else None
        row["noise"], row["interval"], row["beyond_noise"] = _noise(m, fa, fb, scope, a, b)
        row["direction"] = _direction(m, row)
        rows.append(row)
    return rows


def _noise(m: Metric, fa: Figures, fb: Figures, scope: str, a, b):
    if a is None or b is None:
        return (
            "unknown in " + ("both runs" if a is None and b is None else ("A" if a is None else "B")),
            None,
            None,
        )
    if m.stat is None:
        return "not estimated (no per-request figures behind it)", None, None
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
    text = f"95 % interval of B − A: {lo:+.4g} … {hi:+.4g} ({RESAMPLES} resamples)"
    return text, [num(lo), num(hi)], beyond


def _direction(m: Metric, row: dict) -> str | None:
    """better | worse | none (no change) | within noise | None (no side is better, or unknown)."""
    ch = row["change"]
    if ch is None or m.better is None:
        return None
    if ch == 0:
        return "none"
    if row["beyond_noise"] is False:
        return "within noise"
    return "better" if (ch < 0) == (m.better == "lower") else "worse"
