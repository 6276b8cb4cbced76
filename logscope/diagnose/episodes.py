"""Episodes: abnormal stretches of every signal, grouped when they overlap, then classified.

Signals (see ``detect`` for the baseline method):

============  ======================================================  =====================================
signal        series                                                   abnormal when
============  ======================================================  =====================================
stall         stats samples with running >= 1 and 0 tokens/s          on ``stall_min_samples`` samples
              (prompt and generation)
preemptions   per-interval counts (Prometheus-derived, else the stats  >= ``preemptions_min``
              line's 'Preemptions: N', else V0 warnings 1-in-50)
kv_pressure   KV-cache usage per stats sample                          >= ``kv_full``
queue         waiting requests per stats sample                        >= ``waiting_min`` on
                                                                       ``queue_min_samples`` samples
errors        failed requests, each once at its end (``failures``:     >= ``errors_floor`` failures within
              logical requests, else gateway / vLLM 5xx answers)       ``merge_gap_s`` of each other, above the
                                                                       SLO's failure share of the requests
                                                                       ending in them (no baseline, no window)
retries       client + gateway retries per window                      robust outlier >= ``retries_floor``
orphans       executions running after their caller left (caller's     >= ``orphans_floor`` executions
              end to server's finish; merged within ``merge_gap_s``)   (no baseline: waste on any server)
ttft / e2e    answered requests above the SLO, each once at its start  >= ``slow_floor`` of them within
              on the run's clock (``slow``; cold starts left out)      ``merge_gap_s`` of each other, the p95
                                                                       of the requests started in them above
                                                                       the SLO (no baseline, no window)
crash         OOM / engine death / silent death (lifecycle)            always
============  ======================================================  =====================================

On one replica, stretches of server signals that overlap or lie within ``merge_gap_s`` are one
episode, one per death: the preemptions, the full KV cache and the queue of one burst are one
incident seen through three signals. The request signals of the whole folder (errors, retries,
orphans, TTFT, e2e) within ``merge_gap_s`` of it are its companions too (the slow first tokens of
that burst), but never join two episodes: a day-long error rate would otherwise chain every burst of
every replica into one. Request-signal stretches near no server episode are episodes of their own.
The episode is named after its most telling signal (order of ``episode_heads.PRIORITY``) and timed by that
signal; the others are listed as its companions.

The stretches and their grouping are in ``stretches``, the context every step reads in ``context``; each
episode's head (primary signal, companions, ranges) in ``episode_heads``, its baseline in ``episode_baselines``,
its details in ``episode_details``, its class in ``episode_class`` and a pattern of spikes in ``recurring``;
here, each episode built from them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from . import (
    episode_baselines,
    episode_class,
    episode_details,
    episode_heads,
    figures,
    latency_named,
    recurring,
)
from .context import Context
from .episode_class import SEP
from .episode_details import WINDOW_SUMS
from .episode_heads import COUNTED
from .load_ends import open_end
from .load_words import RATE_SPAN_S, came_after
from .records import Episode
from .stretches import grouped, stretches


def build(ctx: Context) -> list[Episode]:
    """Episodes as dicts (table columns + details), ordered by start; ids are given by the caller."""
    heads = episode_heads.heads(ctx, grouped(stretches(ctx), ctx.th.merge_gap_s))
    # the figures of all episodes at once: a day-long incident has thousands of episodes
    req, server = ctx.by_time(ctx.inputs.requests, "ts_start"), ctx.by_time(ctx.server)
    figs = zip(
        figures.requests_many(req, [(h["start"], h["end"]) for h in heads]),
        figures.requests_many(req, [h["ranges"]["before"] for h in heads]),
        figures.requests_many(req, [h["ranges"]["lead"] for h in heads]),
        figures.requests_many(req, [_after(ctx, h["end"]) for h in heads]),
        figures.server_state_many(
            server, [h["state_range"] for h in heads], [h["state_replica"] for h in heads]
        ),
        figures.server_state_many(server, [h["ranges"]["before"] for h in heads]),
        strict=True,
    )
    win = ctx.by_time(ctx.inputs.windows)
    pad, one = timedelta(seconds=ctx.inputs.window_s), timedelta(microseconds=1)
    more = zip(
        figures.windows_sums_many(win, WINDOW_SUMS, [(h["start"] - pad, h["end"]) for h in heads]),
        figures.preemptions_many(ctx.by_time(ctx.pre), [(h["start"] - one, h["end"]) for h in heads]),
        episode_baselines.baselines(ctx, heads),
        episode_details.phases_many(ctx.inputs.phases, [(h["start"], h["end"]) for h in heads]),
        strict=True,
    )
    eps = [
        _episode(ctx, h, during, before, lead, after, state, state_before, sums, pre, baseline, phases)
        for h, (during, before, lead, after, state, state_before), (sums, pre, baseline, phases) in zip(
            heads, figs, more, strict=True
        )
    ]
    eps.sort(key=lambda e: (e["start"], e["signal"], e["replica"] or ""))
    episode_class.mark_context(eps)
    recurring.mark(eps, ctx.th)
    return eps


def _after(ctx: Context, end: datetime) -> tuple[datetime, datetime] | tuple[None, None]:
    """The recovery window after an episode, within what was observed (None: nothing observed after it)."""
    hi = end + timedelta(seconds=ctx.th.recovery_window_s)
    if ctx.span_hi is not None:
        hi = min(hi, ctx.span_hi)
    return (end, hi) if hi > end else (None, None)


def _episode(
    ctx: Context,
    h: dict,
    during_req: dict,
    before_req: dict,
    lead_req: dict,
    after_req: dict,
    state: dict,
    state_before: dict,
    sums: dict[str, int],
    pre: int | None,
    baseline: float | None,
    phases: list[dict],
) -> Episode:
    primary, replica, start, end, w = (h[k] for k in ("primary", "replica", "start", "end", "ranges"))
    companions = h["companions"]
    death = ctx.deaths.get((start, replica)) if primary == "crash" else None
    dur = (end - start).total_seconds()
    # no rate over less than a second: its arrivals are said as a count (load_words.during)
    if 0 < dur < RATE_SPAN_S:
        during_req = {**during_req, "arrival_rate": None}
    total = float(h["total"])
    count = 1 if primary == "crash" else int(round(total)) if primary in COUNTED else int(h["samples"])
    own_end = bool(h["last_sample"] > end)  # its own signal has a sample after it
    recovered = (
        own_end and not any(c.get("to_the_end") for c in companions)
        if death is None
        else death.ready_ts is not None
    )
    ep = Episode(
        signal=primary,
        replica=replica,
        start=start,
        end=end,
        duration_s=dur,
        share_of_span=(dur / ctx.span_s) if ctx.span_s else None,
        recovered=recovered,
        peak=float(h["peak"]),
        baseline=baseline,
        count=count,
        **{
            k: state[k]
            for k in ("running_max", "running_mean", "waiting_max", "waiting_mean", "kv_max", "kv_mean")
        },
        arrival_rate_before=before_req["arrival_rate"],
        arrival_rate_during=during_req["arrival_rate"],
        arrival_rate_after=after_req["arrival_rate"],
        prompt_tokens_mean=during_req["prompt_tokens_mean"],
        output_tokens_mean=during_req["output_tokens_mean"],
        ttft_p95=during_req["ttft_p95"],
        e2e_p95=during_req["e2e_p95"],
        success_share=during_req["success_share"],
    )
    if primary in latency_named.NAMES:  # the clock and source the signal was measured on, for every sentence
        ep["signal_clock"], ep["signal_source"] = latency_named.measured(ctx, primary, start, end)
    ep["details"] = episode_details.details(
        ctx, ep, companions, before_req, during_req, lead_req, death, sums, pre, phases
    )
    # the same server figures over the baseline window, side by side with the episode's
    ep["details"]["state_before"] = state_before
    ep["details"]["state_during"] = state
    ep["details"]["baseline_window"] = {"start": w["before"][0], "end": w["before"][1]}
    if h.get("baseline_of"):  # what a latency's baseline is of, and its clock (slow.baselines)
        ep["details"]["baseline_of"] = h["baseline_of"]
    ep["class"], ep["reason"] = episode_class.classify(
        ctx, ep, companions, before_req, lead_req, death, own_end
    )
    if (
        death is None and ep["arrival_rate_after"] is not None
    ):  # a surge of its load before it, or none (beats)
        ep["decided_by"]["came_after"] = came_after(before_req, lead_req, ctx.th)
    ep["why"] = ep["reason"].split(SEP, 1)[1].split("; with ")[0] if SEP in ep["reason"] else ep["reason"]
    ep["open_end"] = open_end(ep)
    return ep
