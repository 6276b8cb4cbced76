"""Fixed-width time windows over every layer: load, retries, in-flight work, server state, latency.

Windows are aligned on multiples of the width (epoch-based), cover the whole observed span and are
all kept: an empty window is real (zero counts, null statistics). Counts are bucketed with one
vectorised floor division per table; the in-flight means integrate a +1/-1 step function (a sweep
over sorted start/end events, window edges inserted as events) so a request that spans many windows
costs two events, not one row per window.

The diagnosis builds a reduced table of the same columns when no correlation ran (``diagnose.tables.
build_windows``): its docstring says why the two stay apart.
"""

from __future__ import annotations

import math
import re

import polars as pl

from .. import schemas
from .broken import READ_TIMEOUT
from .exprs import secs, to_ts

NICE_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
TARGET_WINDOWS = 120
_WIDTH = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?\s*$")
_UNIT = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, None: 1}
# server_events kinds (parsers/vllm_server.py)
OOM = r"^oom$"
DEATH = r"^engine_dead$"  # the harmless shutdown traceback is 'shutdown_error'
RESTART = r"^server_start$"
PREEMPT = r"^preemption$"


def parse_width(text: str | None) -> float | None:
    if not text:
        return None
    m = _WIDTH.match(text)
    if not m:
        raise ValueError(f"window width {text!r}: expected e.g. '10s', '500ms', '1m'")
    w = float(m.group(1)) * _UNIT[m.group(2)]
    if w <= 0:
        raise ValueError(f"window width {text!r} must be positive")
    return w


# the most windows a run has: the grid, the tables and the charts cost what it holds (a 4 KB input with one time
# in year 5138 made a million windows); a width that would need more is widened, and the notes say so
MAX_WINDOWS = 5000


def capped_width(span_s: float, width: float) -> tuple[float, str | None]:
    """``width``, or the nice width (a whole number of them past a day) that keeps ``span_s`` in MAX_WINDOWS."""
    if span_s / width <= MAX_WINDOWS:
        return width, None
    raw = span_s / MAX_WINDOWS
    wide = float(next((n for n in NICE_S if n >= raw), math.ceil(raw / NICE_S[-1]) * NICE_S[-1]))
    return wide, (
        f"windows of {width:g} s over {span_s:,.0f} s would be {span_s / width:,.0f} windows: "
        f"widened to {wide:g} s (at most {MAX_WINDOWS:,})"
    )


def choose_width(span_s: float) -> float:
    """span / 120 rounded up to a nice width (1, 2, 5, 10, 15, 30, 60 s, ...)."""
    raw = max(span_s, 1.0) / TARGET_WINDOWS
    return float(next((n for n in NICE_S if n >= raw), NICE_S[-1]))


