"""Whether an engine's clock and its callers' agree, read from what the spans hold (issue #38).

"Before the engine" (an engine span's start minus its parent attempt's start) and "after the engine" (the
caller's request span's end minus the engine span's end) subtract two processes' stamps: an offset between the
hosts' clocks is in both. The spans' nesting bounds it. With ``d`` = the engine's clock minus the client's, an
engine span cannot start before the attempt that sent it nor end after its caller's request, so every request
gives ``d <= engine start - attempt start`` and ``d >= engine end - request end``. Over one engine's requests
(one replica, one clock) that puts ``d`` in ``[lo, hi]``:

- 0 inside: no offset the spans can show (on one host, ~0);
- 0 outside, ``lo <= hi`` and the interval narrow: the offset is its middle, stated and removed from both parts;
- otherwise (the bounds cross: no single offset fits every request; or one bound only; or a wide interval): the
  split is unknown, with the offset's estimate and how it was measured.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import polars as pl

from . import clock

MAX_SPREAD_S = 0.1  # an offset known no closer than this is not removed: the split says unknown


@dataclass(frozen=True)
class ClockSkew:
    """One engine's clock against its callers' (clock 'engine - client'), or the gateway log's against the
    client's spans ('gateway - client': ``requests`` counts attempts, the bounds are _GATEWAY's), and what was
    done about it."""

    service: str  # the engine spans' service.name (one replica)
    requests: int  # requests with an engine span under a client attempt
    lo_ms: float | None  # the offset is at least this: the largest engine end - caller's request end
    hi_ms: float | None  # at most this: the smallest engine start - attempt start
    before_p50_ms: float  # the median engine start - attempt start, as stamped (the offset is in it)
    starts_before_parent: int  # engine spans that start before their parent attempt
    ends_after_caller: int  # engine spans that end after their caller's request span
    status: str  # 'agree' | 'corrected' | 'unknown'
    offset_ms: float | None  # removed from the time before and after the engine ('corrected')
    note: str
    clock: str = "engine - client"

    def doc(self) -> dict:
        return asdict(self)


def _ms(s: float) -> str:
    return f"{s * 1000:+.1f} ms" if abs(s) < 1 else f"{s:+.3f} s"


@dataclass(frozen=True)
class _Words:
    """What one pair of clocks is bounded by, in the notes' words."""

    inner: str  # the stamps on the measured clock
    early: str  # the upper bound's violation
    late: str  # the lower bound's violation
    callers: str
    gap: str  # the upper bound's difference, as stamped
    who: str
    no_lo: str
    no_hi: str
    done: str  # what the offset is removed from
    undone: str  # what is left unsplit / unmoved when it is unknown
    unit: str = "requests"
    slack_s: float = 0.0  # the measured stamps' rounding, widening each bound


_ENGINE = _Words(
    inner="engine spans of {s}",
    early="start before their parent attempt",
    late="end after their caller's request span",
    callers="its callers'",
    gap="engine start - attempt start",
    who="engine",
    no_lo="no caller's request span",
    no_hi="no parent attempt",
    done="removed from the time before and after the engine",
    undone="the time before and after the engine is not split",
)
# an access line starts after its attempt span did (the client sent first) and before that span's end less the
# upstream's header time (the client's attempt span ends on the reply's headers, which the gateway got first);
# its end is no bound: nginx logs after the client's last read (up to 81 ms later on traced-2r-kill)
_GATEWAY = _Words(
    inner="gateway log lines of {s}",
    early="start before their client attempt span",
    late="get the upstream's headers after that span ends",
    callers="the client's",
    gap="gateway start - attempt start",
    who="gateway",
    no_lo="no attempt span's end",
    no_hi="no attempt span's start",
    done="removed from the waterfall's gateway log bars and log-stop markers",
    undone="the waterfall draws the gateway's log on its own clock",
    unit="attempts",
    slack_s=clock.SLACK_S,
)


