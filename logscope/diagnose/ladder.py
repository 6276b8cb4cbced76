"""The working boundary: when traffic climbs in steps, the last step that met the SLO and what broke
first at the next one.

Its steps come from ``ladder_steps``.

The working boundary is the highest step that meets the SLO (a lower step that missed it once, between
steps that met it, is reported as such, not taken as the boundary); what broke is read at the step
right above it.

A step meets the SLO when its warm requests (cold-start window left out) have TTFT p95 <= slo_ttft,
e2e p95 <= slo_e2e and a success share >= slo_success: the user's figures decide. A step with a figure
that could not be measured (no TTFT in any source) and none that failed is 'unknown', never 'met', and
says which figure was missing. Pressure (preemptions, a sustained queue, KV near full) is reported beside
each step ('pressure from step N') and fails a step only when the user asks for it (``slo_no_preemption``,
``slo_no_queue``). 'broke' lists every failed condition in the order it first happened inside the step.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import polars as pl

from .. import clock
from ..correlate.stream_failures import MAYBE
from ..scalars import float_value, int_value, time_or_none, time_value
from . import figures, from_histograms, ladder_death, ladder_gave_up, ladder_steps
from .claims import Claim, Fact, clock_of, facts, latency
from .context import Context


def _first_ts(df: pl.DataFrame, cond: pl.Expr, col: str = "ts") -> datetime | None:
    f = df.filter(cond)
    return time_or_none(f[col].min()) if f.height else None


def _step(ctx: Context, i: int, s: dict, timeouts=None) -> dict:
    lo, hi = s["start"], s["end"]
    cold = [(a, b) for a, b in ctx.cold if a <= hi and b >= lo]
    req = ctx.inputs.requests
    # the step's phase label, sent while the step lasted: another client's phase of the same label (a calm run
    # an hour before, also phase '0') is no request of this step
    slack = timedelta(seconds=STEP_SLACK_S)
    mine = (pl.col("phase") == pl.lit(s["label"], pl.String)) & pl.col("ts_start").is_between(
        lo - slack, hi + slack
    )
    if s["label"] is not None and req.height and req.select(mine.any()).item():
        req = req.filter(mine)
        lo_r, hi_r = time_or_none(req["ts_start"].min()), time_or_none(req["ts_start"].max())
    else:
        lo_r, hi_r = lo, hi
    warm = figures.requests(req, lo_r, hi_r, exclude=cold)
    every = figures.requests(req, lo_r, hi_r) if cold or not warm["requests"] else warm
    figs = warm if warm["requests"] else every
    dur = (hi - lo).total_seconds()
    state = figures.server_state(ctx.by_time(ctx.server), lo, hi)
    pre = figures.preemptions(ctx.by_time(ctx.pre), lo, hi)
    if pre is None and ctx.warnings.height:
        pre = None  # V0 warnings are a lower bound only: reported in 'evidence', not as the step's count
    tps = (figs["output_tokens_sum"] / dur) if figs["output_tokens_sum"] and dur > 0 else None
    if tps is None and state["gen_tps_mean"] is not None:
        tps = state["gen_tps_mean"]
    row = {
        "step": i + 1,
        "concurrency": s["value"],
        "mode": s["mode"],
        "ts_start": lo,
        "ts_end": hi,
        "cold": bool(cold),
        "requests": figs["requests"],
        "active_mean": state["running_mean"],
        "arrival_rate": (figs["requests"] / dur) if dur > 0 else None,
        "ttft_p50": figs["ttft_p50"],
        "ttft_p95": figs["ttft_p95"],
        "e2e_p50": figs["e2e_p50"],
        "e2e_p95": figs["e2e_p95"],
        "success_share": figs["success_share"],
        "kv_max": state["kv_max"],
        "kv_mean": state["kv_mean"],
        "waiting_max": state["waiting_max"],
        "preemptions": pre,
        "throughput_tps": tps,
        "max_tokens_mean": figs["max_tokens_mean"],
        "output_tokens_mean": figs["output_tokens_mean"],
        "label": s["label"],
        # the requests of the cold-start window left out of the step's figures, and why
        "cold_set_aside": (every["requests"] - warm["requests"]) if cold and warm["requests"] else 0,
        # every request of the step in the cold-start window: judged on them, and said (not a table column)
        "cold_whole": bool(cold) and not warm["requests"] and bool(every["requests"]),
        "cold_why": (
            _cold_why(ctx, cold)
            + ("" if warm["requests"] else "; every request of the step was in it: none set aside")
        )
        if cold
        else None,
    }
    w = figures.between(ctx.by_time(ctx.warnings), "ts", lo, hi)
    row["v0_preemption_warnings"] = w.height
    from_histograms.fill_step(ctx, row, figures.between(req, "ts_start", lo_r, hi_r))
    mine_req = figures.between(req, "ts_start", lo_r, hi_r)
    # the callers who gave up, over the requests the figures were measured on (ladder_gave_up)
    measured = mine_req.filter(figures.outside("ts_start", cold)) if cold and warm["requests"] else mine_req
    ladder_gave_up.fill(row, measured, figs, ladder_gave_up.stated_timeout(timeouts, lo_r, hi_r))
    reasons = _broke(ctx, row, mine_req, lo, hi)
    missing = [k for k in SLO_FIGURES if row[k] is None] + from_histograms.not_measured(row)
    # an ok answer a failed stream no evidence tied may belong to: the success share is not known to be met
    if row["success_share"] is not None and "mid_stream" in mine_req.columns:
        if (mine_req["mid_stream"] == MAYBE).any():
            missing.append(STREAMS_UNTIED)
    died = ladder_death.in_step(ctx.life.deaths, lo, hi)
    if died is None:
        ladder_death.nothing(row)
    else:  # judged on the requests that ended before the death (ladder_death)
        gone = ladder_death.ended_before(measured, died.ts)
        before = ladder_death.before_figures(row, figures.requests(gone, lo_r, hi_r))
        before["v0_preemption_warnings"] = row["v0_preemption_warnings"]
        reasons = _broke(ctx, before, gone, lo, died.ts)
        reasons = ladder_death.judge(row, died, before, reasons, measured, _replicas(ctx, lo, hi))
        missing, row["slo_undecided"] = [], None  # not judged, or judged on those before it: nothing missing
    undecided = from_histograms.undecided(row, ctx.slo) if died is None else []
    # missed when a figure failed; else unknown when one is missing; else censored when the callers who gave up
    # leave a figure a floor below the SLO; else undecided when a histogram's bucket holds the SLO (between its
    # bounds: neither met nor missed); else met
    row["slo_status"] = (
        "missed"
        if reasons
        else "unknown"
        if missing
        else CENSORED
        if row["censored_figures"]
        else "undecided"
        if undecided
        else "met"
    )
    row["meets_slo"] = {"met": True, "missed": False}.get(row["slo_status"])  # None: unknown or undecided
    row["slo_missing"] = ", ".join(missing) or None
    row["missing_figures"] = missing
    row["undecided_figures"] = undecided
    row["ttft_clock"], row["e2e_clock"] = clock_of(row.get("ttft_source")), clock_of(row.get("e2e_source"))
    row["broke_reasons"] = reasons
    row["broke"] = "; ".join(r["text"] for r in reasons) if reasons else None
    row["pressure_items"] = _pressure(ctx, row, lo, hi)
    row["pressure"] = "; ".join(p["text"] for p in row["pressure_items"]) or None
    return row


def _replicas(ctx: Context, lo, hi) -> int:
    """The servers that logged in the step (a death of one of several is named as such)."""
    got = figures.between(ctx.by_time(ctx.server), "ts", lo, hi)
    return max(1, got["replica"].n_unique()) if "replica" in got.columns and got.height else 1


# the step figures the SLO is judged on (each step's TTFT, e2e and success); a step missing one is 'unknown'
SLO_FIGURES = ("ttft_p95", "e2e_p95", "success_share")
CENSORED = (
    "censored"  # a step whose callers gave up: its figures over those who stayed are floors (ladder_gave_up)
)
OPEN = ("unknown", "undecided", CENSORED)  # a step the SLO could not be judged on
STEP_SLACK_S = (
    2.0  # a step's requests may be stamped this far outside its phase (the client's and the logs' clocks)
)


def _cold_why(ctx: Context, cold: list[tuple]) -> str:
    starts = ", ".join(clock.hms(a) for a, _ in cold)
    return (
        f"sent in the first {ctx.th.cold_start_s:g} s of traffic after a server start (cold_start_s; "
        f"the window from {starts})"
    )


def _pressure(ctx: Context, row: dict, lo, hi) -> list[dict]:
    """What strained the server in the step, reported beside its SLO status: preemptions (or V0's warnings),
    a sustained queue, KV near full; each with when it began."""
    th, out = ctx.th, []
    pre = figures.between(ctx.by_time(ctx.pre), "ts", lo, hi, closed="right").filter(
        pl.col("preemptions") > 0
    )
    if pre.height:
        out.append(
            {
                "what": "preemptions",
                "at": pre["ts"].min(),
                "text": f"{int(pre['preemptions'].sum()):,} preemptions from {clock.hms(time_value(pre['ts'].min()))}",
            }
        )
    elif row["v0_preemption_warnings"]:
        w = figures.between(ctx.by_time(ctx.warnings), "ts", lo, hi)
        out.append(
            {
                "what": "preemptions",
                "at": w["ts"].min(),
                "text": f"V0 preemption warnings from {clock.hms(time_value(w['ts'].min()))}",
            }
        )
    server = figures.between(ctx.by_time(ctx.server), "ts", lo, hi)
    q = server.filter(pl.col("waiting") >= th.waiting_min)
    if q.height >= th.queue_min_samples:
        out.append(
            {
                "what": "queue",
                "at": q["ts"].min(),
                "text": f"waiting up to {int_value(q['waiting'].max())} from {clock.hms(time_value(q['ts'].min()))}",
            }
        )
    kv = server.filter(pl.col("kv") >= th.kv_full)
    if kv.height:
        out.append(
            {
                "what": "kv_pressure",
                "at": kv["ts"].min(),
                "text": f"KV up to {float_value(kv['kv'].max()):.0%} from {clock.hms(time_value(kv['ts'].min()))}",
            }
        )
    far = datetime.max.replace(tzinfo=lo.tzinfo)
    out.sort(key=lambda r: (r["at"] or far, r["what"]))
    return out


def _broke(ctx: Context, row: dict, req: pl.DataFrame, lo, hi) -> list[dict]:
    slo, th = ctx.slo, ctx.th
    out = []
    if from_histograms.over(row, "ttft", slo.ttft_s):
        out.append(
            {
                "what": "ttft",
                "at": _first_ts(req, pl.col("ttft_s") > slo.ttft_s, "ts_start"),
                "text": f"TTFT p95 {from_histograms.stated(row, 'ttft')} > {slo.ttft_s:g} s",
            }
        )
    if from_histograms.over(row, "e2e", slo.e2e_s):
        out.append(
            {
                "what": "e2e",
                "at": _first_ts(req, pl.col("e2e_s") > slo.e2e_s, "ts_start"),
                "text": f"e2e p95 {from_histograms.stated(row, 'e2e')} > {slo.e2e_s:g} s",
            }
        )
    if row["success_share"] is not None and row["success_share"] < slo.success:
        out.append(
            {
                "what": "success",
                "at": _first_ts(req, pl.col("outcome").is_in(["error", "timeout"]), "ts_start"),
                "text": f"success {row['success_share']:.1%} < {slo.success:.1%}",
            }
        )
    asked = {"preemptions": th.slo_no_preemption, "queue": th.slo_no_queue}
    out += [p for p in _pressure(ctx, row, lo, hi) if asked.get(p["what"])]
    far = datetime.max.replace(tzinfo=lo.tzinfo)
    out.sort(key=lambda r: (r["at"] or far, r["what"]))
    return out


def analyse(ctx: Context, timeouts=None) -> tuple[list[dict], dict | None]:
    """``timeouts``: the client records' timeout settings (clockgap.ByTime of client_requests' ts_start and
    timeout_s), the wait a step's callers who gave up waited at least."""
    st, source = ladder_steps.steps(ctx)
    if not st:
        return [], None
    rows = [_step(ctx, i, s, timeouts) for i, s in enumerate(st)]
    # the boundary is never placed above a step the SLO could not be judged on (unknown or undecided)
    first_open = next((i for i, r in enumerate(rows) if r["slo_status"] in OPEN), len(rows))
    last_ok = next((i for i in range(first_open - 1, -1, -1) if rows[i]["slo_status"] == "met"), None)
    boundary = rows[last_ok] if last_ok is not None else None
    nxt_i = 0 if last_ok is None else last_ok + 1
    nxt = rows[nxt_i] if nxt_i < len(rows) else None
    pf = next((r for r in rows if r["pressure_items"]), None)
    summary = {
        "source": source,
        "slo": {
            "ttft_p95_s": ctx.slo.ttft_s,
            "e2e_p95_s": ctx.slo.e2e_s,
            "success": ctx.slo.success,
            "no_preemption": ctx.th.slo_no_preemption,
            "no_queue": ctx.th.slo_no_queue,
        },
        "working_boundary": None
        if boundary is None
        else {
            "step": boundary["step"],
            "concurrency": boundary["concurrency"],
            "mode": boundary["mode"],
            "slo": "met",
        },
        # the step right above the boundary: what failed there first, or the figure it could not be judged on
        "broke_first_at_next_step": _broke_first(nxt),
        "unknown_at_next_step": None
        if nxt is None or nxt["slo_status"] not in OPEN
        else {
            "step": nxt["step"],
            "concurrency": nxt["concurrency"],
            "status": nxt["slo_status"],
            "missing": nxt["missing_figures"] or nxt["undecided_figures"] or nxt["censored_figures"],
            "undecided": nxt["slo_undecided"] if nxt["slo_status"] == "undecided" else None,
            "not_judged": nxt["slo_not_judged"] if nxt["slo_status"] == CENSORED else None,
        },
        "failed_below_boundary": [
            {"step": r["step"], "concurrency": r["concurrency"], "broke": r["broke"]}
            for r in rows[: last_ok or 0]
            if r["slo_status"] == "missed"
        ],
        "unknown_steps": [
            {
                "step": r["step"],
                "concurrency": r["concurrency"],
                "status": r["slo_status"],
                "missing": r["missing_figures"] or r["undecided_figures"] or r["censored_figures"],
                "not_judged": r["slo_not_judged"],
            }
            for r in rows
            if r["slo_status"] in OPEN
        ],
        "died_in_steps": [
            {"step": r["step"], **(ladder_death.summary(r) or {})} for r in rows if r["died_at"]
        ],
        "cold_set_aside": [
            {"step": r["step"], "requests": r["cold_set_aside"], "why": r["cold_why"]}
            for r in rows
            if r["cold_set_aside"]
        ],
        "cold_whole_steps": [
            {
                "step": r["step"],
                "concurrency": r["concurrency"],
                "requests": r["requests"],
                "why": r["cold_why"],
            }
            for r in rows
            if r.get("cold_whole")
        ],
        "pressure_from_step": None
        if pf is None
        else {
            "step": pf["step"],
            "concurrency": pf["concurrency"],
            "first": pf["pressure_items"][0]["what"],
            "pressure": [p["text"] for p in pf["pressure_items"]],
        },
    }
    return rows, summary


