"""What a recurring pattern cost its callers, over every beat: per spike and over them all (evid25).

A recurring pattern's finding is the first beat's episode standing for all of them, and its impact was counted on
that first beat alone: lab abort-ignored's "3 preemption spikes" read 1 failed of the requests in flight during
the first, 02:07:02, a single sample. Here each beat's callers are counted (in flight during it: failed, slowed
above the SLO) and their latency read against the calm before that beat (the lookback ``impact.latency_rise``
uses), then over the beats together: the requests in flight during any beat against those answered in the beats'
calm windows and in flight during none. Each latency names its clock (the callers' rows' ``latency_clock``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from ... import clock as clk
from ...scalars import float_value
from ..claims import Fact
from ..clockgap import MIN_REQUESTS
from ..context import Context

SHOWN = 6  # beats said one by one in the evidence (all of them in the severity claim's facts, up to FACTS)
FACTS = 20  # beats whose figures are facts of the claim: a day can hold hundreds


@dataclass(frozen=True)
class Beat:
    start: datetime
    end: datetime
    requests: int  # logical requests in flight during it
    hit: int  # of them, failed or slowed above the SLO
    p95_s: float | None  # the answered callers' p95 in flight during it (None: under MIN_REQUESTS answered)
    answered: int
    calm_p95_s: float | None  # theirs in the calm before it
    calm_answered: int


@dataclass(frozen=True)
class PatternImpact:
    figure: str  # 'ttft' or 'e2e'
    clock: str | None  # the clock(s) the callers' latencies were measured on ('client')
    beats: tuple[Beat, ...]
    requests: int  # in flight during any beat
    hit: int
    p95_s: float | None  # answered in flight during any beat
    answered: int
    calm_p95_s: float | None  # answered in the beats' calm windows, in flight during none
    calm_answered: int

    def ratio(self) -> float | None:
        if self.p95_s is None or not self.calm_p95_s:
            return None
        return self.p95_s / self.calm_p95_s

    def rose(self, ratio: float) -> bool:
        """The callers' latency during the beats at least ``ratio`` times their calm one."""
        r = self.ratio()
        return r is not None and r >= ratio

    def _p95(self, p: float | None, n: int) -> str:
        return (
            f"{p:.2f} s ({n:,} answered)"
            if p is not None
            else f"not read ({n:,} answered, under {MIN_REQUESTS})"
        )

    def words(self) -> str:
        name = f"{'TTFT' if self.figure == 'ttft' else 'e2e'} p95"
        on = f"{self.clock or 'unknown'} clock"
        r = self.ratio()
        times = f", {r:.1f}×" if r is not None else ""
        head = (
            f"impact over its {len(self.beats)} spikes: {self.hit:,} of the {self.requests:,} requests in flight "
            f"during them slowed or failed; the callers' {name} {self._p95(self.p95_s, self.answered)} during them "
            f"against {self._p95(self.calm_p95_s, self.calm_answered)} in the calm before each{times} ({on})"
        )
        each = [
            f"{clk.hms_range(b.start, b.end) if b.end > b.start else clk.hms(b.start)} {b.hit:,} of {b.requests:,}"
            + (
                f", {name} {b.p95_s:.2f} s against {b.calm_p95_s:.2f} s"
                if b.p95_s is not None and b.calm_p95_s is not None
                else f", {name} not read ({b.answered:,} answered during, {b.calm_answered:,} before)"
            )
            for b in self.beats[:SHOWN]
        ]
        more = f", … {len(self.beats) - SHOWN} more (summary.json)" if len(self.beats) > SHOWN else ""
        return f"{head}; per spike ({on}): " + "; ".join(each) + more

    def facts(self) -> list[Fact]:
        """The figures the severity read: the pattern's, then each beat's (up to FACTS), latencies with their
        clock."""
        src = "client_records"

        def lat(name: str, v: float | None) -> Fact:
            return Fact(name, v, src, self.clock, "s")

        out = [
            Fact("spikes", len(self.beats), None, None, "spikes"),  # their counts: the impact's own facts
            lat(f"{self.figure}_p95_during", self.p95_s),
            Fact("answered_during", self.answered, src, None, "requests"),
            lat(f"{self.figure}_p95_calm", self.calm_p95_s),
            Fact("answered_calm", self.calm_answered, src, None, "requests"),
        ]
        for i, b in enumerate(self.beats[:FACTS], 1):
            out += [
                Fact(f"spike_{i}_start", b.start),
                Fact(f"spike_{i}_slowed_or_failed", b.hit, None, None, "requests"),
                Fact(f"spike_{i}_requests_in_flight", b.requests, None, None, "requests"),
                lat(f"spike_{i}_{self.figure}_p95_during", b.p95_s),
                lat(f"spike_{i}_{self.figure}_p95_calm", b.calm_p95_s),
            ]
        return out

    def missing(self) -> list[str]:
        out = []
        if self.p95_s is None or self.calm_p95_s is None:
            out.append(
                f"the callers' {self.figure} p95 during the spikes or in the calm before them: under "
                f"{MIN_REQUESTS} answered"
            )
        if len(self.beats) > FACTS:
            out.append(f"the figures of spikes {FACTS + 1}–{len(self.beats)} (beyond the first {FACTS})")
        return out


