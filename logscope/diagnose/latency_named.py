"""The clock and source of a latency signal over a range, and its name with them ("TTFT p95 (client clock,
client_records)"). A TTFT p95 read off the engine's histogram starts when the request reaches the engine; one from
the callers' records includes the wait in front of it: a headline or an evidence line that names neither lets a
reader compare them as one (#37). The windows' ttft/e2e percentiles are on one clock (windows.latency_clock); the
requests of that clock in the range say the source."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from .context import Context

NAMES = {"ttft": "TTFT p95", "e2e": "e2e p95"}


def measured(ctx: Context, sig: str, start: datetime, end: datetime) -> tuple[str | None, str | None]:
    """(clock, source) of the windows' ``sig`` percentile over [start, end]: each None when nothing says."""
    w = ctx.inputs.windows
    clocks: list[str] = []
    if "latency_clock" in w.columns and w.height:
        # the windows that overlap the range: one built from the requests (slow.py) can lie inside one window
        lo = start - timedelta(seconds=ctx.inputs.window_s)
        got = w.filter((pl.col("ts") > lo) & (pl.col("ts") <= end))["latency_clock"].drop_nulls().unique()
        clocks = sorted(got.to_list())
    if not clocks:
        return None, None
    req = ctx.inputs.requests
    if not {"latency_clock", "latency_source", "ts_start"} <= set(req.columns):
        return "+".join(clocks), None
    on = req.filter(pl.col("latency_clock").is_in(clocks))
    src = on.filter(pl.col("ts_start").is_between(start, end))["latency_source"].drop_nulls().unique()
    if not src.len():  # no request started in the range (a latency window measures the ends): the run's
        src = on["latency_source"].drop_nulls().unique()
    return "+".join(clocks), " + ".join(sorted(src.to_list())) or None


def words(sig: str, clock: str | None, source: str | None) -> str:
    """'TTFT p95 (client clock, client_records)'; 'TTFT p95 (clock unknown)' when the windows do not say."""
    name = NAMES.get(sig, sig)
    if not clock:
        return f"{name} (clock unknown)"
    return f"{name} ({clock} clock, {source})" if source else f"{name} ({clock} clock)"


def named(ctx: Context, sig: str, start: datetime, end: datetime) -> str:
    return words(sig, *measured(ctx, sig, start, end))
