"""Findings of capacity: a load above what the server completes (an open loop whose backlog grows for minutes),
and a KV cache that cannot hold one request of the model's full length (vLLM's start-up arithmetic)."""

from __future__ import annotations

import math
from datetime import timedelta

import polars as pl

from ... import clock
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Finding
from .record import make_finding

INFLIGHT = ("inflight_client", "inflight_gateway", "inflight_server")
GROWTH_SLACK = (
    0.05  # a bucket's in-flight count may end this much below the previous one's and still be growing
)


def capacity_findings(ctx: Context, cap: dict, reg: Registry, ladder: dict | None) -> list[Finding]:
    # a ladder's capacity is its working boundary: its steps climb in a closed loop, never an open one
    return [*([] if ladder is not None else _overload(ctx, reg)), *_kv_fit(cap, reg)]


def _closed_loop(ctx: Context, lo, hi) -> bool:
    """The client's phases over [lo, hi] were all at a fixed concurrency: a closed loop, whose backlog can
    never outgrow its concurrency (only an open loop, at a rate, can be above capacity for long)."""
    ph = ctx.inputs.phases
    if not ph.height or "mode" not in ph.columns:
        return False
    over = ph.filter((pl.col("ts_start") <= hi) & (pl.col("ts_end") >= lo))
    return bool(over.height) and bool((over["mode"] == "concurrency").all())


