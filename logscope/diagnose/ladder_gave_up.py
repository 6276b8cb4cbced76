"""A ladder step's callers who gave up: its SLO is not met on the answers of the callers who stayed.

A caller that times out (or whose client stops with the request in flight, or whom nginx logs 499) never times its
answer: a step's TTFT and e2e p95 over its requests hold only the answers that came back before their callers left
and the waits of those that left (floors of their latencies). Past ``gave_up.CENSORED_SHARE`` of the step's
callers (the p95's own tail) the true p95 lies at or above the wait they gave up at, wherever the measured one is:
the step is not 'met' on it. A floor already above the SLO still misses it (ladder._broke); one below leaves the
step 'censored' (not judged), never the working boundary. Its success share counts the callers who gave up as
failures: a caller whose client stopped with its request in flight ('unfinished') has no outcome of its own, so
the share over outcomes alone left it out.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from . import gave_up
from .claims import Fact, latency
from .gave_up import GaveUp

# the step's SLO figures the callers who gave up censor, and the figure gave_up counts them for
CENSORS = {"ttft_p95": "ttft", "e2e_p95": "e2e"}
WORDS = {"ttft": "before a first token", "e2e": "before their answer"}
NO_OUTCOME = ("unknown", "unfinished")  # outcomes figures.requests' success share leaves out


def stated_timeout(timeouts: Any, lo, hi) -> float | None:
    """The client timeout the records of callers started in [lo, hi] state: one value for all of them, else None
    (``timeouts``: clockgap.ByTime of client_requests' ts_start and timeout_s)."""
    if (
        timeouts is None
        or not timeouts.height
        or "timeout_s" not in timeouts.columns
        or lo is None
        or hi is None
    ):
        return None
    got: set[float] = set()
    for rows in timeouts.within([(lo, hi)]):
        got |= set(rows["timeout_s"].drop_nulls().to_list())
    return float(got.pop()) if len(got) == 1 else None


def fill(row: dict, rows: pl.DataFrame, figs: dict, timeout_s: float | None) -> None:
    """Put the step's callers and those that gave up on ``row`` (``rows``: the requests its figures were measured
    over; ``figs``: figures.requests of them), count them as failures in its success share, and name the SLO
    figures they censor."""
    callers = (
        rows.filter(pl.col("origin").fill_null("") != gave_up.SERVER_ORIGIN)
        if "origin" in rows.columns
        else rows
    )
    g = gave_up.of_rows(callers, timeout_s)
    row.update(
        callers=g.requests if g else None,
        gave_up=g.gave_up if g else None,
        gave_up_before_first_token=g.gave_up_before_first_token if g else None,
        gave_up_share=g.share("e2e") if g else None,
        gave_up_timeout_s=g.timeout_s if g else None,
        gave_up_wait_min_s=g.wait_min_s if g else None,
        gave_up_wait_max_s=g.wait_max_s if g else None,
        gave_up_wait_source=g.wait_source if g else None,
    )
    # a caller that gave up is a failure: one with no outcome of its own ('unfinished') joins the share's count
    left_out = (
        callers.filter(gave_up.gave_up_expr(callers.columns) & pl.col("outcome").is_in(NO_OUTCOME)).height
        if g
        else 0
    )
    known = figs.get("known_outcomes") or 0
    if left_out and row["success_share"] is not None:
        row["success_share"] = row["success_share"] * known / (known + left_out)
    elif left_out and known == 0:
        row["success_share"] = 0.0
    # a figure the step has: one no source gave is missing already (non-streaming callers have no TTFT)
    row["censored_figures"] = [
        k for k, f in CENSORS.items() if g is not None and row.get(k) is not None and g.censored(f)
    ]
    row["slo_not_judged"] = said(row, g) if g is not None and row["censored_figures"] else None


def said(row: dict, g: GaveUp) -> str:
    """'12 of 40 callers gave up (30 %) before their answer (12 before a first token); their wait is at least the
    4 s timeout: ttft_p95 and e2e_p95 over the callers who stayed are floors; success counts them as failures'."""
    figs = row["censored_figures"]
    f = "e2e" if "e2e_p95" in figs else "ttft"
    text = f"{g.of(f):,} of {g.requests:,} callers gave up ({g.share(f):.0%}) {WORDS[f]}"
    if f == "e2e" and g.gave_up_before_first_token:
        text += f" ({g.gave_up_before_first_token:,} before a first token)"
    if g.timeout_s is not None:
        text += f"; their wait is at least the {g.timeout_s:g} s timeout"
    elif g.wait_min_s is not None and g.wait_max_s is not None:
        text += f"; they waited {g.wait_min_s:.2f}–{g.wait_max_s:.2f} s ({g.wait_source}) before leaving"
    else:
        text += "; how long they waited is not known"
    return f"{text}: {' and '.join(figs)} over the callers who stayed are floors; success counts them as failures"


def facts(row: dict) -> list[Fact]:
    """The step's callers and those that gave up, for its SLO claim (none when no outcome is known)."""
    if row.get("callers") is None:
        return []
    out = [
        Fact("callers", row["callers"], "requests", unit="requests"),
        Fact("gave_up", row["gave_up"], "requests", unit="callers that left before their answer"),
        Fact("gave_up_before_first_token", row["gave_up_before_first_token"], "requests", unit="requests"),
        Fact("gave_up_share", row["gave_up_share"], "requests", unit="share"),
    ]
    if row["gave_up"]:
        out += [
            latency("gave_up_wait_min", row["gave_up_wait_min_s"], row["gave_up_wait_source"]),
            latency("gave_up_wait_max", row["gave_up_wait_max_s"], row["gave_up_wait_source"]),
            latency("client_timeout", row["gave_up_timeout_s"], "client_records"),
            Fact("not_judged", row["slo_not_judged"]),
        ]
    return out