class Grid:
    def __init__(self, lo: float, hi: float, width: float):
        self.w = width
        self.origin = math.floor(lo / width) * width
        self.n = max(int(math.floor((hi - self.origin) / width)) + 1, 1)

    def idx(self, t: str | pl.Expr) -> pl.Expr:
        e = pl.col(t) if isinstance(t, str) else t
        return ((e - self.origin) / self.w).floor().cast(pl.Int64).clip(0, self.n - 1).alias("i")

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame({"i": pl.int_range(0, self.n, eager=True).cast(pl.Int64)})

    def count(self, df: pl.DataFrame, t: str, name: str, weight: str | pl.Expr | None = None) -> pl.DataFrame:
        if weight is None:
            d = df.select(self.idx(t).alias("i"), pl.col(t).is_not_null().alias("_k"))
            agg = pl.len().cast(pl.Int64).alias(name)
        else:
            w = pl.col(weight) if isinstance(weight, str) else weight
            d = df.select(self.idx(t).alias("i"), pl.col(t).is_not_null().alias("_k"), w.alias("_w"))
            agg = pl.col("_w").sum().cast(pl.Int64).alias(name)
        return d.filter(pl.col("_k")).group_by("i").agg(agg)  # the key and weight alone: no copy of df

    def inflight(self, df: pl.DataFrame, t0: str, t1: str, name: str) -> pl.DataFrame:
        """Mean number of [t0, t1) intervals open in each window: each interval adds its overlap with the
        window of its start and of its end, and 1 to every window wholly inside it (a difference array, so
        an interval costs a row whatever its length, and nothing is sorted)."""
        lo, hi = self.origin, self.origin + self.n * self.w
        iv = df.filter(pl.col(t0).is_not_null() & pl.col(t1).is_not_null() & (pl.col(t1) > pl.col(t0)))
        iv = iv.select(pl.col(t0).clip(lo, hi).alias("a"), pl.col(t1).clip(lo, hi).alias("b")).filter(
            pl.col("b") > pl.col("a")
        )
        ia = ((pl.col("a") - self.origin) / self.w).floor().cast(pl.Int64).clip(0, self.n - 1)
        ib = ((pl.col("b") - self.origin) / self.w).floor().cast(pl.Int64).clip(0, self.n - 1)
        iv = iv.select("a", "b", ia.alias("ia"), ib.alias("ib"))
        edge = pl.lit(self.origin) + (pl.col("ia") + 1) * self.w  # end of the start's window
        one = pl.col("ia") == pl.col("ib")
        head = iv.group_by(pl.col("ia").alias("i")).agg(
            pl.when(one).then(pl.col("b") - pl.col("a")).otherwise(edge - pl.col("a")).sum().alias("_p")
        )
        tail = (
            iv.filter(~one)
            .group_by(pl.col("ib").alias("i"))
            .agg((pl.col("b") - (pl.lit(self.origin) + pl.col("ib") * self.w)).sum().alias("_p"))
        )
        inner = iv.filter(pl.col("ib") > pl.col("ia") + 1)
        diff = pl.concat(
            [
                inner.select((pl.col("ia") + 1).alias("i"), pl.lit(1, pl.Int64).alias("_d")),
                inner.select(pl.col("ib").alias("i"), pl.lit(-1, pl.Int64).alias("_d")),
            ]
        )
        diff = diff.group_by("i").agg(pl.col("_d").sum())
        part = pl.concat([head, tail]).group_by("i").agg(pl.col("_p").sum())
        return (
            self.frame()
            .join(diff, on="i", how="left")
            .join(part, on="i", how="left")
            .with_columns(pl.col("_d").fill_null(0).cum_sum(), pl.col("_p").fill_null(0.0))
            .select("i", (pl.col("_d") + pl.col("_p") / self.w).alias(name))
            .filter(pl.col(name) != 0)
        )

    def spans(self, df: pl.DataFrame, t0: str, t1: str, name: str) -> pl.DataFrame:
        """How many [t0, t1] intervals touch each window."""
        d = df.filter(pl.col(t0).is_not_null() & pl.col(t1).is_not_null()).select(
            pl.int_ranges(self.idx(t0), self.idx(t1) + 1).alias("i")
        )
        return d.explode("i").group_by("i").agg(pl.len().cast(pl.Int64).alias(name))


