"""Why requests wait while the KV cache has room, read from the server's own stats lines: a queue being worked off
as fast as prompts are prefilled is neither a cache short of blocks nor a stalled engine, and a lower cap on the
sequences would only slow it down (vllm-public 03, public-2 s01 were told to 'cap --max-num-seqs')."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from ... import clock
from ...scalars import float_value
from ..context import Context
from ..records import Episode
from .record import num, pct


@dataclass(frozen=True)
class Drain:
    """A queue that fell on every stats line while the running set grew, with the cache below full."""

    lines: int
    start: datetime
    end: datetime
    waiting: tuple[int, int]  # first line's, last line's
    running: tuple[int, int]
    kv_max: float | None
    prompt_tps: tuple[float, float] | None  # lowest, highest on its lines; None when a line lacks it (SGLang)

    @property
    def rate(self) -> float | None:
        """Waiting requests admitted per second, net of new arrivals (first to last line)."""
        s = (self.end - self.start).total_seconds()
        return (self.waiting[0] - self.waiting[1]) / s if s > 0 else None


def draining(ctx: Context, ep: Episode) -> Drain | None:
    """The episode's queue drained: on each of its stats lines (at least ``queue_min_samples`` + 1, so a trend of two
    steps) fewer waited and more ran than on the one before, never the other way, with KV below ``kv_full``. None
    otherwise (a queue flat behind a running set that does not grow is another cause)."""
    if ep["signal"] != "queue" or (ep["kv_max"] or 0) >= ctx.th.kv_full:
        return None
    srv = ctx.server.filter(
        (pl.col("replica") == (ep["replica"] or ""))
        & pl.col("ts").is_between(ep["start"], ep["end"])
        & (pl.col("waiting") >= ctx.th.waiting_min)
    ).sort("ts")
    if (
        srv.height < ctx.th.queue_min_samples + 1
        or srv["waiting"].null_count()
        or srv["running"].null_count()
    ):
        return None
    w, r = srv["waiting"].to_list(), srv["running"].to_list()
    steps = list(zip(w, w[1:], r, r[1:], strict=False))
    if any(w1 > w0 or r1 < r0 for w0, w1, r0, r1 in steps) or not (w[-1] < w[0] and r[-1] > r[0]):
        return None
    tps = None
    if "prompt_tps" in srv.columns and not srv["prompt_tps"].null_count():
        lo, hi = float_value(srv["prompt_tps"].min()), float_value(srv["prompt_tps"].max())
        tps = (lo, hi) if lo > 0 else None  # a line with nothing prefilled: no rate to quote
    return Drain(
        lines=srv.height,
        start=srv["ts"][0],
        end=srv["ts"][-1],
        waiting=(int(w[0]), int(w[-1])),
        running=(int(r[0]), int(r[-1])),
        kv_max=ep["kv_max"],
        prompt_tps=tps,
    )


def explained(
    ctx: Context, ep: Episode, cap: dict, hold: float | None, tokens: float | None
) -> tuple[str, str] | None:
    """(cause, next test) of a queue while the cache had room, when its lines say why: drained as fast as prompts
    prefill, held at the sequence cap, or the last requests' backlog; None when they say none of these."""
    if (d := draining(ctx, ep)) is not None:
        return cause(d), next_test(d)
    if (c := at_cap(ctx, ep, cap, hold, tokens)) is not None:
        return cap_cause(c), cap_test(c)
    if (b := backlog(ctx, ep, cap)) is not None:
        return backlog_cause(b), backlog_test(b)
    return None


def _tps(d: Drain) -> str:
    if d.prompt_tps is None:
        return ""
    return f", prompt throughput {_range(d.prompt_tps)} on every line"


def _range(tps: tuple[float, float]) -> str:
    lo, hi = round(tps[0]), round(tps[1])
    return f"{lo:,} tokens/s" if lo == hi else f"{lo:,}–{hi:,} tokens/s"


