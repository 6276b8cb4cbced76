"""A death whose process raised its own error: no killer to look for (evid25).

A Python traceback that ends in a raised exception is the process exiting on its own error; nothing killed it.
Deaths that raised one still read "who killed it: unknown: the folder holds no kernel log": vllm-deaths
ascend-612's worker raised "KeyError: 'model.layers.0.self_attn.q_proj.weight'" while loading, ROCm #3956's
RPC server "RuntimeError: NCCL error: unhandled cuda error" in init_device, public-2 n18's EngineCore
"AttributeError: 'DPEngineCoreProc' object has no attribute 'dp_rank'". The raised line's facts (its type, its
message, where it was raised, when, by which process) say so instead. A raised error that only reports another
process's death (EngineDeadError, 'Engine loop has died', 'Engine process failed to start') is no error of the
dead process's own: its killer stays unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from ... import clock
from ..claims import Fact
from ..context import Context
from ..records import Episode

LOOKBACK_S = 120.0  # how far before the death its raised error is looked for (startup_death's)
# the last line of a traceback: 'KeyError: …', 'torch.OutOfMemoryError: …', a bare 'TimeoutError'
RAISED = re.compile(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))(?:: (\S.*))?\s*$")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
# an error that reports another process's death, not a cause of its own
NOTICE = re.compile(
    r"DeadError|Engine loop (?:has died|is not running)|failed to start|initialization failed|died unexpectedly|"
    r"is already dead|died before",
    re.IGNORECASE,
)

# raised while waiting on another process (the shared-memory queue to the workers, an RPC to them): the other
# process's end, not an error of this one's. Lab oom-cgroup: the kernel killed a worker and EngineCore raised
# 'RuntimeError: cancelled' in shm_broadcast's acquire_read; public-2 n11: get_response's dequeue timed out.
WAITING = re.compile(
    r"shm_broadcast|acquire_read|dequeue|get_response|collective_rpc|_check_success|heartbeat"
)


@dataclass(frozen=True)
class Raised:
    """The error a dying process raised: the traceback's last line and the frame that raised it."""

    error: str  # 'KeyError'
    message: str | None  # "'model.layers.0.self_attn.q_proj.weight'"
    at: datetime
    process: str | None  # 'VllmWorkerProcess pid=76118', 'EngineCore pid=3267'; None: the line does not say
    frame: str | None  # "is_layer_skipped_ascend (quantization/quant_config.py, line 101)"

    def said(self) -> str:
        return f"{self.error}: {self.message}" if self.message else self.error

    def words(self) -> str:
        by = f" by {self.process}" if self.process else ""
        where = f" in {self.frame}" if self.frame else ""
        return (
            f"who killed it: no one from outside: the process exited on its own error, {self.said()[:200]}, "
            f"raised{where}{by} at {clock.hms(self.at)} (its traceback's last line)"
        )

    def facts(self) -> list[Fact]:
        return [
            Fact("raised_error", self.error, "engine_log"),
            Fact("raised_message", (self.message or "")[:300] or None, "engine_log"),
            Fact("raised_at", self.at, "engine_log"),
            Fact("raised_in", self.frame, "engine_log"),
            Fact("raised_by", self.process, "engine_log"),
        ]


def _frame(lines: list[str], i: int) -> str | None:
    """The frame the error was raised in: the last 'File …, line N, in f' before line ``i``."""
    for line in reversed(lines[:i]):
        m = FRAME.match(line)
        if m is not None:
            path = "/".join(m.group(1).split("/")[-2:])
            return f"{m.group(3)} ({path}, line {m.group(2)})"
    return None


def of(ctx: Context, ep: Episode) -> Raised | None:
    """The first error of its own the death's replica raised from LOOKBACK_S before the death to ``merge_gap_s``
    after it (the root of a chain: 'The above exception was the direct cause …' comes after it); None when its
    records hold none."""
    ev, t = ctx.inputs.events, ep["start"]
    if not ev.height or "detail" not in ev.columns:
        return None
    rows = ev.filter(
        (pl.col("replica").fill_null("") == (ep["replica"] or ""))
        & pl.col("ts").is_between(
            t - timedelta(seconds=LOOKBACK_S), t + timedelta(seconds=ctx.th.merge_gap_s), closed="both"
        )
    ).sort(["ts", "seq"])
    cols = [c for c in ("ts", "message", "detail", "process", "pid") if c in rows.columns]
    for r in rows.select(cols).iter_rows(named=True):
        lines = [*(r.get("message") or "").splitlines(), *(r.get("detail") or "").splitlines()]
        if not any("Traceback (most recent call last)" in x or FRAME.match(x) for x in lines):
            continue  # a raised line is a traceback's end: a message alone ('Error: …' in prose) is not one
        for i, line in enumerate(lines):
            m = RAISED.match(line)
            frame = _frame(lines, i) if m is not None else None
            if m is None or frame is None or NOTICE.search(line) or WAITING.search(frame):
                continue
            if (m.group(2) or "").strip() == "cancelled":  # the wait for another process was cancelled
                continue
            who = " ".join(f"{x}" for x in (r.get("process"), r.get("pid") and f"pid={r['pid']}") if x)
            msg = (m.group(2) or "").strip() or None
            return Raised(m.group(1), msg, r["ts"], who or None, frame)
    return None


def killer_words(ctx: Context, ep: Episode) -> str:
    """'who killed it': no one, when the process raised its own error; else what the platform records lack."""
    from .platform import unknown_killer

    own = of(ctx, ep)
    return own.words() if own is not None else unknown_killer(ctx, ep)
