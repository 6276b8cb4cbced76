"""The load each run was given, as steps (ladder steps or the client's phases) and as a few figures
(arrival rate, prompt and requested output lengths), and whether two runs were given the same load.

In a closed loop (fixed concurrency) the arrival rate follows the server's speed, so it is a result there,
not an input, and only the steps and the request shapes must match; in an open loop (a fixed rate) the
arrival rate is the input itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

import polars as pl

from ..report.fmt import num
from ..scalars import float_or_none, time_or_none
from . import precision, sources
from .counters import increase
from .runs import Run

TOLERANCE = 0.10  # a traffic figure that differs by more than this share is a different load
LEAD = timedelta(
    seconds=1
)  # a step's first sends can be logged this much before its phase (the clocks differ)
DRAIN = timedelta(seconds=5)  # its last first tokens and finishes reach a scrape within this (2 s scrapes)


@dataclass(frozen=True)
class Step:
    key: str  # what matches a step of the other run: '<mode>=<value>#<k-th of that value>'
    mode: str  # concurrency | rate | inflight | whole
    value: float | None
    label: str
    ts_start: datetime | None
    ts_end: datetime | None
    phase: str | None = None  # the requests' phase label, when the step is a client phase


def _fmt(v: float) -> str:
    return f"{v:g}"


def steps(run: Run) -> list[Step]:
    """Ladder steps when the diagnosis found a ladder, else the client's phases (one source's), else none. A
    ladder step read from the client's phases keeps its phase, so that its requests are the phase's own (a bench
    file's), not those that happen to start in its window."""
    lad = run.table("ladder")
    ph = run.table("client_phases")
    rows: list[tuple[str, float, datetime, datetime, str | None]] = []
    if lad.height:
        rows = [
            (r["mode"] or "concurrency", r["concurrency"], r["ts_start"], r["ts_end"], _phase_of(ph, r))
            for r in lad.sort("step").iter_rows(named=True)
            if r["concurrency"] is not None
        ]
    elif ph.height:
        src = sorted(ph["source"].unique().to_list())[0]  # a client's .jsonl and .log state the same phases
        rows = [
            (r["mode"] or "concurrency", r["value"], r["ts_start"], r["ts_end"], r["phase"])
            for r in ph.filter(pl.col("source") == src).sort("ts_start").iter_rows(named=True)
            if r["value"] is not None
        ]
    out: list[Step] = []
    seen: dict[str, int] = {}
    for mode, value, lo, hi, phase in rows:
        base = f"{mode}={_fmt(value)}"
        seen[base] = seen.get(base, 0) + 1
        unit = "c" if mode in ("concurrency", "inflight") else "rate "
        label = f"{unit}={_fmt(value)}" if unit == "c" else f"{_fmt(value)}/s"
        if seen[base] > 1:
            label += f" (#{seen[base]})"
        out.append(Step(f"{base}#{seen[base]}", mode, float(value), label, lo, hi, phase))
    return out


def _phase_of(ph: pl.DataFrame, step: dict) -> str | None:
    """The client phase a ladder step was read from: the one of the step's value whose time overlaps it most."""
    if ph.height == 0 or step["ts_start"] is None or step["ts_end"] is None:
        return None
    best, most = None, 0.0
    for r in ph.filter(pl.col("value") == step["concurrency"]).iter_rows(named=True):
        if r["ts_start"] is None or r["ts_end"] is None:
            continue
        lap = (min(r["ts_end"], step["ts_end"]) - max(r["ts_start"], step["ts_start"])).total_seconds()
        if lap > most:
            best, most = r["phase"], lap
    return best


def windows(run: Run, st: list[Step]) -> dict[str, tuple[datetime, datetime]]:
    """The range each step's server figures (histograms, counters, gauges) are read over: from a second before its
    first send to a few seconds after its last answer, or up to the next step's range when the load runs on
    (contiguous phases: what an overload leaves behind drains into the step after it); the last step's to the
    run's end. The next ladder step's first requests (a bench's clock runs a little off the server's) stay out."""
    r = run.table("requests")
    w = run.table("windows")
    last_window = time_or_none(w["ts"].max()) if w.height else None
    end = None
    if last_window is not None:
        end = last_window + timedelta(seconds=float_or_none(w["window_s"].max()) or 0)
    spans: list[list] = []
    for i, s in enumerate(st):
        if s.ts_start is None or s.ts_end is None:
            spans.append([s.ts_start, s.ts_end])
            continue
        mine = requests_of(run, s, r)
        first = time_or_none(mine["ts_start"].min()) if mine.height else None
        last = time_or_none(mine["ts_end"].max()) if mine.height else None
        lo = min(x for x in (s.ts_start, first) if x is not None) - LEAD
        prev = st[i - 1].ts_end if i else None
        lo = max(lo, prev) if prev is not None else lo
        hi = max(x for x in (s.ts_end, last) if x is not None) + DRAIN
        spans.append([lo, hi])
    for i in range(len(spans) - 1):
        if spans[i][1] is not None and spans[i + 1][0] is not None:
            spans[i][1] = min(spans[i][1], spans[i + 1][0])
    if spans and end is not None and spans[-1][1] is not None:
        spans[-1][1] = max(spans[-1][1], end)
    return {s.key: (lo, hi) for s, (lo, hi) in zip(st, spans, strict=True)}


def match(a: list[Step], b: list[Step]) -> tuple[list[tuple[Step, Step]], list[Step], list[Step]]:
    """Pairs of steps with the same key, in A's order; and the steps of each run the other lacks."""
    kb = {s.key: s for s in b}
    pairs = [(s, kb[s.key]) for s in a if s.key in kb]
    ka = {s.key for s in a}
    return pairs, [s for s in a if s.key not in kb], [s for s in b if s.key not in ka]


def requests_of(run: Run, step: Step | None, r: pl.DataFrame | None = None) -> pl.DataFrame:
    """The logical requests of a step (its phase's, else those that started in its window); all without one.
    ``r``: the requests to choose from (the run's table by default)."""
    r = run.table("requests") if r is None else r
    if step is None or r.height == 0:
        return r
    if step.phase is not None and "phase" in r.columns and (r["phase"] == step.phase).any():
        return r.filter(pl.col("phase") == step.phase)
    if step.ts_start is None or step.ts_end is None:
        return r.clear()
    return r.filter((pl.col("ts_start") >= step.ts_start) & (pl.col("ts_start") <= step.ts_end))


def describe(run: Run, st: list[Step]) -> dict:
    """The run's load in figures (null where the logs do not say), over the requests a time places; those with no
    time counted apart (``untimed_requests``), as analyze counts them."""
    r = sources.timed(run)
    apart = sources.untimed(run)
    mode = sorted({s.mode for s in st})
    lo, hi = (cast("datetime | None", r["ts_start"].min()), cast("datetime | None", r["ts_start"].max()))
    if not r.height:
        lo = hi = None
    dur = (hi - lo).total_seconds() if lo is not None and hi is not None else None

    def mean(c: str) -> float | None:
        return num(r[c].mean()) if c in r.columns and r[c].drop_nulls().len() else None

    prompt = mean("prompt_tokens")
    if prompt is None:  # vLLM V1 does not log prompt lengths: its metrics' mean, when scraped
        m = run.table("server_metrics")
        s, n = (
            (
                increase(m, "vllm:request_prompt_tokens_sum", None, None),
                increase(m, "vllm:request_prompt_tokens_count", None, None),
            )
            if m.height
            else (None, None)
        )
        prompt = num(s / n) if s is not None and n else None
    return {
        "mode": mode[0] if len(mode) == 1 else ("mixed" if mode else None),
        "steps": [s.label for s in st],
        "requests": r.height,
        "untimed_requests": apart.requests if apart else 0,
        "arrival_rate": num(r.height / dur) if dur else None,
        "load_s": num(dur),
        "prompt_tokens_mean": prompt,
        "max_tokens_mean": mean("max_tokens"),
    }


def shown(d: dict) -> dict:
    """describe's figures to the digits their data holds (logscope.compare.precision), for compare's outputs."""
    return d | {k: (precision.seconds if k == "load_s" else precision.figures)(d[k]) for k in ROUNDED}


ROUNDED = ("arrival_rate", "load_s", "prompt_tokens_mean", "max_tokens_mean")


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if a == b:
        return 0.0
    return abs(b - a) / max(abs(a), abs(b))


def differences(a: dict, b: dict) -> tuple[list[dict], bool | None]:
    """What differs in the load beyond TOLERANCE, and whether the loads are alike (None: cannot tell)."""
    rows = []
    if a["steps"] != b["steps"]:
        rows.append({"name": "steps", "a": a["steps"], "b": b["steps"], "note": "the load steps differ"})
    keys = ["prompt_tokens_mean", "max_tokens_mean"]
    if "concurrency" not in (a["mode"], b["mode"]):  # open loop (or unknown): the rate is the load itself
        keys = ["arrival_rate", *keys]
    known = 0
    for k in keys:
        d = _rel(a[k], b[k])
        if d is None:
            continue
        known += 1
        if d > TOLERANCE:
            rows.append(
                {
                    "name": k,
                    "a": precision.figures(a[k]),
                    "b": precision.figures(b[k]),
                    "note": f"differs by {d * 100:.0f} % (tolerance {TOLERANCE * 100:.0f} %)",
                }
            )
    if rows:
        return rows, False
    return rows, (True if known or a["steps"] else None)
