"""The concurrency ladder's finding: the measured working boundary and the step that broke first."""

from __future__ import annotations

import math

from .. import ladder_death
from ..claims import Registry
from ..records import Finding
from .record import make_finding, num


def ladder_finding(ladder: dict, rows: list[dict], reg: Registry, max_num_seqs: int | None = None) -> Finding:
    """``max_num_seqs``: the server's cap, when its log says it (a cap already at the boundary is not advised)."""
    wb, nxt = ladder["working_boundary"], ladder["broke_first_at_next_step"]
    slo = ladder["slo"]
    slo_txt = f"TTFT p95 ≤ {slo['ttft_p95_s']:g} s, e2e p95 ≤ {slo['e2e_p95_s']:g} s, success ≥ {slo['success']:.0%}"
    steps = ", ".join(f"{num(r['concurrency'])}" for r in rows)
    bound = reg.get(ladder.get("claim_id"))
    unk, pf = ladder.get("unknown_at_next_step"), ladder.get("pressure_from_step")
    if wb is None and unk is not None:
        title = "Working boundary unknown"
    elif wb is None:
        title = f"No ladder step met the SLO (first step {num(rows[0]['concurrency'])})"
    else:
        title = f"Working boundary: {rows[0]['mode']} {num(wb['concurrency'])}"
        if bound is not None and bound.value("engine_only"):
            title += " by the engine's clock"
    if nxt is not None:  # a step a server died in: the death, judged or not (ladder_death)
        title += ladder_death.words(nxt, num(nxt["concurrency"]))
    elif unk is not None and unk.get("status") == "undecided":
        title += f"; at {num(unk['concurrency'])} undecided: {unk['undecided']}"
    elif unk is not None and unk.get("status") == "censored":
        title += f"; at {num(unk['concurrency'])} not judged: {unk['not_judged']}"
    elif unk is not None:
        title += f"; at {num(unk['concurrency'])} unknown (no {', '.join(unk['missing'])})"
    asked = [
        w for w, on in (("no preemption", slo.get("no_preemption")), ("no queue", slo.get("no_queue"))) if on
    ]
    ev = f"steps {steps} ({ladder['source']}); SLO: {slo_txt}" + (f", {', '.join(asked)}" if asked else "")
    if nxt is not None:
        ev += "; at step " + str(nxt["step"]) + ": " + "; ".join(r["text"] for r in nxt["reasons"])
        ev += f"; {nxt['floors']}" if nxt.get("floors") else ""
    if pf is not None:  # beside the SLO, never failing a step by itself unless asked
        ev += f"; pressure from step {pf['step']} ({num(pf['concurrency'])}): " + "; ".join(pf["pressure"])
    if bound is not None and bound.value("engine_only"):
        ev += (
            "; the steps' TTFT is vLLM's histogram (the engine's clock, from when the engine received each "
            "request): the callers' TTFT is not in this folder, and a wait in front of the engine would not show"
        )
    aside = [c for c in ladder.get("cold_set_aside") or []]
    if aside:
        ev += "; set aside as cold start: " + "; ".join(
            f"{c['requests']} request(s) of step {c['step']} ({c['why']})" for c in aside
        )
    whole = ladder.get("cold_whole_steps") or []
    if whole:  # no warm request to judge them on
        ev += "; judged on cold-start requests only: " + "; ".join(
            f"step {c['step']} (all {c['requests']} request(s) {c['why'].split('; every request')[0]})"
            for c in whole
        )
    below = ladder.get("failed_below_boundary") or []
    if below:
        ev += (
            "; below the boundary, step(s) "
            + ", ".join(f"{num(b['concurrency'])} ({b['broke']})" for b in below)
            + " missed the SLO once: not a trend, the steps above them met it"
        )
    under = pf is not None and wb is not None and pf["concurrency"] <= wb["concurrency"]
    first = (
        capped(wb, nxt, max_num_seqs, rows[0]["mode"])
        or f"Cap admitted concurrency at {math.floor(wb['concurrency'])} (--max-num-seqs) and re-run the next "
        "step to confirm"
        if wb is not None and nxt is not None
        else ""
    )
    died = nxt is not None and bool(nxt.get("not_judged"))  # not judged: a server died in it (ladder_death)
    nt = (
        f"Find what ended the server in step {nxt['step']} ({num(nxt['concurrency'])}), then re-run that step to "
        f"judge it: {nxt['not_judged']}"
        if died and nxt is not None
        else first
        + (
            f"; the boundary step already preempts or queues (pressure from {num(pf['concurrency'])}): "
            "re-run it longer to see whether its latency holds"
            if under and pf is not None
            else ""
        )
        if wb is not None and nxt is not None
        else f"Re-run step {unk['step']} ({num(unk['concurrency'])}) with a client timeout above the SLO's e2e "
        f"({slo['e2e_p95_s']:g} s), so that its callers wait for their answers, to judge it"
        if unk is not None and unk.get("status") == "censored"
        else f"Re-run step {unk['step']} ({num(unk['concurrency'])}) keeping each request's figures at the caller "
        "(vllm bench serve --save-detailed, or the client's own records) to decide it: "
        + (unk.get("undecided") or "no " + ", ".join(unk["missing"]))
        if unk is not None
        else "Extend the ladder upwards to find where it breaks"
        if nxt is None
        else "Re-run the ladder starting lower"
    )
    return make_finding(
        "low",
        title,
        "traffic climbed in steps",
        ev,
        "the step where KV pressure or latency first exceeds the SLO is the server's measured capacity for "
        "this request size",
        nt,
        None,
        rows[0]["ts_start"],
        rows[-1]["ts_end"],
        kind="ladder",
        claim=bound.id if bound is not None else None,
    )


def capped(wb: dict, nxt: dict, max_num_seqs: int | None, mode: str) -> str | None:
    """The change to test when the server's --max-num-seqs is already at or below the boundary a concurrency ladder
    measured (lab seqs-8 and seqs-16 were told to 'cap admitted concurrency at' the cap they ran with): the engine
    admitted no more at the step that broke, its callers waited in front of it, so capacity is the change; None when
    the cap is not known or above the boundary."""
    b = math.floor(wb["concurrency"])
    if mode != "concurrency" or max_num_seqs is None or max_num_seqs > b:
        return None
    return (
        f"The server's --max-num-seqs is already {max_num_seqs}, at or below the boundary of {b}: at step "
        f"{nxt['step']} ({num(nxt['concurrency'])}) the engine admitted no more at once and the callers above it "
        f"waited in its queue; add capacity (a second replica, or more KV cache) and re-run step {nxt['step']} to confirm"
    )