def _broke_first(nxt: dict | None) -> dict | None:
    """What failed first at the step right above the boundary; at a step a server died in, not judged, the death
    (ladder_death), never the failures it caused."""
    if nxt is not None and nxt["slo_status"] == CENSORED and nxt["died_at"] is not None:
        return ladder_death.next_step(nxt)
    if nxt is None or nxt["slo_status"] != "missed":
        return None
    return {
        "step": nxt["step"],
        "concurrency": nxt["concurrency"],
        "first": nxt["broke_reasons"][0]["what"],
        "reasons": nxt["broke_reasons"],
        "floors": nxt["slo_not_judged"],  # its p95s over the callers who stayed, when many gave up
        "death": ladder_death.summary(nxt),  # a death in it, the load's or beside what failed before it
    }


def nice(x: float) -> str:
    return str(int(x)) if x is not None and math.isfinite(x) and x == int(x) else f"{x:g}"


STEP_STATE = {
    "met": "met",
    "missed": "not met",
    "unknown": "unknown",
    "undecided": "undecided",
    CENSORED: CENSORED,
}
STREAMS_UNTIED = "success_share_streams"
MISSING_WORDS = {
    "ttft_p95": "TTFT p95 (no source gave a TTFT for the step)",
    "e2e_p95": "e2e p95 (no source gave an e2e latency for the step)",
    "success_share": "success share (no request outcome in the step)",
    STREAMS_UNTIED: "success share (ok answers of the step may include a stream that failed after its 200: the "
    "proxy's stream-error line names no request, requests.mid_stream 'may have failed')",
}


