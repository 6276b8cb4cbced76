"""The finding of a death that followed a GPU fault (``gpu_faults``): the kernel's Xid lines, their clock, how they
were tied to the server, and what the code says of the cause (NVIDIA's XID catalog)."""

from __future__ import annotations

from typing import Any

from ... import clock
from ..gpu_faults import Fault, fault_for
from ..records import Episode
from .record import clock_time, make_finding

HARDWARE = {48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120}  # ECC, NVLink, fallen off the bus, GSP: the device
KERNEL = {
    13,
    31,
    43,
}  # a graphics-engine exception, an MMU fault (illegal address), a channel stopped: the code run


def _cause(codes: set) -> tuple[str, str]:
    """(cause, the one change to measure) by what the codes say of the GPU."""
    if None in codes or codes & HARDWARE:
        return (
            "a fault of the GPU itself (NVIDIA's XID catalog: ECC, NVLink, the GPU lost from the bus or its "
            "firmware): the engine's next CUDA call failed, not its load",
            "Drain the node and run the GPU's diagnostics (dcgmi diag -r 3) before serving on it again; replay the "
            "same traffic on another GPU: if the death does not follow, replace or reset this one",
        )
    if codes & KERNEL:
        return (
            "an exception raised by a GPU kernel the engine ran (Xid 13: a graphics-engine exception, 31: an MMU "
            "fault at an illegal address, 43: the driver stopped the faulting channel): most often a kernel bug "
            "hit by a request's shape, not a hardware fault",
            "Replay the requests in flight at the death on another GPU with CUDA_LAUNCH_BLOCKING=1: if the same Xid "
            "follows, it is the kernel (report it with the model, version and request shape); if not, run dcgmi "
            "diag on this GPU",
        )
    return (
        "a GPU fault the NVIDIA driver reported (its XID catalog names the code's cause)",
        "Look the code up in NVIDIA's XID catalog and run the GPU's diagnostics (dcgmi diag -r 3) before serving on "
        "it again",
    )


# returns a Finding or None (crash.death_finding: dict)
def fault_finding(ctx, ep: Episode, c: dict, when: str) -> Any:
    """The death's finding when a GPU fault is tied to it, else None; a CUDA OOM in the death keeps its own."""
    f: Fault | None = fault_for(getattr(ctx, "platform", None), ep["replica"], ep["start"])
    if f is None or "oom" in c["kinds"]:
        return None
    cause, change = _cause(set(f.codes))
    ev = [
        *f.lines,
        f"tied to the server: {f.mapping}",
        f"the engine's death at {clock_time(f.death_ts)} (its own clock)"
        + (f": {c['message'][:200]}" if c.get("message") else ""),
    ]
    return make_finding(
        "critical",
        f"GPU fault ({f.what()}) {f.lead_s:.0f} s before the engine died at {when}",
        f"the NVIDIA driver reported {f.what()} at {clock.hms(f.ts)} (read on {f.clock}), then "
        f"{ep['replica'] or 'the server'}'s engine died",
        "; ".join(ev),
        cause,
        change,
        ep,
        kind="crash",
    )
