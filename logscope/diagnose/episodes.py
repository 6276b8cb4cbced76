"""Episodes: abnormal stretches of every signal, grouped when they overlap, then classified.

Signals (see ``detect`` for the baseline method):

============  ======================================================  =====================================
signal        series                                                   abnormal when
============  ======================================================  =====================================
stall         stats samples with running >= 1 and 0 tokens/s          on ``stall_min_samples`` samples
              (prompt and generation)
preemptions   per-interval counts (Prometheus-derived, else the stats  >= ``preemptions_min``
              line's 'Preemptions: N', else V0 warnings 1-in-50)
kv_pressure   KV-cache usage per stats sample                          >= ``kv_full``
queue         waiting requests per stats sample                        >= ``waiting_min`` on
                                                                       ``queue_min_samples`` samples
errors        failed requests, each once at its end (``failures``:     >= ``errors_floor`` failures within
              logical requests, else gateway / vLLM 5xx answers)       ``merge_gap_s`` of each other, above the
                                                                       SLO's failure share of the requests
                                                                       ending in them (no baseline, no window)
retries       client + gateway retries per window                      robust outlier >= ``retries_floor``
orphans       executions running after their caller left (caller's     >= ``orphans_floor`` executions
              end to server's finish; merged within ``merge_gap_s``)   (no baseline: waste on any server)
ttft / e2e    answered requests above the SLO, each once at its start  >= ``slow_floor`` of them within
              on the run's clock (``slow``; cold starts left out)      ``merge_gap_s`` of each other, the p95
                                                                       of the requests started in them above
                                                                       the SLO (no baseline, no window)
crash         OOM / engine death / silent death (lifecycle)            always
============  ======================================================  =====================================

On one replica, stretches of server signals that overlap or lie within ``merge_gap_s`` are one
episode, one per death: the preemptions, the full KV cache and the queue of one burst are one
incident seen through three signals. The request signals of the whole folder (errors, retries,
orphans, TTFT, e2e) within ``merge_gap_s`` of it are its companions too (the slow first tokens of
that burst), but never join two episodes: a day-long error rate would otherwise chain every burst of
every replica into one. Request-signal stretches near no server episode are episodes of their own.
The episode is named after its most telling signal (order of ``PRIORITY``) and timed by that
signal; the others are listed as its companions.

Classes, in the order they are decided:

* **crash**: the episode holds a death (OOM, engine death, or a silent death followed by a restart).
* **sustained**: still abnormal when the logs (or the range) end; or still going at the last arrival;
  or it ended only when its load did: in the ``recovery_window_s`` after it, arrivals fell below
  ``recovery_load_ratio`` of the load before it (a ladder step's pressure ends with the step), unless it is a
  latency of the requests whose next requests, in the ``load_end_tolerance_s`` after it, came at that share of the
  load or more: they met the SLO at that load (``slow.kept_load``).
* **spike** (a one-off): it began after the last arrival and drained to baseline (the backlog of the last
  requests; the claim names the missing test: no load after it); or the signals returned to baseline while the server kept serving (arrivals after
  it at ``recovery_load_ratio`` of the baseline or more); the reason says whether it followed a surge of
  arrivals or prompt lengths (``rise_ratio``), with the rates before, during and after.
* **recurring**: ``recurring_min`` or more spikes of one signal; the reason gives their spacing. A
  sustained episode of that signal on a replica of the pattern, sustained only because its log ends inside
  it (no longer than the pattern's longest spike), is its last spike, cut short.

Neither an episode's duration nor its share of the observed span decides its class: both change when
calm time is added or a range is narrowed, and a class must not (tests/test_metamorphic.py).

The stretches and their grouping are in ``stretches``, the context every step reads in ``context``;
here, each episode's figures, details and class.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import polars as pl

from .. import clock
from ..scalars import int_or_none, int_value
from . import beats, figures, latency_named, preemption_count, slow
from .beats import regular, spacing_words
from .context import Context
from .load_ends import last_arrival_at, open_end, phase_pause, stop_in
from .load_words import RATE_SPAN_S, came_after
from .load_words import rates as _rates
from .load_words import rise as _rise
from .records import Episode
from .stretches import REQUEST_SIGNALS, grouped, stretches
from .thresholds import Thresholds

PRIORITY = (
    "crash",
    "stall",
    "preemptions",
    "kv_pressure",
    "queue",
    "orphans",
    "retries",
    "errors",
    "ttft",
    "e2e",
)
COUNTED = ("preemptions", "errors", "retries", "orphans")
UNIT = {
    "preemptions": "preemptions",
    "kv_pressure": "KV usage",
    "queue": "waiting",
    "errors": "errors",
    "retries": "retries",
    "orphans": "orphaned executions",
    "ttft": "TTFT p95 (s)",
    "e2e": "e2e p95 (s)",
    "crash": "deaths",
    "stall": "running with no progress",
}


def _t(ts: datetime | None) -> str:
    return clock.hms(ts) if ts is not None else "?"


def build(ctx: Context) -> list[Episode]:
    """Episodes as dicts (table columns + details), ordered by start; ids are given by the caller."""
    heads = _heads(ctx, grouped(stretches(ctx), ctx.th.merge_gap_s))
    # the figures of all episodes at once: a day-long incident has thousands of episodes
    req, server = ctx.by_time(ctx.inputs.requests, "ts_start"), ctx.by_time(ctx.server)
    figs = zip(
        figures.requests_many(req, [(h["start"], h["end"]) for h in heads]),
        figures.requests_many(req, [h["ranges"]["before"] for h in heads]),
        figures.requests_many(req, [h["ranges"]["lead"] for h in heads]),
        figures.requests_many(req, [_after(ctx, h["end"]) for h in heads]),
        figures.server_state_many(
            server, [h["state_range"] for h in heads], [h["state_replica"] for h in heads]
        ),
        figures.server_state_many(server, [h["ranges"]["before"] for h in heads]),
        strict=True,
    )
    win = ctx.by_time(ctx.inputs.windows)
    pad, one = timedelta(seconds=ctx.inputs.window_s), timedelta(microseconds=1)
    more = zip(
        figures.windows_sums_many(win, WINDOW_SUMS, [(h["start"] - pad, h["end"]) for h in heads]),
        figures.preemptions_many(ctx.by_time(ctx.pre), [(h["start"] - one, h["end"]) for h in heads]),
        _baselines(ctx, heads),
        _phases_many(ctx.inputs.phases, [(h["start"], h["end"]) for h in heads]),
        strict=True,
    )
    eps = [
        _episode(ctx, h, during, before, lead, after, state, state_before, sums, pre, baseline, phases)
        for h, (during, before, lead, after, state, state_before), (sums, pre, baseline, phases) in zip(
            heads, figs, more, strict=True
        )
    ]
    eps.sort(key=lambda e: (e["start"], e["signal"], e["replica"] or ""))
    _context(eps)
    _recurring(eps, ctx.th)
    return eps


BLIP_SIGNALS = ("kv_pressure", "queue", "stall")


def _context(eps: list[Episode]) -> None:
    """A level seen on one stats sample that was back at baseline on the next, while the server kept serving
    (a one-sample KV blip): context beside the timeline, not an episode to act on. It gets no finding and no
    --fail-on matches it; one still abnormal when the logs end stays what its rule says (nothing after it)."""
    for e in eps:
        if e["class"] == "spike" and e["signal"] in BLIP_SIGNALS and e["duration_s"] == 0 and e["count"] == 1:
            e["class"] = "context"
            e["decided_by"] = {**(e.get("decided_by") or {}), "rule": "one_sample"}
            e["reason"] = e["reason"].replace(SEP, f"{SEP}one sample, ", 1) + " (context, not a finding)"


def _heads(ctx: Context, rows: pl.DataFrame) -> list[dict]:
    """Each episode's stretches (``grouped``) summed up: its primary signal (the first of PRIORITY it holds),
    the primary's figures, its companions, and the time ranges its figures cover. All episodes in a few calls
    (a day holds thousands: a few filters each took a second)."""
    if rows.height == 0:
        return []
    n = int_value(rows["_e"].max()) + 1
    rank = {sig: i for i, sig in enumerate(PRIORITY)}
    rows = rows.with_columns(pl.col("signal").replace_strict(rank, return_dtype=pl.Int64).alias("_p"))
    rows = rows.with_columns(
        (pl.col("_p") == pl.col("_p").min().over("_e")).alias("_primary"),
        ~pl.col("signal").is_in(REQUEST_SIGNALS).alias("_core"),
    )
    prim = pl.col("_primary")
    core = pl.col("_core")
    figs = (
        rows.group_by("_e")
        .agg(
            pl.col("_p").min(),
            pl.col("replica").filter(prim).first(),
            pl.col("start").filter(prim).min(),
            pl.col("end").filter(prim).max(),
            pl.col("total").filter(prim).sum(),
            pl.col("samples").filter(prim).sum(),
            pl.col("peak").filter(prim).max(),
            pl.col("last_sample").filter(prim).max(),
            # the server signals' span (the queue often builds before the first preemption), else the group's
            pl.coalesce(pl.col("start").filter(core).min(), pl.col("start").min()).alias("core_start"),
            pl.coalesce(pl.col("end").filter(core).max(), pl.col("end").max()).alias("core_end"),
        )
        .sort("_e")
    )
    heads = []
    for r, companions in zip(figs.iter_rows(named=True), _companions(rows, n), strict=True):
        primary, start, end = PRIORITY[r["_p"]], r["start"], r["end"]
        ranges = _ranges(ctx, start)
        # a death: the state in the lead-in too (what the server was running when it died)
        lo = ranges["lead"][0] if primary == "crash" else start
        heads.append(
            {
                "primary": primary,
                "replica": r["replica"] or None,
                "start": start,
                "end": end,
                "ranges": ranges,
                "total": r["total"],
                "samples": r["samples"],
                "peak": r["peak"],
                "last_sample": r["last_sample"],
                "companions": companions,
                # server state over the incident as the server saw it (all its server signals), not over the request
                # signals around it (an error rate may last all day)
                "state_range": (min(lo, r["core_start"]), max(end, r["core_end"])),
                "state_replica": r["replica"]
                or None,  # narrowed to it when its samples are there (figures.server_state)
            }
        )
    return heads


def _after(ctx: Context, end: datetime) -> tuple[datetime, datetime] | tuple[None, None]:
    """The recovery window after an episode, within what was observed (None: nothing observed after it)."""
    hi = end + timedelta(seconds=ctx.th.recovery_window_s)
    if ctx.span_hi is not None:
        hi = min(hi, ctx.span_hi)
    return (end, hi) if hi > end else (None, None)


def _episode(
    ctx: Context,
    h: dict,
    during_req: dict,
    before_req: dict,
    lead_req: dict,
    after_req: dict,
    state: dict,
    state_before: dict,
    sums: dict[str, int],
    pre: int | None,
    baseline: float | None,
    phases: list[dict],
) -> Episode:
    primary, replica, start, end, w = (h[k] for k in ("primary", "replica", "start", "end", "ranges"))
    companions = h["companions"]
    death = ctx.deaths.get((start, replica)) if primary == "crash" else None
    dur = (end - start).total_seconds()
    # no rate over less than a second: its arrivals are said as a count (load_words.during)
    if 0 < dur < RATE_SPAN_S:
        during_req = {**during_req, "arrival_rate": None}
    total = float(h["total"])
    count = 1 if primary == "crash" else int(round(total)) if primary in COUNTED else int(h["samples"])
    own_end = bool(h["last_sample"] > end)  # its own signal has a sample after it
    recovered = (
        own_end and not any(c.get("to_the_end") for c in companions)
        if death is None
        else death.ready_ts is not None
    )
    ep = Episode(
        signal=primary,
        replica=replica,
        start=start,
        end=end,
        duration_s=dur,
        share_of_span=(dur / ctx.span_s) if ctx.span_s else None,
        recovered=recovered,
        peak=float(h["peak"]),
        baseline=baseline,
        count=count,
        **{
            k: state[k]
            for k in ("running_max", "running_mean", "waiting_max", "waiting_mean", "kv_max", "kv_mean")
        },
        arrival_rate_before=before_req["arrival_rate"],
        arrival_rate_during=during_req["arrival_rate"],
        arrival_rate_after=after_req["arrival_rate"],
        prompt_tokens_mean=during_req["prompt_tokens_mean"],
        output_tokens_mean=during_req["output_tokens_mean"],
        ttft_p95=during_req["ttft_p95"],
        e2e_p95=during_req["e2e_p95"],
        success_share=during_req["success_share"],
    )
    if primary in latency_named.NAMES:  # the clock and source the signal was measured on, for every sentence
        ep["signal_clock"], ep["signal_source"] = latency_named.measured(ctx, primary, start, end)
    ep["details"] = _details(ctx, ep, companions, before_req, during_req, lead_req, death, sums, pre, phases)
    # the same server figures over the baseline window, side by side with the episode's
    ep["details"]["state_before"] = state_before
    ep["details"]["state_during"] = state
    ep["details"]["baseline_window"] = {"start": w["before"][0], "end": w["before"][1]}
    if h.get("baseline_of"):  # what a latency's baseline is of, and its clock (slow.baselines)
        ep["details"]["baseline_of"] = h["baseline_of"]
    ep["class"], ep["reason"] = _classify(ctx, ep, companions, before_req, lead_req, death, own_end)
    if (
        death is None and ep["arrival_rate_after"] is not None
    ):  # a surge of its load before it, or none (beats)
        ep["decided_by"]["came_after"] = came_after(before_req, lead_req, ctx.th)
    ep["why"] = ep["reason"].split(SEP, 1)[1].split("; with ")[0] if SEP in ep["reason"] else ep["reason"]
    ep["open_end"] = open_end(ep)
    return ep


def _ranges(ctx: Context, start: datetime) -> dict:
    """The lead-in (merge_gap_s before the start, where a trigger such as a burst shows) and the baseline
    window before it (baseline_lookback_s, not before the observed span)."""
    lead = timedelta(seconds=ctx.th.merge_gap_s)
    lo = start - lead - timedelta(seconds=ctx.th.baseline_lookback_s)
    if ctx.span_lo is not None:
        lo = max(lo, ctx.span_lo)
    hi = start - lead
    return {"lead": (start - lead, start), "before": (lo, hi) if hi > lo else (None, None)}


def _companions(rows: pl.DataFrame, n: int) -> list[list[dict]]:
    """Each episode's other signals (``rows``: the stretches of every episode ``_e``, ``_primary`` marking its
    primary signal's), one entry per signal: its earliest start, latest end, peak, count."""
    out: list[list[dict]] = [[] for _ in range(n)]
    rows = (
        rows.filter(~pl.col("_primary"))
        .group_by("_e", "signal", maintain_order=True)
        .agg(
            pl.col("start").min(),
            pl.col("end").max(),
            pl.col("peak").max(),
            pl.col("total").sum(),
            pl.col("samples").sum(),
            pl.col("last_sample").max(),
        )
        .sort(["_e", "start", "signal"])
    )
    for r in rows.iter_rows(named=True):
        c = {
            "signal": r["signal"],
            "start": r["start"],
            "end": r["end"],
            "peak": r["peak"],
            "count": int(round(r["total"])) if r["signal"] in COUNTED else int(r["samples"]),
        }
        if (
            r["signal"] not in REQUEST_SIGNALS
            and r["last_sample"] is not None
            and r["last_sample"] <= r["end"]
        ):
            # a server signal with no sample after its stretch: still abnormal when its samples end (public-2 n19:
            # the KV cache fell back under 90 % while the queue rose to 233 on the last line). The episode has
            # not recovered while it has not (request signals end with the arrivals: the load decides those)
            c["to_the_end"] = True
        out[r["_e"]].append(c)
    return out


