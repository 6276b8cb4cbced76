"""Abnormal stretches of every signal, and their grouping into episodes (the rules: ``episodes``)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from ..scalars import time_value
from . import detect, failures, figures, slow
from .context import Context

# signals of the requests of the whole folder (replica ""), as opposed to one server's
REQUEST_SIGNALS = ("errors", "retries", "orphans", "ttft", "e2e")


# ---------------------------------------------------------------- stretches per signal


def _series_stretches(
    ctx: Context,
    name: str,
    df: pl.DataFrame,
    col: str,
    rule: detect.Rule,
    merge_gap: float | None = None,
    end_pad_s: float = 0.0,
) -> pl.DataFrame:
    th = ctx.th
    df = df.filter(pl.col(col).is_not_null())
    if df.height == 0:
        return pl.DataFrame()
    st = detect.stretches(
        df.select("replica", "ts", col),
        col,
        rule,
        th.mad_k,
        merge_gap or th.merge_gap_s,
        th.max_sample_gap_factor,
    )
    if st.height == 0:
        return pl.DataFrame()
    last = df.group_by("replica").agg(pl.col("ts").max().alias("last_sample"))
    return st.join(last, on="replica", how="left").with_columns(
        pl.lit(name).alias("signal"),
        pl.col("end") + timedelta(seconds=end_pad_s),
        (pl.col("last_sample") + timedelta(seconds=end_pad_s)),
    )


def _windowed(
    ctx: Context, name: str, value: pl.Expr, rule: detect.Rule, skip_cold: bool = False
) -> pl.DataFrame:
    w = ctx.inputs.windows
    if w.height == 0:
        return pl.DataFrame()
    df = w.select(pl.lit("").alias("replica"), "ts", value.alias("v"))
    if skip_cold and ctx.cold:
        pad = timedelta(seconds=ctx.inputs.window_s)
        df = df.filter(figures.outside("ts", [(a - pad, b) for a, b in ctx.cold]))
    return _series_stretches(ctx, name, df, "v", rule, end_pad_s=ctx.inputs.window_s)


def _crash_stretches(ctx: Context) -> pl.DataFrame:
    rows = []
    for d in ctx.life.deaths:
        end = d.ready_ts or max(d.ts, ctx.span_hi or d.ts)
        rows.append(
            {
                "replica": d.replica,
                "start": d.ts,
                "end": end,
                "samples": 1,
                "peak": 1.0,
                "total": 1.0,
                "mean": 1.0,
                "med": 0.0,
                "last_sample": ctx.span_hi or end,
                "signal": "crash",
            }
        )
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def stretches(ctx: Context) -> pl.DataFrame:
    th = ctx.th
    parts = []
    if ctx.pre.height:
        parts.append(
            _series_stretches(
                ctx, "preemptions", ctx.pre, "preemptions", detect.Rule(hard=th.preemptions_min)
            )
        )
    elif ctx.warnings.height:
        parts.append(
            _series_stretches(
                ctx,
                "preemptions",
                ctx.warnings,
                "preemptions",
                detect.Rule(hard=1),
                merge_gap=th.v0_warning_merge_s,
            )
        )
    if ctx.server.height:
        parts.append(_series_stretches(ctx, "kv_pressure", ctx.server, "kv", detect.Rule(hard=th.kv_full)))
        parts.append(
            _series_stretches(
                ctx,
                "queue",
                ctx.server,
                "waiting",
                detect.Rule(
                    hard=th.waiting_min, min_samples=th.queue_min_samples, keep_peak=th.queue_outlier_floor
                ),
            )
        )
        stalled = ctx.server.with_columns(
            ((pl.col("running") >= 1) & (pl.col("prompt_tps") == 0) & (pl.col("gen_tps") == 0))
            .cast(pl.Float64)
            .alias("stalled")
        )
        parts.append(
            _series_stretches(
                ctx, "stall", stalled, "stalled", detect.Rule(hard=1, min_samples=th.stall_min_samples)
            )
        )
    parts += _request_stretches(ctx)
    parts.append(_crash_stretches(ctx))
    cols = ["signal", "replica", "start", "end", "samples", "peak", "total", "mean", "med", "last_sample"]
    parts = [
        p.select(cols).with_columns(
            pl.col("samples").cast(pl.Int64),
            pl.col("start").cast(pl.Datetime("us", "UTC")),
            pl.col("end").cast(pl.Datetime("us", "UTC")),
            pl.col("last_sample").cast(pl.Datetime("us", "UTC")),
            *[pl.col(c).cast(pl.Float64) for c in ("peak", "total", "mean", "med")],
        )
        for p in parts
        if p.height
    ]
    if not parts:
        return pl.DataFrame()
    return pl.concat(parts).sort(["start", "signal", "replica"])


def _request_stretches(ctx: Context) -> list[pl.DataFrame]:
    """Request-level signals: errors (the failed requests themselves, ``failures``), retries per window, orphaned
    work (from the executions when correlated), TTFT and e2e tails (the answered requests themselves, ``slow``)."""
    th, w = ctx.th, ctx.inputs.windows
    if w.height == 0:
        return []

    def has(c: str) -> bool:
        return w[c].null_count() < w.height

    # the failed requests themselves, each once (failures.py); the windows' 5xx only when no layer tells them
    errors = failures.error_stretches(ctx)
    if errors is None:
        errors = _windowed(
            ctx, "errors", pl.col("gateway_5xx").cast(pl.Float64), detect.Rule(floor=th.errors_floor)
        )
    out = [errors]
    if has("client_retries") or has("gateway_retries"):
        retries = pl.col("client_retries").fill_null(0) + pl.col("gateway_retries").fill_null(0)
        out.append(_windowed(ctx, "retries", retries.cast(pl.Float64), detect.Rule(floor=th.retries_floor)))
    orphans = _orphan_stretches(ctx)
    if orphans is not None:
        out.append(orphans)
    elif has("orphaned"):
        out.append(
            _windowed(
                ctx, "orphans", pl.col("orphaned").cast(pl.Float64), detect.Rule(floor=th.orphans_floor)
            )
        )
    # the answered requests themselves, each once at its start (slow.py); the windows' p95 only when none has a latency
    for sig, col, slo in (("ttft", "ttft_p95", ctx.slo.ttft_s), ("e2e", "e2e_p95", ctx.slo.e2e_s)):
        got = slow.latency_stretches(ctx, sig)
        out.append(
            got
            if got is not None
            else _windowed(ctx, sig, pl.col(col), detect.Rule(hard=slo), skip_cold=True)
        )
    return out


def _orphan_stretches(ctx: Context) -> pl.DataFrame | None:
    """Orphaned work from the executions themselves, not per window: each ran from its caller's leaving (the
    request's end) to the server's finish; those within ``merge_gap_s`` of each other are one stretch, kept from
    ``orphans_floor`` executions. Work for a caller that left is waste on any server, so there is no baseline
    to beat: a per-window robust outlier moved with the window grid and the range (abort-ignored's callers left
    through the whole second half of its run; its 'episode' was the last 6 s of it, gone in a range around it).
    None when the requests do not carry it (no correlation): then the windows' counts."""
    req = ctx.inputs.requests
    if ctx.inputs.requests_origin != "correlated" or not {"orphaned_executions", "orphan_s", "ts_end"} <= set(
        req.columns
    ):
        return None
    if ctx.inputs.windows.height == 0:
        return None
    o = req.filter((pl.col("orphaned_executions").fill_null(0) > 0) & pl.col("ts_end").is_not_null())
    last = time_value(ctx.inputs.windows["ts"].max()) + timedelta(seconds=ctx.inputs.window_s)
    if o.height == 0:
        return pl.DataFrame()
    ran = (pl.col("orphan_s").fill_null(0.0) / pl.col("orphaned_executions")).clip(lower_bound=0.0)
    runs = o.select(
        pl.lit("").alias("replica"),
        pl.col("ts_end").alias("start"),
        (pl.col("ts_end") + pl.duration(microseconds=(ran * 1e6).cast(pl.Int64))).alias("end"),
        pl.lit(1, pl.UInt32).alias("samples"),
        pl.col("orphaned_executions").cast(pl.Float64).alias("peak"),
        pl.col("orphaned_executions").cast(pl.Float64).alias("total"),
        pl.lit(0.0).alias("med"),
    )
    st = detect.merge(runs, ctx.th.merge_gap_s).filter(pl.col("total") >= ctx.th.orphans_floor)
    return st.with_columns(
        pl.col("samples").cast(pl.Int64),
        pl.lit(last, pl.Datetime("us", "UTC")).alias("last_sample"),
        pl.lit("orphans").alias("signal"),
    )


