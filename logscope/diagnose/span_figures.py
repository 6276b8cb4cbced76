"""What the spans measure, per ladder step and per episode, for the diagnosis (issue #38): diagnosis.json's
``spans``, rendered by the report's traces section.

Each figure is a typed record naming its clock and source (source ``spans``; clock ``engine`` for vLLM's
``llm_request`` attributes, ``client`` for the caller's spans; a difference of two processes' stamps names both):
engine TTFT, e2e, queue, prefill and decode, the time before the engine, the caller's e2e. The split of the
callers' latency is the mean of each part (means add up, percentiles do not): before the attempt (earlier attempts,
backoff, the caller's own work),
before the engine (gateway + API server + network), queue, prefill, decode, the rest of the engine span, and
after the engine (the answer's way back: a stream's delivery). A request belongs to the segment holding its
first send on the logs' clock (its request row), else the caller's span, its first attempt, its engine span.

Consumers (the ladder, the SLO, the findings) take a segment's ``latencies[metric]`` where its ``n`` > 0: they
are per-request figures on the named clock, better than a histogram's bucket bounds, and never to be compared
with another clock's figure as if one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from ..resources import time_range
from .records import Episode

SOURCE = "spans"
MIN_REQUESTS = 3  # an episode with fewer traced requests gets no split of its own
MAX_EPISODES = 12  # the episodes with the most traced requests, in time order
_secs = lambda a, b: (pl.col(a) - pl.col(b)).dt.total_microseconds() / 1e6  # noqa: E731
# the parts of the callers' latency: (label, expression, clock)
PARTS: list[tuple[str, pl.Expr, str]] = [
    # the caller's request span start to the attempt the engine answered: with no retry, the client's own work
    (
        "before the attempt (retries, backoff, the client)",
        pl.col("before_attempt_s"),
        "client",
    ),
    ("before the engine (gateway + API server + network)", pl.col("before_engine_s"), "engine - client"),
    ("queue", pl.col("span_queue_s"), "engine"),
    ("prefill", pl.col("span_prefill_s"), "engine"),
    ("decode", pl.col("span_decode_s"), "engine"),
    (
        "rest of the engine span",
        (
            pl.col("span_e2e_s") - pl.col("span_queue_s") - pl.col("span_prefill_s") - pl.col("span_decode_s")
        ).clip(lower_bound=0),
        "engine",
    ),
    ("after the engine (the answer's way back)", pl.col("after_engine_s"), "client - engine"),
]
# the per-request figures: (metric, expression, clock)
METRICS: list[tuple[str, pl.Expr, str]] = [
    ("ttft", pl.col("span_ttft_s"), "engine"),
    ("e2e", pl.col("span_e2e_s"), "engine"),
    ("queue", pl.col("span_queue_s"), "engine"),
    ("prefill", pl.col("span_prefill_s"), "engine"),
    ("decode", pl.col("span_decode_s"), "engine"),
    ("before_engine", pl.col("before_engine_s"), "engine - client"),
    ("caller_e2e", _secs("request_end", "request_start"), "client"),
    # the callers' own TTFT (their records, clock client) beside the engine span's, and the gap per request
    ("caller_ttft", pl.col("caller_ttft_s"), "client"),
    ("caller_minus_engine_ttft", pl.col("caller_ttft_s") - pl.col("span_ttft_s"), "client - engine"),
]
# figures not read off the spans: where they come from (the request rows' latency_source)
_OTHER_SOURCE = {"caller_ttft": "caller_ttft_source"}


@dataclass(frozen=True)
class SpanLatency:
    """In milliseconds: diagnosis.json keeps 4 decimals, and a queue of 31 µs is not 0."""

    metric: str
    clock: str
    n: int
    p50_ms: float | None
    p95_ms: float | None
    mean_ms: float | None
    source: str = SOURCE


@dataclass
class Segment:
    segment: str  # 'whole range', 'E3 · sustained · kv_pressure', 'step 2 (c=8)', 'outside every episode'
    kind: str  # range | ladder step | episode | outside episodes
    start: datetime | None
    end: datetime | None
    requests: int  # traced requests with an engine span
    latencies: dict[str, SpanLatency] = field(default_factory=dict)
    split: list[dict] = field(default_factory=list)  # {part, clock, mean_ms, n}
    # the engine spans against vLLM's histograms over the same step, where both exist (HistCheck.doc())
    histogram_check: list[dict] = field(default_factory=list)
    key: str | None = None  # the episode id or ladder step it is

    def doc(self) -> dict:
        d = asdict(self)
        d["latencies"] = {k: asdict(v) for k, v in self.latencies.items()}
        return d


# the engine span attributes vLLM also observes in a histogram (diagnosis' metrics_histograms)
HIST = {"ttft": "span_ttft_s", "e2e": "span_e2e_s", "queue": "span_queue_s", "prefill": "span_prefill_s"}
HIST |= {"decode": "span_decode_s"}


@dataclass(frozen=True)
class HistCheck:
    """One figure seen twice on the engine's clock: its spans and its histogram. The spans' value is read at the
    histogram's own rank (the smallest value with at least 95 % of the requests at or below it, Prometheus'
    histogram_quantile), so a p95 interpolated between two requests is not taken for a disagreement."""

    metric: str
    spans_n: int
    spans_p95_at_rank_ms: float
    histogram: str  # the metric's name
    histogram_n: float
    bucket: str  # where the histogram puts its p95
    agree: bool  # the spans' value falls in that bucket
    clock: str = "engine"

    def doc(self) -> dict:
        return asdict(self)


def _hist_checks(part: pl.DataFrame, hists: dict | None) -> list[dict]:
    out = []
    for metric, col in HIST.items():
        h = (hists or {}).get(metric) or {}
        v = part[col].drop_nulls().sort()
        if v.len() == 0 or h.get("p95_bucket_lo") is None or h.get("p95_bucket_hi") is None:
            continue
        at = float(v[math.ceil(0.95 * v.len()) - 1])  # type: ignore[arg-type]
        agree = bool(h["p95_bucket_lo"] < at <= h["p95_bucket_hi"] or (at == 0 and h["p95_bucket_lo"] == 0))
        out.append(
            HistCheck(
                metric, v.len(), at * 1000, h.get("metric") or "", h.get("n") or 0, h["p95_bucket"], agree
            )
        )
    return [c.doc() for c in out]


def _source(rs: pl.DataFrame, metric: str) -> str:
    col = _OTHER_SOURCE.get(metric)
    got = rs[col].drop_nulls().unique().sort().to_list() if col else [SOURCE]
    return ", ".join(got) if got else "unknown"


def _clock(clk: str, rs: pl.DataFrame) -> str:
    """A difference of two processes' stamps names the offset removed from it (correlate/span_skew.py)."""
    if " - " in clk and "clock_offset_s" in rs.columns and rs["clock_offset_s"].is_not_null().any():
        return f"{clk}, the engine's clock offset removed (traces.clock_skew)"
    return clk