# the column each signal's baseline is the median of (a death has none)
BASELINE_OF = {
    "preemptions": "preemptions",
    "kv_pressure": "kv",
    "queue": "waiting",
    "stall": "gen_tps",
    "errors": "errors",
    "retries": "client_retries",
    "orphans": "orphaned",
    "ttft": "ttft_p95",
    "e2e": "e2e_p95",
}
SERVER_SIGNALS = ("preemptions", "kv_pressure", "queue", "stall")  # their baseline is their replica's


def _baseline(ctx: Context, signal: str, replica: str | None, start: datetime) -> float | None:
    """The median of the signal over [start - baseline_lookback_s, start), on the replica for a server
    signal (``_baselines`` gives every episode's at once; this is its rule, and its way for unsorted times)."""
    if signal not in BASELINE_OF:
        return None
    of_requests = slow.baselines(ctx, signal, [start])  # a latency's, from the requests
    if of_requests is not None:
        return of_requests[0]["value"]
    col, look = BASELINE_OF[signal], timedelta(seconds=ctx.th.baseline_lookback_s)
    s = figures.between(ctx.by_time(_baseline_frame(ctx, signal)), "ts", start - look, start, closed="left")
    if signal in SERVER_SIGNALS:
        s = s.filter(pl.col("replica") == (replica or ""))
    if not s.height:  # (an empty frame may lack the column)
        return _baseline_value(ctx, signal, 0, None, 0)
    return _baseline_value(ctx, signal, s.height, s[col].median(), s[col].drop_nulls().len())