def _p95(s: pl.Series) -> float | None:
    return round(float_value(s.quantile(0.95, "linear")), 3) if s.len() >= MIN_REQUESTS else None


def of(
    ctx: Context,
    req: pl.DataFrame,
    hit: pl.Expr,
    callers: pl.DataFrame,
    fig: str,
    beats: list[tuple[datetime, datetime]],
) -> PatternImpact | None:
    """The pattern's impact over ``beats`` ((start, end) each): ``req`` the logical requests (``hit``: failed or
    slowed), ``callers`` the client's, whose ``fig`` latency is read. None when the callers' latency is not in them."""
    col = f"{fig}_s"
    if not beats or col not in callers.columns or "ts_end" not in callers.columns:
        return None
    end = pl.col("ts_end").fill_null(pl.col("ts_start")) if "ts_end" in req.columns else pl.col("ts_start")
    ok = callers.filter(
        (pl.col("outcome") == "ok") & pl.col(col).is_not_null() & pl.col("ts_end").is_not_null()
    ).with_row_index("_i")
    gap, back = timedelta(seconds=ctx.th.merge_gap_s), timedelta(seconds=ctx.th.baseline_lookback_s)
    rows, any_in, any_req, calm = [], pl.lit(False), pl.lit(False), pl.lit(False)
    for lo_t, hi_t in beats:
        any_in = any_in | ((pl.col("ts_start") <= hi_t) & (pl.col("ts_end") >= lo_t))
    for lo_t, hi_t in beats:
        inflight = (pl.col("ts_start") <= hi_t) & (end >= lo_t)
        n, h = req.select(inflight.sum().alias("n"), (inflight & hit).sum().alias("h")).row(0)
        during = ok.filter((pl.col("ts_start") <= hi_t) & (pl.col("ts_end") >= lo_t))[col]
        hi = lo_t - gap
        lo = max(hi - back, ctx.span_lo) if ctx.span_lo is not None else hi - back
        before_x = (pl.col("ts_start") >= lo) & (pl.col("ts_end") < hi)
        before = ok.filter(before_x & ~any_in)[
            col
        ]  # the calm before it: no beat's requests (an earlier one's)
        rows.append(
            Beat(lo_t, hi_t, int(n or 0), int(h or 0), _p95(during), during.len(), _p95(before), before.len())
        )
        any_req = any_req | inflight
        calm = calm | before_x
    n, h = req.select(any_req.sum().alias("n"), (any_req & hit).sum().alias("h")).row(0)
    during = ok.filter(any_in)[col]
    quiet = ok.filter(calm & ~any_in)[col]
    clocks = sorted(set(ok["latency_clock"].drop_nulls().to_list())) if "latency_clock" in ok.columns else []
    return PatternImpact(
        fig,
        " + ".join(clocks) or None,
        tuple(rows),
        int(n or 0),
        int(h or 0),
        _p95(during),
        during.len(),
        _p95(quiet),
        quiet.len(),
    )
