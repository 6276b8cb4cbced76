"""A gateway that stopped while it was still answering (vllm-public 31: the production-stack router logged uvicorn's
'Shutting down' at >1k concurrent requests, then five more 200s while it waited for its connections to close, then
its shutdown). A stop after the traffic (every lab recording's nginx ends on its SIGQUIT) is no finding.

The gateway's own records order the stop and its answers. By time when both carry one: the requests in flight at
the stop (started before it, answered after it; one started after it went to the gateway started again, as after a
rotated log's stop). Else by their order in the one file that holds both (uvicorn's lines carry no time: the
router's access lines after its 'Shutting down', up to a 'Started server process' after it). Answers are counted
from the access lines in the stop's folder only: a fleet's other gateways answering on do not make this one's stop
a stop under load (a flat folder of several gateways' logs could, by time, if their requests overlap its stop)."""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from ... import clock
from ...scalars import int_or_none
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Finding
from .record import make_finding

STOP = "shutdown"  # gateway_errors.kind of a gateway's stop (parsers/nginx_error.py, parsers/vllm_router.py)
START = "start"  # ... and of its start (uvicorn's 'Started server process')
_NAME = r"(^|/)[^/]*$"  # a source path's file name: what is left is its folder ('' at the input's top)


def gateway_stop_findings(ctx: Context, reg: Registry) -> list[Finding]:
    errs, att = ctx.inputs.gateway_errors, ctx.inputs.gateway
    if not errs.height or "line_no" not in errs.columns:
        return []
    stops = errs.filter(pl.col("kind") == STOP)
    if not stops.height or not att.height:
        return []
    out = []
    # the first stop of each file (nginx logs its master's and its workers' lines of one stop)
    for stop in (
        stops.sort("line_no").unique("source", keep="first", maintain_order=True).iter_rows(named=True)
    ):
        found = _answers_after(stop, errs, att)
        if found is not None:
            out.append(_finding(stop, *found, reg))
    return out


def _answers_after(
    stop: dict, errs: pl.DataFrame, att: pl.DataFrame
) -> tuple[int, int, str, datetime | None] | None:
    """(answers of the stopped process after the stop, its answers before it, how they were ordered, the stop's time
    or the first time its file gives after it), or None when none came after or nothing orders them."""
    src, ts = stop["source"], stop["ts"]
    mine = att.filter(pl.col("source").str.replace(_NAME, "") == re.sub(_NAME, "", src))
    if ts is not None:
        # in flight at the stop: started before it, answered after it. A request that started after it went to
        # the gateway started again (a rotated log's stop an hour before the incident is no stop under load)
        start = pl.coalesce("ts_start", pl.col("ts_end") - pl.duration(seconds=pl.col("duration_s")))
        timed = mine.filter(pl.col("ts_end").is_not_null() & start.is_not_null() & (start <= ts))
        after = int((timed["ts_end"] > ts).sum())
        before = timed.height - after
        how = "by time: started before it, answered after it"
    else:
        same = mine.filter(pl.col("source") == src)
        if not same.height:
            return None
        # the stopped process's lines: up to the next start the file records, if any
        file = errs.filter(pl.col("source") == src)
        starts = file.filter((pl.col("kind") == START) & (pl.col("line_no") > stop["line_no"]))["line_no"]
        end = int_or_none(starts.min())
        lines = same["line_no"]
        after = int(((lines > stop["line_no"]) & (lines < end if end is not None else True)).sum())
        before = int((lines < stop["line_no"]).sum())
        how = "in the file's order (its lines carry no time)"
        later = file.filter(pl.col("line_no") > stop["line_no"])["ts"].drop_nulls()
        ts = later.min() if later.len() else None
    return (after, before, how, ts) if after else None


def _finding(stop: dict, after: int, before: int, how: str, ts: datetime | None, reg: Registry) -> Finding:
    src = stop["source"]
    at = (
        (f"at {clock.hms(ts)}" if stop["ts"] is not None else f"by {clock.hms(ts)}") if ts is not None else ""
    )
    c = reg.add(
        Claim(
            f"gateway.stopped.{src}",
            "stopped_under_load",
            f"the gateway's stop ({src}), against its own answers",
            "observed",
            [
                Fact("stopped", ts, "gateway_log"),
                Fact("stop_line", stop["line_no"], "gateway_log"),
                Fact("answers_after", after, "gateway_log", unit="requests"),
                Fact("answers_before", before, "gateway_log", unit="requests"),
                Fact("ordered", how, "gateway_log"),
            ],
            missing=[]
            if stop["ts"] is not None
            else ["the stop record's own time (placed by the first time its file gives after it)"]
            if ts is not None
            else ["the stop's time (neither its record nor any after it carries one)"],
        )
    )
    line = f"line {stop['line_no']:,} of {src}"
    return make_finding(
        "high",
        f"The gateway stopped while it was still answering{' ' + at if at else ''}: {after:,} answer(s) after its "
        f"stop ({src})",
        "the gateway shut down under load",
        f"its stop record ({line}); {after:,} answer(s) in its access lines after it and {before:,} before, ordered "
        f"{how}",
        "why it stopped is not in its log: a signal from its supervisor (a failed liveness probe, a deploy, an OOM "
        "kill of the process) or a crash; the requests still open when it exited lost their connections",
        f"Read the supervisor's record of this stop (kubectl describe pod / get events, the systemd journal) for "
        f"{at.split(' ', 1)[-1] if at else 'this time'}, then drive the same concurrency at this gateway alone "
        "and watch its memory, open connections and liveness probe: the one change to measure is the limit or "
        "probe timeout that record names",
        None,
        ts,
        ts,
        kind="errors",
        claim=c.id,
    )