def _baseline_frame(ctx: Context, signal: str) -> pl.DataFrame:
    """The samples a signal's baseline is read from."""
    if signal == "preemptions":
        return ctx.pre if ctx.pre.height else ctx.warnings
    return ctx.server if signal in SERVER_SIGNALS else ctx.inputs.windows


def _baseline_value(ctx: Context, signal: str, rows: int, median, count: int) -> float | None:
    """The baseline from the lookback's ``rows`` samples, their ``median`` and ``count`` of values: no sample
    of a counted preemption is a baseline of 0."""
    if signal == "preemptions":
        return float(median) if rows else (0.0 if ctx.pre.height else None)
    return float(median) if rows and count else None


def _baselines(ctx: Context, heads: list[dict]) -> list[float | None]:
    """``_baseline`` of every episode: the episodes of one signal in a few calls."""
    look, one = timedelta(seconds=ctx.th.baseline_lookback_s), timedelta(microseconds=1)
    out: list[float | None] = [None] * len(heads)
    by_signal: dict[str, list[int]] = {}
    for k, h in enumerate(heads):
        if h["primary"] in BASELINE_OF:
            by_signal.setdefault(h["primary"], []).append(k)
    for signal, ks in by_signal.items():
        of_requests = slow.baselines(ctx, signal, [heads[k]["start"] for k in ks])
        if of_requests is not None:  # a latency's baseline from the requests, not from windows of a width
            for k, b in zip(ks, of_requests, strict=True):
                out[k], heads[k]["baseline_of"] = b["value"], b
            continue
        col, frame = BASELINE_OF[signal], _baseline_frame(ctx, signal)
        # [start - look, start): times are whole microseconds; a bounded batch of episodes at a time
        parts = (
            figures.gathered(
                ctx.by_time(frame),
                "ts",
                [(heads[k]["start"] - look, heads[k]["start"] - one) for k in ks],
                columns=["replica", col],
            )
            if frame.height
            else iter([frame])
        )
        if parts is None:  # times not sortable: one episode at a time
            for k in ks:
                out[k] = _baseline(ctx, signal, heads[k]["replica"], heads[k]["start"])
            continue
        want = pl.DataFrame(
            {"_k": range(len(ks)), "_want": [heads[k]["replica"] or "" for k in ks]},
            schema={"_k": pl.Int64, "_want": pl.String},
        )
        got = {}
        for rows in parts:
            if rows.height and signal in SERVER_SIGNALS:
                rows = rows.join(want, on="_k").filter(pl.col("replica") == pl.col("_want"))
            if rows.height:
                got.update(
                    {
                        r["_k"]: r
                        for r in rows.group_by("_k")
                        .agg(
                            pl.len().alias("n"),
                            pl.col(col).median().alias("m"),
                            pl.col(col).count().alias("c"),
                        )
                        .iter_rows(named=True)
                    }
                )
        for i, k in enumerate(ks):
            r = got.get(i, {"n": 0, "m": None, "c": 0})
            out[k] = _baseline_value(ctx, signal, r["n"], r["m"], r["c"])
    return out