def cause(d: Drain) -> str:
    return (
        f"the queue was being worked off: on each of its {d.lines} stats lines fewer waited and more ran (waiting "
        f"{d.waiting[0]} → {d.waiting[1]}, running {d.running[0]} → {d.running[1]}, "
        f"{clock.hms_range(d.start, d.end)}) while the KV cache had room (at most {pct(d.kv_max)}){_tps(d)}: the "
        "waiting requests were admitted as fast as their prompts were prefilled, a burst larger than one prefill "
        "step takes, not a cache short of blocks nor a stalled engine"
    )


def next_test(d: Drain) -> str:
    rate = d.rate
    pace = (
        f"it drained at {num(rate, 2)} requests/s ({d.waiting[0]} → {d.waiting[1]} waiting in "
        f"{(d.end - d.start).total_seconds():.0f} s, {d.waiting[1]} left: about "
        f"{d.waiting[1] / rate:.0f} s more at that pace)"
        if rate
        else "compare how fast it drains"
    )
    flat = f" stays at {_range(d.prompt_tps)}" if d.prompt_tps else " does not rise"
    return (
        "Raise the prefill tokens per engine step (--max-num-batched-tokens) and replay the same burst: "
        f"{pace}, and should drain faster; if the prompt throughput{flat}, prefill compute is the limit: spread the "
        "burst's arrivals or add a replica. A lower cap on the sequences would only slow the drain"
    )


@dataclass(frozen=True)
class AtCap:
    """A queue while the running set sat at --max-num-seqs with the cache below full: the cap, not the cache."""

    cap: int
    lines: int  # stats lines of the episode with requests waiting
    at_cap: int  # ... of them with the cap's number running
    waiting_max: float | None
    kv_max: float | None
    hold: float | None  # requests the KV cache holds at the observed request size (capacity)
    tokens: float | None  # ... of this many tokens each


def at_cap(ctx: Context, ep: Episode, cap: dict, hold: float | None, tokens: float | None) -> AtCap | None:
    """The episode's queue waited behind the sequence cap: the server's --max-num-seqs is known and as many ran
    on at least one of its stats lines with requests waiting, the KV cache below ``kv_full`` (lab seqs-8 and the
    spike at --max-num-seqs 8: 8 running, up to 56 / 40 waiting, KV at most 86.5 / 68.5 %). None otherwise."""
    mns = cap.get("max_num_seqs")
    if ep["signal"] != "queue" or not mns or (ep["kv_max"] or 0) >= ctx.th.kv_full:
        return None
    srv = ctx.server.filter(
        (pl.col("replica") == (ep["replica"] or ""))
        & pl.col("ts").is_between(ep["start"], ep["end"])
        & (pl.col("waiting") >= ctx.th.waiting_min)
    )
    full = srv.filter(pl.col("running") >= mns).height
    if not full:
        return None
    return AtCap(int(mns), srv.height, full, ep["waiting_max"], ep["kv_max"], hold, tokens)


def cap_cause(c: AtCap) -> str:
    return (
        f"the cap on requests run at once binds: on {c.at_cap} of the {c.lines} stats lines with requests waiting, "
        f"{c.cap} ran, the server's --max-num-seqs {c.cap}, while up to {num(c.waiting_max)} waited and the KV cache "
        f"stayed at most {pct(c.kv_max)}: the scheduler admits no more than the cap, whatever room the cache has"
    )


def cap_test(c: AtCap) -> str:
    """Raise the cap to what the cache holds: at the observed request size when known, else as many as the cap's
    running requests filled of it (8 running at most 68.5 % full: about 11)."""
    if c.hold is not None and c.tokens:
        more = int(c.hold)
        basis = f"what the KV cache holds at the observed request size: {c.hold:.1f} requests of {c.tokens:.0f} tokens"
    elif c.kv_max:
        more = int(c.cap / c.kv_max)
        basis = f"{c.cap} running filled at most {pct(c.kv_max)} of the KV cache: about {more} fit"
    else:
        more, basis = 0, ""
    if more > c.cap:
        return (
            f"Raise --max-num-seqs from {c.cap} to {more} ({basis}) and replay the same traffic: the queue should "
            f"shorten with no preemption; above {more} the cache would preempt"
        )
    return (
        f"The cap of {c.cap} and the KV cache bind together ({basis or 'how many it holds is not known'}): give the "
        "KV cache more memory (--gpu-memory-utilization) and raise --max-num-seqs with it, or add a replica, and "
        "replay the same traffic: the queue should shorten"
    )