def _figures(seg: Segment, rs: pl.DataFrame) -> Segment:
    for metric, expr, clk in METRICS:
        clk = (
            clk if metric == "caller_minus_engine_ttft" else _clock(clk, rs)
        )  # two durations: no offset in it
        v = rs.select(expr.alias("v"))["v"].drop_nulls()
        seg.latencies[metric] = SpanLatency(
            metric,
            clk,
            v.len(),
            float(v.median()) * 1000 if v.len() else None,  # type: ignore[arg-type]
            float(v.quantile(0.95, "linear")) * 1000 if v.len() else None,  # type: ignore[arg-type]
            float(v.mean()) * 1000 if v.len() else None,  # type: ignore[arg-type]
            _source(rs, metric),
        )
    for part, expr, clk in PARTS:
        clk = _clock(clk, rs)
        v = rs.select(expr.alias("v"))["v"].drop_nulls()
        seg.split.append(
            {"part": part, "clock": clk, "n": v.len(), "mean_ms": float(v.mean()) * 1000 if v.len() else None}  # type: ignore[arg-type]
        )
    return seg


def _in(rs: pl.DataFrame, lo: datetime | None, hi: datetime | None) -> pl.DataFrame:
    t = pl.col("_t")
    keep = pl.lit(True)
    if lo is not None:
        keep = keep & (t >= lo)
    if hi is not None:
        keep = keep & (t <= hi)
    return rs.filter(keep)


