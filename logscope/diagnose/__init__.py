"""Diagnosis: one-off spike or sustained regime, the working boundary, findings with evidence.

``run(out, options)`` reads the ingest and correlation tables of ``out`` and writes
``episodes.parquet``, ``findings.parquet``, ``ladder.parquet`` and ``diagnosis.json`` (returned as
a dict). It works from the server log alone (no client, gateway or correlation tables): the
request-level signals then come from vLLM's own request lines, or are absent.

Same input, same bytes: ids follow time order (E1.., F1.. by rank), keys are sorted, floats are
rounded, and nothing depends on the wall clock.
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from pathlib import Path
from typing import Protocol

import polars as pl

from .. import clock, jsontext, schemas
from ..correlate import stream_failures
from ..resources import time_range
from ..scalars import time_or_none
from . import (
    cancellation,
    capacity,
    claims,
    clockgap,
    clockgap_run,
    episode_claim,
    episodes,
    figures,
    findings,
    from_histograms,
    gateway_config,
    gpu_faults,
    ladder,
    lifecycle,
    outcomes,
    platform,
    refused,
    retry_spread,
    span_figures,
    stop_errors,
    tables,
    untied,
    untimed,
    verdict,
    wording,
)
from .context import Context, Slo
from .tables import Inputs, load
from .thresholds import ThresholdOptions, Thresholds, from_options

__all__ = ["run", "Thresholds", "DiagnoseOptions"]

METHOD = [
    "Episodes: each signal is compared with its own baseline (median + k·MAD over the run, with absolute floors "
    "so a flat-zero baseline works) and with hard levels (any preemption, KV >= kv_full, a waiting queue on "
    "consecutive samples, latency above the SLO); abnormal samples form stretches, stretches closer than "
    "merge_gap_s merge, and on one replica overlapping stretches of different server signals are one episode "
    "(one per death), named after its most telling signal; the request signals of the whole folder (errors, "
    "retries, orphans, latency) overlapping it are its companions, never a link between two episodes or two "
    "replicas.",
    "Times are sample times: a stats line or Prometheus scrape at t reports the interval ending at t; vLLM log "
    "times have whole seconds.",
    "Preemptions come from Prometheus-derived counts when present (vLLM 0.32 never logs them), else from the "
    "stats line's 'Preemptions: N', else from V0 warnings (one line per 50 preemptions: a lower bound).",
    "A silent death is a new startup banner (new pid) after requests were flowing, with no shutdown between: "
    "death = the last line of the old process, downtime = new readiness - death.",
    "Cold start: cold_start_s after the first request that follows each server start is reported apart and "
    "left out of latency episodes and of warm ladder figures.",
]


# the analysis options of the SLO -> their keys in diagnosis.json's "slo"
SLO_KEYS = {"slo_ttft_s": "ttft_p95_s", "slo_e2e_s": "e2e_p95_s", "slo_success": "success"}


def slo_options(diag: dict) -> dict:
    """The SLO a diagnosis (diagnosis.json) judged by, as analysis options (those it lacks left out)."""
    slo = diag.get("slo")
    if not isinstance(slo, dict):
        slo = {}
    return {opt: slo[key] for opt, key in SLO_KEYS.items() if slo.get(key) is not None}


class DiagnoseOptions(time_range.RangeOptions, ThresholdOptions, Protocol):
    """What the diagnosis reads of its options (``AnalyzeOptions`` has them): the range, the window width the
    correlation chose when None, the SLO, and the thresholds."""

    window: str | None
    slo_ttft_s: float
    slo_e2e_s: float
    slo_success: float


def run(out: Path, options: DiagnoseOptions) -> dict:
    out = Path(out)
    with clock.covering(
        *time_range.of(options).clip(*clock.files_span(out))
    ):  # times carry their date over days
        return _run(out, options)


def _run(out: Path, options: DiagnoseOptions) -> dict:
    th, unknown = from_options(options)
    slo = Slo(float(options.slo_ttft_s), float(options.slo_e2e_s), float(options.slo_success))
    rng = time_range.of(options)
    inp = load(out, options.window, rng)
    inp.untimed = untimed.load(out)
    whole = lifecycle.analyse(inp.stats, inp.events, inp.access, inp.server_requests, inp.requests, th)
    # a log that stops while the gateway's connections to its address are refused, with no start after it
    whole.deaths = sorted(
        [
            *whole.deaths,
            *refused.deaths(
                whole,
                inp.events,
                lifecycle.activity(inp.stats, [inp.events], inp.server_requests),
                inp.gateway_errors,
            ),
        ],
        key=lambda d: (d.ts, d.replica),
    )
    life = _in_range(whole, rng)
    facts = platform.load(
        out, rng
    )  # who killed it: the platform's kills become the deaths' causes (issue #40)
    platform.attach(life, platform.kills(facts, inp.events))
    gpu_faults.tie(facts, life, inp.events)  # an Xid shortly before a death is its cause
    ctx = Context(inp, life, th, slo)
    ctx.platform = facts
    ctx.gateway_conf = gateway_config.read(out)
    ctx.stop_errors = stop_errors.errors_after(inp.gateway, life)
    streams = stream_failures.load(out, rng)  # a stream the access log called 200 that broke off
    ctx.stream_failures = streams
    ctx.hist = from_histograms.load(out, rng, inp.stats)
    reg = claims.Registry()
    # a metrics target tied to no log: its episode beside one log replica's is evidence there, not a second one
    eps = untied.fold(episodes.build(ctx), findings.metrics_only(ctx), untied.reasons(out), inp.stats)
    from_histograms.fill_episodes(ctx, eps)
    for i, e in enumerate(eps, 1):
        e["episode_id"] = f"E{i}"
        e["claim_id"] = reg.add(episode_claim.claim(e, th)).id
    # the timeout the client records state: the wait their callers gave up at (gave_up), by start once
    timeouts = clockgap.ByTime.of(
        tables.read(
            out, "client_requests", ("ts_start", "timeout_s"), pl.col("timeout_s").is_not_null(), rng
        ),
        "ts_start",
        ("timeout_s",),
    )
    rows, lad = ladder.analyse(ctx, timeouts)
    if lad is not None:
        lad["steps"] = rows
        for r in rows:
            r["claim_id"] = reg.add(ladder.step_claim(r, lad["slo"])).id
        lad["claim_id"] = reg.add(ladder.boundary_claim(rows, lad)).id
    # the gateway's rows sorted by time once: each range's then come from a binary search (clockgap.ByTime)
    gw, gw_errors = clockgap.ByTime.of(inp.gateway, "ts_start"), clockgap.ByTime.of(inp.gateway_errors, "ts")
    gaps = clockgap.claims(rows, eps, th, inp.requests, gw, gw_errors, timeouts)
    if not rows:  # no ladder: the gap over the load's phases too, episode or not (clockgap_run)
        gaps += clockgap_run.claims(ctx, inp.requests, gw, gw_errors, timeouts, eps, rng)
    for c in gaps:
        reg.add(c)
        if c.value("figure") == "TTFT":
            ctx.ttft_gaps[str(c.value("where"))] = c
    cap = capacity.analyse(inp, ctx.server, tables.read(out, "server_metrics", rng=rng))
    rm = _multiplication(out)
    traffic = _traffic(inp, rm)
    # what the retries followed: the client's attempts, else what the gateway's retried lines name
    traffic["retried_for"] = retry_spread.retried_for(
        tables.read(out, "client_attempts", rng=rng)
    ) or retry_spread.gateway_retried_for(
        # only the lines stating retries, with the error they name (not among the inputs' columns)
        tables.read(out, "gateway_attempts", retry_spread.GATEWAY_COLS, pl.col("attempts_total") > 1, rng)
    )
    traffic["cancellation"] = cancellation.analyse(
        _correlation_orphans(out),
        th,
        gateway_config.read(out, cancellation.left_span(inp.requests)),
        # a caller leaving is seen by the callers' records or the gateway's, not by the engine's alone
        callers_seen=bool(rm.get("client_attempts") or rm.get("gateway_requests") or inp.gateway.height),
    )
    canc = cancellation.claim(traffic["cancellation"])
    if canc is not None:
        reg.add(canc)
    every, executions = outcomes.rows(out, inp)  # those placed by their end alone too, as compare counts them
    traffic["outcomes"] = outcomes.analyse(every, inp.requests_origin, streams, executions)
    if traffic["outcomes"] is not None:  # those with no time, beside: the retries' count holds them
        traffic["outcomes"]["untimed"] = outcomes.apart(out, inp)
    traffic["amplification_below_1"] = outcomes.below_one(
        inp.requests, _amplification(out, traffic), _server_end(inp)
    )
    cold = _cold(ctx)
    # per-request figures of the spans, per ladder step and episode (clock named; issue #38): the findings read
    # an episode's queue from them where no stats line or metric gives one
    spans = span_figures.analyse(out, rng, eps, rows)
    ctx.span_segments = span_figures.by_episode(spans)
    fnd = findings.build(ctx, eps, rows, lad, cap, traffic, cold, reg)
    for f in fnd:
        untied.evidence(f, eps)
    for c in reg.all():
        wording.render(c)
    if canc is not None:
        traffic["cancellation"]["text"] = canc.sentence
    lines = verdict.build(ctx, eps, fnd, lad, reg)
    _write_tables(out, eps, fnd, rows)
    diag = {
        "verdict": lines,
        "claims": [c.to_dict() for c in reg.all()],
        "episodes": [_ep_json(e) for e in eps],
        "findings": [f.to_dict() for f in fnd],
        "ladder": lad,
        "capacity": cap,
        "cold_start": cold,
        "server_lifecycle": _life(life, ctx.stop_errors),
        "output_lengths": {
            "overall": from_histograms.fill_lengths(ctx, capacity.output_lengths(inp.requests)),
            "per_step": [
                {
                    "step": r["step"],
                    "concurrency": r["concurrency"],
                    "max_tokens_mean": r["max_tokens_mean"],
                    "output_tokens_mean": r["output_tokens_mean"],
                    "source": r.get("lengths_source"),
                }
                for r in rows
            ],
            "per_episode": [{"episode_id": e["episode_id"], **e["details"]["output_lengths"]} for e in eps],
        },
        "traffic": traffic,
        "spans": spans,
        "observed": {
            "start": ctx.span_lo,
            "end": ctx.span_hi,
            "seconds": ctx.span_s,
            "last_arrival": ctx.load_end,
            "requests_from": inp.requests_origin,
            "windows_from": inp.windows_origin,
            "window_s": inp.window_s,
        },
        "slo": {
            SLO_KEYS["slo_ttft_s"]: slo.ttft_s,
            SLO_KEYS["slo_e2e_s"]: slo.e2e_s,
            SLO_KEYS["slo_success"]: slo.success,
        },
        "thresholds": th.as_dict(),
        "thresholds_unknown": unknown,
        "method": METHOD,
    }
    if rng:
        diag["range"] = rng.doc()
    diag = _clean(diag)
    jsontext.write(out / "diagnosis.json", diag, jsontext.DIAGNOSIS)
    return diag


def _in_range(life: lifecycle.Lifecycle, rng: time_range.Range) -> lifecycle.Lifecycle:
    """Starts, stops and cold windows in the range only: the starts before it were read to tell a death in
    it (the previous instance's), not to be reported, and their cold windows lie before it."""
    if not rng:
        return life
    inside = rng.contains
    return lifecycle.Lifecycle(
        [s for s in life.starts if inside(s["ts"])],
        [d for d in life.deaths if inside(d.ts)],
        [s for s in life.shutdowns if inside(s["ts"])],
        life.shutdown_noise,
        [c for c in life.cold if inside(c["server_start"])],
    )


# ------------------------------------------------------------------ outputs


def _write_tables(out: Path, eps: list, fnd: list, rows: list[dict]) -> None:
    def frame(items: list, table: str) -> pl.DataFrame:
        if not items:
            return schemas.empty(table)
        cols = schemas.TABLES[table]
        data = {c: [it.get(c) for it in items] for c in cols}
        return pl.DataFrame(data, schema=schemas.schema(table), strict=False)

    frame(eps, "episodes").write_parquet(out / "episodes.parquet")
    frame(fnd, "findings").write_parquet(out / "findings.parquet")
    frame(rows, "ladder").write_parquet(out / "ladder.parquet")


def _ep_json(e) -> dict:
    keys = list(schemas.TABLES["episodes"]) + ["why", "details"]
    return {k: e.get(k) for k in keys}


_AS_IS = frozenset((str, int, bool, type(None)))  # values JSON takes as they are


def _clean(x):
    """JSON-ready and deterministic: ISO times (UTC, ms), floats rounded to 4 decimals, NaN -> null.
    (Values taken as they are skip the call: a day's diagnosis holds half a million.)"""
    if isinstance(x, dict):
        return {str(k): v if type(v) in _AS_IS else _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [v if type(v) in _AS_IS else _clean(v) for v in x]
    if isinstance(x, datetime):
        return x.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(x, date):
        return x.isoformat()
    if isinstance(x, float):
        return None if not math.isfinite(x) else round(x, 4)
    return x


# ------------------------------------------------------------------ run-level figures


def _multiplication(out: Path) -> dict:
    """correlation.json's request counts per layer ({} when correlation did not run)."""
    p = out / "correlation.json"
    doc = json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
    rm = doc.get("retry_multiplication") if isinstance(doc, dict) else None
    return rm if isinstance(rm, dict) else {}


def _traffic(inp: Inputs, rm: dict | None = None) -> dict:
    # counts as expressions over whole columns: a filtered copy of a million-row table is ~100 MB
    req, sr, ga = inp.requests, inp.server_requests, inp.gateway
    t: dict = {}
    gen = pl.col("endpoint").is_in(["completion", "chat"]) | pl.col("endpoint").is_null()
    away = (rm or {}).get("server_requests_elsewhere") or {}
    if away.get("replicas"):  # executions on a replica no caller here reached are no retries of these callers
        gen = gen & ~pl.col("replica").fill_null("").is_in(away["replicas"])
    n_gen, n_abort = sr.select(
        gen.sum().alias("n"), (gen & pl.col("aborted_ts").is_not_null()).sum().alias("a")
    ).row(0)
    t["server_requests"] = n_gen or None
    t["server_aborts"] = n_abort if n_gen else None
    if inp.requests_origin in ("correlated", "client"):
        t["logical_requests"] = req.height
        att = req["client_attempts"].drop_nulls()
        t["client_attempts"] = int(att.sum()) if att.len() else None
        t["client_retries"] = int((att - 1).clip(0).sum()) if att.len() else None
        t["timeouts"] = int((req["outcome"] == "timeout").sum())
        t["unfinished"] = int((req["outcome"] == "unfinished").sum())
        t["errors"] = int((req["outcome"] == "error").sum())
        t["ok"] = int((req["outcome"] == "ok").sum())
        if away.get("logical_requests"):  # logical requests made of those executions alone
            t["logical_requests"] = req.height - away["logical_requests"]
        if t["server_requests"] and t["logical_requests"]:
            t["amplification"] = t["server_requests"] / t["logical_requests"]
        orph = req["orphaned_executions"].drop_nulls()
        t["orphaned_executions"] = int(orph.sum()) if orph.len() else None
    if ga.height:
        first = schemas.gateway_request_row()  # nginx's first try of a line, or a one-line gateway's line
        # LiteLLM's router lines apart from its access lines are no requests, yet the retries they state count
        one = first & ~schemas.gateway_apart()
        n, retries, x5, x499 = ga.select(
            one.sum().alias("n"),
            ((pl.col("attempts_total").fill_null(1) - 1).clip(0) * first).sum().alias("r"),
            (one & (pl.col("status") >= 500)).sum().alias("x5"),
            (one & (pl.col("status") == 499)).sum().alias("x4"),
        ).row(0)
        t["gateway_requests"], t["gateway_retries"] = int(n), int(retries)
        t["gateway_5xx"], t["gateway_499"] = int(x5), int(x499)
        t["gateway_stated"] = retry_spread.as_dict(retry_spread.stated(ga))
    if inp.requests_origin in ("correlated", "client", "gateway"):
        t["retry_spread"] = retry_spread.as_dict(retry_spread.of_requests(req))
    w = inp.windows
    if w.height and w["orphaned"].null_count() < w.height and not t.get("orphaned_executions"):
        t["orphaned_executions"] = int(w["orphaned"].fill_null(0).sum()) or None
    return t


def _amplification(out: Path, traffic: dict) -> float | None:
    """The amplification the outputs show: correlation.json's, else the one counted here."""
    p = out / "correlation.json"
    if p.exists():
        doc = json.loads(p.read_text(encoding="utf-8"))
        amp = ((doc.get("retry_multiplication") or {}) if isinstance(doc, dict) else {}).get("amplification")
        if isinstance(amp, int | float):
            return float(amp)
    return traffic.get("amplification")


def _server_end(inp: Inputs) -> datetime | None:
    """The last time the server's log speaks for (stats, request lines)."""
    ends = [
        x
        for x in (
            time_or_none(inp.stats["ts"].max()) if inp.stats.height else None,
            time_or_none(
                inp.server_requests.select(
                    pl.max_horizontal(
                        [
                            c
                            for c in ("finished_ts", "aborted_ts", "failed_ts", "received_ts")
                            if c in inp.server_requests.columns
                        ]
                    )
                )
                .to_series()
                .max()
            )
            if inp.server_requests.height
            else None,
        )
        if x is not None
    ]
    return max(ends) if ends else None


def _correlation_orphans(out: Path) -> dict | None:
    """correlation.json's orphaned-work section (None when correlation did not run)."""
    p = out / "correlation.json"
    if not p.exists():
        return None
    doc = json.loads(p.read_text(encoding="utf-8"))
    return doc.get("orphans") if isinstance(doc, dict) else None


def _cold(ctx: Context) -> dict:
    req = ctx.inputs.requests
    warm = figures.requests(req, ctx.span_lo, ctx.span_hi, exclude=ctx.cold) if ctx.span_lo else None
    ranges = [(c["start"], c["end"]) for c in ctx.life.cold]
    figs = figures.requests_many(ctx.by_time(req, "ts_start"), ranges)
    states = figures.server_state_many(ctx.by_time(ctx.server), ranges)
    srcs = from_histograms.sources_many(ctx.by_time(req, "ts_start"), ranges)
    wins = [
        {
            **c,
            "requests": f["requests"],
            "ttft_p50": f["ttft_p50"],
            "ttft_p95": f["ttft_p95"],
            "e2e_p50": f["e2e_p50"],
            "e2e_p95": f["e2e_p95"],
            # the clock each latency was measured on (the requests' layers)
            "ttft_clock": claims.clock_of(src.get("ttft")) if f["ttft_p95"] is not None else None,
            "e2e_clock": claims.clock_of(src.get("e2e")) if f["e2e_p95"] is not None else None,
            "success_share": f["success_share"],
            "running_max": st["running_max"],
            "kv_max": st["kv_max"],
        }
        for c, f, st, src in zip(ctx.life.cold, figs, states, srcs, strict=True)
    ]
    return {
        "seconds": ctx.th.cold_start_s,
        "server_starts": [
            {
                "replica": s["replica"] or None,
                "ts": s["ts"],
                "pid": s["pid"],
                "ready": s["ready_ts"],
                "version": s["version"],
            }
            for s in ctx.life.starts
        ],
        "windows": wins,
        "warm": None
        if warm is None
        else {
            **{
                k: warm[k]
                for k in ("requests", "ttft_p50", "ttft_p95", "e2e_p50", "e2e_p95", "success_share")
            },
            **_clocks(ctx, warm),
        },
        "rule": "cold = cold_start_s after the first request following each server start (readiness when logged)",
    }


def _clocks(ctx: Context, warm: dict) -> dict:
    """The clocks of the warm figures (every request but the cold windows')."""
    req = ctx.inputs.requests
    keep = req.filter(figures.outside("ts_start", ctx.cold)) if ctx.cold and req.height else req
    src = {f: from_histograms.request_source(keep, c) for f, c in from_histograms.PER_REQUEST.items()}
    return {
        f"{f}_clock": claims.clock_of(src[f]) if warm.get(f"{f}_p95") is not None else None
        for f in ("ttft", "e2e")
    }


def _life(life: lifecycle.Lifecycle, errs: dict) -> dict:
    def after(ts, replica) -> dict:  # the gateway 5xx the callers saw after it (stop_errors.errors_after)
        e = errs.get((ts, replica or None))
        if e is None:
            return {
                "gateway_5xx_after": 0,
                "gateway_5xx_after_by_status": {},
                "gateway_5xx_until": None,
                "gateway_5xx_until_bound": None,
            }
        return {
            "gateway_5xx_after": e.total,
            "gateway_5xx_after_by_status": {str(k): v for k, v in e.by_status.items()},
            "gateway_5xx_until": e.until,
            "gateway_5xx_until_bound": e.bound,
        }

    return {
        "starts": len(life.starts),
        "deaths": [
            {
                "replica": d.replica or None,
                "ts": d.ts,
                "kinds": d.kinds,
                "pid": d.pid,
                "restart": d.restart_ts,
                "ready": d.ready_ts,
                "new_pid": d.new_pid,
                "downtime_s": d.downtime_s,
                "at_startup": d.at_startup,
                "same_server": d.same_server.to_dict() if d.same_server is not None else None,
                **after(d.ts, d.replica),
            }
            for d in life.deaths
        ],
        "graceful_shutdowns": [
            {
                "replica": s["replica"] or None,
                "ts": s["ts"],
                # the start after it: this server again or another (same_server), and each life's requests
                "restart": s.get("restart"),
                "new_pid": s.get("new_pid"),
                "same_server": s["same_server"].to_dict() if s.get("same_server") is not None else None,
                "received_before": s.get("received_before"),
                "received_after": s.get("received_after"),
                **after(s["ts"], s["replica"]),
            }
            for s in life.shutdowns
        ],
        "errors_after_s": stop_errors.STOP_ERRORS_S,
        "shutdown_noise_records": life.shutdown_noise,
    }
