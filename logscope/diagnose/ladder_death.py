"""A ladder step a server died in: judged only on what came before the death.

The requests a death fails (refused, cut in flight) say that the server died, not whether the step's load held: lab
traced-ladder-kill's c=16 step read 'success 46.0 % < 99 % broke first' when its only replica was SIGKILLed 25 s in.
A step holding a death (``lifecycle.Death``, any kind) is judged on the requests that ENDED before it (their TTFT /
e2e p95 on their own clock, their success share):

- a death the load drives (``LOAD_KINDS``: out of memory, the device's, the kernel's or the container's) is the
  step's failure: 'the server died (OOM)' is among what broke, at its time;
- otherwise, when the requests before it already missed the SLO, the step is missed on those, the death named beside;
- otherwise the step is not judged ('censored', as ladder_gave_up's): the death's time, how far into the step, its
  kind and cause; the working boundary is never set at it.

Several replicas: the death of any one of them cuts the whole step at its time (kept simple: the survivors'
requests after it are not judged either, as the load on them changed), and the words name the replica and how many
the run had. The facts (time, kind, replica, requests before / cut / sent after, the figures before it) live on the
step row and its claim.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from .. import clock
from . import histograms
from .claims import Fact, clock_of, latency
from .lifecycle import Death

# The kind decides whether the load killed the server: memory exhausted (the device's, the kernel's, the
# container's) grows with what the step holds, so it is the load's failure. An engine that died or timed out with no
# memory error beside it says nothing of why (a kill from outside, a bug, a CUDA fault: lab enginecore-kill's
# EngineCore was SIGKILLed and vLLM logs the same EngineDeadError), and neither does a kill nothing explains
# (silent: the log just stops) or a GPU fault the kernel logged: the step is then not judged.
LOAD_KINDS = frozenset({"oom", "kernel_oom", "oom_killed"})
OUTSIDE_KINDS = frozenset({"silent", "gpu_xid"})
CAUSE = {
    "silent": "silent: cause unknown",
    "kernel_oom": "kernel OOM",
    "oom_killed": "OOMKilled, the container's memory limit",
    "oom": "out of device memory",
    "engine_dead": "engine dead: cause unknown",
    "engine_timeout": "an engine step timed out: cause unknown",
    "gpu_xid": "a GPU fault, the kernel's Xid",
}
SHORT = {"oom": "OOM", "kernel_oom": "kernel OOM", "oom_killed": "OOMKilled", "engine_dead": "engine dead"}
SLO_FIGURES = ("ttft_p95", "e2e_p95", "success_share")


def in_step(deaths: list[Death], lo: datetime, hi: datetime) -> Death | None:
    """The first death in [lo, hi)."""
    return next((d for d in sorted(deaths, key=lambda d: d.ts) if lo <= d.ts < hi), None)


def load_driven(kinds: list[str]) -> bool:
    return bool(LOAD_KINDS & set(kinds)) and not OUTSIDE_KINDS & set(kinds)


def ended_before(req: pl.DataFrame, ts: datetime) -> pl.DataFrame:
    """The requests that ended before the death: what the step served while the server lived."""
    return req.filter(pl.col("ts_end").is_not_null() & (pl.col("ts_end") < ts))


def before_figures(row: dict, figs: dict) -> dict:
    """``figs`` (figures.requests of the requests ended before the death) on the clocks of the step's per-request
    figures; a step whose TTFT / e2e came from a histogram has none before the death (its buckets span it)."""
    out = dict(figs)
    for f in ("ttft", "e2e"):
        src = row.get(f"{f}_source")
        if src == histograms.SOURCE or src is None:
            out[f"{f}_p95"] = None
        out[f"{f}_source"] = src
    return out


def judge(
    row: dict, d: Death, before: dict, reasons: list[dict], req: pl.DataFrame, replicas: int
) -> list[dict]:
    """Put the death's facts on ``row`` and give the reasons the step missed its SLO by (``reasons``: those of the
    requests that ended before the death); a step not judged gets ``censored_figures`` and ``slo_not_judged``."""
    lo = row["ts_start"]
    into = (d.ts - lo).total_seconds()
    kinds = sorted(d.kinds)
    load = load_driven(kinds)
    cause = "; ".join(CAUSE.get(k, k) for k in kinds)
    who = f"{d.replica} (1 of {replicas} replicas)" if replicas > 1 else "the server"
    n = before["requests"]
    started = pl.col("ts_start") < d.ts
    cut, sent = req.filter(started).height - n, req.filter(~started).height
    row.update(
        died_at=d.ts,
        died_kinds=", ".join(kinds),
        died_replica=d.replica,
        died_into_s=round(into, 3),
        died_load_driven=load,
        before_death_requests=n,
        before_death_ttft_p95=before["ttft_p95"],
        before_death_e2e_p95=before["e2e_p95"],
        before_death_success_share=before["success_share"],
        cut_by_death=cut,
        sent_after_death=sent,
    )
    at = f"at {clock.hms(d.ts)}, {into:.0f} s into the step"
    # the step's requests around it, and the figures of those it is judged on (each latency on its clock)
    tail = (
        f"; before it {n:,} request(s) ended ({_figures(before)})" if n else "; no request ended before it"
    ) + f", {cut:,} were cut by it, {sent:,} sent after it"
    if load:  # the step's failure, at its time among the others
        short = f"{who} died ({', '.join(SHORT.get(k, CAUSE.get(k, k)) for k in kinds)}) {at}"
        row["died"] = short + tail
        death = {"what": "death", "at": d.ts, "text": short}
        return sorted([*reasons, death], key=lambda r: r["at"] or d.ts)
    words = f"{who} died {at} ({cause})"
    row["died"] = words + tail
    if reasons:  # missed on the requests that ended before it: the death beside, not among its reasons
        return [{**r, "text": f"{r['text']} before the death"} for r in reasons]
    row["censored_figures"] = list(SLO_FIGURES)
    met = f"; the {n:,} request(s) that ended before it met the SLO" if n and _all_met(before) else ""
    gave = row.get("slo_not_judged")
    row["slo_not_judged"] = words + met + (f"; {gave}" if gave else "")
    return []


def _figures(before: dict) -> str:
    """'TTFT p95 1.10 s (client clock), e2e p95 5.66 s (client clock), success 100.0 %'."""
    out = []
    for f, name in (("ttft", "TTFT"), ("e2e", "e2e")):
        v, on = before.get(f"{f}_p95"), clock_of(before.get(f"{f}_source"))
        out.append(f"{name} p95 {v:.2f} s ({on or 'no'} clock)" if v is not None else f"no {name} p95")
    s = before.get("success_share")
    return ", ".join([*out, f"success {s:.1%}" if s is not None else "no outcome"])


def _all_met(before: dict) -> bool:
    return all(before.get(k) is not None for k in SLO_FIGURES)


def nothing(row: dict) -> None:
    """A step no server died in: its death facts empty."""
    row.update({k: None for k in COLUMNS})


COLUMNS = (
    "died",
    "died_at",
    "died_kinds",
    "died_replica",
    "died_into_s",
    "died_load_driven",
    "before_death_requests",
    "before_death_ttft_p95",
    "before_death_e2e_p95",
    "before_death_success_share",
    "cut_by_death",
    "sent_after_death",
)


def summary(nxt: dict) -> dict | None:
    """The death of the step above the boundary, for the ladder's summary (None when it had none)."""
    if nxt.get("died_at") is None:
        return None
    return {
        "at": nxt["died_at"],
        "kinds": nxt["died_kinds"],
        "replica": nxt["died_replica"],
        "into_step_s": nxt["died_into_s"],
        "load_driven": nxt["died_load_driven"],
        "requests_before": nxt["before_death_requests"],
        "cut": nxt["cut_by_death"],
        "sent_after": nxt["sent_after_death"],
        "text": nxt["died"],
        "not_judged": nxt["slo_not_judged"] if nxt["slo_status"] == "censored" else None,
    }


