"""What moved between the runs: the figures of each matched step and of the whole runs, A beside B, each
on its clock, with whether the change is beyond the sampling noise.

Every latency names its clock (logscope.compare.sources): the callers' TTFT and e2e (client records, a load
test's per-request results), the gateway's span of each completed request, the engine's histograms (TTFT, e2e, queue time).
A row compares one clock only: a figure of the engine's clock is never set against the callers' one; when a
figure's clock differs between the runs (callers' records in A, only a gateway log in B) the row says so and
compares nothing. The gap between the callers' TTFT and the engine's (means) is a figure of its own: the time
before the engine's clock starts.

The noise of a figure computed from requests (success share, the callers' TTFT / e2e percentiles, the gateway's
e2e, amplification) is a bootstrap: each run's requests are resampled with replacement, the figure computed
again, and the 95 % interval of B − A taken over the resamples; a change is beyond the noise when that interval
excludes 0. A histogram's p95 is bootstrapped from its bucket counts (logscope.compare.engine) and moves beyond
the noise only into another bucket. Event counts (preemptions, retries, completions, orphaned executions) are
judged as Poisson counts: a change is beyond the noise when |B − A| > 2·√(A + B) (about 95 %; bursty events
such as preemptions vary more, so this is a floor). Server gauges (waiting, KV usage) and exact means (a
histogram's _sum / _count) have no per-request figures to resample: their noise is not estimated, and they say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from ..correlate.stream_failures import MAYBE
from ..diagnose.stated import unknown as unknown_of
from ..report.fmt import num
from ..scalars import float_value, time_value
from . import censored, engine, reach, sources
from .counters import increase
from .noise import MIN_N, agg, judge
from .runs import Run
from .traffic import Step, requests_of

CLIENT, GATEWAY, ENGINE = "client", "gateway", "engine"
PREEMPTIONS = "vllm:num_preemptions_total"


@dataclass(frozen=True)
class Metric:
    name: str
    title: str
    better: str | None  # "lower" | "higher" | None (neither: context)
    unit: str  # count | share | s | tps | x
    stat: str | None = None  # how per-request samples give it: share | p50 | p95 | mean | count (Poisson)
    clock: str | None = None  # client | gateway | engine; None: the data's (outcomes) or none (counts)


METRICS = (
    Metric("requests", "logical requests", None, "count"),
    Metric("completed", "completed ok", "higher", "count", "count"),
    Metric("success_share", "success share", "higher", "share", "share"),
    Metric("ttft_p50", "TTFT p50 (callers)", "lower", "s", "p50", CLIENT),
    Metric("ttft_p95", "TTFT p95 (callers)", "lower", "s", "p95", CLIENT),
    Metric("e2e_p50", "e2e p50 (callers)", "lower", "s", "p50", CLIENT),
    Metric("e2e_p95", "e2e p95 (callers)", "lower", "s", "p95", CLIENT),
    Metric("gateway_e2e_p95", "e2e p95 (gateway)", "lower", "s", "p95", GATEWAY),
    Metric("engine_ttft_p95", "TTFT p95 (engine)", "lower", "s", "p95", ENGINE),
    Metric("engine_e2e_p95", "e2e p95 (engine)", "lower", "s", "p95", ENGINE),
    Metric("queue_p95", "queue time p95 (engine)", "lower", "s", "p95", ENGINE),
    Metric("queue_mean_s", "queue time, mean (engine)", "lower", "s", None, ENGINE),
    Metric("span_ttft_p95", "TTFT p95 ({owner} spans, clock engine)", "lower", "s", "p95", ENGINE),
    Metric("span_queue_p95", "queue time p95 ({owner} spans, clock engine)", "lower", "s", "p95", ENGINE),
    Metric("ttft_outside_s", "callers' TTFT beyond the engine's (means)", "lower", "s", "means", "client − engine"),
    Metric("preemptions", "preemptions", "lower", "count", "count", ENGINE),
    Metric("waiting_max", "waiting, max", "lower", "count", None, ENGINE),
    Metric("waiting_mean", "waiting, mean", "lower", "count", None, ENGINE),
    Metric("kv_max", "KV usage, max", None, "share", None, ENGINE),
    Metric("throughput_tps", "output tokens/s", "higher", "tps"),
    Metric("client_retries", "client retries", "lower", "count", "count", CLIENT),
    Metric("gateway_retries", "gateway retries", "lower", "count", "count", GATEWAY),
    Metric("amplification", "{engine} executions per logical request", "lower", "x", "mean"),
    Metric("orphaned", "orphaned executions", "lower", "count", "count"),
    Metric("orphan_s", "orphaned generation (s)", "lower", "s"),
)  # fmt: skip
BY_NAME = {m.name: m for m in METRICS}

# the engine's histogram figures: (metric name, histogram, statistic)
HIST = (("engine_ttft_p95", "ttft", "p95"), ("engine_e2e_p95", "e2e", "p95"), ("queue_p95", "queue", "p95"),
        ("queue_mean_s", "queue", "mean"))  # fmt: skip
SPAN_COLS = {
    "engine_ttft_p95": "ttft_s",
    "engine_e2e_p95": "e2e_s",
    "queue_p95": "queue_s",
    "queue_mean_s": "queue_s",
}


@dataclass
class Figures:
    """One run's figures over one step (or the whole run), with the per-request samples behind some and, per
    figure, its clock, source and (for a histogram's quantile) the bucket it lies in."""

    values: dict[str, float | int | None]
    samples: dict[str, pl.Series]
    window: tuple[datetime | None, datetime | None]
    meta: dict[str, dict] = field(default_factory=dict)
    # what a setting needs to act, over the range (logscope.compare.reach): running max, the gateway's own acts
    facts: dict[str, int | None] = field(default_factory=dict)


def _arr(s: pl.Series) -> pl.Series:
    return s.drop_nulls().cast(pl.Float64)


def _stat(x: pl.Series, stat: str) -> float:
    return pl.DataFrame({"v": x}).select(agg(stat)).item()


def _mode(s: pl.Series) -> str | None:
    s = s.drop_nulls()
    return None if s.len() == 0 else str(s.value_counts(sort=True).row(0)[0])


def _window(run: Run, r: pl.DataFrame, step: Step | None, window: tuple | None):
    if step is not None:
        return window if window is not None else (step.ts_start, step.ts_end)
    w = run.table("windows")
    if w.height:  # the whole run: every window, every sample
        return w["ts"].min(), w["ts"].max()
    return (r["ts_start"].min(), r["ts_end"].max()) if r.height else (None, None)


def figures(run: Run, step: Step | None, window: tuple | None = None) -> Figures:
    """The figures of ``step`` (None: the whole run). Server gauges, counters and histograms are read over
    ``window`` (traffic.windows: the step's sends and answers, what its load leaves behind draining into it)."""
    r = requests_of(run, step, sources.requests(run))
    lo, hi = _window(run, r, step, window)
    f = Figures({m.name: None for m in METRICS}, {}, (lo, hi))
    _requests(f, run, r)
    if step is None and (u := sources.untimed(run)):  # analyze's count, said beside the run's requests
        f.meta.setdefault("requests", {})["untimed"] = u.requests
        f.values["requests"] = r.height  # 0 where no request carries a time, as the traffic table says
    _gateway(f, run, r, step is None, lo, hi)
    _engine(f, run, step is None, lo, hi)
    for name, x in f.samples.items():
        stat = BY_NAME[name].stat
        if x.len() and f.values[name] is None and stat in MIN_N:
            f.values[name] = num(float(_stat(x, str(stat))))
    _outside(f)
    return f


def _requests(f: Figures, run: Run, r: pl.DataFrame) -> None:
    """The logical requests' figures: outcomes on the clock of the layer that defined them, the callers'
    latencies on theirs."""
    if r.height == 0:
        return
    v, smp = f.values, f.samples
    # over the requests whose outcome a record states (diagnose.stated, analyze's too): an unknown one is no failure
    stated = r.filter(pl.col("stated_outcome").is_not_null())
    ok = stated.filter(pl.col("stated_outcome") == "ok")
    clock, source = _mode(r["latency_clock"]), _mode(r["latency_source"])
    v["requests"] = r.height
    # the outcomes' layer is the record that stated them (the caller's, the gateway's, the engine's own end)
    by = _mode(stated["stated_by"]) if stated.height else None
    src = _mode(stated.filter(pl.col("stated_by") == by)["stated_source"]) if by else None
    for k in ("completed", "success_share"):
        f.meta[k] = {"clock": LAYER.get(by or "", clock), "source": src or source}
    if stated.height:
        v["completed"] = ok.height
        smp["success_share"] = (stated["stated_outcome"] == "ok").cast(pl.Float64)
    # the requests of unknown outcome, in analyze's words (diagnose.stated.Unknown): left out of both, and said so
    if unknown := unknown_of(r):
        for k in ("completed", "success_share"):
            f.meta[k]["unstated" if stated.height else "missing"] = unknown.text
    # ok answers a failed stream no evidence tied may belong to (requests.mid_stream): a success met is unknown
    maybe = int((ok["mid_stream"] == MAYBE).sum()) if "mid_stream" in ok.columns else 0
    if maybe:
        f.meta["success_share"]["uncertain"] = maybe
    callers = ok.filter(pl.col("latency_clock") == CLIENT)
    mine = r.filter(pl.col("latency_clock") == CLIENT)
    if callers.height:
        src = _mode(callers["latency_source"])
        for name, col in (
            ("ttft_p50", "ttft_s"),
            ("ttft_p95", "ttft_s"),
            ("e2e_p50", "e2e_s"),
            ("e2e_p95", "e2e_s"),
        ):
            x = _arr(callers[col])
            if x.len():
                smp[name] = x
                f.meta[name] = {"clock": CLIENT, "source": src}
        f.meta["_ttft_mean_callers"] = (
            {"value": num(float_value(x.mean()))} if (x := _arr(callers["ttft_s"])).len() else {}
        )
        censored.mark(f.meta, mine)  # over the answers alone, where too many callers gave up: a floor
    # each layer's figures only when its log is in the folder (the correlation fills 0 / 1 for a layer it lacks)
    engine_log = run.table("server_requests").height > 0
    if engine_log and r["server_requests"].drop_nulls().len():
        smp["amplification"] = r["server_requests"].fill_null(0).cast(pl.Float64)
    v["client_retries"] = _retries(mine["client_attempts"]) if mine.height else None
    f.meta["client_retries"] = {"clock": CLIENT, "source": sources.client_source_of(r)}
    orph = r["orphaned_executions"]
    if engine_log:
        v["orphaned"] = int(orph.fill_null(0).sum()) if orph.drop_nulls().len() else None
        v["orphan_s"] = num(r["orphan_s"].sum()) if r["orphan_s"].drop_nulls().len() else None
    tps = _throughput(ok)
    if tps is not None:
        v["throughput_tps"], f.meta["throughput_tps"] = tps, {"clock": clock, "source": source}
    for name, x in _span_samples(run, r).items():  # vLLM's own per-request spans, beside its histograms
        smp[name] = x
        f.meta[name] = {"clock": ENGINE, "source": "spans", "n": x.len()}


LAYER = {"caller": CLIENT, "gateway": GATEWAY, "engine": ENGINE}  # stated_by -> the clock of its layer


def _gateway(f: Figures, run: Run, r: pl.DataFrame, whole: bool, lo, hi) -> None:
    """The gateway's figures, each as analyze counts it. Its e2e: its span of each completed request (requests
    .gateway_e2e_s, its first receipt to the answer the caller got), never a 2xx whose answer broke off after it
    (truncated) nor one the caller gave up on: those are no served answers, and the row names how many it left
    out. Its retries: the correlation's, attempts beyond the first of each gateway request (windows), never a
    client's retry that came through it as a request of its own."""
    if run.table("gateway_attempts").height == 0:
        return
    seen = (
        r.filter(pl.col("gateway_requests").fill_null(0) > 0) if "gateway_e2e_s" in r.columns else r.clear()
    )
    x = _arr(seen.filter(pl.col("outcome") == "ok")["gateway_e2e_s"]) if seen.height else None
    if x is not None and x.len():
        f.samples["gateway_e2e_p95"] = x
        f.meta["gateway_e2e_p95"] = {"clock": GATEWAY, "source": "gateway_log", "left_out": _left_out(seen)}
    w = _windows(run, whole, lo, hi)
    if w.height and "gateway_retries" in w.columns:
        f.values["gateway_retries"] = int(w["gateway_retries"].fill_null(0).sum())
        f.meta["gateway_retries"] = {"clock": GATEWAY, "source": "gateway_log"}


def _left_out(seen: pl.DataFrame) -> dict[str, int]:
    """The requests through the gateway that ended without a served answer, by outcome (a truncated one by what
    broke it off: requests.mid_stream)."""
    bad = seen.filter(pl.col("outcome").fill_null("unknown") != "ok")
    how = pl.col("mid_stream") if "mid_stream" in bad.columns else pl.lit(None, pl.String)
    key = pl.when(pl.col("outcome") == "truncated").then(
        pl.concat_str(pl.lit("truncated, "), how.fill_null("cut"))
    )
    got = bad.group_by(pl.coalesce(key, pl.col("outcome").fill_null("unknown")).alias("k")).len()
    return {str(k): int(n) for k, n in sorted(got.iter_rows())}


def _windows(run: Run, whole: bool, lo, hi) -> pl.DataFrame:
    """The windows of the range: a window belongs to the step its middle falls in."""
    w = run.table("windows")
    if whole or lo is None or hi is None or w.height == 0:
        return w
    mid = pl.col("ts") + pl.duration(milliseconds=(pl.col("window_s") * 500).cast(pl.Int64))
    return w.filter((mid >= lo) & (mid < hi))


def _engine(f: Figures, run: Run, whole: bool, lo, hi) -> None:
    """The engine's clock: its histograms over the range, else its request spans; its counters and gauges."""
    if lo is None or hi is None:
        return
    span = (None, None) if whole else (lo, hi)
    spans = sources.between(sources.engine_spans(run), *span)
    for name, fig, stat in HIST:
        got = engine.measure(run, fig, *span)
        if got is not None and got.get(stat) is not None:
            _from_histogram(f, run, name, fig, stat, got, span)
        elif spans.height and _arr(spans[SPAN_COLS[name]]).len():
            x = _arr(spans[SPAN_COLS[name]])
            f.samples[name] = x
            f.values[name] = num(float(_stat(x, "mean" if stat == "mean" else "p95")))
            f.meta[name] = {"clock": ENGINE, "source": "spans", "n": x.len()}
            if name == "engine_ttft_p95":
                f.meta["_ttft_mean_engine"] = {"value": num(float_value(x.mean()))}
    _gauges(f, run, whole, lo, hi)


def _from_histogram(f: Figures, run: Run, name: str, fig: str, stat: str, got: dict, span) -> None:
    f.values[name] = num(got[stat])
    meta = {"clock": ENGINE, "source": "engine_histogram", "n": got["n"]}
    if stat == "p95":
        meta |= {"bucket": got.get("p95_bucket"), "bucket_bounds": engine.p95_bucket(got)}
        counts = engine.bucket_counts(run, fig, *span)
        if counts is not None:
            f.samples[name] = engine.pseudo_samples(*counts)
    f.meta[name] = meta
    if name == "engine_ttft_p95" and got.get("mean") is not None:
        f.meta["_ttft_mean_engine"] = {"value": num(got["mean"])}


def _gauges(f: Figures, run: Run, whole: bool, lo, hi) -> None:
    """Preemptions, waiting and KV usage over the range (its windows), and the engine's generation rate when the
    callers' tokens are unknown."""
    v = f.values
    w = _windows(run, whole, lo, hi)
    for name, col, how in (("preemptions", "preemptions", "sum"), ("waiting_max", "waiting_max", "max"),
                           ("waiting_mean", "waiting_mean", "mean"), ("kv_max", "kv_max", "max")):  # fmt: skip
        s = w[col].drop_nulls() if w.height else None
        if s is not None and s.len():
            got = int(s.sum()) if how == "sum" else num(getattr(s, how)())
            # the queue's max is a count of requests: '76', not '76.0'
            v[name] = int(round(got)) if name == "waiting_max" and got is not None else got
            f.meta[name] = {"clock": ENGINE, "source": _stats_source(run)}
    f.facts = reach.facts(w, run.table("gateway_attempts").height > 0)
    # preemptions from vLLM's counter when scraped: the source that saw most (a folder holding the same server's
    # scrapes twice, a dump and the raw /metrics, has its windows count them twice)
    m = run.table("server_metrics")
    got = increase(m, PREEMPTIONS, *((None, None) if whole else (lo, hi))) if m.height else None
    if got is not None:
        v["preemptions"] = int(round(got))
        f.meta["preemptions"] = {"clock": ENGINE, "source": "engine_metrics"}
    if v["throughput_tps"] is None:
        tps = engine.generated_tps(run, lo, hi)
        if tps is None:
            st = run.table("server_stats")
            st = st if whole else st.filter((pl.col("ts") >= lo) & (pl.col("ts") < hi))
            g = st["gen_tps"].drop_nulls()
            tps = float_value(g.mean()) if g.len() else None
        if tps is not None:
            v["throughput_tps"] = num(tps)
            f.meta["throughput_tps"] = {"clock": ENGINE, "source": "engine_metrics"}


def _stats_source(run: Run) -> str:
    """Where the windows' server gauges came from: vLLM's metrics when scraped, else its stats log lines."""
    st = run.table("server_stats")
    scraped = "origin" in st.columns and (st["origin"] == "prometheus").any()
    return "engine_metrics" if scraped else "engine_log"


def _outside(f: Figures) -> None:
    """The callers' TTFT beyond the engine's, as a difference of means (additive, unlike percentiles): the time
    a request spent before the engine's clock started (the gateway, the API server, a queue in front)."""
    a = f.meta.pop("_ttft_mean_callers", {}).get("value")
    b = f.meta.pop("_ttft_mean_engine", {}).get("value")
    if a is not None and b is not None:
        f.values["ttft_outside_s"] = num(a - b)
        f.meta["ttft_outside_s"] = {"clock": "client − engine", "source": "means of both", "engine_mean": b}


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
    span = (time_value(ok["ts_end"].max()) - time_value(ok["ts_start"].min())).total_seconds()
    return num(float(t.sum()) / span) if span > 0 else None


def compare(fa: Figures, fb: Figures, scope: str, named: str | None = None) -> list[dict]:
    """One row per figure: A, B (each with its clock and source), the change, whether it is beyond the noise,
    and which way is better. A figure whose clock differs between the runs is shown, never compared. ``named``:
    the runs' one engine (settings.engine_name), named in the rows' titles."""
    rows = []
    for m in METRICS:
        a, b = fa.values[m.name], fb.values[m.name]
        ma, mb = fa.meta.get(m.name, {}), fb.meta.get(m.name, {})
        clock_a, clock_b = ma.get("clock", m.clock), mb.get("clock", m.clock)
        row: dict = {
            "name": m.name,
            "title": sources.titled(m.title, named),
            "unit": m.unit,
            "better": m.better,
            "clock": clock_a if clock_a == clock_b or b is None else (clock_b if a is None else None),
            "source": {
                "a": ma.get("source") if a is not None else None,
                "b": mb.get("source") if b is not None else None,
            },
            "bucket": {"a": ma.get("bucket"), "b": mb.get("bucket")}
            if ma.get("bucket") or mb.get("bucket")
            else None,
            # the requests a figure of served answers did not count, by outcome (gateway_e2e_p95's; null: none)
            "left_out": {"a": ma.get("left_out") or None, "b": mb.get("left_out") or None}
            if ma.get("left_out") or mb.get("left_out")
            else None,
            "a": a,
            "b": b,
            "change": None,
            "change_rel": None,
            "change_bounds": None,  # a histogram's quantile: the range of B − A its two buckets allow
            "bucket_bounds": None,
            "interval": None,
            "beyond_noise": None,
            "noise": "",
            "direction": None,
        }
        if a is not None and b is not None and clock_a != clock_b:
            row["noise"] = f"on different clocks (A: {clock_a}, B: {clock_b}): not compared"
            rows.append(row)
            continue
        if a is not None and b is not None and (why := censored.noise(ma, mb)):
            row["noise"] = why
            rows.append(row)
            continue
        if a is not None and b is not None:
            row["change"] = num(b - a)
            row["change_rel"] = num((b - a) / abs(a)) if a else None
            ba, bb = ma.get("bucket_bounds"), mb.get("bucket_bounds")
            if ba is not None and bb is not None:  # a histogram's quantile: the buckets are the figures
                row["change_bounds"], row["change_rel"] = engine.change_bounds(ba, bb), None
        if row["bucket"]:  # each side's bucket as numbers (an open end null), for a machine or a chart
            row["bucket_bounds"] = {
                s: [num(x) for x in bb_] if (bb_ := m_.get("bucket_bounds")) else None
                for s, m_ in (("a", ma), ("b", mb))
            }
        row["noise"], row["interval"], row["beyond_noise"] = judge(m, fa, fb, scope, a, b)
        row["noise"] += _unstated((ma, a), (mb, b)) + sources.untimed_said(ma, mb)
        row["direction"] = _direction(m, row)
        rows.append(row)
    return rows


def _unstated(*sides: tuple[dict, object]) -> str:
    """What an outcome figure lacks (moves._requests), in analyze's words: a side's unknown one, its requests of
    unknown outcome ('1 unknown (no caller's or gateway's record)'); those a known one left out; '' when nothing."""
    said = []
    for s, (m, x) in zip("AB", sides, strict=True):
        if x is None and m.get("missing"):
            said.append((s, str(m["missing"])))
        elif x is not None and m.get("unstated"):
            said.append((s, f"{m['unstated']} left out"))
    if len(said) == 2 and said[0][1] == said[1][1]:
        return f" (in each: {said[0][1]})"
    return f" ({'; '.join(f'{s}: {t}' for s, t in said)})" if said else ""


GAUGE_MOVE = 0.25  # a figure without a noise estimate (gauges, exact means) counts as moved past this change
GAUGE_FLOOR = {"s": 0.05, "count": 1.0}  # ... and past this much in its unit (0 -> 2 ms of queue is no move)


def gauge_moved(row: dict) -> bool:
    """Whether a figure without a noise estimate moved: the larger of A and B more than GAUGE_MOVE above the smaller
    (a ratio, so that B against A says what A against B says: 481 -> 640 tok/s, +33 %, had moved and 640 -> 481,
    -25 %, had not), or one side 0 or of the other sign."""
    ch, a, b = row["change"], row["a"], row["b"]
    if ch is None or abs(ch) < GAUGE_FLOOR.get(row["unit"], 0.0):
        return False
    if not isinstance(a, int | float) or not isinstance(b, int | float) or a * b <= 0:
        return True
    return max(abs(a), abs(b)) > (1 + GAUGE_MOVE) * min(abs(a), abs(b))


def _direction(m: Metric, row: dict) -> str | None:
    """better | worse | none (no change) | same bucket (a histogram's quantiles in one bucket) | within noise | small (no noise estimate, a change below GAUGE_MOVE) |
    None (no side is better, unknown, or too few requests to tell)."""
    ch = row["change"]
    if ch is None or m.better is None:
        return None
    if (row.get("bucket") or {}).get("a") and row["bucket"]["a"] == row["bucket"].get("b"):
        return "same bucket"  # the histogram cannot tell where either lies inside it: no move, and no 'none'
    if ch == 0:
        return "none"
    if row["beyond_noise"] is False:
        return "within noise"
    if row["beyond_noise"] is None:
        if m.stat is not None:  # a per-request figure with too few requests: no side is shown better
            return None
        if not gauge_moved(row):
            return "small"
    return "better" if (ch < 0) == (m.better == "lower") else "worse"