def _phases_many(phases: pl.DataFrame, ranges: list[tuple]) -> list[list[dict]]:
    """The client's load phases overlapping each range, by start (one join for every episode)."""
    out: list[list[dict]] = [[] for _ in ranges]
    if not phases.height or not ranges:
        return out
    q = pl.DataFrame(
        {
            "_k": range(len(ranges)),
            "_lo": [figures.epoch_us(a) for a, _ in ranges],
            "_hi": [figures.epoch_us(b) for _, b in ranges],
        },
        schema={"_k": pl.Int64, "_lo": pl.Int64, "_hi": pl.Int64},
    )
    ph = phases.with_row_index("_r").with_columns(
        pl.col("ts_start").to_physical().alias("_s"), pl.col("ts_end").to_physical().alias("_t")
    )
    hits = q.join_where(ph, pl.col("_s") <= pl.col("_hi"), pl.col("_t") >= pl.col("_lo")).sort(
        "_k", "ts_start", "_r"
    )
    for r in hits.iter_rows(named=True):
        out[r["_k"]].append(
            {
                "phase": r["phase"],
                "mode": r["mode"],
                "value": r["value"],
                "start": r["ts_start"],
                "end": r["ts_end"],
            }
        )
    return out


# window columns summed over each episode (details)
WINDOW_SUMS = [
    "server_requests",
    "client_attempts",
    "client_retries",
    "gateway_retries",
    "gateway_5xx",
    "gateway_499",
    "server_aborts",
    "orphaned",
    "timeouts",
    "errors",
    "arrivals",
]


