"""The callers who gave up: what censors a range's latency on the callers' clock.

A caller that times out (or whose client stops with the request in flight) never times its answer: the callers'
p95 over a range holds only the answers that came back before they left (and the waits of those that left, which
are floors of their latencies). Past ``CENSORED_SHARE`` of the range's callers (the p95's own tail, 1 - 0.95) the
true p95 lies at or above the wait they gave up at, wherever the measured one is: it is not a figure to set beside
the engine's, which times the requests it ran to their end (abort-ignored: 76 of 169 callers gave up at their 3 s
timeout; their p95 of 3.18 s read 'no gap' beside vLLM's 5-10 s). An nginx 499 is its caller closing the
connection: the gateway's callers gave up too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

import polars as pl

from .claims import ORIGIN_SOURCE

# the share of a range's callers past which its p95 is censored: the top 5 % a p95 leaves above it
CENSORED_SHARE = 1 - 0.95
GAVE_UP_OUTCOMES = ("timeout", "unfinished")  # requests.outcome of a caller that left before its answer
CLIENT_CLOSED = 499  # nginx's status of a request whose client closed the connection
SERVER_ORIGIN = "server"  # requests.origin of a request only the server's log records
CLOCK_ORIGIN = {"engine": SERVER_ORIGIN}  # requests.latency_clock -> the origin whose source names it
READS = ("outcome", "status", "ttft_s", "e2e_s", "latency_clock", "origin")  # the request columns it reads


class Rows(Protocol):
    """clockgap.ByTime: a table's rows by start, gathered per range (``RANGE`` holds the range's index)."""

    @property
    def columns(self) -> tuple[str, ...]: ...

    @property
    def height(self) -> int: ...

    def within(self, ranges: list[Any]) -> Iterator[pl.DataFrame]: ...


@dataclass(frozen=True)
class GaveUp:
    """The callers of one range: how many started in it, how many of them gave up (for TTFT: before a first token),
    how long those waited (their clock's source) and the client timeout their records state, when one."""

    requests: int
    gave_up: int
    gave_up_before_first_token: int
    wait_min_s: float | None
    wait_max_s: float | None
    wait_source: str | None
    timeout_s: float | None

    def of(self, figure: str) -> int:
        """The callers whose ``figure`` ('ttft', 'e2e') the callers' clock never got."""
        return self.gave_up_before_first_token if figure == "ttft" else self.gave_up

    def share(self, figure: str) -> float | None:
        return self.of(figure) / self.requests if self.requests else None

    def censored(self, figure: str) -> bool:
        """More of the callers gave up than the p95 leaves above it: their p95 is at or above their wait."""
        s = self.share(figure)
        return s is not None and self.of(figure) > 0 and s >= CENSORED_SHARE


def gave_up_expr(columns: tuple[str, ...] | list[str]) -> pl.Expr:
    """A request whose caller left before its answer (timed out, in flight when its client stopped, or an nginx
    499 on the gateway's record)."""
    out = pl.col("outcome").is_in(GAVE_UP_OUTCOMES).fill_null(False)
    if "status" in columns:
        out = out | (pl.col("status") == CLIENT_CLOSED).fill_null(False)
    return out


@dataclass(frozen=True)
class _One:
    """One range's rows as ``Rows``: every row is in the range (a ladder step's requests, already chosen)."""

    rows: pl.DataFrame

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.rows.columns)

    @property
    def height(self) -> int:
        return self.rows.height

    def within(self, ranges: list[Any]) -> Iterator[pl.DataFrame]:
        yield self.rows.with_columns(pl.lit(0, pl.Int64).alias(_ONE))


_ONE = "_gave_up_range"


def of_rows(rows: pl.DataFrame, timeout_s: float | None) -> GaveUp | None:
    """The callers of one range already chosen (``rows``: its requests) and those that gave up, counted as
    ``per_range`` counts them; ``timeout_s``: the client timeout their records state, when one. None when the
    rows hold no outcome."""
    if not rows.height or "ts_start" not in rows.columns:
        return None
    lo, hi = rows["ts_start"].min(), rows["ts_start"].max()
    got = per_range(_One(rows), [(lo, hi)], None, _ONE)[0]
    return None if got is None else replace(got, timeout_s=timeout_s)


def per_range(
    req: Rows | None, ranges: list[Any], timeouts: Rows | None, range_col: str
) -> list[GaveUp | None]:
    """Per range, its callers (the requests started in it) and those that gave up; None for a range with an
    unknown end, or when the requests hold no outcome. ``timeouts``: the client records that state their timeout
    setting (client_requests' ts_start and timeout_s, by start)."""
    out: list[GaveUp | None] = [None for _ in ranges]
    if req is None or "outcome" not in req.columns:
        return out
    cols = req.columns
    gave = gave_up_expr(cols)
    no_first = gave & pl.col("ttft_s").is_null() if "ttft_s" in cols else gave
    on, names = ("latency_clock", CLOCK_ORIGIN) if "latency_clock" in cols else ("origin", {})
    waits = gave & pl.col("e2e_s").is_not_null() if "e2e_s" in cols else pl.lit(False)
    found: dict[int, tuple] = {}
    for rows in req.within(ranges):
        # a server's own record of a request is no caller (killed-debug beside a calm replica counted the
        # replica's 63 requests, outcome unknown, among its callers: 60 % gave up read 56 %)
        if "origin" in cols:
            rows = rows.filter(pl.col("origin").fill_null("") != SERVER_ORIGIN)
        got = rows.group_by(range_col).agg(
            pl.len().alias("n"),
            gave.sum().alias("gave"),
            no_first.sum().alias("no_first"),
            pl.col("e2e_s").filter(waits).min().alias("lo"),
            pl.col("e2e_s").filter(waits).max().alias("hi"),
            pl.col(on).filter(waits).drop_nulls().unique().alias("layers"),
        )
        for i, n, g, nf, lo, hi, layers in got.iter_rows():
            found[i] = (n, g, nf, lo, hi, layers or [])
    stated: dict[int, list] = {}
    if timeouts is not None and timeouts.height and "timeout_s" in timeouts.columns:
        for rows in timeouts.within(ranges):
            for i, ts in rows.group_by(range_col).agg(pl.col("timeout_s").drop_nulls().unique()).iter_rows():
                stated[i] = ts
    for i, (lo_t, hi_t) in enumerate(ranges):
        if lo_t is None or hi_t is None:
            continue
        n, g, nf, lo, hi, layers = found.get(i, (0, 0, 0, None, None, []))
        src = " + ".join(sorted(ORIGIN_SOURCE.get(o, o) for o in {names.get(o, o) for o in layers}))
        ts = stated.get(i) or []
        # the timeout the range's client records state: one value for all of them, else none to name
        out[i] = GaveUp(int(n), int(g), int(nf), lo, hi, src or None, float(ts[0]) if len(ts) == 1 else None)
    return out
