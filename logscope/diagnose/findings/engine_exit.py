"""An engine process that ended with no error of its own. vLLM V1's API server reports "engine core exited
unexpectedly" (0.11+) or "Engine core proc EngineCore_DP0 died unexpectedly" (0.8-0.10) whenever its EngineCore
process is gone; when the EngineCore printed no error before that, it did not fail in Python: it was killed from
outside (SIGKILL: the kernel OOM killer, a supervisor, an operator) or crashed in native code (a segfault), and the
cause is outside vLLM's log. The lab's enginecore-kill (SIGKILL of the EngineCore) and zai-org/GLM-V #208 show it;
a fatal error the EngineCore printed (public n11, n18, vllm-public 11) keeps its own cause."""

from __future__ import annotations

import re
from datetime import timedelta

import polars as pl

from ..context import Context
from ..records import Episode

UNEXPECTED = re.compile(r"(?:exited|died) unexpectedly")
WHICH = re.compile(
    r"\b(Engine core|Worker) proc (\S+)"
)  # 'Engine core proc EngineCore_DP0', 'Worker proc VllmWorker-0'
LOOKBACK_S = 120.0  # how far before the death an error of the engine's own is looked for
OWN = r"(?i)^(?:EngineCore|VllmWorker|Worker)"  # the engine's processes, not the API server that reports it


def silent_exit(ctx: Context, ep: Episode, c: dict) -> dict | None:
    """{'covered_s', 'what', 'pid'} when the death is the API server's report of an engine process gone, and no line of
    the engine's own processes at ERROR or above precedes it in the LOOKBACK_S the log covers; None otherwise
    (its own error, another kind of death, or no line of this replica before it: nothing to tell it by)."""
    if not UNEXPECTED.search(c.get("message") or ""):
        return None
    ev, t = ctx.inputs.events, ep["start"]
    rep = ep["replica"] or ""
    before = ev.filter(
        (pl.col("replica").fill_null("") == rep)
        & pl.col("ts").is_between(t - timedelta(seconds=LOOKBACK_S), t, closed="left")
    )
    st = ctx.server.filter(
        (pl.col("replica").fill_null("") == rep)
        & pl.col("ts").is_between(t - timedelta(seconds=LOOKBACK_S), t, closed="left")
    )
    first = min([x for x in (before["ts"].min(), st["ts"].min()) if x is not None], default=None)
    if first is None:
        return None
    own = before.filter(pl.col("process").fill_null("").str.contains(OWN))
    if own.filter(pl.col("level").is_in(["ERROR", "CRITICAL", "FATAL"])).height:
        return None
    m = WHICH.search(c.get("message") or "")
    worker = m is not None and m.group(1) == "Worker"
    what = f"worker process {m.group(2)}" if worker and m else "EngineCore process"
    # its pid where the log names one process of that kind (several workers: which one is not said)
    mine = ev.filter(
        (pl.col("replica").fill_null("") == rep)
        & pl.col("process")
        .fill_null("")
        .str.contains(r"^(?:VllmWorker|Worker)" if worker else r"^EngineCore")
        & (pl.col("ts") <= t)
    )
    pids = mine["pid"].drop_nulls().unique()
    return {
        "covered_s": (t - first).total_seconds(),
        "what": what,
        "pid": int(pids[0]) if pids.len() == 1 else None,
    }


def cause_words(x: dict) -> str:
    return (
        f"the engine's {x['what']} ended with no error of its own: no line of the engine's processes at ERROR in the "
        f"{x['covered_s']:.0f} s the log covers before it. It did not fail in Python: it was killed from outside "
        "(SIGKILL: the kernel OOM killer, a supervisor, an operator) or crashed in native code (a segfault), "
        "neither of which prints a Python error"
    )


def next_test_words(x: dict, at: str, half: str) -> str:
    pid = f" (pid {x['pid']})" if x["pid"] else ""
    return (
        f"Find what ended the {x['what']}{pid} at about {at}: the kernel log (dmesg -T / journalctl -k) "
        "for the OOM killer or a segfault, and the supervisor's log; if it was the OOM killer, test a lower "
        f"--max-num-seqs{half or ' (halved)'}"
    )