def _details(
    ctx: Context,
    ep: Episode,
    companions: list[dict],
    before: dict,
    during: dict,
    lead: dict,
    death,
    sums: dict[str, int],
    pre: int | None,
    phases: list[dict],
) -> dict:
    start, end = ep["start"], ep["end"]
    d: dict = {
        "companions": companions,
        "requests_during": during,
        "requests_before": before,
        "arrival_rate_lead_in": lead["arrival_rate"],
    }
    w = figures.between(
        ctx.by_time(ctx.warnings), "ts", start - timedelta(seconds=ctx.th.v0_warning_merge_s), end
    )
    if w.height:
        cum = w["cumulative_preemptions"].max()
        d["v0_preemption_warnings"] = {
            "lines": w.height,
            "last_cumulative": int_or_none(cum),
            "modes": sorted(set(w["preemption_mode"].drop_nulls().to_list())),
            "note": "V0 prints one warning per 50 preemptions",
        }
    if ep["signal"] == "preemptions" and not ctx.pre.height:  # counted from those warnings: exact or a floor
        mine = figures.between(ctx.by_time(ctx.warnings), "ts", start, end)
        # SGLang's retractions count the requests they name: no counter, no floor
        v0 = pl.col("preemption_mode").fill_null("") != "RETRACT"
        mine = mine.filter((pl.col("replica") == (ep["replica"] or "")) & v0)
        by = preemption_count.counted_by(mine.height, mine["cumulative_preemptions"].null_count())
        if by is not None:
            d["preemptions_counted_by"] = by
    if pre is not None and ep["signal"] != "preemptions":
        d["preemptions"] = pre
    arr = sums.get("arrivals")
    d.update((k, v) for k, v in sums.items() if k != "arrivals")
    if arr and d.get("server_requests") is not None:
        d["amplification"] = d["server_requests"] / arr
    if phases:
        d["phases"] = phases
    if death is not None:
        d["crash"] = {
            "kinds": death.kinds,
            "pid": death.pid,
            "message": death.message,
            "last_line": death.last_line_ts,
            "restart": death.restart_ts,
            "ready": death.ready_ts,
            "new_pid": death.new_pid,
            "downtime_s": death.downtime_s,
            "at_startup": death.at_startup,
            "notes": death.notes,
            "engine": death.engine,
            "same_server": death.same_server.words() if death.same_server is not None else None,
            "same_server_state": death.same_server.state if death.same_server is not None else None,
        }
        gw = figures.between(ctx.gateway_trouble, "ts", death.ts, end)
        if gw.height:
            d["crash"]["gateway_first_error"] = gw["ts"].min()
            d["crash"]["gateway_errors_by_kind"] = dict(sorted(Counter(gw["kind"].to_list()).items()))
    d["output_lengths"] = {k: during[k] for k in ("max_tokens_mean", "output_tokens_mean")}
    return d


