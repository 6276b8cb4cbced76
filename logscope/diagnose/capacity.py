"""Capacity arithmetic from the startup lines, checked against what the traffic really needed.

vLLM reserves KV blocks for a request's prompt and its output as it grows; the pool holds
``kv_tokens`` tokens. A request of P prompt + O output tokens holds ceil((P + O) / block_size)
blocks at its end, so the pool fits about ``kv_tokens / (blocks * block_size)`` such requests at
once. When more are admitted (``max_num_seqs`` allows it), they preempt one another. The startup
line 'Maximum concurrency for N tokens per request: X' is the same sum done for max-length requests.
"""

from __future__ import annotations

import math

import polars as pl

from ..scalars import float_or_none, float_value, int_or_none
from .tables import Inputs

CAP_COLS = (
    "kv_tokens",
    "gpu_blocks",
    "cpu_blocks",
    "block_size",
    "max_concurrency",
    "max_concurrency_tokens",
    "max_model_len",
    "max_num_seqs",
    "gpu_memory_utilization",
    "kv_memory_gib",
    "weights_gib",
    "version",
    "num_gpu_blocks_override",
)


def startup(events: pl.DataFrame) -> dict:
    """Latest known value of each capacity/config field (the last server start's, when it restarted)."""
    ev = events.filter(pl.col("kind").is_in(["capacity", "config", "version", "server_start"]))
    ev = ev.sort(["ts", "seq"], nulls_last=False)
    out: dict = {}
    for c in CAP_COLS:
        v = ev[c].drop_nulls()
        out[c] = v[-1] if v.len() else None
    if out["kv_tokens"] is None and out["gpu_blocks"] and out["block_size"]:
        out["kv_tokens"] = out["gpu_blocks"] * out["block_size"]
    return out


def _q(s: pl.Series, q: float) -> float | None:
    s = s.drop_nulls()
    return float_value(s.quantile(q, "linear")) if s.len() else None


def _increase(m: pl.DataFrame, name: str) -> float | None:
    """Counter increase over the run (resets tolerated: only rises are summed), the largest over sources
    (a query_range export and a TSDB dump of one server hold the same samples)."""
    c = m.filter((pl.col("name") == name) & pl.col("value").is_not_nan())  # NaN = Prometheus staleness marker
    if c.height == 0:
        return None
    per = (
        c.sort(["source", "labels", "ts"])
        .with_columns(pl.col("value").diff().over(["source", "replica", "labels"]).clip(0).alias("d"))
        .group_by("source")
        .agg(pl.col("d").sum())
    )
    v = float_or_none(per["d"].max())
    return v if v is not None and math.isfinite(v) else None


def metrics_tokens(m: pl.DataFrame) -> dict | None:
    """Mean prompt and generated tokens per finished request from vLLM's own histograms."""
    if m.height == 0:
        return None
    out: dict[str, float | str | None] = {}
    for key, base in (("prompt", "vllm:request_prompt_tokens"), ("output", "vllm:request_generation_tokens")):
        s, n = _increase(m, base + "_sum"), _increase(m, base + "_count")
        out[key] = (s / n) if s is not None and n else None
    if out["prompt"] is None and out["output"] is None:
        return None
    out["what"] = "means from vllm:request_prompt_tokens / vllm:request_generation_tokens (sum / count)"
    return out


def analyse(inp: Inputs, server: pl.DataFrame, metrics: pl.DataFrame | None = None) -> dict:
    """The capacity arithmetic; with several replicas, each replica's own (``per_replica``: their configs and
    caches may differ, and one replica's cache says nothing of another's queue), the top level being the
    replica that came closest to its limits (``replica``)."""
    replicas = sorted(
        {
            r
            for r in (
                *_names(inp.events.filter(pl.col("kind").is_in(["capacity", "config"]))),
                *_names(server),
            )
            if r
        }
    )
    if len(replicas) <= 1:
        return _one(inp.events, inp.requests, server, metrics)
    per = {}
    for r in replicas:
        mine = pl.col("replica") == r
        m = (
            metrics.filter(mine)
            if metrics is not None and metrics.height and (metrics["replica"] == r).any()
            else metrics
        )
        per[r] = _one(inp.events.filter(mine), inp.requests, server.filter(mine), m)
    main = max(
        replicas,
        key=lambda r: (
            per[r]["kv_observed_max"] or 0,
            per[r]["running_observed_max"] or 0,
            per[r]["waiting_observed_max"] or 0,
        ),
    )
    return {**per[main], "replica": main, "per_replica": per}