# ---------------------------------------------------------------- grouping


def grouped(st: pl.DataFrame, gap_s: float) -> pl.DataFrame:
    """The stretches of every episode, ``_e`` numbering the episodes by start. On one replica, server-signal
    stretches that overlap or lie within gap_s of each other are one episode, one per death when they hold
    several; the request-signal stretches (the whole folder's) within gap_s of it are its companions (a
    stretch near two episodes is in both; an errors stretch mostly outside them is an episode of its own too),
    and those near no server episode are episodes of their own, grouped the same way. Request signals never join two server stretches, and one replica's stretches are
    never another's companions: a day-long error rate would otherwise chain every burst of every replica,
    and every death of a crash loop, into one. All in a few calls: a day holds thousands of episodes."""
    if st.height == 0:
        return st.with_columns(pl.lit(None, dtype=pl.Int64).alias("_e"))
    gap = timedelta(seconds=gap_s)
    st = st.with_row_index("_i").with_columns(pl.col("_i").cast(pl.Int64))
    wide_rows = pl.col("signal").is_in(REQUEST_SIGNALS)
    wide, server = st.filter(wide_rows), st.filter(~wide_rows)
    # server stretches: runs per replica, then one group per death in each run (every other stretch goes with
    # the last death that began before it, those before the first death with the first; a death is its own
    # anchor, so two deaths stamped in the same second stay apart)
    server = server.with_columns(pl.col("replica").fill_null("").alias("_rep")).sort(
        "_rep", "start", "signal"
    )
    server = server.with_columns(_runs(gap_s, over="_rep").alias("_run")).sort("start", "_i")
    deaths = server.filter(pl.col("signal") == "crash").select(
        "_run", "start", "_i", (pl.int_range(pl.len(), dtype=pl.Int64).over("_run")).alias("_d")
    )
    # both in start order: each stretch meets the last death of its run that began at or before it
    server = server.join_asof(
        deaths.drop("_i"), on="start", by="_run", strategy="backward", check_sortedness=False
    )
    server = server.join(deaths.select("_i", pl.col("_d").alias("_own")), on="_i", how="left").with_columns(
        pl.coalesce("_own", "_d", pl.lit(0, dtype=pl.Int64)).alias("_d")
    )
    server = server.with_columns(pl.struct("_run", "_d").rank("dense").cast(pl.Int64).alias("_g")).drop(
        "_rep", "_run", "_d", "_own"
    )
    cores = server.group_by("_g").agg(pl.col("start").min().alias("_lo"), pl.col("end").max().alias("_hi"))
    near = (
        wide.join_where(cores, pl.col("start") <= pl.col("_hi") + gap, pl.col("end") >= pl.col("_lo") - gap)
        if cores.height and wide.height
        else wide.clear().with_columns(pl.lit(None, dtype=pl.Int64).alias("_g"))
    )
    # failed requests that outlast the server episodes they accompany (most of their span outside all of them, each
    # padded by gap_s: abort-ignored's callers timed out for 93 s around two 2 s preemption bursts) are their
    # companion and an episode of their own, so that what the callers got is not told only as a detail of a burst;
    # mostly inside, they are those episodes' (a crash's 502s until the server is back). The errors only: they are
    # judged over the run (failures.py); the windowed signals keep to the episodes they are near
    spanning = pl.Series("_i", [], dtype=pl.Int64)
    if "_lo" in near.columns:
        us = pl.duration(microseconds=1)
        cut = near.filter(pl.col("signal") == "errors").select(
            "_i",
            "start",
            "end",
            pl.max_horizontal("start", pl.col("_lo") - gap).alias("_a"),
            pl.min_horizontal("end", pl.col("_hi") + gap).alias("_b"),
        )
        prev = pl.col("_b").cum_max().shift(1).over("_i")
        piece = (pl.col("_b") - pl.max_horizontal("_a", pl.coalesce(prev, "_a"))).clip(lower_bound=us * 0)
        cover = (
            cut.sort("_i", "_a")
            .group_by("_i")
            .agg((pl.col("end").first() - pl.col("start").first()).alias("_len"), piece.sum().alias("_in"))
        )
        spanning = cover.filter(pl.col("_in") * 2 < pl.col("_len"))["_i"]
    alone = wide.filter(
        ~pl.col("_i").is_in(near["_i"].implode()) | pl.col("_i").is_in(spanning.implode())
    ).sort("start", "signal")
    alone = alone.with_columns((_runs(gap_s) + (server["_g"].max() or 0)).alias("_g"))
    rows = pl.concat([server, near.select(server.columns), alone.select(server.columns)])
    order = (
        rows.group_by("_g")
        .agg(pl.col("start").min().alias("_s"), pl.col("_i").min().alias("_m"))
        .sort("_s", "_m")
        .select("_g", pl.int_range(pl.len(), dtype=pl.Int64).alias("_e"))
    )
    return rows.join(order, on="_g").sort("_e", "start", "signal", "_i").drop("_g", "_i")


def _runs(gap_s: float, over: str | None = None) -> pl.Expr:
    """Run numbers of stretches sorted by start (per ``over``): a run goes on while the next stretch starts
    within gap_s of the latest end so far."""
    prev_end = pl.col("end").cum_max().shift(1)
    if over:
        prev_end = prev_end.over(over)
    new = ((pl.col("start") - prev_end).dt.total_microseconds() / 1e6 > gap_s).fill_null(True)
    return new.cum_sum().cast(pl.Int64)
