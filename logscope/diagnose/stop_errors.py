"""The gateway's errors after each stop and death of the server: the 5xx its callers saw until the server
was back (its next start ready), counted once for the findings, diagnosis.json and the timeline.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from .. import schemas
from .lifecycle import Lifecycle

STOP_ERRORS_S = 300.0  # gateway 5xx this long after a stop or death (up to its server's return) are its cost


@dataclass
class StopErrors:
    """The gateway's 5xx (first attempts) from a stop or death until ``until``: its server's next start
    became ready (the banner's time when readiness is not logged), or STOP_ERRORS_S later, or the gateway's
    last answer, whichever first."""

    by_status: dict[int, int]
    until: datetime
    # "ready" (the next start was ready), "restart" (its banner; readiness not logged), "cap" (STOP_ERRORS_S
    # with no return), "logs_end" (no return before the gateway's last answer)
    bound: str

    @property
    def total(self) -> int:
        return sum(self.by_status.values())


def errors_after(gateway: pl.DataFrame, life: Lifecycle) -> dict[tuple, StopErrors]:
    """Per stop and death, keyed (ts, replica or None): what the callers paid for it. The findings,
    diagnosis.json's server_lifecycle and the timeline's labels all read this one count. The server is back
    when its next start is ready, not at the new banner: the new process loads the model first, and the
    gateway fails requests meanwhile. Binary searches per status (a few), so a crash loop's thousands of
    deaths cost no pass over the table each."""
    ends = [(s["ts"], s["replica"] or None) for s in life.shutdowns] + [
        (d.ts, d.replica or None) for d in life.deaths
    ]
    if not ends:
        return {}
    starts: dict = {}
    for st in life.starts:
        starts.setdefault(st["replica"] or None, []).append(st)
    for v in starts.values():
        v.sort(key=lambda st: st["ts"])
    # no return logged: count to the cap, or to the gateway's last answer when its log ends first (an
    # 'until' past the logs would claim a time nobody saw)
    last = gateway["ts_end"].max() if gateway.height else None
    bounds: list[tuple[datetime, str]] = []
    for t, replica in ends:
        later = starts.get(replica, [])
        k = bisect.bisect_right(later, t, key=lambda st: st["ts"])
        cap = (t + timedelta(seconds=STOP_ERRORS_S), "cap")
        if last is not None and t <= last < cap[0]:
            cap = (last, "logs_end")
        back = (
            (
                (later[k]["ready_ts"], "ready")
                if later[k]["ready_ts"] is not None
                else (later[k]["ts"], "restart")
            )
            if k < len(later)
            else cap
        )
        bounds.append(min(back, cap, key=lambda b: b[0]))
    out = {key: StopErrors({}, hi, how) for key, (hi, how) in zip(ends, bounds, strict=True)}
    if not gateway.height:
        return out
    lo_s = pl.Series([t for t, _ in ends], dtype=gateway["ts_end"].dtype)
    hi_s = pl.Series([hi for hi, _ in bounds], dtype=gateway["ts_end"].dtype)
    ga = (
        # one row a request, whatever the gateway (HAProxy's one line is its last attempt)
        gateway.filter((pl.col("status") >= 500) & schemas.gateway_request_row())
        .select("ts_end", "status")
        .drop_nulls()
    )
    for (status,), part in ga.sort("ts_end", "status").partition_by("status", as_dict=True).items():
        e = part["ts_end"]
        n = (e.search_sorted(hi_s, side="right") - e.search_sorted(lo_s, side="left")).to_list()
        for key, c in zip(ends, n, strict=True):
            if c:
                out[key].by_status[int(status)] = int(c)
    for v in out.values():
        v.by_status = dict(sorted(v.by_status.items()))
    return out