def step_claim(r: dict, slo: dict) -> Claim:
    """The SLO claim of one ladder step: met, not met, undecided (a histogram bucket holds the SLO) or unknown
    (a figure missing), on the clocks its figures were measured on, with the requests set aside as cold."""
    missing = [
        GATEWAY_TTFT_WORDS
        if k == "ttft_p95" and r.get("ttft_source") == "gateway"
        else MISSING_WORDS.get(k, k)
        for k in r["missing_figures"]
    ]
    return Claim(
        f"ladder.step.{r['step']}",
        "slo_step",
        f"step {r['step']} of the ladder against the SLO",
        STEP_STATE[r["slo_status"]],
        [
            *facts(step=r["step"], concurrency=r["concurrency"], mode=r["mode"]),
            latency("ttft_p95", r["ttft_p95"], r.get("ttft_source")),
            latency("e2e_p95", r["e2e_p95"], r.get("e2e_source")),
            Fact("success_share", r["success_share"], "requests", unit="share"),
            Fact("requests", r["requests"], "requests", unit="requests"),
            Fact("broke", r["broke"]),
            Fact("undecided_bucket", r.get("slo_undecided")),
            Fact("cold_set_aside", r["cold_set_aside"], "requests", unit="requests"),
            Fact("cold_why", r["cold_why"]),
            Fact("cold_whole", True if r.get("cold_whole") else None),  # said where it holds
            *ladder_gave_up.facts(r),
            *ladder_death.facts(r),
            # the death's words, when it left the step not judged and no caller who gave up said them
            *([Fact("not_judged", r["slo_not_judged"])] if r["died_at"] and not r.get("gave_up") else []),
        ],
        {
            "slo_ttft_p95_s": slo["ttft_p95_s"],
            "slo_e2e_p95_s": slo["e2e_p95_s"],
            "slo_success": slo["success"],
        },
        missing
        if r["slo_status"] == "unknown"
        else [r["slo_not_judged"]]
        if r["slo_status"] == CENSORED
        else [],
    )


