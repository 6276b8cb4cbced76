"""A KV cache near full while every request was admitted: the cache is used, not short.

A level of KV usage is no pressure by itself: pressure is what it does to requests (they wait, they are preempted
and recomputed, their first token comes late). vLLM #18115 printed 91-92 % for minutes with 8 running and 0
waiting, tenstorrent/vllm #55 92-95 % with 16 running and 0 pending: the engine filled the cache it was given and
every request ran. Calling that "sustained KV pressure" of high severity is a claim none of its lines supports.
"""

from __future__ import annotations

import polars as pl

from ... import clock
from ..context import Context
from ..records import Episode, Finding
from .record import make_finding, num, pct, state_phrase

# Companions that show an impact on requests: any of them makes the level pressure, not a full cache at work.
IMPACT = frozenset({"preemptions", "queue", "ttft", "e2e", "errors", "stall", "crash"})


def admitted(ctx: Context, ep: Episode) -> dict | None:
    """The facts that a KV episode had no impact any line shows (waiting 0 on every stats line in it, no preemption
    counted or warned, no slow or failed request beside it), or None when one of them is missing or says otherwise.
    ``preemptions`` is None when nothing in the folder counts them (no metrics; V1's log prints none)."""
    if ep["signal"] != "kv_pressure" or ep["waiting_max"] is None or ep["waiting_max"] > 0:
        return None
    d = ep["details"]
    if {c["signal"] for c in d.get("companions") or []} & IMPACT or "v0_preemption_warnings" in d:
        return None
    pre = d.get("preemptions")
    if pre or swapped(ctx, ep):
        return None
    return {
        "preemptions": pre,
        "running_max": ep["running_max"],
        "request_records": ctx.inputs.requests.height > 0,
    }


def swapped(ctx: Context, ep: Episode) -> bool:
    """V0's 'Swapped: N' above 0 in the range: requests preempted by swapping out, pressure by another name."""
    st = ctx.inputs.stats
    if "swapped" not in st.columns:
        return False
    st = st.filter(
        (pl.col("replica").fill_null("") == (ep["replica"] or ""))
        & pl.col("ts").is_between(ep["start"], ep["end"])
    )
    return bool((st["swapped"].fill_null(0) > 0).any())


def preemption_words(facts: dict) -> str:
    return (
        "none preempted"
        if facts["preemptions"] == 0
        else "preemptions not counted in the folder (no vllm:num_preemptions_total scrape, no preemption count "
        "or warning in the log)"
    )


def admitted_finding(ctx: Context, ep: Episode, facts: dict) -> Finding:
    what = f"KV cache ≥ {pct(ctx.th.kv_full)}"
    title = f"KV cache near full with nothing waiting: {what} {clock.hms_range(ep['start'], ep['end'])}"
    pre_txt = preemption_words(facts)
    symptom = f"{what} for {ep['duration_s']:.0f} s ({state_phrase(ep)}), with 0 waiting on every stats line"
    req_txt = (
        "no slow or failed request beside it"
        if facts["request_records"]
        else "requests' latency not observed (no request records in the folder)"
    )
    evidence = f"{ep['reason']}; waiting 0 on every stats line in the range; {pre_txt}; {req_txt}"
    cause = (
        f"the engine filled the cache it was given while every request was admitted (up to "
        f"{num(facts['running_max'])} ran): the cache is used, not yet short; pressure starts when requests wait "
        "or are preempted, and no line here shows either"
    )
    nt = (
        f"Replay the same traffic with one step more concurrency than the {num(facts['running_max'])} that ran, "
        "with vllm:num_preemptions_total and vllm:num_requests_waiting scraped: the step where either rises is "
        "the KV cache's limit for this workload; cap --max-num-seqs below it"
    )
    return make_finding("low", title, symptom, evidence, cause, nt, ep, kind="pressure")
