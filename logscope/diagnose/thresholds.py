"""Named, documented thresholds of the diagnosis. Every number that decides something lives here.

Override any of them with ``AnalyzeOptions(thresholds=Thresholds(kv_full=0.95))``: a name no threshold has
is a TypeError there. Thresholds given by name from a file (a diagnosis.json's ``thresholds``, which
``logscope report OUT --since`` judges another range by) go through ``from_dict``, which casts each value to
its threshold's type and returns the names it does not know: they are reported in ``diagnosis.json`` under
``thresholds_unknown``, never ignored silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Protocol


@dataclass(frozen=True)
class Thresholds:
    # --- robust baseline (median + k * MAD) ---
    mad_k: float = 4.0
    """A value is a robust outlier above median + mad_k * 1.4826 * MAD of its own series."""

    # --- per-signal levels ---
    kv_full: float = 0.9
    """KV-cache usage at or above this is 'near full' (vLLM admits new work only while blocks are free)."""
    preemptions_min: int = 1
    """Preemptions per interval that count as abnormal: any preemption means a running request lost its KV."""
    waiting_min: int = 1
    """Waiting requests that count as a queue ..."""
    queue_min_samples: int = 2
    """... when seen on at least this many consecutive stats samples (one sample can be a burst being admitted),"""
    queue_outlier_floor: int = 5
    """... or on one sample when it is also a robust outlier of at least this many waiting."""
    errors_floor: int = 3
    """Failed requests within merge_gap_s of each other below this are never an episode (a lone failure is not a
    regime; diagnose/failures.py)."""
    slow_floor: int = 3
    """Requests above the TTFT (or e2e) SLO within merge_gap_s of each other below this are never an episode (one
    slow request is no p95; diagnose/slow.py)."""
    retries_floor: int = 3
    """Retries per window below this are never an episode."""
    amplification_high: float = 1.5
    """Server executions per logical request at or above this (in a window with >= 3 arrivals) is a retry storm."""
    orphans_floor: int = 3
    """Server executions still running after their caller left, within merge_gap_s of each other, below which it is
    no episode."""
    orphans_share: float = 0.05
    """Orphaned executions are a finding when at least this share of the server's requests (a few can be
    timing noise of the cross-layer match)."""
    cancel_ran_on_max_share: float = 0.05
    """Cancellation is 'propagated' when at most this share of the attempts abandoned by their callers ran on
    at the server (a finish within the race window is not running on) ..."""
    cancel_aborted_min_share: float = 0.05
    """... and 'not propagated' when the server aborted at most this share of them; 'partly' in between."""
    stall_min_samples: int = 2
    """Stats samples in a row with requests running and 0 tokens/s that make a stall (a hung engine)."""
    slow_decode_tps: float = 1.0
    """Generation tokens/s per running request below which decoding is pathologically slow (a human reads 5-10
    tokens/s; a working engine decodes tens to hundreds per request), when nothing waits and no prompt is being
    prefilled: not capacity (public-2 n14: 0.4 tokens/s for 2 running, KV 0.6 %)."""

    clock_gap_min_s: float = 1.0
    """The callers' p95 latency (client clock) above the engine's (its histogram bucket's upper bound) by at
    least this many seconds ..."""
    clock_gap_ratio: float = 2.0
    """... and at least this many times it is a large gap: the time went to a queue in front of the engine (API
    server, gateway), which the engine's own figures cannot see."""
    clock_gap_span_ratio: float = 2.0
    """A range shorter than this many times the callers' p95 gives no gap: the engine's histogram over it counts
    the first tokens that fell inside it, while the requests the callers started in it got theirs up to that
    p95 later, mostly after it (frontend-bound's 2 s episodes, callers' TTFT p95 2.9 s: other requests)."""

    overload_min_s: float = 180.0
    """Offered load above completed load for at least this long, with the requests in flight growing over it, is
    a load above capacity (an open loop: arrivals do not wait for answers) ..."""
    overload_ratio: float = 1.1
    """... when arrivals exceed completions by at least this factor in each of its overload_bucket_s buckets."""
    overload_bucket_s: float = 30.0
    """The buckets the arrival and completion rates are compared in."""
    overload_ratio_growth: float = 0.1
    """... and the requests in flight grew over it by at least this share of the requests that arrived in it."""

    impact_high_share: float = 0.1
    """A pressure finding stays high only when at least this share of the requests in flight during it were slowed
    (above the SLO) or failed ..."""
    impact_high_min_s: float = 30.0
    """... for at least this long; fewer (or shorter) is medium, none is low: severity follows impact."""
    impact_latency_ratio: float = 2.0
    """A pressure finding none of whose requests broke the SLO is still felt (medium, not low) when the callers'
    latency p95 during it (their own clock) is at least this many times their p95 in the baseline lookback before
    it: spike-b's non-streaming callers waited 7.98 s (e2e p95) against 2.09 s before, all under the 20 s SLO."""

    # --- shaping intervals into episodes ---
    merge_gap_s: float = 10.0
    """Abnormal stretches of one signal closer than this are one stretch; signals closer than this are one episode."""
    v0_warning_merge_s: float = 120.0
    """V0 preemption warnings are printed once per 50 preemptions: they join when closer than this."""
    max_sample_gap_factor: float = 4.0
    """A gap longer than this many typical sample intervals (idle stats are demoted to DEBUG) breaks a stretch."""
    baseline_lookback_s: float = 60.0
    """The baseline of an episode is the signal over this long before it."""

    # --- classification ---
    load_end_tolerance_s: float = 5.0
    """An episode still going within this many seconds of the last arrival is sustained (no recovery while the
    load lasts) ..."""
    recovery_window_s: float = 10.0
    """... and so is one after which, in this long, ...."""
    recovery_load_ratio: float = 0.5
    """... arrivals fell below this share of the load before it (of the load during it without a baseline): it
    ended only when its load did. At or above it, the server recovered while still serving: a one-off."""
    recurring_min: int = 3
    """At least this many spikes of one signal make them recurring."""
    recurring_regular_share: float = 0.25
    """Their gaps all within this share of the median gap: 'about every <median> s'; wider, their range is said (a
    pattern 34 and 66 s apart is no rhythm of 66 s). Wording only: the class does not depend on it."""
    rise_ratio: float = 2.0
    """Arrivals (or prompt length) during / before at or above this is 'a sharp rise'."""

    # --- server lifecycle ---
    cold_start_s: float = 30.0
    """Seconds after the first request following a server start that count as cold (compilation, caches)."""
    shutdown_grace_s: float = 60.0
    """Errors within this long after a graceful shutdown began are shutdown noise, not a crash."""

    # --- ladder ---
    ladder_min_steps: int = 3
    """A ladder needs at least this many steps of rising concurrency/rate."""
    ladder_min_step_s: float = 10.0
    """Steps detected from in-flight counts must last at least this long."""
    slo_no_preemption: bool = False
    """A ladder step with a preemption misses the SLO even when its latency and success meet it (asked for with
    ``--slo-no-preemption``; otherwise pressure is reported beside the step and never fails it by itself)."""
    slo_no_queue: bool = False
    """A ladder step with a sustained queue (``waiting_min`` on ``queue_min_samples`` samples) misses the SLO
    (``--slo-no-queue``)."""

    def __post_init__(self) -> None:
        # a whole number given for a fractional threshold is that float: diagnosis.json says 0.0 either way
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(f.default, float) and isinstance(v, int) and not isinstance(v, bool):
                object.__setattr__(self, f.name, float(v))

    def as_dict(self) -> dict:
        return asdict(self)


class ThresholdOptions(Protocol):
    """What the diagnosis reads of its options for its thresholds (``AnalyzeOptions`` has them)."""

    thresholds: Thresholds | None  # None: the defaults
    thresholds_unknown: tuple[str, ...]  # names a stored diagnosis set that no threshold of this version has


def from_options(options: ThresholdOptions) -> tuple[Thresholds, list[str]]:
    """The thresholds to judge by, and the names given that no threshold has."""
    return options.thresholds or Thresholds(), sorted(options.thresholds_unknown)


def from_dict(given: Mapping[str, object]) -> tuple[Thresholds, list[str]]:
    """Thresholds overridden by name (values cast to each threshold's type), and the names no threshold has.
    ``pressure_breaks_slo``, the one switch ``slo_no_preemption`` and ``slo_no_queue`` replaced, sets both."""
    given = dict(given)
    if "pressure_breaks_slo" in given:
        legacy = _cast(False, given.pop("pressure_breaks_slo"))
        given.setdefault("slo_no_preemption", legacy)
        given.setdefault("slo_no_queue", legacy)
    names = {f.name for f in fields(Thresholds)}
    unknown = sorted(k for k in given if k not in names)
    known = {k: _cast(getattr(Thresholds, k), v) for k, v in given.items() if k in names}
    return replace(Thresholds(), **known), unknown


def _cast(default, v):
    if isinstance(default, bool):
        return v if isinstance(v, bool) else str(v).strip().lower() in ("1", "true", "yes", "on")
    return type(default)(v)
