"""The concurrency ladder's finding: the measured working boundary and the step that broke first."""

from __future__ import annotations

import math

from .record import _f, _n


def _ladder(ladder: dict, rows: list[dict]) -> dict:
    wb, nxt = ladder["working_boundary"], ladder["broke_first_at_next_step"]
    slo = ladder["slo"]
    slo_txt = f"TTFT p95 ≤ {slo['ttft_p95_s']:g} s, e2e p95 ≤ {slo['e2e_p95_s']:g} s, success ≥ {slo['success']:.0%}"
    steps = ", ".join(f"{_n(r['concurrency'])}" for r in rows)
    if wb is None:
        title = f"No ladder step met the SLO (first step {_n(rows[0]['concurrency'])})"
    else:
        title = f"Working boundary: {rows[0]['mode']} {_n(wb['concurrency'])}"
    unk, pf = ladder.get("unknown_at_next_step"), ladder.get("pressure_from_step")
    if nxt is not None:
        title += f"; at {_n(nxt['concurrency'])} {nxt['first']} broke first"
    elif unk is not None:
        title += f"; at {_n(unk['concurrency'])} unknown (no {', '.join(unk['missing'])})"
    asked = [
        w for w, on in (("no preemption", slo.get("no_preemption")), ("no queue", slo.get("no_queue"))) if on
    ]
    ev = f"steps {steps} ({ladder['source']}); SLO: {slo_txt}" + (f", {', '.join(asked)}" if asked else "")
    if nxt is not None:
        ev += "; at step " + str(nxt["step"]) + ": " + "; ".join(r["text"] for r in nxt["reasons"])
    if pf is not None:  # beside the SLO, never failing a step by itself unless asked
        ev += f"; pressure from step {pf['step']} ({_n(pf['concurrency'])}): " + "; ".join(pf["pressure"])
    below = ladder.get("failed_below_boundary") or []
    if below:
        ev += (
            "; below the boundary, step(s) "
            + ", ".join(f"{_n(b['concurrency'])} ({b['broke']})" for b in below)
            + " missed the SLO once: not a trend, the steps above them met it"
        )
    under = pf is not None and wb is not None and pf["concurrency"] <= wb["concurrency"]
    nt = (
        f"Cap admitted concurrency at {math.floor(wb['concurrency'])} (--max-num-seqs) and re-run the next step "
        "to confirm"
        + (
            f"; the boundary step already preempts or queues (pressure from {_n(pf['concurrency'])}): "
            "re-run it longer to see whether its latency holds"
            if under
            else ""
        )
        if wb is not None and nxt is not None
        else "Extend the ladder upwards to find where it breaks"
        if nxt is None
        else "Re-run the ladder starting lower"
    )
    return _f(
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
    )
