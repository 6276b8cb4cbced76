"""Requests vLLM aborted, in a folder with no caller's record of them. vLLM logs 'Aborted request X' when a request
ends before its answer, mostly because its caller left (a client's timeout, a cancelled call, a gateway's
timeout). With the callers' or the gateway's log in the folder the cancellation claims say who left; without it,
the aborts are all there is, and a folder whose requests were mostly aborted is not "nothing alarming" (public-2
n02: the 9 sequences of one n=9 completion aborted in one second, 10 minutes after they were added, lm-eval's
timeout). With no stats line either (vllm-public 15: one chat request aborted, nothing else) nothing says the server
served: the calm claim is unknown already and names the abort."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import polars as pl

from ... import clock
from ..claims import facts
from ..context import Context
from ..records import Finding
from .record import make_finding


def abort_findings(ctx: Context) -> list[Finding]:
    if ctx.inputs.requests_origin in ("correlated", "client"):  # the callers' records say who left
        return []
    if ctx.server.height == 0:
        # no stats line shows the server serving: 'nothing alarming' is already unknown, the aborts beside it said
        # there (vllm-public 15: one abort alone is no incident; n02's stats lines read 'Nothing alarming')
        return []
    sr = ctx.inputs.server_requests
    if sr.height == 0 or "aborted_ts" not in sr.columns:
        return []
    aborted = sr.filter(pl.col("aborted_ts").is_not_null())
    finished = int(sr["finished_ts"].is_not_null().sum()) if "finished_ts" in sr.columns else 0
    a = aborted.height
    if a == 0 or a < finished:  # most requests that ended were answered: an abort now and then is no finding
        return []
    lo, hi = cast(datetime, aborted["aborted_ts"].min()), cast(datetime, aborted["aborted_ts"].max())
    when = f"at {clock.hms(lo)}" if lo == hi else clock.hms_range(lo, hi)
    share = "none finished" if finished == 0 else f"{finished:,} finished"
    return [
        make_finding(
            "medium",
            f"{a:,} request(s) aborted {when}, {share}",
            "vLLM aborted requests before they finished",
            f"{a:,} 'Aborted request' line(s) {when}, {finished:,} request(s) finished in the logs; no caller's or "
            "gateway's record of them in the folder",
            "most often the callers left before the answer: vLLM aborts a request when its caller disconnects (a "
            "client's timeout, a cancelled call, a gateway's timeout); why these did is not in the folder (no client "
            "or gateway log)",
            "Add the callers' or the gateway's log for these times: it says whether they timed out (after how long) "
            "or cancelled; if a timeout, compare it with how long these requests ran (vLLM's 'Added request' lines "
            "with --enable-log-requests) and raise it above the e2e at this load, or lower max_tokens",
            None,
            lo,
            hi,
            kind="errors",
            facts=facts(
                "engine_log",
                aborted=a,
                finished=finished,
                first=lo,
                last=hi,
                callers_seen=False,
            ),
        )
    ]
