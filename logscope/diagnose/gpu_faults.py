"""GPU faults tied to a server's death (issue #40): an NVIDIA Xid (or a GPU fallen off the bus) the kernel logged
shortly before a server's engine died is that death's platform cause, with its lines and their clock; one far from
any death, or one no server can be told from another's, stays context (the Xid finding of its own).

The engine notices a GPU fault when its next CUDA call fails: milliseconds to seconds later, a minute or two when
the fault hangs a collective until a timeout fires. A fault is tied to a death when the kernel logged it at most
``BEFORE_S`` before the death (``AFTER_S`` after it: the server stamps whole seconds), on a server its pid names or,
as a guess said as one, on the folder's only server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from .. import clock
from .lifecycle import Death, Lifecycle
from .platform import Facts, kernel_clock, servers_of

BEFORE_S, AFTER_S = 120.0, 2.0


@dataclass
class Fault:
    """The GPU fault a death followed: the kernel's Xid lines in the window before it, and how it was tied."""

    replica: str
    death_ts: datetime
    ts: datetime  # the first Xid line of the window (the kernel host's clock)
    codes: list[int | None]  # Xid codes in order of appearance; None: a GPU fallen off the bus with no Xid
    gpus: list[str]
    lines: list[str] = field(default_factory=list)  # 'kernel.log line 12: NVRM: Xid (...)', the first few
    keys: set[str] = field(default_factory=set)  # 'kernel.log line 12' of every line in the window
    mapping: str = ""
    clock: str = ""

    @property
    def lead_s(self) -> float:
        return (self.death_ts - self.ts).total_seconds()

    def what(self) -> str:
        names = [f"Xid {c}" if c is not None else "GPU fallen off the bus" for c in self.codes]
        return ", ".join(dict.fromkeys(names)) + f" on {', '.join(dict.fromkeys(self.gpus))}"


def _faults(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.filter((pl.col("layer") == "kernel") & pl.col("kind").is_in(["xid", "gpu_lost"])).sort(
        "ts", "source", "line_no", nulls_last=True
    )


def _tie(d: Death, near: pl.DataFrame, servers: dict, replicas: list[str]) -> str | None:
    """How the fault lines ``near`` are tied to ``d``'s server, or None when they cannot be told apart from
    another server's GPU."""
    srv = servers.get(d.replica or "")
    named = [p for p in near["pid"].drop_nulls().unique().to_list()]
    for p in named:
        if srv is not None and p in srv.pids:
            role = srv.pids[p][0] or "process"
            return f"pid {p} is {d.replica or 'the server'}'s {role}: its log names it"
    others = [r for r, s in servers.items() if r != (d.replica or "") and any(p in s.pids for p in named)]
    if others:
        return None  # the faulting pid is another server's
    if len(replicas) == 1:
        who = (
            f"the Xid names pid {', '.join(str(p) for p in named)}, which its log does not name"
            if named
            else "the Xid names no process"
        )
        return f"a guess: {d.replica or 'the server'} is the folder's only server; {who}"
    return None


def tie(facts: Facts, life: Lifecycle, server_events: pl.DataFrame) -> list[Fault]:
    """The faults before each death: the death takes the kind 'gpu_xid' and a note; the facts keep them
    (``facts.faults``) and the deaths' times (what the Xid finding of its own says it was far from)."""
    xs = _faults(facts.events)
    facts.death_times = [d.ts for d in life.deaths]
    if not xs.height or not life.deaths:
        return []
    known = servers_of(server_events)
    replicas = sorted(set(known) | set(facts.logs))
    out = []
    for d in life.deaths:
        near = xs.filter(
            pl.col("ts").is_not_null()
            & (pl.col("ts") >= d.ts - timedelta(seconds=BEFORE_S))
            & (pl.col("ts") <= d.ts + timedelta(seconds=AFTER_S))
        )
        if not near.height:
            continue
        how = _tie(d, near, known, replicas)
        if how is None:
            continue
        first = near.row(0, named=True)
        f = Fault(
            d.replica or "",
            d.ts,
            first["ts"],
            near["xid"].to_list(),
            near["gpu"].drop_nulls().to_list() or ["an unnamed GPU"],
            [f"{r['source']} line {r['line_no']}: {(r['message'] or '').strip()[:220]}" for r in near.head(4).iter_rows(named=True)],
            {f"{r['source']} line {r['line_no']}" for r in near.iter_rows(named=True)},
            how,
            kernel_clock(first["ts_basis"]),
        )  # fmt: skip
        if near.height > len(f.lines):
            f.lines.append(
                f"and {near.height - len(f.lines)} more Xid line(s) in the {BEFORE_S:.0f} s before"
            )
        out.append(f)
        d.kinds = sorted({*(k for k in d.kinds if k != "silent"), "gpu_xid"})
        d.notes.append(f"the kernel logged {f.what()} at {clock.hms(f.ts)}, {f.lead_s:.0f} s before ({how})")
    facts.faults = out
    return out


def fault_for(facts: Facts | None, replica: str | None, ts: datetime) -> Fault | None:
    """The fault tied to the death of ``replica`` at ``ts``."""
    if facts is None:
        return None
    for f in facts.faults:
        if f.replica == (replica or "") and abs((f.death_ts - ts).total_seconds()) < 1:
            return f
    return None