GATEWAY_TTFT_WORDS = "a TTFT (the gateway's upstream header time is not one, and no other source gave it)"


def boundary_claim(rows: list[dict], lad: dict) -> Claim:
    """The working boundary: the highest met step with no unknown or undecided step below it; 'not met' when
    every step was judged and none met; else unknown, naming the step that could not be judged."""
    wb = lad["working_boundary"]
    first_open = next((r for r in rows if r["slo_status"] in OPEN), None)
    below = rows[: wb["step"]] if wb else []
    engine_only = bool(below) and all(r.get("ttft_clock") == "engine" for r in below)
    state = "met" if wb else "unknown" if first_open is not None else "not met"
    missing = []
    if first_open is not None and (wb is None or first_open["step"] == wb["step"] + 1):
        what = (
            first_open["slo_undecided"]
            if first_open["slo_status"] == "undecided"
            else f"not judged: {first_open['slo_not_judged']}"
            if first_open["slo_status"] == CENSORED
            else "no " + ", ".join(first_open["missing_figures"])
        )
        missing = [
            f"step {first_open['step']} ({nice(first_open['concurrency'])}) {first_open['slo_status']}: {what}"
        ]
    return Claim(
        "ladder.boundary",
        "boundary",
        "the ladder's working boundary",
        state,
        [
            Fact("boundary_step", wb["step"] if wb else None),
            Fact("boundary_concurrency", wb["concurrency"] if wb else None),
            Fact("mode", rows[0]["mode"]),
            Fact("steps", len(rows)),
            Fact("first_open_step", first_open["step"] if first_open else None),
            Fact("engine_only", engine_only if wb else None),
        ],
        dict(lad["slo"]),
        missing if state == "unknown" or (state == "met" and missing) else [],
    )