def for_replica(cap: dict, replica: str | None) -> dict:
    """The capacity figures of one replica (the folder's when it has one replica or the replica is unknown)."""
    return (cap.get("per_replica") or {}).get(replica or "", cap)


def _names(df: pl.DataFrame) -> list[str]:
    return df["replica"].drop_nulls().unique().to_list() if "replica" in df.columns and df.height else []


def _one(events: pl.DataFrame, req: pl.DataFrame, server: pl.DataFrame, metrics: pl.DataFrame | None) -> dict:
    cap = startup(events)
    bs = cap["block_size"] or 16  # vLLM's default block size on GPUs
    tok = req.select(
        (pl.col("prompt_tokens") + pl.col("output_tokens")).alias("t"),
        (pl.col("prompt_tokens") + pl.col("max_tokens")).alias("r"),
    )
    p50, p95 = _q(tok["t"], 0.5), _q(tok["t"], 0.95)
    r50 = _q(tok["r"], 0.5)
    cap["tokens_per_request_observed"] = {
        "p50": p50,
        "p95": p95,
        "n": int(tok["t"].drop_nulls().len()),
        "what": "prompt + generated tokens of requests that report both",
    }
    mt = metrics_tokens(metrics) if metrics is not None else None
    cap["tokens_per_request_metrics"] = mt
    if p50 is None and mt and mt["prompt"] is not None and mt["output"] is not None:
        p50 = mt["prompt"] + mt["output"]
        cap["tokens_per_request_observed"].update(
            {
                "p50": p50,
                "what": "mean prompt + generated tokens per request from vLLM's metrics (no per-request "
                "token counts in the logs)",
            }
        )
    cap["tokens_per_request_reserved"] = {"p50": r50, "what": "prompt + requested max_tokens"}
    kv = cap["kv_tokens"]

    def fit(t: float | None) -> float | None:
        if not kv or not t or not math.isfinite(t):
            return None
        return kv / (math.ceil(t / bs) * bs)

    cap["concurrency_kv_can_hold"] = {
        "at_p50": fit(p50),
        "at_p95": fit(p95),
        "at_reserved_p50": fit(r50),
        "block_size_assumed": cap["block_size"] is None,
    }
    cap["max_concurrency_startup"] = cap.pop("max_concurrency")
    if server.height:
        cap["running_observed_max"] = int_or_none(server["running"].max())  # None: no sample of it
        cap["waiting_observed_max"] = int_or_none(server["waiting"].max())
        cap["kv_observed_max"] = float_or_none(server["kv"].max())
    else:
        cap["running_observed_max"] = cap["waiting_observed_max"] = cap["kv_observed_max"] = None
    hold = cap["concurrency_kv_can_hold"]["at_p50"]
    if hold is not None and cap["max_num_seqs"] and cap["max_num_seqs"] > hold:
        cap["note"] = (
            f"max_num_seqs {cap['max_num_seqs']} admits more requests than the KV cache holds at the "
            f"observed size ({hold:.1f} requests of {p50:.0f} tokens): beyond that, admitted requests "
            "preempt each other"
        )
    return cap


def output_lengths(req: pl.DataFrame) -> dict:
    """Requested max_tokens against generated tokens (what was reserved vs used)."""
    r = req.filter(pl.col("max_tokens").is_not_null() | pl.col("output_tokens").is_not_null())
    if r.height == 0:
        return {"requests": 0}
    row = r.select(
        pl.len().alias("requests"),
        pl.col("max_tokens").mean().alias("max_tokens_mean"),
        pl.col("output_tokens").mean().alias("output_tokens_mean"),
        pl.col("output_tokens").quantile(0.5, "linear").alias("output_tokens_p50"),
        pl.col("output_tokens").max().alias("output_tokens_max"),
        (pl.col("output_tokens") >= pl.col("max_tokens")).mean().alias("share_hit_max_tokens"),
        (pl.col("output_tokens") / pl.col("max_tokens")).mean().alias("used_share_of_reserve"),
    ).row(0, named=True)
    return row
