"""Findings of a load test's own summary (the ``load_tests`` table: ``vllm bench serve``, SGLang's
``bench_serving``, AIPerf's console table, lm-eval's progress): what the tool measured, on the client clock.

A summary is evidence even with no other log: a mean TTFT of 49 minutes, or 1 request of 100 succeeding, is
the incident. Its figures are aggregates (mean, median, p99) the tool printed, not per-request records, so a
finding quotes them as printed and compares them with the SLO only where the comparison holds: a *mean*
above the p95 SLO means most requests were over it; a p99 above it is a tail only. One finding per summary
that breaks the SLO (high: mean or success share; medium: the p99 tail); a summary within it is an info
finding, so the report says the load test was read. Where the callers' per-request records are in the folder
too (a ladder's --save-result JSON beside each step's stdout), they are the evidence and the summaries add no
finding (the report still shows them beside the logs' figures).
"""

from __future__ import annotations

import polars as pl

from ..claims import Fact
from ..context import Context
from ..records import Finding
from .record import make_finding, pct


def _dur(s: float) -> str:
    """A latency as a person reads it: 850 ms, 4.6 s, 49.0 min, 1.2 h."""
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    return f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _figures(r: dict) -> str:
    bits = []
    if r.get("requests") is not None or r.get("successful") is not None:
        sent = f" of {r['requests']}" if r.get("requests") is not None else ""
        bits.append(f"{r['successful'] if r.get('successful') is not None else '?'}{sent} successful")
    if r.get("failed"):
        bits.append(f"{r['failed']} failed")
    for name, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("e2e", "e2e")):
        values = [(w, r.get(f"{key}_{w}_s")) for w in ("mean", "median", "p99")]
        got = [f"{w} {_dur(v)}" for w, v in values if v is not None]
        if got:
            bits.append(f"{name} " + ", ".join(got))
    if r.get("concurrency") is not None:
        bits.append(f"max concurrency {r['concurrency']:g}")
    if r.get("request_rate") is not None:
        bits.append(f"request rate {r['request_rate']:g}/s")
    if r.get("duration_s") is not None:
        bits.append(f"ran {_dur(r['duration_s'])}")
    return "; ".join(bits)


def _facts(r: dict, slo) -> list[Fact]:
    """What the tool's summary printed (its own aggregates, on the callers' clock) and the SLO it is read against."""
    lat = [
        Fact(f"{key}_{w}_s", r.get(f"{key}_{w}_s"), "load_test", "client", "s")
        for key in ("ttft", "e2e")
        for w in ("mean", "p99")
    ]
    counts = [Fact(k, r.get(k), "load_test", unit="requests") for k in ("requests", "successful", "failed")]
    return [*counts, *lat, Fact("slo_ttft_p95_s", slo.ttft_s), Fact("slo_e2e_p95_s", slo.e2e_s)]


def _one(ctx: Context, r: dict) -> Finding:
    slo = ctx.slo
    where = f"{r['tool']} ({r['source'].rsplit('/', 1)[-1]}, line {r['line_no']})"
    said = f"{_figures(r)} — the tool's own summary, client clock"
    share = r["successful"] / r["requests"] if r.get("successful") is not None and r.get("requests") else None
    breaks = []
    if r.get("ttft_mean_s") is not None and r["ttft_mean_s"] > slo.ttft_s:
        breaks.append(f"mean TTFT {_dur(r['ttft_mean_s'])} (SLO: p95 {slo.ttft_s:g} s)")
    if r.get("e2e_mean_s") is not None and r["e2e_mean_s"] > slo.e2e_s:
        breaks.append(f"mean e2e {_dur(r['e2e_mean_s'])} (SLO: p95 {slo.e2e_s:g} s)")
    if share is not None and share < slo.success:
        breaks.append(f"{r['successful']} of {r['requests']} requests successful ({pct(share)})")
    tail = r.get("ttft_p99_s") is not None and r["ttft_p99_s"] > slo.ttft_s
    if breaks:
        sev, title = "high", f"Load test ({r['tool']}): {breaks[0]}, client clock"
        symptom = "; ".join(breaks)
    elif tail:
        sev = "medium"
        title = f"Load test ({r['tool']}): TTFT p99 {_dur(r['ttft_p99_s'])} (SLO: p95 {slo.ttft_s:g} s), client clock"
        symptom = "the slowest first tokens are above the SLO; the mean is within it"
    else:
        judged = share is not None or any(
            r.get(k) is not None for k in ("ttft_mean_s", "e2e_mean_s", "ttft_p99_s")
        )
        return make_finding(
            "info",
            f"Load test read: {r['tool']} within the SLO"
            if judged
            else f"Load test read: {r['tool']}, no latency or success figure printed",
            "the tool's figures are within the SLO",
            f"{where}: {said}",
            "",
            "Nothing to change for this load; a higher concurrency finds where it breaks",
            None,
            kind="other",
            facts=_facts(r, slo),
        )
    failing = share is not None and share < slo.success
    cause = (
        "most requests failed, as the tool counted them: its summary does not say why"
        if failing
        else "requests waited before their first token: the tool sent more than the server admitted at once"
        " (TTFT includes the queue)"
    )
    nt = (
        "Add the server's log of the same run to the folder: the summary counts failures, the server says why"
        if failing
        else "Rerun at stepped concurrency (--max-concurrency 1, 2, 4, …) to find where TTFT leaves the SLO, "
        "with the server's log of each step beside its summary"
    )
    return make_finding(
        sev, title, symptom, f"{where}: {said}", cause, nt, None, kind="latency", facts=_facts(r, slo)
    )


def load_test_findings(ctx: Context) -> list[Finding]:
    """A finding per summary, unless the folder holds the callers' own per-request records (a tool's --save-result
    JSON, a client log): the requests' figures are then measured from those, and the summary repeats them."""
    lt = getattr(ctx.inputs, "load_tests", None)
    if lt is None or not isinstance(lt, pl.DataFrame) or not lt.height:
        return []
    if ctx.inputs.requests_origin in ("client", "correlated"):
        return []
    return [_one(ctx, r) for r in lt.sort("source", "run").to_dicts()]
