"""A gateway that stopped while it was still answering (vllm-public 31: the production-stack router logged uvicorn's
'Shutting down' at >1k concurrent requests, then five more 200s while it waited for its connections to close, then
its shutdown). A stop after the traffic (every lab recording's nginx ends on its SIGQUIT) is no finding.

The gateway's own records order the stop and its answers: by time when both carry one, else by their order in the
one file that holds both (uvicorn's lines carry no time, so the router's access lines and its 'Shutting down' are
placed by line). Answers are counted from the gateway's access lines in the stop's folder only: a fleet's other
gateways answering on do not make this one's stop a stop under load."""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from ... import clock
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Finding
from .record import make_finding

STOP = "shutdown"  # gateway_errors.kind of a gateway's stop (parsers/nginx_error.py, parsers/vllm_router.py)
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
    """(answers after the stop, answers before it, how they were ordered, the stop's time or the first time its file
    gives after it), or None when none came after or nothing orders them."""
    src, ts = stop["source"], stop["ts"]
    mine = att.filter(pl.col("source").str.replace(_NAME, "") == re.sub(_NAME, "", src))
    if ts is not None:
        when = pl.coalesce("ts_end", "ts_start")
        timed = mine.filter(when.is_not_null())
        after = int(timed.select((when > ts).sum()).item())
        before = timed.height - after
        how = "by time"
    else:
        same = mine.filter(pl.col("source") == src)
        if not same.height:
            return None
        after = int((same["line_no"] > stop["line_no"]).sum())
        before = same.height - after
        how = "in the file's order (its lines carry no time)"
        later = errs.filter((pl.col("source") == src) & (pl.col("line_no") > stop["line_no"]))[
            "ts"
        ].drop_nulls()
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
