"""A death at start-up, before any request was served: its next test follows from what the death holds (the
signal, the error the start-up raised), never from the load, as no request was served. TGI #1627's shard died of
signal 4 (SIGILL: an instruction the CPU lacks, so the build against this CPU); vLLM #28910 and GPUStack #2723 raised
'WorkerProc initialization failed' (the error names where its cause is). Both were told to 'reproduce at a lower
--max-num-seqs / --max-batch-size to tell a load-driven death from a software fault'."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import polars as pl

from ..claims import Fact, facts
from ..context import Context
from ..records import Episode, Finding
from .record import make_finding

LOOKBACK_S = 120.0  # how far before the death the start-up's raised error is looked for
# the raised error of a traceback ('RuntimeError: …', 'Exception: …') or TGI's launcher exit ('Error: ShardCannotStart')
RAISED = re.compile(r"^\s*((?:[A-Za-z_][\w.]*)?(?:Error|Exception)): (\S.*)$")
NO_LOAD = "no request was served, so no load setting was involved"
# what each signal says of who ended the process, and the test that follows from it
SIGNALS = {
    "SIGILL": (
        "an instruction the CPU lacks (SIGILL): the build or image was compiled for CPU features (AVX2, AVX-512, "
        "say) this host does not have",
        "Compare the image's build target with this host's CPU (grep -o 'avx[^ ]*' /proc/cpuinfo | sort -u): run "
        "an image built for this CPU, or this image on a host that has those instructions",
    ),
    "SIGSEGV": (
        "a crash in native code (SIGSEGV) while starting: the build, a driver or a kernel library",
        "Start it again with the same image and settings and PYTHONFAULTHANDLER=1 to see where it crashes; "
        "check the driver and CUDA versions the build needs",
    ),
    "SIGBUS": (
        "a bad memory access (SIGBUS) while starting: often a shared-memory segment too small (/dev/shm in a "
        "container)",
        "Check the container's /dev/shm size (--shm-size, or a memory-backed emptyDir) and start it again",
    ),
    "SIGKILL": (
        "killed from outside (SIGKILL) while starting: the kernel OOM killer (loading weights into host memory), "
        "a supervisor or an operator",
        "Find what sent SIGKILL at that time: the kernel log (dmesg -T / journalctl -k) for the OOM killer, the "
        "supervisor's log; if it was the OOM killer, give the host or container more memory for loading",
    ),
}


@dataclass(frozen=True)
class StartupDeath:
    """What a start-up death holds of its cause: the signal that ended it and the error the start-up raised, each
    None where its records do not say (``missing`` names which)."""

    engine: str  # the engine whose records say it died ('vllm', 'tgi', ...)
    signal: str | None  # 'SIGILL', from the engine's own death record
    error: (
        str | None
    )  # 'Exception: WorkerProc initialization failed …', the last raised error before the death
    missing: tuple[str, ...]

    def cause(self) -> str:
        if self.signal in SIGNALS:
            return SIGNALS[self.signal][0]
        if self.error:
            return f"the start-up raised an error: {self.error}"
        return (
            "the start-up failed and its records do not say why (" + "; ".join(self.missing) + f"); {NO_LOAD}"
        )

    def next_test(self) -> str:
        if self.signal in SIGNALS:
            return f"{SIGNALS[self.signal][1]} ({NO_LOAD})"
        if self.error:
            return (
                f"Fix what the start-up's error names ({self.error[:160]}) and the traceback before it: a setting, "
                f"the model files, the device or the build ({NO_LOAD}); start again with the same settings to "
                "confirm it"
            )
        return (
            "Start it again with the same settings and keep its whole output (the error the start-up raises is "
            f"not in the folder); {NO_LOAD}"
        )

    def facts(self) -> list[Fact]:
        return facts(
            "engine_log",
            at_startup=True,
            engine=self.engine,
            signal=self.signal,
            error=self.error,
            missing="; ".join(self.missing) or None,
        )


def of(ctx: Context, ep: Episode, c: dict) -> StartupDeath:
    """The signal and the raised error of the death's replica, from its records up to LOOKBACK_S before it."""
    ev, t = ctx.inputs.events, ep["start"]
    signal = error = None
    if ev.height:
        rows = ev.filter(
            (pl.col("replica").fill_null("") == (ep["replica"] or ""))
            & pl.col("ts").is_between(t - timedelta(seconds=LOOKBACK_S), t, closed="both")
            & pl.col("level").is_in(["ERROR", "CRITICAL", "FATAL"])
        ).sort(["ts", "seq"])
        sigs = rows["signal"].drop_nulls().to_list() if "signal" in rows.columns else []
        signal = sigs[-1] if sigs else None
        for text in rows["detail"].fill_null("").to_list():
            for line in text.splitlines():
                m = RAISED.match(line)
                if m is not None:
                    error = f"{m.group(1)}: {m.group(2).strip()}"[:300]
    missing = tuple(
        w
        for w, v in (("no signal in its death record", signal), ("no raised error in its records", error))
        if v is None
    )
    return StartupDeath(c.get("engine") or "vllm", signal, error, missing)


def finding(ctx: Context, ep: Episode, c: dict, when: str, ev: list[str]) -> Finding | None:
    """The finding of a start-up death no memory error, step timeout, silent kill or silent engine exit explains
    (those keep their own); None for any other death."""
    from .engine_exit import silent_exit
    from .raised import killer_words

    if (
        not c["at_startup"]
        or {"oom", "engine_timeout", "silent"} & set(c["kinds"])
        or silent_exit(ctx, ep, c)
    ):
        return None
    from .raised import of as raised_of

    born = of(ctx, ep, c)
    if (
        born.signal != "SIGILL"
    ):  # SIGILL: the CPU ended it, no killer to look for; nor a raised error of its own
        ev = [*ev, killer_words(ctx, ep)]
    own = raised_of(ctx, ep) if born.signal != "SIGILL" else None  # the raised line's facts beside its own
    return make_finding(
        "critical",
        f"Engine died at start-up, before serving any request, at {when}",
        "the engine process died while starting and the server never served",
        "; ".join(ev),
        born.cause(),
        born.next_test(),
        ep,
        kind="crash",
        facts=born.facts() + (own.facts() if own is not None else []),
    )