def build(
    grid: Grid,
    req: pl.DataFrame,
    ca: pl.DataFrame,
    gr: pl.DataFrame,
    ex: pl.DataFrame,
    stats: pl.DataFrame,
    events: pl.DataFrame,
) -> tuple[pl.DataFrame, list[str]]:
    notes: list[str] = []
    g = grid
    gr = gr.filter(pl.col("inference"))
    # the answered requests; and those of vLLM's spans alone, which it finished (correlate/span_sources.py)
    done = pl.col("outcome") == "ok"
    if "origin" in req.columns:
        done = done | (pl.col("origin") == "spans (engine)")
    ok = req.filter(done).select("t0", "t1", "ttft_s", "e2e_s", "output_tokens", "latency_clock")
    clock = run_clock(ok)
    bad = req.filter(pl.col("outcome").is_in(["error", "timeout", "truncated"])).select("t1")
    # the streams the gateway cut itself after its 2xx (its read timeout): the gateway acting, as a 5xx or a retry is
    cut = req.filter(pl.col("mid_stream") == READ_TIMEOUT) if "mid_stream" in req.columns else req.clear()
    parts = [
        g.count(req, "t0", "arrivals"),
        g.count(ok, "t1", "completions"),
        g.count(bad, "t1", "errors"),
        g.count(ca.filter(pl.col("timed_out").fill_null(False)), "t1", "timeouts"),
        g.count(gr.filter(pl.col("status") >= 500), "t1", "gateway_5xx"),
        g.count(gr.filter(pl.col("status") == 499), "t1", "gateway_499"),
        g.count(cut, "t1", "gateway_cuts"),
        g.count(ca, "t0", "client_attempts"),
        g.count(ca.filter(pl.col("attempt").fill_null(1) > 1), "t0", "client_retries"),
        g.count(gr, "t0", "gateway_retries", (pl.col("n_attempts") - 1).clip(0)),
        g.count(ex, "t0", "server_requests"),
        g.count(ex, "aborted", "server_aborts"),
        g.count(req, "t0", "_cohort_exec", "server_requests"),
        g.inflight(ca, "t0", "t1", "inflight_client"),
        g.inflight(gr, "t0", "t1", "inflight_gateway"),
        g.inflight(ex, "start", "end", "inflight_server"),
        _latency(g, req, ok, clock),
        _server_state(g, stats, notes),
        (pre := _preemptions(g, stats, events, notes)),
        g.count(events.filter(pl.col("kind").str.contains(OOM)), "t", "oom_events"),
        g.count(events.filter(pl.col("kind").str.contains(DEATH)), "t", "engine_deaths"),
        g.count(events.filter(pl.col("kind").str.contains(RESTART)), "t", "server_restarts"),
        g.spans(ex.filter(pl.col("orphaned").fill_null(False)), "left", "end", "orphaned"),
    ]
    w = g.frame()
    for p in parts:
        w = w.join(p, on="i", how="left")
    counts = [c for c, (t, _) in schemas.TABLES["windows"].items() if t == pl.Int64]
    w = w.with_columns(
        [pl.col(c).fill_null(0) for c in counts if c in w.columns]
        + [pl.col(c).fill_null(0.0) for c in ("inflight_client", "inflight_gateway", "inflight_server")]
    ).with_columns(
        to_ts(pl.lit(g.origin) + pl.col("i") * g.w).alias("ts"),
        pl.lit(g.w).alias("window_s"),
        pl.lit(clock, pl.String).alias("latency_clock"),
        pl.when(pl.col("arrivals") > 0)
        .then(pl.col("_cohort_exec") / pl.col("arrivals"))
        .alias("amplification"),
    )
    if "preemptions" not in pre.columns:
        w = w.with_columns(pl.lit(None, pl.Int64).alias("preemptions"))
    if ca.height == 0:
        w = w.with_columns(pl.lit(None, pl.Float64).alias("inflight_client"))
    if ex.height == 0:  # no vLLM request line in the input: its executions are unknown, not none
        w = w.with_columns(
            pl.lit(None, pl.Float64).alias("inflight_server"), pl.lit(None, pl.Float64).alias("amplification")
        )
    if gr.height == 0:
        w = w.with_columns(pl.lit(None, pl.Float64).alias("inflight_gateway"))
    if ex.height == 0:
        w = w.with_columns(pl.lit(None, pl.Float64).alias("inflight_server"))
    return schemas.conform(w.sort("i"), "windows"), notes


# the clocks of the requests' latencies, the caller's first: the windows' percentiles are on one of them
CLOCKS = ("client", "gateway", "engine")


def run_clock(ok: pl.DataFrame) -> str | None:
    """The clock of the run's latency percentiles: the first of CLOCKS any request that ended ok has figures on."""
    have = (
        set(ok["latency_clock"].drop_nulls().unique().to_list()) if "latency_clock" in ok.columns else set()
    )
    return next((c for c in CLOCKS if c in have), None)