SEP = " — "  # between what the episode is and why it got its class
RECURRING_SHOWN = 8  # start times named in a recurring pattern's reason (then '… n more …' and the last)


def _counted(ep: Episode) -> str:
    if ep["signal"] == "preemptions":  # V0's warnings count one per 50: by its counter, or a floor
        return preemption_count.words(ep)
    return f"{ep['count']} {UNIT[ep['signal']] if ep['count'] != 1 else UNIT[ep['signal']].rstrip('s')}"


def _classify(
    ctx: Context, ep: Episode, companions: list[dict], before: dict, lead: dict, death, own_end: bool = False
) -> tuple[str, str]:
    th = ctx.th
    sig, start, end = ep["signal"], ep["start"], ep["end"]
    # one sample has a time, not a duration: '06:16:52–06:16:52 (0 s)' read as a measured 0 s (public-2 n01)
    when = (
        f"at {clock.hms(start)} (one sample)"
        if start == end
        else f"{clock.hms_range(start, end)} ({ep['duration_s']:.{1 if ep['duration_s'] < 1 else 0}f} s)"
    )
    head = f"{_unit(ctx, sig, start, end)} {when}"
    if sig in COUNTED:
        head = f"{_counted(ep)} {when}"
    comp = (
        "; with "
        + ", ".join(
            f"{c['signal']} {clock.hms_span(c['start'], c['end'])}"
            + (f" ({c['count']:,} failed)" if c["signal"] == "errors" else "")
            for c in companions
        )
        if companions
        else ""
    )
    if death is not None:
        ep["decided_by"] = {
            "rule": "death",
            "death_kinds": "+".join(death.kinds),
            "death_ts": death.ts,
            "ready_ts": death.ready_ts,
            "downtime_s": death.downtime_s,
        }
        what = (
            (
                "silent death (log stops, new banner)"
                if death.restart_ts
                else "silent death (log stops, connections refused)"
            )
            if death.kinds == ["silent"]
            else "+".join(death.kinds)
        )
        if death.at_startup:
            return "crash", f"{what} at startup {_t(death.ts)}: the server never served a request{comp}"
        if death.ready_ts is not None:
            return "crash", (
                f"{what} at {_t(death.ts)}, restarted (pid {death.new_pid}) and ready at "
                f"{_t(death.ready_ts)}: down {death.downtime_s:.0f} s{comp}"
            )
        # whether it died at start-up is not in the logs: said, not read as a death while serving
        unknown = f"; at start-up: unknown ({death.startup_basis})" if death.at_startup is None else ""
        return "crash", (
            f"{what} at {_t(death.ts)} with no restart before {ctx.inputs.rng.end_words}{unknown}{comp}"
        )
    load = {
        "recovered": ep["recovered"],
        "end": end,
        "last_arrival": ctx.load_end,
        "arrival_rate_before": ep["arrival_rate_before"],
        "arrival_rate_during": ep["arrival_rate_during"],
        "arrival_rate_after": ep["arrival_rate_after"],
    }
    tol = timedelta(seconds=th.load_end_tolerance_s)
    if (
        not ep["recovered"]
        and sig in REQUEST_SIGNALS
        and ctx.load_end is not None
        and end >= ctx.load_end - tol
        and ctx.span_hi is not None
        and ctx.span_hi > end + tol
    ):
        # a signal of the requests (timed by their arrivals) has no sample after the last arrival: it did not end with
        # the logs, which go on (gateway-queue: its TTFT stretch ends with the last arrival at 08:29:22, the queue
        # drained until 08:30:00). It lasted as long as the load did
        ep["decided_by"] = {"rule": "load_end", **load}
        return (
            "sustained",
            f"{head}{SEP}no recovery while the load lasted (last arrival {_t(ctx.load_end)}){comp}",
        )
    if not ep["recovered"]:
        stop = stop_in(ctx, ep)
        ep["decided_by"] = {
            "rule": "stopped" if stop is not None else "ends_abnormal",
            **load,
            "stopped_at": stop,
        }
        if stop is not None:
            return "sustained", (
                f"{head}{SEP}still abnormal when the server was stopped at {_t(stop)} (a graceful "
                f"shutdown: SIGTERM, a deploy or a failing probe){comp}"
            )
        left = [c for c in companions if c.get("to_the_end")]
        if own_end and left:  # its own signal did end, a companion did not
            what = ", ".join(f"its {c['signal'].replace('_', ' ')}" for c in left)
            return "sustained", f"{head}{SEP}{what} still abnormal when {ctx.inputs.rng.end_words}{comp}"
        return "sustained", f"{head}{SEP}still abnormal when {ctx.inputs.rng.end_words}{comp}"
    last = last_arrival_at(ctx, ep) if ctx.load_end is not None else None
    if last is not None and start > last:
        # it began after the last arrival and went back to baseline while the server still reported: the backlog
        # of the last requests, drained (kv-short: 3 long prompts sent at once, served one at a time, waiting
        # 2 -> 1 -> 0). No load after it can say whether it would recur: a one-off, the test named as missing
        ep["decided_by"] = {"rule": "drained", **load, "last_arrival": last, "samples_after": 1}
        return "spike", (
            f"{head}{SEP}the backlog of the last requests, drained after the load ended (last arrival "
            f"{_t(last)}): back to baseline with no new arrivals{comp}"
        )
    if ctx.load_end is not None and end >= ctx.load_end - tol:
        ep["decided_by"] = {"rule": "load_end", **load}
        return (
            "sustained",
            f"{head}{SEP}no recovery while the load lasted (last arrival {_t(ctx.load_end)}){comp}",
        )
    # the client's load phase ended as the episode did and the client paused (a ladder's gap between steps):
    # arrivals fell to none, below any recovery_load_ratio of the load before (the 'load fell' rule at its limit).
    # Only when the folder's arrivals did fall: one client's short phase ending while others kept the same rate
    # (kv-blip: a 0.15 s burst client beside a calm one, 12.4/s before and 13.6/s after) paused nothing
    # (the reference: arrivals during it, the load that paused; before it for a one-sample episode; unknown rates
    # leave the phases alone to say)
    stop = phase_pause(ctx, start, end)
    after, paused = ep["arrival_rate_after"], ep["arrival_rate_during"] or ep["arrival_rate_before"]
    if (
        stop is not None
        and th.recovery_load_ratio > 0
        and (after is None or not paused or after < th.recovery_load_ratio * paused)
    ):
        load["last_arrival"] = stop
        ep["decided_by"] = {"rule": "load_paused", **load}
        return (
            "sustained",
            f"{head}{SEP}abnormal for as long as its load lasted: the client's load phase ended at {_t(stop)} "
            f"and it sent nothing for {th.recovery_window_s:g} s or more, no recovery at that load{comp}",
        )
    rates = _rates(ep)
    b = ep["arrival_rate_before"]
    ref = b if b else ep["arrival_rate_during"]
    # a latency stretch of the requests recovers on the next requests: under the SLO at its load, it did not end with it
    fell = bool(after is not None and ref and after < th.recovery_load_ratio * ref)
    kept = slow.kept_load(ctx, sig, end, ref) if fell else None
    if fell and kept is None:
        ep["decided_by"] = {"rule": "load_fell", **load}
        return "sustained", (
            f"{head}{SEP}abnormal for as long as its load lasted: it ended only when arrivals "
            f"fell ({rates}), no recovery at that load{comp}"
        )
    ep["decided_by"] = {
        "rule": "recovered",
        **load,
        "samples_after": 1,
    }  # a sample after it, back at baseline
    if kept is not None:
        ep["decided_by"]["arrival_rate_kept"] = kept
    if after is None:  # no request log: the server's own samples say it recovered, the load is unknown
        return "spike", f"{head}{SEP}back to baseline after it (the load is unknown: no request log){comp}"
    still = f" ({kept:.1f}/s in the {th.load_end_tolerance_s:g} s after it)" if kept is not None else ""
    return (
        "spike",
        f"{head}{SEP}back to baseline while still serving{still}, {_rise(ep, before, lead, th)}{comp}",
    )