def overload_stretch(ctx: Context) -> dict | None:
    """The longest stretch of ``overload_bucket_s`` buckets whose arrivals exceed their completions by
    ``overload_ratio`` (one bucket's exception allowed), lasting ``overload_min_s``, over which the requests in
    flight grew: its rates and backlog, else None."""
    w, th = ctx.inputs.windows, ctx.th
    if not w.height or w["arrivals"].null_count() == w.height or w["completions"].null_count() == w.height:
        return None
    col = next((c for c in INFLIGHT if w[c].null_count() < w.height and (w[c].fill_null(0) > 0).any()), None)
    if col is None:
        return None
    b = (
        w.sort("ts")
        .group_by_dynamic("ts", every=f"{int(th.overload_bucket_s)}s")
        .agg(
            pl.col("arrivals").fill_null(0).sum().alias("a"),
            pl.col("completions").fill_null(0).sum().alias("c"),
            pl.col(col).first().alias("in0"),
            pl.col(col).last().alias("in1"),
        )
    )
    # a bucket of overload: arrivals above completions, and the requests in flight no lower at its end than at
    # the previous bucket's (a queue that grows; requests that fail fast leave it, and it shrinks)
    ends = b["in1"].fill_null(0)
    rising = ends >= ends.shift(1).fill_null(0) * (1 - GROWTH_SLACK)
    over = (b["a"] >= 1) & (b["a"] >= th.overload_ratio * b["c"]) & rising
    marks = over.to_list()
    best, i = None, 0
    while i < len(marks):
        if not marks[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(marks) and (marks[j + 1] or (j + 2 < len(marks) and marks[j + 2])):
            j += 1
        while not marks[j]:
            j -= 1
        if best is None or j - i > best[1] - best[0]:
            best = (i, j)
        i = j + 1
    if best is None:
        return None
    part = b.slice(best[0], best[1] - best[0] + 1)
    lo = part["ts"][0]
    hi = part["ts"][-1] + timedelta(seconds=th.overload_bucket_s)
    dur = (hi - lo).total_seconds()
    grew = (part["in1"][-1] or 0) - (part["in0"][0] or 0)
    arrived = int(part["a"].sum())
    # the backlog grows by a real share of what arrived (a start of traffic fills the pipe, then holds)
    if dur < th.overload_min_s or grew < th.overload_ratio_growth * arrived or _closed_loop(ctx, lo, hi):
        return None
    return {
        "start": lo,
        "end": hi,
        "duration_s": dur,
        "arrival_rate": int(part["a"].sum()) / dur,
        "completion_rate": int(part["c"].sum()) / dur,
        "inflight_start": part["in0"][0],
        "inflight_end": part["in1"][-1],
        "backlog_growth": grew,
        "inflight_source": col,
    }


def _overload(ctx: Context, reg: Registry) -> list[Finding]:
    o = overload_stretch(ctx)
    if o is None:
        return []
    th = ctx.th
    c = reg.add(
        Claim(
            "capacity.overload",
            "overload",
            "offered load against completed load",
            "over capacity",
            [
                Fact("start", o["start"]),
                Fact("end", o["end"]),
                Fact("duration_s", o["duration_s"], "windows", unit="s of wall time"),
                Fact("arrival_rate", o["arrival_rate"], "requests", unit="/s"),
                Fact("completion_rate", o["completion_rate"], "requests", unit="/s"),
                Fact("inflight_start", o["inflight_start"], o["inflight_source"], unit="requests"),
                Fact("inflight_end", o["inflight_end"], o["inflight_source"], unit="requests"),
                Fact("backlog_growth", o["backlog_growth"], o["inflight_source"], unit="requests"),
            ],
            {
                "overload_min_s": th.overload_min_s,
                "overload_ratio": th.overload_ratio,
                "overload_bucket_s": th.overload_bucket_s,
            },
        )
    )
    rate, done = o["arrival_rate"], o["completion_rate"]
    return [
        make_finding(
            "high",
            f"Load above capacity: {rate:.1f} requests/s offered, {done:.1f}/s completed for "
            f"{o['duration_s'] / 60:.0f} min ({clock.hms_range(o['start'], o['end'])})",
            "requests arrive faster than the server completes them, so the backlog and every request's wait grow "
            "for as long as the load lasts",
            f"{rate:.2f} arrivals/s against {done:.2f} completions/s over {o['duration_s']:.0f} s; requests in "
            f"flight ({o['inflight_source'].removeprefix('inflight_')}) from {o['inflight_start']:.0f} to "
            f"{o['inflight_end']:.0f}",
            "an open loop (callers send at their own rate, whatever the answers) above what the server completes: "
            "a sustained regime, not a spike",
            f"Keep the offered rate below what the server completes ({done:.1f}/s here): admission control at the "
            f"gateway (nginx limit_req at about {math.floor(done * 10) / 10:g} r/s) or a second replica, then replay "
            f"the same {rate:.1f}/s and check that completions keep up",
            None,
            o["start"],
            o["end"],
            kind="capacity",
            claim=c.id,
        )
    ]


def _kv_fit(cap: dict, reg: Registry) -> list[Finding]:
    x, tokens = cap.get("max_concurrency_startup"), cap.get("max_concurrency_tokens")
    if x is None or tokens is None or x >= 1:
        return []
    c = reg.add(
        Claim(
            "capacity.kv_fit",
            "kv_fit",
            "one request of the model's full length against the KV cache",
            "not met",
            [
                Fact("max_concurrency", x, "engine_log", unit="x"),
                Fact("max_concurrency_tokens", tokens, "engine_log", unit="tokens"),
                Fact("kv_tokens", cap.get("kv_tokens"), "engine_log", unit="tokens"),
                Fact("max_model_len", cap.get("max_model_len"), "engine_log", unit="tokens"),
            ],
        )
    )
    kv = cap.get("kv_tokens")
    holds = f"{kv:,} tokens" if kv else f"about {math.floor(x * tokens):,} tokens"
    return [
        make_finding(
            "medium",
            f"One request of {tokens:,} tokens does not fit in the KV cache: vLLM's start-up arithmetic gives "
            f"{x:g}x concurrency",
            f"the KV cache holds {holds}, less than one request of the full length ({tokens:,} tokens)",
            f"start-up line: Maximum concurrency for {tokens:,} tokens per request: {x:g}x"
            + (f"; KV cache {kv:,} tokens" if kv else ""),
            "the memory left for the KV cache after the weights is smaller than one max-length sequence: a request "
            "near the full length can never be scheduled whole (it waits or is preempted again and again)",
            f"Start with --max-model-len at most {kv or math.floor(x * tokens):,} (what the cache holds) or give the cache "
            "more memory (--gpu-memory-utilization, fewer other processes on the device), and replay a request of "
            "the full length",
            None,
            kind="capacity",
            claim=c.id,
        )
    ]
