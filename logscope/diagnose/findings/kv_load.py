"""A KV connector's failed load: vLLM V1's 'Recovered from KV load failure: N request(s) rescheduled (M tokens
affected)' (``vllm/v1/core/sched/scheduler.py``, with a KV connector such as LMCache, NIXL or Mooncake). The
requests' cached blocks could not be loaded, so vLLM recomputes them: a cost of the connector, not the KV cache
running out (public-2 n19, LMCache: 215 requests rescheduled, read '1 preemption' of KV pressure)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

import polars as pl

from ... import clock
from ..claims import facts
from ..context import Context
from ..records import Episode, Finding
from ..server_series import kv_load_failures
from .record import make_finding

SYMPTOMS = ("pressure", "latency", "errors")  # what the recompute of the rescheduled requests shows


def kv_load_findings(ctx: Context) -> list[Finding]:
    kl = kv_load_failures(ctx.inputs.events)
    if kl.height == 0:
        return []
    timed = kl.filter(pl.col("ts").is_not_null())
    lo, hi = (
        (cast(datetime, timed["ts"].min()), cast(datetime, timed["ts"].max()))
        if timed.height
        else (None, None)
    )
    requests = kl["requests"].drop_nulls()
    tokens = kl["tokens"].drop_nulls()
    n_req = int(requests.sum()) if requests.len() else None
    n_tok = int(tokens.sum()) if tokens.len() == kl.height else None
    when = (
        "at a time the lines do not give"
        if lo is None
        else f"at {clock.hms(lo)}"
        if lo == hi
        else clock.hms_range(lo, hi)
    )
    what = (
        f"{n_req:,} request(s) rescheduled"
        if n_req is not None
        else "requests rescheduled (how many: not said)"
    )
    cost = f", {n_tok:,} tokens to compute again" if n_tok is not None else ""
    lines = f"{kl.height} line(s)" if kl.height > 1 else "1 line"
    return [
        make_finding(
            "high",
            f"Cached KV failed to load from the KV connector {when}: {what}{cost}",
            "the engine could not load the KV blocks its connector was to bring in, and recomputes those requests",
            f"{lines} 'Recovered from KV load failure' ({kl['source'][0] or 'the server log'}): "
            f"{(kl['message'][0] or '')[:200]}",
            "the KV connector's load failed (its storage or transfer backend): the affected requests' prompts are "
            "computed again, which takes the engine's prefill time from the others",
            "Find in the KV connector's own log (LMCache, NIXL, Mooncake) why the load failed at "
            f"{clock.hms(lo) if lo is not None else 'that time'}, and measure the cost: prompt throughput and the "
            "waiting queue in the minute after it, against a run where the load succeeds",
            None,
            lo,
            hi,
            kind="other",
            facts=facts(
                "engine_log",
                lines=kl.height,
                requests_rescheduled=n_req,
                tokens_affected=n_tok,
                first=lo,
                last=hi,
            ),
        )
    ]


def before(ctx: Context, ep: Episode) -> dict | None:
    """The KV connector's failed loads in an episode's lead-in or inside it, on its replica: the requests whose
    recompute filled the cache (n19: 215 rescheduled at 01:40:17, KV 100 % and the queue rising from 01:40:18)."""
    kl = kv_load_failures(ctx.inputs.events).filter(pl.col("ts").is_not_null())
    if kl.height == 0:
        return None
    lo = ep["start"] - timedelta(seconds=ctx.th.merge_gap_s)
    kl = kl.filter(pl.col("ts").is_between(lo, ep["end"]))
    if ep.get("replica"):
        kl = kl.filter(pl.col("replica").is_in([ep["replica"], ""]))
    if kl.height == 0:
        return None
    tokens = kl["tokens"].drop_nulls()
    return {
        "at": kl["ts"].min(),
        "requests": int(kl["requests"].drop_nulls().sum()) if kl["requests"].drop_nulls().len() else None,
        "tokens": int(tokens.sum()) if tokens.len() == kl.height else None,
    }


def leads(out: list[Finding], gap_s: float) -> None:
    """A KV connector's failed load leads the pressure, slow answers and errors that begin within ``gap_s`` after
    it (their cause, as severe as the worst of them), as load above capacity leads its symptoms."""
    kl = next((f for f in out if f["title"].startswith("Cached KV failed to load")), None)
    if kl is None or kl["start"] is None:
        return
    t0, t1 = kl["start"], (kl["end"] or kl["start"]) + timedelta(seconds=gap_s)
    inside = [f for f in out if f["kind"] in SYMPTOMS and f["start"] is not None and t0 <= f["start"] <= t1]
    if not inside:
        return
    kl["severity"] = min(
        [kl["severity"], *(f["severity"] for f in inside)],
        key=("critical", "high", "medium", "low", "info").index,
    )
    first = min(out.index(f) for f in inside)
    if out.index(kl) > first:
        out.remove(kl)
        out.insert(first, kl)