def analyse(out: Path, rng: time_range.Range, eps: list[Episode], steps: list[dict]) -> dict | None:
    """diagnosis.json's ``spans``: None when no request has an engine span."""
    p = Path(out) / "request_spans.parquet"
    if not p.exists():
        return None
    rs = pl.read_parquet(p).filter(pl.col("engine_spans").is_not_null())
    # a request's place in the steps and episodes is read on the logs' clock (its request row, put on the
    # reference clock by correlate), the episodes' and steps' own: the spans' clock may be skewed against it
    when = [c for c in ("ts_start", "request_start", "client_start", "engine_start") if c in rs.columns]
    rs = rs.with_columns(pl.coalesce(*when).alias("_t"))
    for c, t in (("caller_ttft_s", pl.Float64), ("caller_ttft_source", pl.String)):
        if c not in rs.columns:  # request_spans written before the callers' TTFT was kept: unknown
            rs = rs.with_columns(pl.lit(None, t).alias(c))
    if rng:
        rs = _in(rs, rng.since, rng.until)
    if rs.height == 0:
        return None
    segs = [_figures(Segment("whole range", "range", rs["_t"].min(), rs["_t"].max(), rs.height), rs)]  # type: ignore[arg-type]
    for s in steps:
        part = _in(rs, s.get("ts_start"), s.get("ts_end"))
        if part.height:
            label = f"step {s['step']} ({s.get('mode') or 'load'} {s.get('concurrency'):g})"
            seg = Segment(
                label, "ladder step", s.get("ts_start"), s.get("ts_end"), part.height, key=str(s["step"])
            )
            seg = _figures(seg, part)
            seg.histogram_check = _hist_checks(part, s.get("metrics_histograms"))
            segs.append(seg)
    found = []
    for e in eps:
        part = _in(rs, e.get("start"), e.get("end"))
        if part.height >= MIN_REQUESTS:
            found.append((e, part))
    found = sorted(sorted(found, key=lambda x: -x[1].height)[:MAX_EPISODES], key=lambda x: x[0]["start"])
    # episodes of one time seen by two sources of a replica (its log, its scrapes) hold the same requests: one
    same: dict[tuple, list[Episode]] = {}
    for e, part in found:
        same.setdefault(
            (tuple(sorted(part["trace_id"].to_list())), e.get("class"), e.get("signal")), []
        ).append(e)
    for (_, cls, signal), group in same.items():
        e = group[0]
        part = _in(rs, e.get("start"), e.get("end"))
        ids = ", ".join(g["episode_id"] for g in group)
        seg = Segment(
            f"{ids} · {cls} · {signal}", "episode", e.get("start"), e.get("end"), part.height, key=ids
        )
        segs.append(_figures(seg, part))
    if eps:
        inside = pl.lit(False)
        for e in eps:
            inside = inside | pl.col("_t").is_between(e["start"], e["end"])
        calm = rs.filter(~inside)
        if calm.height >= MIN_REQUESTS:
            segs.append(
                _figures(Segment("outside every episode", "outside episodes", None, None, calm.height), calm)
            )
    return {
        "source": SOURCE,
        "clocks": {
            "engine": "vLLM's llm_request span attributes",
            "client": "the caller's spans",
            "engine - client": "an engine span's start minus its parent attempt's start: two processes' clocks",
        },
        "requests_with_engine_span": rs.height,
        "segments": [s.doc() for s in segs],
        "histogram_check": _hist_summary(segs),
    }


def _hist_summary(segs: list[Segment]) -> dict | None:
    """How many of the figures seen both ways agree, and each that does not (shown, never averaged away)."""
    checks = [(g.segment, c) for g in segs for c in g.histogram_check]
    if not checks:
        return None
    return {
        "checked": len(checks),
        "agree": sum(c["agree"] for _, c in checks),
        "disagree": [
            f"{seg} {c['metric']}: spans {c['spans_p95_at_rank_ms'] / 1000:.3f} s over {c['spans_n']} requests, "
            f"{c['histogram']} {c['bucket']} over {c['histogram_n']:g}"
            for seg, c in checks
            if not c["agree"]
        ],
        "clock": "engine",
        "how": "p95 of the engine spans read at the histogram's rank (Prometheus' histogram_quantile), against the "
        "bucket the histogram puts its p95 in, over the same ladder step",
    }


def by_episode(spans: dict | None) -> dict[str, dict]:
    """Episode id -> its segment of ``analyse``'s answer (episodes of one time share one segment)."""
    out: dict[str, dict] = {}
    for seg in (spans or {}).get("segments") or []:
        if seg["kind"] == "episode" and seg.get("key"):
            for eid in seg["key"].split(", "):
                out[eid] = seg
    return out
