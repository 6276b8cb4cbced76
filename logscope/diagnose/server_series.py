"""The server's series the diagnosis works on: running / waiting / KV per stats sample (the engines of a
replica summed), preemptions per interval, V0's preemption warnings and V1's KV load failures.
"""

from __future__ import annotations

import polars as pl

from .. import schemas
from ..schemas import TS


def _agg_engines(df: pl.DataFrame) -> pl.DataFrame:
    """One row per (replica, ts): aggregated DP lines when printed, else the engines summed. One engine's
    lines within one second (SGLang prints a batch line per step) are its last state, not a sum (s01: 34 + 30
    waiting at 16:43:30 is 30), and a column no line of the second has stays null, not 0 (SGLang's prefill
    lines have no generation throughput: not 0 tokens/s, not a stall)."""
    if df.height == 0:
        return df.with_columns(pl.lit(None, pl.UInt32).alias("engines"))
    has_agg = df.group_by("replica").agg((pl.col("engine") == "aggregated").any().alias("_agg"))
    df = df.join(has_agg, on="replica", how="left").filter(
        ~pl.col("_agg") | (pl.col("engine") == "aggregated")
    )
    last = (
        df.sort(["replica", "ts", "seq"])
        .group_by(["replica", "engine", "ts"], maintain_order=True)
        .agg(
            pl.col("running", "waiting", "kv", "prompt_tps", "gen_tps").drop_nulls().last(),
            pl.col("seq").min(),
        )
    )

    def total(c: str) -> pl.Expr:
        return pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum())

    return (
        last.group_by(["replica", "ts"], maintain_order=True)
        .agg(
            *(total(c) for c in ("running", "waiting", "prompt_tps", "gen_tps")),
            pl.col("kv").max(),
            pl.col("seq").min(),
            # how many engines' lines were summed: a sum says so (public-2 n01: 51 + 31 running read '82 running')
            pl.col("engine").n_unique().alias("engines"),
        )
        .sort(["replica", "ts", "seq"])
    )


def server_series(stats: pl.DataFrame) -> pl.DataFrame:
    """running / waiting / KV per stats sample: the log lines when the log has them (that is what the
    server itself printed), else the metrics-derived rows."""
    st = stats.with_columns(
        pl.coalesce("kv_usage", pl.max_horizontal("gpu_kv_usage", "cpu_kv_usage")).alias("kv"),
        pl.col("replica").fill_null(""),
    )
    # Metrics name their replica by instance label, logs by file: they cannot be paired reliably, so
    # one origin serves the whole run (the log whenever it has state lines).
    if ((st["origin"] == "log") & st["running"].is_not_null()).any():
        st = st.filter(pl.col("origin") == "log")
    return _agg_engines(
        st.filter(
            pl.col("running").is_not_null() | pl.col("kv").is_not_null() | pl.col("waiting").is_not_null()
        )
    )


def preemption_series(stats: pl.DataFrame) -> pl.DataFrame:
    """Preemptions per interval: Prometheus-derived counts when present (vLLM 0.32 never logs them),
    else the stats line's 'Preemptions: N'. Rows: replica, ts, preemptions."""
    st = stats.filter(pl.col("preemptions").is_not_null()).with_columns(pl.col("replica").fill_null(""))
    if st.height == 0:
        return pl.DataFrame(
            schema={"replica": pl.String, "ts": TS, "preemptions": pl.Int64, "origin": pl.String}
        )
    has_prom = st.group_by("replica").agg((pl.col("origin") == "prometheus").any().alias("_p"))
    st = st.join(has_prom, on="replica", how="left").filter(
        pl.when(pl.col("_p"))
        .then(pl.col("origin") == "prometheus")
        .otherwise(pl.col("origin") != "prometheus")
    )
    return (
        st.group_by(["replica", "ts"], maintain_order=True)
        .agg(pl.col("preemptions").sum(), pl.col("origin").first())
        .sort(["replica", "ts"])
    )


def v0_warnings(events: pl.DataFrame) -> pl.DataFrame:
    """V0 'Sequence group ... is preempted' warnings (1 in 50 printed), with the preemptions each stands for; SGLang's
    retractions, each the requests it retracted. V1's 'Recovered from KV load failure: N request(s) rescheduled' is no
    preemption: a KV connector failed to load cached blocks (public-2 n19 read '1 preemption' of KV pressure where 215
    requests were rescheduled): ``kv_load_failures``."""
    w = (
        events.filter(
            (pl.col("kind") == "preemption")
            & pl.col("ts").is_not_null()
            & (pl.col("preemption_mode").fill_null("") != schemas.RESCHEDULE)
        )
        .with_columns(pl.col("replica").fill_null(""))
        .sort(["replica", "ts", "seq"])
    )
    affected = pl.col("requests_affected") if "requests_affected" in w.columns else pl.lit(None, pl.Int64)
    cum = pl.col("cumulative_preemptions")
    rise = cum - cum.shift(1).over("replica")
    return w.with_columns(
        # a replica's first counted warning (or the first after a restart reset the counter) stands for the
        # counter itself: 101 preemptions since the engine started (vllm-public 04), not 1
        pl.when(rise.is_null() | (rise < 0))
        .then(cum)
        .otherwise(rise)
        .fill_null(affected)
        .fill_null(1)
        .clip(1)
        .alias("preemptions")
    ).select("replica", "ts", "preemptions", "cumulative_preemptions", "request_id", "preemption_mode")


_TOKENS_AFFECTED = r"\((\d+) tokens affected\)"


def kv_load_failures(events: pl.DataFrame) -> pl.DataFrame:
    """V1's 'Recovered from KV load failure: N request(s) rescheduled (M tokens affected)' lines (a KV connector,
    e.g. LMCache or NIXL, failed to load cached blocks; vLLM recomputes them). Rows: replica, ts, source, requests,
    tokens, message."""
    if "preemption_mode" not in events.columns:
        return pl.DataFrame(
            schema={
                "replica": pl.String,
                "ts": TS,
                "source": pl.String,
                "requests": pl.Int64,
                "tokens": pl.Int64,
                "message": pl.String,
            }
        )
    affected = (
        pl.col("requests_affected") if "requests_affected" in events.columns else pl.lit(None, pl.Int64)
    )
    return (
        events.filter((pl.col("kind") == "preemption") & (pl.col("preemption_mode") == schemas.RESCHEDULE))
        .sort(["ts", "source", "line_no"], nulls_last=True)
        .select(
            pl.col("replica").fill_null(""),
            "ts",
            "source",
            affected.cast(pl.Int64).alias("requests"),
            pl.col("message").str.extract(_TOKENS_AFFECTED).cast(pl.Int64).alias("tokens"),
            "message",
        )
    )
