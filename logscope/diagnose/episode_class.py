"""An episode's class and the reason for it (``classify``), and a one-sample level set aside as context
(``mark_context``); a pattern of spikes is decided after them (``recurring``).

Classes, in the order they are decided:

* **crash**: the episode holds a death (OOM, engine death, or a silent death followed by a restart).
* **sustained**: still abnormal when the logs (or the range) end; or still going at the last arrival;
  or it ended only when its load did: in the ``recovery_window_s`` after it, arrivals fell below
  ``recovery_load_ratio`` of the load before it (a ladder step's pressure ends with the step), unless it is a
  latency of the requests whose next requests, in the ``load_end_tolerance_s`` after it, came at that share of the
  load or more: they met the SLO at that load (``slow.kept_load``).
* **spike** (a one-off): it began after the last arrival and drained to baseline (the backlog of the last
  requests; the claim names the missing test: no load after it); or the signals returned to baseline while the server kept serving (arrivals after
  it at ``recovery_load_ratio`` of the baseline or more); the reason says whether it followed a surge of
  arrivals or prompt lengths (``rise_ratio``), with the rates before, during and after.
* **recurring**: ``recurring_min`` or more spikes of one signal; the reason gives their spacing. A
  sustained episode of that signal on a replica of the pattern, sustained only because its log ends inside
  it (no longer than the pattern's longest spike), is its last spike, cut short.

Neither an episode's duration nor its share of the observed span decides its class: both change when
calm time is added or a range is narrowed, and a class must not (tests/test_metamorphic.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .. import clock
from . import latency_named, preemption_count, slow
from .context import Context
from .episode_heads import COUNTED
from .load_ends import last_arrival_at, phase_pause, stop_in
from .load_words import rates as _rates
from .load_words import rise as _rise
from .records import Episode
from .stretches import REQUEST_SIGNALS

UNIT = {
    "preemptions": "preemptions",
    "kv_pressure": "KV usage",
    "queue": "waiting",
    "errors": "errors",
    "retries": "retries",
    "orphans": "orphaned executions",
    "ttft": "TTFT p95 (s)",
    "e2e": "e2e p95 (s)",
    "crash": "deaths",
    "stall": "running with no progress",
}
SEP = " — "  # between what the episode is and why it got its class


def hms(ts: datetime | None) -> str:
    return clock.hms(ts) if ts is not None else "?"


BLIP_SIGNALS = ("kv_pressure", "queue", "stall")


def mark_context(eps: list[Episode]) -> None:
    """A level seen on one stats sample that was back at baseline on the next, while the server kept serving
    (a one-sample KV blip): context beside the timeline, not an episode to act on. It gets no finding and no
    --fail-on matches it; one still abnormal when the logs end stays what its rule says (nothing after it)."""
    for e in eps:
        if e["class"] == "spike" and e["signal"] in BLIP_SIGNALS and e["duration_s"] == 0 and e["count"] == 1:
            e["class"] = "context"
            e["decided_by"] = {**(e.get("decided_by") or {}), "rule": "one_sample"}
            e["reason"] = e["reason"].replace(SEP, f"{SEP}one sample, ", 1) + " (context, not a finding)"


def _counted(ep: Episode) -> str:
    if ep["signal"] == "preemptions":  # V0's warnings count one per 50: by its counter, or a floor
        return preemption_count.words(ep)
    return f"{ep['count']} {UNIT[ep['signal']] if ep['count'] != 1 else UNIT[ep['signal']].rstrip('s')}"


def classify(
    ctx: Context, ep: Episode, companions: list[dict], before: dict, lead: dict, death, own_end: bool = False
) -> tuple[str, str]:
    th = ctx.th
    sig, start, end = ep["signal"], ep["start"], ep["end"]
    # one sample has a time, not a duration: '06:16:52–06:16:52 (0 s)' read as a measured 0 s (public-2 n01)
    when = (
        f"at {clock.hms(start)} (one sample)"
        if start == end
        else f"{clock.hms_range(start, end)} ({ep['duration_s']:.{1 if ep['duration_s'] < 1 else 0}f} s)"
    )
    head = f"{_unit(ctx, sig, start, end)} {when}"
    if sig in COUNTED:
        head = f"{_counted(ep)} {when}"
    comp = (
        "; with "
        + ", ".join(
            f"{c['signal']} {clock.hms_span(c['start'], c['end'])}"
            + (f" ({c['count']:,} failed)" if c["signal"] == "errors" else "")
            for c in companions
        )
        if companions
        else ""
    )
    if death is not None:
        ep["decided_by"] = {
            "rule": "death",
            "death_kinds": "+".join(death.kinds),
            "death_ts": death.ts,
            "ready_ts": death.ready_ts,
            "downtime_s": death.downtime_s,
        }
        what = (
            (
                "silent death (log stops, new banner)"
                if death.restart_ts
                else "silent death (log stops, connections refused)"
            )
            if death.kinds == ["silent"]
            else "+".join(death.kinds)
        )
        if death.at_startup:
            return "crash", f"{what} at startup {hms(death.ts)}: the server never served a request{comp}"
        if death.ready_ts is not None:
            return "crash", (
                f"{what} at {hms(death.ts)}, restarted (pid {death.new_pid}) and ready at "
                f"{hms(death.ready_ts)}: down {death.downtime_s:.0f} s{comp}"
            )
        # whether it died at start-up is not in the logs: said, not read as a death while serving
        unknown = f"; at start-up: unknown ({death.startup_basis})" if death.at_startup is None else ""
        return "crash", (
            f"{what} at {hms(death.ts)} with no restart before {ctx.inputs.rng.end_words}{unknown}{comp}"
        )
    load = {
        "recovered": ep["recovered"],
        "end": end,
        "last_arrival": ctx.load_end,
        "arrival_rate_before": ep["arrival_rate_before"],
        "arrival_rate_during": ep["arrival_rate_during"],
        "arrival_rate_after": ep["arrival_rate_after"],
    }
    tol = timedelta(seconds=th.load_end_tolerance_s)
    if (
        not ep["recovered"]
        and sig in REQUEST_SIGNALS
        and ctx.load_end is not None
        and end >= ctx.load_end - tol
        and ctx.span_hi is not None
        and ctx.span_hi > end + tol
    ):
        # a signal of the requests (timed by their arrivals) has no sample after the last arrival: it did not end with
        # the logs, which go on (gateway-queue: its TTFT stretch ends with the last arrival at 08:29:22, the queue
        # drained until 08:30:00). It lasted as long as the load did
        ep["decided_by"] = {"rule": "load_end", **load}
        return (
            "sustained",
            f"{head}{SEP}no recovery while the load lasted (last arrival {hms(ctx.load_end)}){comp}",
        )
    if not ep["recovered"]:
        stop = stop_in(ctx, ep)
        ep["decided_by"] = {
            "rule": "stopped" if stop is not None else "ends_abnormal",
            **load,
            "stopped_at": stop,
        }
        if stop is not None:
            return "sustained", (
                f"{head}{SEP}still abnormal when the server was stopped at {hms(stop)} (a graceful "
                f"shutdown: SIGTERM, a deploy or a failing probe){comp}"
            )
        left = [c for c in companions if c.get("to_the_end")]
        if own_end and left:  # its own signal did end, a companion did not
            what = ", ".join(f"its {c['signal'].replace('_', ' ')}" for c in left)
            return "sustained", f"{head}{SEP}{what} still abnormal when {ctx.inputs.rng.end_words}{comp}"
        return "sustained", f"{head}{SEP}still abnormal when {ctx.inputs.rng.end_words}{comp}"
    last = last_arrival_at(ctx, ep) if ctx.load_end is not None else None
    if last is not None and start > last:
        # it began after the last arrival and went back to baseline while the server still reported: the backlog
        # of the last requests, drained (kv-short: 3 long prompts sent at once, served one at a time, waiting
        # 2 -> 1 -> 0). No load after it can say whether it would recur: a one-off, the test named as missing
        ep["decided_by"] = {"rule": "drained", **load, "last_arrival": last, "samples_after": 1}
        return "spike", (
            f"{head}{SEP}the backlog of the last requests, drained after the load ended (last arrival "
            f"{hms(last)}): back to baseline with no new arrivals{comp}"
        )
    if ctx.load_end is not None and end >= ctx.load_end - tol:
        ep["decided_by"] = {"rule": "load_end", **load}
        return (
            "sustained",
            f"{head}{SEP}no recovery while the load lasted (last arrival {hms(ctx.load_end)}){comp}",
        )
    # the client's load phase ended as the episode did and the client paused (a ladder's gap between steps):
    # arrivals fell to none, below any recovery_load_ratio of the load before (the 'load fell' rule at its limit).
    # Only when the folder's arrivals did fall: one client's short phase ending while others kept the same rate
    # (kv-blip: a 0.15 s burst client beside a calm one, 12.4/s before and 13.6/s after) paused nothing
    # (the reference: arrivals during it, the load that paused; before it for a one-sample episode; unknown rates
    # leave the phases alone to say)
    stop = phase_pause(ctx, start, end)
    after, paused = ep["arrival_rate_after"], ep["arrival_rate_during"] or ep["arrival_rate_before"]
    if (
        stop is not None
        and th.recovery_load_ratio > 0
        and (after is None or not paused or after < th.recovery_load_ratio * paused)
    ):
        load["last_arrival"] = stop
        ep["decided_by"] = {"rule": "load_paused", **load}
        return (
            "sustained",
            f"{head}{SEP}abnormal for as long as its load lasted: the client's load phase ended at {hms(stop)} "
            f"and it sent nothing for {th.recovery_window_s:g} s or more, no recovery at that load{comp}",
        )
    rates = _rates(ep)
    b = ep["arrival_rate_before"]
    ref = b if b else ep["arrival_rate_during"]
    # a latency stretch of the requests recovers on the next requests: under the SLO at its load, it did not end with it
    fell = bool(after is not None and ref and after < th.recovery_load_ratio * ref)
    kept = slow.kept_load(ctx, sig, end, ref) if fell else None
    if fell and kept is None:
        ep["decided_by"] = {"rule": "load_fell", **load}
        return "sustained", (
            f"{head}{SEP}abnormal for as long as its load lasted: it ended only when arrivals "
            f"fell ({rates}), no recovery at that load{comp}"
        )
    ep["decided_by"] = {
        "rule": "recovered",
        **load,
        "samples_after": 1,
    }  # a sample after it, back at baseline
    if kept is not None:
        ep["decided_by"]["arrival_rate_kept"] = kept
    if after is None:  # no request log: the server's own samples say it recovered, the load is unknown
        return "spike", f"{head}{SEP}back to baseline after it (the load is unknown: no request log){comp}"
    still = f" ({kept:.1f}/s in the {th.load_end_tolerance_s:g} s after it)" if kept is not None else ""
    return (
        "spike",
        f"{head}{SEP}back to baseline while still serving{still}, {_rise(ep, before, lead, th)}{comp}",
    )


def _unit(ctx: Context, sig: str, start: datetime, end: datetime) -> str:
    """The signal's unit; a latency's with the clock its windows were measured on (client, gateway, engine) and
    its source, or 'clock unknown' when they do not say."""
    if sig not in latency_named.NAMES:
        return UNIT[sig]
    return latency_named.named(ctx, sig, start, end)
