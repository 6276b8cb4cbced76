"""Two clocks, one range: the callers' latency beside the engine's, and the gap between them.

vLLM's TTFT histogram starts when the request reaches the engine; the callers' starts when they send it. Where
a ladder step (or an episode) has both, their p95s are never one figure: the gap between them is a claim of
its own. The callers' p95 is taken over the range's requests that took one attempt at every layer (a retried
request's latency holds its failed attempts, which the engine timed as separate requests); the gap is that p95
minus the upper bound of the engine p95's histogram bucket, so a lower bound of the time spent in front of the
engine. A large one (``clock_gap_min_s`` and ``clock_gap_ratio``) is a finding: a queue in front of the engine
(the API server process, the gateway) that no engine metric shows. Where the gateway's access log times the same
range's requests, its own clock tells which: its request time against its upstream's response time (nginx
``$request_time`` and ``$upstream_response_time``), and the requests its rate limit held back (``limit_req``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from . import figures
from .claims import ORIGIN_SOURCE, Claim, Fact, latency
from .gave_up import CENSORED_SHARE, CLOCK_ORIGIN, GaveUp, per_range
from .gave_up import READS as GAVE_UP_READS
from .thresholds import Thresholds

FIGURES = {"ttft": "TTFT", "e2e": "e2e"}
CALLERS = {"ttft": ("client",), "e2e": ("client", "gateway", "client + gateway")}
MIN_REQUESTS = 10  # single-attempt requests a range needs for its callers' p95
_ROW, RANGE = "_clockgap_row", "_clockgap_range"
# the only columns the gap's figures read: a sorted copy holds these, not the request table's thirty (a fleet's
# overlapping ranges gathered the whole width: tests/test_replicas.py's bounded batches)
READS = (
    "ts_start", "ts_end", "ts", "source", "line_no", "request_time_s", "duration_s", "kind",
    "origin", "latency_clock", "ttft_s", "e2e_s", "client_attempts", "gateway_attempts",
)  # fmt: skip
Range = tuple[Any, Any]  # [start, end], either None when unknown


@dataclass(frozen=True)
class ByTime:
    """A table's rows that have a time, sorted by it once: every range's rows come from one binary search for all
    bounds (``figures.gathered``), in the table's own order, where a filter per range read every row (a bench
    folder's 593 phases, steps and episodes: 2.9 of its diagnosis' 4.2 CPU s, docs/performance.md item 42)."""

    # the rows whose ``col`` is not null, by ``col``, each with its row number in the table
    sorted: pl.DataFrame
    col: str
    height: int  # the whole table's rows, those without a time included
    columns: tuple[str, ...]

    @classmethod
    def of(cls, df: pl.DataFrame | ByTime | None, col: str, reads: tuple[str, ...] = READS) -> ByTime | None:
        """``reads``: the columns its figures read (READS; the callers who gave up read theirs, gave_up.READS)."""
        if df is None or isinstance(df, ByTime):
            return df
        if col not in df.columns:
            return cls(df.clear().with_row_index(_ROW), col, df.height, tuple(df.columns))
        keep = [c for c in df.columns if c in reads or c == col]
        rows = (
            df.select(keep)
            .with_row_index(_ROW)
            .filter(pl.col(col).is_not_null())
            .sort(col, maintain_order=True)
        )
        return cls(rows, col, df.height, tuple(df.columns))

    def within(self, ranges: list[Range]) -> Iterator[pl.DataFrame]:
        """The rows of every range whose time is in [start, end] (``is_between``'s), with the range's index in
        ``RANGE``, a batch of whole ranges of about ``figures.GATHER_BYTES`` at a time (ranges may overlap:
        the memory stays bounded), each range's rows in the table's order (sums come out as a filter's did).
        A range with an unknown end has none."""
        parts = figures.gathered(self.sorted, self.col, ranges) if self.col in self.columns else None
        if parts is None:  # no zoned time column: range by range
            parts = (
                self.sorted.filter(pl.col(self.col).is_between(lo, hi)).with_columns(
                    pl.lit(k, pl.Int64).alias("_k")
                )
                for k, (lo, hi) in enumerate(ranges)
                if lo is not None and hi is not None and self.col in self.columns
            )
        for part in parts:
            yield part.rename({"_k": RANGE}).sort(RANGE, _ROW).drop(_ROW)


def claims(
    rows: list[dict],
    eps: list,
    th: Thresholds,
    req: pl.DataFrame | ByTime,
    gw: pl.DataFrame | ByTime | None = None,
    gw_errors: pl.DataFrame | ByTime | None = None,
    timeouts: pl.DataFrame | ByTime | None = None,
) -> list[Claim]:
    """The gap claims of every ladder step and episode that has the engine's figure beside the callers'
    (``timeouts``: the client records' timeout settings, client_requests' ts_start and timeout_s)."""
    ranges = [(r["ts_start"], r["ts_end"]) for r in rows] + [(e["start"], e["end"]) for e in eps]
    at_gw = at_gateway(ByTime.of(gw, "ts_start"), ByTime.of(gw_errors, "ts"), ranges)
    by_start = ByTime.of(req, "ts_start")
    single = single_attempts(by_start, ranges)
    # a copy of its own, narrow: the gap's holds the columns of its figures only (tests/test_replicas.py)
    gave = per_range(
        ByTime.of(req, "ts_start", GAVE_UP_READS) if isinstance(req, pl.DataFrame) else None,
        ranges,
        ByTime.of(timeouts, "ts_start", ("timeout_s",)),
        RANGE,
    )
    out = []
    for i, r in enumerate(rows):
        where, key = f"step {r['step']} ({r['concurrency']:g})", f"ladder.step.{r['step']}"
        out += _of(r, where, key, th, single[i], at_gw[i], gave[i])
    for i, e in enumerate(eps, len(rows)):
        out += _of(e, f"{e['episode_id']}", f"{e['episode_id']}", th, single[i], at_gw[i], gave[i])
    return out


def at_gateway(gw: ByTime | None, errors: ByTime | None, ranges: list[Range]) -> list[list[Fact]]:
    """Per range, the gateway's own clock over the requests it received in it: its request time (arrival to answer)
    against its upstreams' response time, summed over a request's attempts; what is left was spent in the gateway
    (a rate limit's delay, its own queue, connecting). And the requests its rate limit delayed or refused (nginx's
    error-log lines of limit_req, at warn and error level). Nothing when the gateway's log times neither."""
    out: list[list[Fact]] = [[] for _ in ranges]
    if gw is None or not gw.height or "request_time_s" not in gw.columns:
        return out
    p95 = lambda c: pl.col(c).quantile(0.95, "linear")  # noqa: E731
    per_range = [
        # one access line = one gateway request, its attempts in its lists
        rows.filter(pl.col("request_time_s").is_not_null())
        .group_by(RANGE, "source", "line_no")
        .agg(
            pl.col("request_time_s").max().alias("rt"),
            pl.when(pl.col("duration_s").is_not_null().any()).then(pl.col("duration_s").sum()).alias("up"),
        )
        .with_columns((pl.col("rt") - pl.col("up")).clip(lower_bound=0).alias("outside"))
        .filter(pl.col("up").is_not_null())
        .group_by(RANGE)
        .agg(pl.len().alias("n"), p95("rt"), p95("up"), p95("outside"))
        for rows in gw.within(ranges)
    ]
    if not per_range:
        return out
    timed = pl.concat(per_range)
    by_kind: dict[int, dict[str, int]] = {}
    if timed.height and errors is not None and errors.height and "kind" in errors.columns:
        for rows in errors.within(ranges):
            lim = rows.filter(pl.col("kind").cast(pl.String).str.starts_with("limit_req_"))
            for i, k, n in lim.group_by(RANGE, "kind").len().iter_rows():
                by_kind.setdefault(i, {})[str(k)] = int(n)
    for i, n, rt, up, outside in timed.select(RANGE, "n", "rt", "up", "outside").iter_rows():
        kinds = by_kind.get(i, {})
        out[i] = [
            Fact("gateway_requests", n, "gateway_log", unit="requests answered by an upstream"),
            latency("gateway_request_time_p95", rt, "gateway_log"),
            latency("gateway_upstream_p95", up, "gateway_log"),
            latency("gateway_outside_upstream_p95", outside, "gateway_log"),
            Fact(
                "gateway_rate_limit_delayed",
                kinds.get("limit_req_delayed", 0),
                "gateway_log",
                unit="requests",
            ),
            Fact(
                "gateway_rate_limit_rejected",
                kinds.get("limit_req_rejected", 0),
                "gateway_log",
                unit="requests",
            ),
        ]
    return out


def single_attempts(
    req: ByTime | None, ranges: list[Range]
) -> list[dict[str, tuple[float | None, int, str | None]]]:
    """Per range, the callers' p95 of each figure over the requests started in it that took one attempt at every
    layer: (p95, how many, their source). TTFT only where the client measured it (the gateway's is its header
    time). Nothing for a range with an unknown end."""
    out: list[dict[str, tuple[float | None, int, str | None]]] = [{} for _ in ranges]
    if req is None or not req.height or "origin" not in req.columns:
        return out
    one = pl.lit(True)
    for c in ("client_attempts", "gateway_attempts"):
        if c in req.columns:
            one = one & (pl.col(c).fill_null(1) <= 1)
    on, names = ("latency_clock", CLOCK_ORIGIN) if "latency_clock" in req.columns else ("origin", {})
    figs = [(f, col) for f, col in (("ttft", "ttft_s"), ("e2e", "e2e_s")) if col in req.columns]
    found: dict[tuple[str, int], tuple] = {}
    for rows in req.within(ranges):
        r = rows.filter(one)
        for f, col in figs:
            # each row's latency names its clock (requests.latency_clock), else its origin's layer
            mine = (pl.col(on) == "client") if f == "ttft" else pl.lit(True)
            got = (
                r.filter(pl.col(col).is_not_null() & mine)
                .group_by(RANGE)
                .agg(
                    pl.col(col).quantile(0.95, "linear").alias("p95"),
                    pl.len().alias("n"),
                    pl.col(on).drop_nulls().unique(),
                )
            )
            found |= {
                (f, i): (p95, n, layers)
                for i, p95, n, layers in got.select(RANGE, "p95", "n", on).iter_rows()
            }
    for i, (lo, hi) in enumerate(ranges):
        if lo is None or hi is None:
            continue
        for f, _ in figs:
            p95, n, layers = found.get((f, i), (None, 0, []))
            src = " + ".join(sorted(ORIGIN_SOURCE.get(o, o) for o in {names.get(o, o) for o in layers}))
            out[i][f] = (p95, n, src or None)
    return out


def _of(
    fig, where: str, key: str, th: Thresholds, single: dict, at_gw: list[Fact], gave: GaveUp | None = None
) -> list[Claim]:
    """The gap claims of one range whose figures (``fig``) hold the engine's p95 beside the callers'. No gap is
    read from a callers' p95 that is censored (``gave``: too many of the range's callers gave up) or below the
    engine's bucket (the two count different requests): only a large gap, which a floor of the callers' p95 still
    shows."""
    out = []
    for f, name in FIGURES.items():
        hi, p95 = fig.get(f"{f}_p95_engine_hi"), fig.get(f"{f}_p95_engine")
        lo = fig.get(f"{f}_p95_engine_lo")
        callers, n, src = single.get(f, (None, 0, None))
        c = latency("callers_p95", callers, src)
        if hi is None or not math.isfinite(hi) or fig.get(f"{f}_p95") is None:
            continue
        if callers is not None and c.clock not in CALLERS[f]:
            continue
        lo_t, hi_t = fig.get("ts_start") or fig.get("start"), fig.get("ts_end") or fig.get("end")
        span = (hi_t - lo_t).total_seconds() if lo_t is not None and hi_t is not None else None
        short = callers is not None and (span is None or span < th.clock_gap_span_ratio * callers)
        gap = (callers - hi) if callers is not None and n >= MIN_REQUESTS and not short else None
        large = gap is not None and gap >= th.clock_gap_min_s and callers >= th.clock_gap_ratio * hi
        censored = gave is not None and gave.censored(f)
        below = callers is not None and lo is not None and callers < lo
        missing = []
        if callers is None or n < MIN_REQUESTS:
            missing.append(
                f"a callers' {name} p95 over {MIN_REQUESTS} or more requests of one attempt ({where} has {n}; a "
                "retried request's latency holds its failed attempts, which the engine timed apart)"
            )
        elif short:
            missing.append(
                f"a range at least {th.clock_gap_span_ratio:g} times the callers' p95 ({where} lasts "
                f"{span or 0:.1f} s, the callers' p95 is {callers:.2f} s): the engine's histogram over it holds the "
                "first tokens that fell inside it, the callers' requests started in it got theirs mostly after it"
            )
        elif censored and not large and gave is not None:
            missing.append(
                f"the {name} of the {gave.of(f)} of {gave.requests} callers of {where} that gave up before it came "
                f"({gave.share(f) or 0:.1%}, at least the {CENSORED_SHARE:.0%} a p95 leaves above it): the "
                "callers' p95 holds the answers that came in time, not the slow ones they left"
            )
        elif below and not large:
            missing.append(
                f"the engine's {name} over the callers' own requests: the callers' p95 ({callers:.2f} s) is below "
                f"the engine's bucket ({fig.get(f'{f}_p95_engine_bucket')}), so vLLM's histogram over {where} "
                "counts other requests (those that finished in it) than the callers started in it"
            )
        state = (
            "unknown"
            if gap is None
            else "large gap"
            if large
            else "censored"
            if censored
            else "callers below engine"
            if below
            else "small gap"
        )
        out.append(
            Claim(
                f"clock_gap.{key}.{f}",
                "clock_gap",
                f"{name} p95 of {where} on the callers' clock against the engine's",
                state,
                [
                    Fact("where", where),
                    Fact("start", lo_t),
                    Fact("end", hi_t),
                    Fact("figure", name),
                    c,
                    Fact("callers_clock", c.clock),
                    Fact("requests", n, "requests", unit="requests with one attempt"),
                    latency("engine_p95", p95, "engine_histogram"),
                    latency("engine_p95_lo", lo, "engine_histogram"),
                    latency("engine_p95_hi", hi, "engine_histogram"),
                    Fact("engine_p95_bucket", fig.get(f"{f}_p95_engine_bucket"), "engine_histogram"),
                    Fact(
                        "gap_s",
                        # no gap is read from a censored callers' figure, nor from one below the engine's
                        None if gap is None or state not in ("large gap", "small gap") else max(gap, 0.0),
                        "requests + engine_histogram",
                        f"{c.clock} + engine" if c.clock else None,
                        "s",
                    ),
                    *_gave_up_facts(gave, f),
                    *at_gw,
                ],
                {
                    "clock_gap_min_s": th.clock_gap_min_s,
                    "clock_gap_ratio": th.clock_gap_ratio,
                    "clock_gap_span_ratio": th.clock_gap_span_ratio,
                    "censored_share": CENSORED_SHARE,
                },
                missing,
            )
        )
    return out


def _gave_up_facts(gave: GaveUp | None, f: str) -> list[Fact]:
    """The range's callers and those that gave up before its figure ``f`` came (none when no outcome is known)."""
    if gave is None:
        return []
    out = [
        Fact("callers", gave.requests, "requests", unit="requests started in the range"),
        Fact(
            "gave_up", gave.of(f), "requests", unit="callers that left before it (timed out, client stopped)"
        ),
        Fact("gave_up_share", gave.share(f), "requests", unit="share"),
    ]
    if gave.of(f):
        out += [
            latency("gave_up_wait_min", gave.wait_min_s, gave.wait_source),
            latency("gave_up_wait_max", gave.wait_max_s, gave.wait_source),
            latency("client_timeout", gave.timeout_s, "client_records"),
        ]
    return out
