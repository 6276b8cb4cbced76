"""What a finding cost the callers: requests that failed, and requests that succeeded above the SLO, in its
time range. Findings of one severity are ranked by it (the reviewer reads first what the users felt), and the
verdict's headline is the first finding's.

Counted from the logical requests (one per caller's request, retries folded in): failed = ended in an error
or a timeout; slowed = ended ok with TTFT or e2e above the SLO. A request counts for a finding when it was in
flight during the finding's range. Run-level findings without a range (retries, orphaned work when no episode
holds them) count the requests they are about. Where no request table exists, the cost is unknown (None),
never zero.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from ... import clock as clk
from ...scalars import float_value
from ..clockgap import MIN_REQUESTS
from ..context import Context
from ..records import Finding
from ..severity import Severity
from ..tables import FAILED_OUTCOMES
from . import beat_impact, impact_rule


def measure(ctx: Context, found: list[Finding]) -> None:
    """Set ``failed_requests`` and ``slowed_requests`` on every finding of ``found``."""
    req = ctx.inputs.requests
    usable = req.height and {"ts_start", "outcome"} <= set(req.columns)
    if not usable:
        for f in found:
            f["slowed_requests"] = None  # failed_requests: None unless the finding counted its own
        return
    failed = pl.col("outcome").is_in(FAILED_OUTCOMES)
    # a TTFT on the callers' clock: the gateway's is its header time, no first token
    slowed = _slowed(ctx, req)
    end = pl.col("ts_end").fill_null(pl.col("ts_start")) if "ts_end" in req.columns else pl.col("ts_start")
    for f in found:
        if (
            f.get("failed_requests") is not None
        ):  # counted by the finding itself (failed streams the table calls ok)
            continue
        which = _about(f, req.columns)
        for lo, hi in f.beats:  # a recurring pattern: in flight during any of its beats, not the first alone
            inflight = (pl.col("ts_start") <= hi) & (end >= lo)
            which = inflight if which is None else which | inflight
        if which is None and f.get("start") is not None:
            lo, hi = f["start"], f.get("end") or f["start"]
            which = (pl.col("ts_start") <= hi) & (end >= lo)
        if which is None:
            f["failed_requests"] = f["slowed_requests"] = None
            continue
        n_failed, n_slowed, n_in = req.select(
            (which & failed).sum().alias("f"), (which & slowed).sum().alias("s"), which.sum().alias("n")
        ).row(0)
        f["failed_requests"], f["slowed_requests"] = int(n_failed or 0), int(n_slowed or 0)
        f["requests_in_range"] = int(n_in or 0)


def by_impact(
    ctx: Context, found: list, ladder: bool = False, open_ids: frozenset[str] = frozenset()
) -> None:
    """Severity follows impact: a pressure finding whose requests are counted is lowered to what the callers
    felt: low when no request in flight during it was slowed or failed and their latency stayed under
    ``impact_latency_ratio`` times its baseline, medium when fewer than ``impact_high_share`` of them were slowed
    or failed, it lasted under ``impact_high_min_s``, or only their latency rose so. Never raised; left as its class
    says when the requests are not in the folder (a server log alone). On a ladder (``ladder``) the step before is
    a lower load by design, no baseline: the SLO alone judges its steps. The episodes of ``open_ids`` were still on
    when the observation stopped: their time under pressure is a lower bound. The facts are counted here; the rule
    is decided once, and its words rendered from the decision, in ``impact_rule``."""
    th, req = ctx.th, ctx.inputs.requests
    # slowed requests are counted only when the callers' latency is in the folder: without it a slow first token
    # would count as no impact. Callers with an e2e and no TTFT at all (non-streaming: nothing reaches them before
    # the end, so their e2e is what they felt) are judged by it, and the evidence says the TTFT was unknown
    if not req.height or "ttft_s" not in req.columns or "origin" not in req.columns:
        return
    callers = req.filter(pl.col("origin") == "client")
    by = ""
    if not callers.filter(pl.col("ttft_s").is_not_null()).height:
        if "e2e_s" not in req.columns or not callers.filter(pl.col("e2e_s").is_not_null()).height:
            return
        by = " (judged by the callers' e2e: their TTFT is not in their records)"
    fig = "e2e" if by else "ttft"
    failed = pl.col("outcome").is_in(FAILED_OUTCOMES)
    for f in found:
        if f["kind"] != "pressure" or f.get("episode_id") is None or f["severity"] not in ("high", "medium"):
            continue
        if f["failed_requests"] is None or not f.get(
            "requests_in_range"
        ):  # none in flight: unknown, not none hit
            continue
        hit, n = f["failed_requests"] + f["slowed_requests"], f["requests_in_range"]
        # a pattern's time under pressure is its beats' together (its first beat alone was 0 s in abort-ignored)
        dur = (
            sum((hi - lo).total_seconds() for lo, hi in f.beats)
            if f.beats
            else (f["end"] - f["start"]).total_seconds()
            if f["start"] is not None and f["end"] is not None
            else 0.0
        )
        pattern = (
            beat_impact.of(ctx, req, failed | _slowed(ctx, req), callers, fig, f.beats) if f.beats else None
        )
        rise = None
        if hit == 0 and not ladder and pattern is None:
            rise = latency_rise(ctx, callers, fig, f["start"], f["end"] or f["start"])
        rose = pattern is not None and hit == 0 and not ladder and pattern.rose(th.impact_latency_ratio)
        felt = impact_rule.Felt(
            f["failed_requests"],
            f["slowed_requests"],
            n,
            dur,
            f["severity"],
            bool(f.beats),
            by,
            rise,
            rose,
            open_end=not f.beats and f["episode_id"] in open_ids,
        )
        sev = impact_rule.decide(
            felt, th, tuple(pattern.facts() if pattern else ()), tuple(pattern.missing() if pattern else ())
        )
        if pattern is not None:  # every beat's cost, each latency on its clock, whatever the rule read
            f["evidence"] += f"; {pattern.words()}"
        f["evidence"] += impact_rule.evidence(sev)
        f["severity"], f.severity_by = sev.level, sev


def _slowed(ctx: Context, req: pl.DataFrame) -> pl.Expr:
    """measure's 'slowed': ended ok with the callers' TTFT or any e2e above the SLO."""
    late = pl.lit(False)
    if "ttft_s" in req.columns:
        callers = (pl.col("origin") != "gateway").fill_null(True) if "origin" in req.columns else pl.lit(True)
        late = late | ((pl.col("ttft_s") > ctx.slo.ttft_s) & callers).fill_null(False)
    if "e2e_s" in req.columns:
        late = late | (pl.col("e2e_s") > ctx.slo.e2e_s).fill_null(False)
    return (pl.col("outcome") == "ok") & late


# What the severity cap under unknown impact applies to: the findings whose severity is their class's (a regime of
# KV pressure, preemptions or queueing seen in the server's stats), not a cost they measured. A death is its own
# impact (crash, stall keep theirs); errors, slow answers and retries are counted on the requests themselves.
CLASS_RATED = ("pressure",)
UNKNOWN_CAP = (
    "medium"  # may have hurt (medium: spikes, SLO breaches), but 'high' claims a regime the users felt
)


def unknown_impact(found: list) -> None:
    """A class-rated finding with no request, client or gateway record in flight during it (a server log alone:
    vllm-public 41's 10 s of KV ≥ 90 %, 33's one V0 preemption) did not show what the callers felt: its severity
    is capped at UNKNOWN_CAP, and its evidence says the impact is unknown and why, rather than [high] on the class
    alone."""
    for f in found:
        if f["kind"] not in CLASS_RATED or f.get("episode_id") is None:
            continue
        if f.get("failed_requests") is not None and f.get("requests_in_range"):
            continue  # counted: by_impact judged it
        why = (
            "no request records"
            if f.get("failed_requests") is None
            else "no request records in flight during it"
        )
        said = f"impact on callers unknown: {why}"
        was = f.severity_by
        if SEVERITY.index(f["severity"]) < SEVERITY.index(UNKNOWN_CAP):
            f["evidence"] += f"; severity {UNKNOWN_CAP}, not {f['severity']} by its class: {said}"
            f["severity"] = UNKNOWN_CAP
            rule = "impact_unknown"
        elif f["severity"] == UNKNOWN_CAP:  # a low one claims no impact (and says its own 'not observed')
            f["evidence"] += f"; {said}"
            rule = "class"
        else:
            continue
        f.severity_by = Severity(
            f["severity"],
            rule,
            f"{was.said}; {said}" if was is not None else said,
            tuple(was.facts) if was is not None else (),
            missing=(f"the callers' records in flight during it ({why})",),
        )


def latency_rise(ctx: Context, callers: pl.DataFrame, fig: str, start, end) -> dict | None:
    """The callers' ``fig`` p95 (their own clock) over the answered requests in flight during [start, end] against
    their p95 over those answered in the baseline lookback before it, when the first is at least
    ``impact_latency_ratio`` times the second; None when it is not, or either side has fewer than MIN_REQUESTS
    (then nothing is said of it, and the SLO alone judges)."""
    col = f"{fig}_s"
    if start is None or col not in callers.columns or "ts_end" not in callers.columns:
        return None
    ok = callers.filter(
        (pl.col("outcome") == "ok") & pl.col(col).is_not_null() & pl.col("ts_end").is_not_null()
    )
    # the episodes' own baseline window (episode_heads._ranges): the lookback before the lead-in, where a burst that
    # set the episode off already shows (spike-b's burst began 3 s before its first preemption)
    hi = start - timedelta(seconds=ctx.th.merge_gap_s)
    lo = hi - timedelta(seconds=ctx.th.baseline_lookback_s)
    if ctx.span_lo is not None:
        lo = max(lo, ctx.span_lo)
    during = ok.filter((pl.col("ts_start") <= end) & (pl.col("ts_end") >= start))[col]
    before = ok.filter((pl.col("ts_start") >= lo) & (pl.col("ts_end") < hi))[col]
    if during.len() < MIN_REQUESTS or before.len() < MIN_REQUESTS:
        return None
    p_in, p_before = (
        float_value(during.quantile(0.95, "linear")),
        float_value(before.quantile(0.95, "linear")),
    )
    if p_before <= 0 or p_in < ctx.th.impact_latency_ratio * p_before:
        return None
    clock = (
        "+".join(sorted(ok["latency_clock"].drop_nulls().unique().to_list()))
        if "latency_clock" in ok.columns
        else ""
    )
    name = f"{'TTFT' if fig == 'ttft' else 'e2e'} p95"
    return {
        "figure": fig,
        "clock": clock or None,
        "p95_s": round(p_in, 3),
        "baseline_p95_s": round(p_before, 3),
        "requests": during.len(),
        "baseline_requests": before.len(),
        "words": (
            f"{name} was {p_in:.2f} s during it ({during.len():,} answered) against {p_before:.2f} s before it "
            f"({clk.hms_range(lo, hi)}, {before.len():,} answered), {p_in / p_before:.1f}× "
            f"({clock or 'unknown'} clock)"
        ),
    }


SEVERITY = ("critical", "high", "medium", "low", "info")


def _about(f: Finding, cols: list[str]) -> pl.Expr | None:
    """The requests a run-level finding is about, when it has no time range of its own."""
    if f.get("start") is not None:
        return None
    if f["kind"] == "retries" and "client_attempts" in cols:
        more = pl.col("client_attempts").fill_null(1) > 1
        if "gateway_attempts" in cols:
            more = more | (pl.col("gateway_attempts").fill_null(1) > 1)
        return more
    if f["kind"] == "orphans" and "orphaned_executions" in cols:
        return pl.col("orphaned_executions").fill_null(0) > 0
    return None


def cost(f: Finding) -> int:
    """The ranking's key within a severity: failed and slowed requests (unknown ranks after any known)."""
    a, b = f.get("failed_requests"), f.get("slowed_requests")
    return -1 if a is None and b is None else (a or 0) + (b or 0)


def words(f: dict) -> str:
    """'12 failed and 340 slowed requests' (what a finding's users felt), or '' when unknown."""
    a, b = f.get("failed_requests"), f.get("slowed_requests")
    if a is None and b is None:
        return ""
    return f"{a or 0:,} failed and {b or 0:,} slowed request{'s' if (b or 0) != 1 else ''}"
