"""The context every diagnosis step reads: the inputs, their server series, the span, SLO and thresholds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

import polars as pl

from ..scalars import time_or_none
from .histograms import Histograms
from .lifecycle import Lifecycle
from .server_series import preemption_series, server_series, v0_warnings
from .tables import Inputs
from .thresholds import Thresholds

# nginx logs these at [info] in normal operation (keep-alive closes, clients hanging up after [DONE])
BENIGN_GATEWAY_ERRORS = ("keepalive_closed", "client_closed")


@dataclass
class Slo:
    ttft_s: float
    e2e_s: float
    success: float


@dataclass
class Context:
    inputs: Inputs
    life: Lifecycle
    th: Thresholds
    slo: Slo
    server: pl.DataFrame = field(init=False)  # per replica, in time order
    pre: pl.DataFrame = field(init=False)
    warnings: pl.DataFrame = field(init=False)
    span_lo: datetime | None = None
    span_hi: datetime | None = None
    load_end: datetime | None = None
    hist: Histograms | None = None  # vLLM's latency / length histograms (from_histograms), when exported
    gateway_conf: dict | None = None  # the gateway configuration in the folder (gateway_config.read), if any
    stop_errors: dict = field(
        default_factory=dict
    )  # (ts, replica) of a stop or death -> stop_errors.StopErrors
    platform: object | None = (
        None  # platform.Facts: the kernel's, Kubernetes' and the GPUs' records (issue #40)
    )
    # stream_failures.StreamFailures: streamed answers that failed after the access log's 200
    stream_failures: object | None = None
    # episode id -> the engine spans' figures over it (span_figures.by_episode), when the folder has spans
    span_segments: dict = field(default_factory=dict)
    # range ('E1', 'step 3 (8)') -> its TTFT clock-gap claim (clockgap), read by the slow-first-token finding
    ttft_gaps: dict = field(default_factory=dict)
    _by_time: dict = field(default_factory=dict, init=False, repr=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        from .tables import span

        self.server = server_series(self.inputs.stats)
        self.pre = preemption_series(self.inputs.stats)
        self.warnings = v0_warnings(self.inputs.events)
        # a file timed only by its modification time places its rows at the copy's time: no bound of the span
        st = self.inputs.stats
        dated = st.filter(~pl.col("source").is_in(list(self.inputs.undated))) if self.inputs.undated else st
        self.span_lo, self.span_hi = span(dated, self.inputs.requests)
        if self.inputs.requests.height:
            self.load_end = time_or_none(self.inputs.requests["ts_start"].max())

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """What ``build`` gives, built once per context: figures several findings read (the failures, the answered
        requests) from modules this one cannot import without a cycle."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def by_time(self, frame: pl.DataFrame, col: str = "ts") -> pl.DataFrame:
        """``frame`` (one this context holds) in time order, sorted once: time ranges of it are then
        binary-search slices (figures.between). For figures that do not depend on row order."""
        key = (id(frame), col)
        hit = self._by_time.get(key)
        if hit is None or hit[0] is not frame:
            hit = (frame, frame.sort(col, maintain_order=True, nulls_last=True))
            self._by_time[key] = hit
        return hit[1]

    @cached_property
    def gateway_trouble(self) -> pl.DataFrame:
        """The gateway's error lines but the benign ones, in time order (what a death's details count)."""
        return self.inputs.gateway_errors.filter(~pl.col("kind").is_in(BENIGN_GATEWAY_ERRORS)).sort(
            "ts", maintain_order=True, nulls_last=True
        )

    @cached_property
    def deaths(self) -> dict:
        """The deaths by (time, replica or None), the first of each (what a crash episode is timed by)."""
        out: dict = {}
        for d in self.life.deaths:
            out.setdefault((d.ts, d.replica or None), d)
        return out

    @property
    def cold(self) -> list[tuple]:
        return [(c["start"], c["end"]) for c in self.life.cold]

    @property
    def span_s(self) -> float | None:
        if self.span_lo is None or self.span_hi is None:
            return None
        return (self.span_hi - self.span_lo).total_seconds()