def _one(service: str, b: pl.Series, a: pl.Series, n: int, w: _Words = _ENGINE) -> ClockSkew:
    p50 = float(b.median())  # type: ignore[arg-type]
    b, a = b + w.slack_s, a + w.slack_s
    hi = float(b.min()) if b.len() else None  # type: ignore[arg-type]
    lo = -float(a.min()) if a.len() else None  # type: ignore[arg-type]
    early, late = int((b < 0).sum()), int((a < 0).sum())
    facts = f"{early} of {b.len()} {w.inner.format(s=service)} {w.early}, {late} of {a.len()} {w.late}"
    rounding = f", each widened by {w.slack_s * 1000:.0f} ms for its stamps' rounding" if w.slack_s else ""
    how = f"(bounds from the spans' nesting over {n} {w.unit}{rounding}; the median {w.gap} is {_ms(p50)})"
    base = dict(
        service=service,
        requests=n,
        lo_ms=None if lo is None else lo * 1000,
        hi_ms=None if hi is None else hi * 1000,
        before_p50_ms=p50 * 1000,
        starts_before_parent=early,
        ends_after_caller=late,
        clock=f"{w.who} - client",
    )
    # one bound only: no caller's request span (or no parent attempt) to close the interval
    if lo is None or hi is None:
        one, side = (hi, w.no_lo) if lo is None else (lo, w.no_hi)
        if one is None or (one >= 0 if lo is None else one <= 0):
            return ClockSkew(
                **base,  # type: ignore[arg-type]
                status="agree",
                offset_ms=None,
                note=f"{service}'s clock and {w.callers} agree as far as the spans show: {facts} {how}; only one "
                f"bound ({side})",
            )
        return _unknown(
            base, service, one, facts, how, f"{side}: the offset is at least that far, how far not shown", w
        )
    if lo <= 0 <= hi:
        return ClockSkew(
            **base,  # type: ignore[arg-type]
            status="agree",
            offset_ms=None,
            note=f"{service}'s clock and {w.callers} agree: the offset lies within [{_ms(lo)}, {_ms(hi)}] {how}",
        )
    if 0 <= hi - lo <= MAX_SPREAD_S:
        off = (lo + hi) / 2
        return ClockSkew(
            **base,  # type: ignore[arg-type]
            status="corrected",
            offset_ms=off * 1000,
            note=f"{service}'s clock runs {_ms(off)} against {w.callers} (± {(hi - lo) * 500:.1f} ms: within "
            f"[{_ms(lo)}, {_ms(hi)}]): {facts} {how}; {_ms(off)} {w.done}",
        )
    why = (
        f"no single offset fits every {w.unit[:-1]} (the bounds cross by {_ms(lo - hi)})"
        if lo > hi
        else f"the offset is known only within [{_ms(lo)}, {_ms(hi)}]"
    )
    return _unknown(base, service, (lo + hi) / 2, facts, how, why, w)


def _unknown(
    base: dict, service: str, est: float, facts: str, how: str, why: str, w: _Words = _ENGINE
) -> ClockSkew:
    return ClockSkew(
        **base,
        status="unknown",
        offset_ms=None,
        note=f"unknown: client and {w.who} ({service}) clocks differ by ~{_ms(est)}: {facts} {how}; {why}, so "
        f"{w.undone}",
    )


def gateway(att: pl.DataFrame, gw: pl.DataFrame) -> ClockSkew | None:
    """The gateway log's clock (the logs' reference: correlate/clock.py) against the client's spans, from each
    access line carrying an attempt's traceparent (``gw``: trace_id, span_id, ts_start, header_s, source) and
    that attempt's span (``att``: trace_id, span_id, start, end); None when no line names an attempt span."""
    j = gw.join(att.select("trace_id", "span_id", "start", "end"), on=["trace_id", "span_id"], how="inner")
    if j.height == 0:
        return None
    secs = lambda a, b: (pl.col(a) - pl.col(b)).dt.total_microseconds() / 1e6  # noqa: E731
    d = j.select(
        secs("ts_start", "start").alias("b"),
        (secs("end", "ts_start") - pl.col("header_s").fill_null(0.0)).alias("a"),
    )
    name = ", ".join(sorted(j["source"].drop_nulls().unique().to_list())) or "the gateway"
    return _one(name, d["b"].drop_nulls(), d["a"].drop_nulls(), j.height, _GATEWAY)


def measure(df: pl.DataFrame) -> list[ClockSkew]:
    """One ClockSkew per engine service of ``df`` (request_spans' rows: before_engine_s, after_engine_s)."""
    have = df.filter(pl.col("engine_service").is_not_null() & pl.col("before_engine_s").is_not_null())
    return [
        _one(svc, g["before_engine_s"].drop_nulls(), g["after_engine_s"].drop_nulls(), g.height)
        for svc in sorted(have["engine_service"].unique().to_list())
        for g in [have.filter(pl.col("engine_service") == svc)]
    ]


def apply(df: pl.DataFrame, skews: list[ClockSkew]) -> pl.DataFrame:
    """``df`` with each engine's offset removed from before_engine_s and after_engine_s (``clock_offset_s``
    says by how much), or both nulled where the offset is unknown."""
    off = {
        s.service: s.offset_ms / 1000 for s in skews if s.status == "corrected" and s.offset_ms is not None
    }
    unknown = [s.service for s in skews if s.status == "unknown"]
    o = pl.col("engine_service").replace_strict(off, default=None, return_dtype=pl.Float64)
    gone = pl.col("engine_service").is_in(unknown)
    return df.with_columns(o.alias("clock_offset_s")).with_columns(
        pl.when(gone)
        .then(None)
        .otherwise(pl.col("before_engine_s") - pl.col("clock_offset_s").fill_null(0.0))
        .alias("before_engine_s"),
        pl.when(gone)
        .then(None)
        .otherwise(pl.col("after_engine_s") + pl.col("clock_offset_s").fill_null(0.0))
        .alias("after_engine_s"),
    )