@dataclass(frozen=True)
class Backlog:
    """A queue that began after the last arrival and drained with none after it (episodes: rule 'drained'), the
    cache below full: the last requests' backlog, not a load the server could not keep up with."""

    last_arrival: datetime
    seconds: float
    waiting_max: float | None
    running_max: float | None
    kv_max: float | None
    waiting_before: float | None  # the signal's baseline: what the load before it kept waiting
    rate_before: float | None  # arrivals/s before it
    prompt_tokens: float | None  # mean prompt of the requests during it (None: not in the logs)
    kv_tokens: int | None  # what the whole KV cache holds (start-up line)
    max_num_seqs: int | None


def backlog(ctx: Context, ep: Episode, cap: dict) -> Backlog | None:
    """The episode's queue is the drained backlog of the last requests (kv-short: 3 long prompts sent at once as
    the load ended, served one at a time, waiting 2 → 1 → 0, KV at most 75 %). None otherwise."""
    rule = ep.get("decided_by") or {}
    if ep["signal"] != "queue" or rule.get("rule") != "drained" or (ep["kv_max"] or 0) >= ctx.th.kv_full:
        return None
    return Backlog(
        rule["last_arrival"],
        ep["duration_s"],
        ep["waiting_max"],
        ep["running_max"],
        ep["kv_max"],
        ep.get("baseline"),
        ep.get("arrival_rate_before"),
        ep.get("prompt_tokens_mean"),
        cap.get("kv_tokens"),
        cap.get("max_num_seqs"),
    )


def backlog_cause(b: Backlog) -> str:
    before = (
        f"; the load before it ({num(b.rate_before, 2)} requests/s) "
        + (f"kept {num(b.waiting_before)} waiting" if b.waiting_before else "queued nothing")
        if b.rate_before is not None and b.waiting_before is not None
        else ""
    )
    sizes = (
        f"; their prompts averaged {num(b.prompt_tokens)} tokens, against {b.kv_tokens:,} tokens in the whole KV "
        "cache"
        if b.prompt_tokens and b.kv_tokens
        else ""
    )
    return (
        f"the backlog of the last requests: up to {num(b.waiting_max)} waited behind {num(b.running_max)} running "
        f"after the last arrival ({clock.hms(b.last_arrival)}) and drained in {b.seconds:.0f} s with no new one, the "
        f"KV cache at most {pct(b.kv_max)}: each waiting request needed more free blocks than the running ones "
        f"left, so they ran one after another{sizes}{before}"
    )


def backlog_test(b: Backlog) -> str:
    """No cap to lower (it drained on its own, and a lower cap admits fewer); the one change that would let such
    requests run side by side is room in the KV cache, replayed on the same last requests."""
    mns = f" ({b.max_num_seqs})" if b.max_num_seqs else ""
    room = (
        f"so that more than one of them fits ({num(b.prompt_tokens)}-token prompts, {b.kv_tokens:,} tokens now)"
        if b.prompt_tokens and b.kv_tokens
        else "so that more than one of them fits"
    )
    return (
        f"No change to --max-num-seqs{mns}: this queue drained on its own after the load ended, and a lower cap "
        f"would admit fewer, not more. If the last requests' wait matters, give the KV cache more memory "
        f"(--gpu-memory-utilization) {room} and replay the same requests, during the load this time (none "
        "followed them here): they should run together, with no queue; if they still wait with the cache below "
        "full, the engine, not the cache, holds them"
    )