def next_step(nxt: dict) -> dict:
    """'broke first' at a step the server died in without the load's doing, and nothing before it missed: the
    death, with its facts, never the success share of the requests it failed."""
    return {
        "step": nxt["step"],
        "concurrency": nxt["concurrency"],
        "first": "death",
        "reasons": [{"what": "death", "at": nxt["died_at"], "text": nxt["died"]}],
        "floors": None,
        "not_judged": nxt["slo_not_judged"],
        "death": summary(nxt),
    }


def words(nxt: dict, level: str) -> str:
    """What the step above the boundary shows, in the finding's title and the verdict: '; at 16 not judged: the
    server died at ...' or '; at 32 the server died (OOM) first, at ...'."""
    if nxt.get("not_judged"):
        return f"; at {level} not judged: {nxt['not_judged']}"
    first, died = nxt["reasons"][0], nxt.get("death")
    if first["what"] == "death":
        return f"; at {level} {first['text']} (what broke first)"
    if died is not None and not died["load_driven"]:  # missed before it: the death beside
        return f"; at {level} {nxt['first']} broke first, before {died['text'].split('; ')[0]}"
    return f"; at {level} {nxt['first']} broke first"


def facts(row: dict) -> list[Fact]:
    """The step's death, for its SLO claim (none when no server died in it)."""
    if row.get("died_at") is None:
        return []
    return [
        Fact("died", row["died"]),
        Fact("died_at", row["died_at"], "engine_log"),
        Fact("died_kinds", row["died_kinds"], "engine_log"),
        Fact("died_replica", row["died_replica"]),
        Fact("died_into_s", row["died_into_s"], unit="s into the step"),
        Fact("died_load_driven", row["died_load_driven"]),
        Fact("before_death_requests", row["before_death_requests"], "requests", unit="requests"),
        latency("before_death_ttft_p95", row["before_death_ttft_p95"], row.get("ttft_source")),
        latency("before_death_e2e_p95", row["before_death_e2e_p95"], row.get("e2e_source")),
        Fact("before_death_success_share", row["before_death_success_share"], "requests", unit="share"),
        Fact("cut_by_death", row["cut_by_death"], "requests", unit="requests"),
        Fact("sent_after_death", row["sent_after_death"], "requests", unit="requests"),
    ]