def _unit(ctx: Context, sig: str, start: datetime, end: datetime) -> str:
    """The signal's unit; a latency's with the clock its windows were measured on (client, gateway, engine) and
    its source, or 'clock unknown' when they do not say."""
    if sig not in latency_named.NAMES:
        return UNIT[sig]
    return latency_named.named(ctx, sig, start, end)


def _cut_short(e: Episode, longest_s: float) -> bool:
    """Sustained only because its replica's samples stop inside it: no longer than the pattern's spikes."""
    return e["class"] == "sustained" and not e["recovered"] and e["duration_s"] <= longest_s


def _recurring(eps: list[Episode], th: Thresholds) -> None:
    by_sig: dict[str, list[Episode]] = {}
    for e in eps:
        if e["class"] == "spike":
            by_sig.setdefault(e["signal"], []).append(e)
    for sig, group_ in by_sig.items():
        # a spike of the pattern that its log's end cut short is one more of them, not a regime of its own (the
        # 1 GB bench folder's last ladder copy was a 'Sustained' finding above the pattern it repeats); its
        # reason keeps 'still abnormal when the logs end'
        on = {e["replica"] for e in group_}
        longest = max(e["duration_s"] for e in group_)
        group_ = sorted(
            group_ + [e for e in eps if e["signal"] == sig and e["replica"] in on and _cut_short(e, longest)],
            key=lambda e: e["start"],
        )
        # spikes starting together on several replicas are one time, not a rhythm (their spacing would be 0 s)
        starts = sorted({e["start"] for e in group_})
        if len(starts) < th.recurring_min or len(starts) == len([e for e in group_ if e["class"] != "spike"]):
            continue
        beat = beats.of(group_)
        if (
            beat.one_offs()
        ):  # each after a surge of its own load: the load recurred, each spike is its one-off
            continue
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
        gaps.sort()
        med = gaps[len(gaps) // 2]
        # a long incident can hold hundreds: name the first few and the last
        shown = (
            [_t(s) for s in starts]
            if len(starts) <= RECURRING_SHOWN + 1
            else (
                [_t(s) for s in starts[:RECURRING_SHOWN]]
                + [f"… {len(starts) - RECURRING_SHOWN - 1} more …", _t(starts[-1])]
            )
        )
        noun = sig.removesuffix("s").replace("_", " ").replace("ttft", "TTFT").replace("kv ", "KV ")
        # spikes of several replicas at the same times: so many spikes, at so many times
        times = f" at {len(starts)} times" if len(starts) < len(group_) else ""
        why = f"{len(group_)} {noun} spikes{times}, starting {spacing_words(gaps, th)}, {beat.words()}"
        first = min(group_, key=lambda e: e["start"])
        for e in group_:
            e["class"] = "recurring"
            e["why"] = why
            kept = (e.get("decided_by") or {}).get(
                "arrival_rate_kept"
            )  # why a beat counts as recovered, kept
            e["decided_by"] = {
                "rule": "recurring",
                "spikes": len(group_),
                "spacing_s": med,
                "spacing_min_s": gaps[0],
                "spacing_max_s": gaps[-1],
                "regular": regular(gaps, th),
                # the facts 'recurring' rests on beside the spacing: the load at each beat, each one's recovery
                "beats_recovered": beat.recovered,
                "beats_steady": beat.steady,
                "beats_after_surge": beat.surge,
                "beats_total": sum(beat.counts),
                "beats_phase": beat.phase,
            }
            if kept is not None:
                e["decided_by"]["arrival_rate_kept"] = kept
            # the start times once, on the first; the others point to it (a day can hold hundreds of them)
            where = f" ({', '.join(shown)})" if e is first else f", the first {_t(starts[0])}"
            e["reason"] = f"{why}{where}; this one: {e['reason']}"