def _latency(g: Grid, req: pl.DataFrame, ok: pl.DataFrame, clock: str | None) -> pl.DataFrame:
    q = []
    for col, name in (("ttft_s", "ttft"), ("e2e_s", "e2e")):
        for p in (50, 95, 99):
            q.append(pl.col(col).quantile(p / 100, "linear").alias(f"{name}_p{p}"))
    # figures on another clock are not mixed in (a gateway's e2e beside the callers' is another measure)
    on = ok.filter(pl.col("latency_clock") == clock) if clock else ok.head(0)
    lat = on.filter(pl.col("t0").is_not_null()).group_by(g.idx("t0")).agg(q)
    arr = (
        req.filter(pl.col("t0").is_not_null())
        .group_by(g.idx("t0"))
        .agg(
            pl.col("prompt_tokens").mean().alias("prompt_tokens_mean"),
            pl.col("max_tokens").mean().alias("max_tokens_mean"),
        )
    )
    out = (
        ok.filter(pl.col("t1").is_not_null())
        .group_by(g.idx("t1"))
        .agg(pl.col("output_tokens").mean().alias("output_tokens_mean"))
    )
    return g.frame().join(lat, on="i", how="left").join(arr, on="i", how="left").join(out, on="i", how="left")


def _server_state(g: Grid, stats: pl.DataFrame, notes: list[str]) -> pl.DataFrame:
    """Running / waiting / KV per window: the log's stats lines when present, else the metrics."""
    st = stats.filter(pl.col("ts").is_not_null()).with_columns(
        secs("ts").alias("t"), pl.coalesce("kv_usage", "gpu_kv_usage", "cpu_kv_usage").alias("kv")
    )
    has_log = st.filter((pl.col("origin") == "log") & pl.col("running").is_not_null()).height > 0
    st = st.filter(pl.col("origin") == ("log" if has_log else "prometheus"))
    if st.height == 0:
        return (
            g.frame()
            .head(0)
            .with_columns(
                *(
                    pl.lit(None, pl.Float64).alias(c)
                    for c in (
                        "running_max",
                        "running_mean",
                        "waiting_max",
                        "waiting_mean",
                        "kv_max",
                        "kv_mean",
                    )
                )
            )
        )
    if not has_log:
        notes.append(
            "running/waiting/KV per window come from the Prometheus metrics (no stats lines in the log)"
        )
    # several replicas: per replica first, then summed (requests) or pooled (KV usage)
    per = st.group_by(g.idx("t"), "replica").agg(
        pl.col("running").max().alias("rmax"),
        pl.col("running").mean().alias("rmean"),
        pl.col("waiting").max().alias("wmax"),
        pl.col("waiting").mean().alias("wmean"),
        pl.col("kv").max().alias("kmax"),
        pl.col("kv").mean().alias("kmean"),
    )
    return per.group_by("i").agg(
        pl.col("rmax").sum().cast(pl.Float64).alias("running_max"),
        pl.col("rmean").sum().alias("running_mean"),
        pl.col("wmax").sum().cast(pl.Float64).alias("waiting_max"),
        pl.col("wmean").sum().alias("waiting_mean"),
        pl.col("kmax").max().alias("kv_max"),
        pl.col("kmean").mean().alias("kv_mean"),
    )


def _preemptions(g: Grid, stats: pl.DataFrame, events: pl.DataFrame, notes: list[str]) -> pl.DataFrame:
    st = stats.filter(pl.col("preemptions").is_not_null()).with_columns(secs("ts").alias("t"))
    for origin in ("prometheus", "log"):
        s = st.filter(pl.col("origin") == origin)
        if s.height:
            return g.count(s, "t", "preemptions", "preemptions")
    warn = events.filter(  # a KV connector's failed load is recomputed, not preempted (public-2 n19)
        pl.col("kind").str.contains(PREEMPT) & (pl.col("preemption_mode").fill_null("") != schemas.RESCHEDULE)
        if "preemption_mode" in events.columns
        else pl.col("kind").str.contains(PREEMPT)
    )
    if warn.height:
        notes.append(
            "preemptions per window count the V0 preemption warnings, which vLLM prints only for some "
            "preemptions (1, 51, 101, ...): a lower bound"
        )
        return g.count(warn, "t", "preemptions")
    notes.append("no preemption count in any source (vLLM V1 logs none; no metrics): preemptions left null")
    return pl.DataFrame(schema={"i": pl.Int64})
