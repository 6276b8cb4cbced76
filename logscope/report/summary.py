"""summary.json: the stable, documented result (logscope/summary.schema.json is its doc).

Everything here is a pure function of the output folder and the options: no wall-clock time,
no absolute output path, sorted orders, rounded floats. The HTML and Markdown renderers read
this dict, so what a reviewer reads and what a script reads are the same numbers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import polars as pl

from .. import __version__, schemas
from . import layers_seen, timing
from .fmt import clean, iso, num
from .load import Loaded
from .options import ReportOptions
from .severity_by import severity_by

SCHEMA_VERSION = "1.0"
MAX_SHAPES = 50  # unrecognised shapes listed in summary.json (all are in unrecognized.parquet)
EPISODE_METRICS = (
    "running_max", "running_mean", "waiting_max", "waiting_mean", "kv_max", "kv_mean",
    "arrival_rate_before", "arrival_rate_during", "arrival_rate_after", "prompt_tokens_mean", "output_tokens_mean",
    "ttft_p95", "e2e_p95", "success_share", "share_of_span",
)  # fmt: skip
# where the episode's latency figures come from, and a histogram p95's bucket
EPISODE_SOURCES = (
    "ttft_source", "ttft_clock", "ttft_p95_bucket", "e2e_source", "e2e_clock", "e2e_p95_bucket",
)  # fmt: skip
RETRY_KEYS = (
    "logical_requests", "client_attempts", "client_retries", "gateway_requests", "gateway_attempts",
    "gateway_retries", "server_requests", "server_aborts", "amplification", "orphaned_requests",
    "orphan_s", "cancellation_propagated",
)  # fmt: skip


def build(ld: Loaded, options: ReportOptions) -> dict:
    """The summary dict, in the key order of the schema."""
    diag = ld.doc("diagnosis")
    na: dict[str, str] = {}
    out = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": {
            "tool": "logscope",
            "version": __version__,
            "command_line": options.command_line or None,
        },
        "verdict": verdict(ld),
        "claims": claims(ld),
        "inputs": inputs(ld),
        "span": span(ld),
        "assumptions": assumptions(ld, options),
        "slo": {
            "ttft_s": num(options.slo_ttft_s),
            "e2e_s": num(options.slo_e2e_s),
            "success": num(options.slo_success),
        },
        "episodes": episodes(ld),
        "findings": findings(ld),
        "retries": retries(ld, traces(ld)),
        "outcomes": clean(_dict(diag.get("traffic")).get("outcomes")),
        "load_tests": load_tests(ld),
        "ladder": ladder(ld),
        "capacity": clean(diag.get("capacity")),
        "cold_start": clean(diag.get("cold_start")),
        "server_lifecycle": clean(diag.get("server_lifecycle")),
        "output_lengths": clean(diag.get("output_lengths")),
        "traces": traces(ld),
        "thresholds": clean(diag.get("thresholds")),
        "method": [str(m) for m in diag.get("method") or []],
        "not_available": na,
    }
    for key, why in _gaps(ld, out).items():
        na[key] = why
    return out


SEGMENT_METRICS = ("ttft", "queue", "caller_e2e", "caller_ttft", "caller_minus_engine_ttft")


def traces(ld: Loaded) -> dict | None:
    """What the spans showed (correlation.json's ``traces``, diagnosis.json's ``spans``): the same objects the
    report's traces section renders; None when the folder had no spans."""
    tr = _dict(ld.doc("correlation").get("traces"))
    if not tr:
        return None
    keys: tuple[str, ...] = (
        "spans",
        "spans_by_service",
        "requests",
        "requests_joined",
        "requests_three_layers",
        "traced",
    )
    keys += ("attempt_spans", "attempts_with_engine", "retried_attempts", "no_engine_span", "startup_spans")
    keys += ("client_span_vs_record", "clock_skew", "gateway_clock")
    stop_keys = (
        "replica",
        "service",
        "upstream",
        "how",
        "log_last",
        "restart",
        "spans_last",
        "gateway_errors",
    )
    segs = _dict(ld.doc("diagnosis").get("spans")).get("segments") or []
    return clean(
        {
            **{k: tr.get(k) for k in keys},
            "stops": [
                {**{k: s.get(k) for k in stop_keys}, "evidence": s.get("evidence")}
                for s in tr.get("stops") or []
            ],
            "segments": [
                {
                    "segment": g["segment"],
                    "kind": g["kind"],
                    "requests": g["requests"],
                    **{
                        f"{m}_{q}_ms": (g["latencies"].get(m) or {}).get(f"{q}_ms")
                        for m in SEGMENT_METRICS
                        for q in ("p50", "p95")
                    },
                    "split_mean_ms": {p["part"]: p["mean_ms"] for p in g["split"]},
                    # each figure's clock, as diagnosis.json's spans name it: the engine's, the callers', or both
                    "clocks": {
                        **{m: (g["latencies"].get(m) or {}).get("clock") for m in SEGMENT_METRICS},
                        **{p["part"]: p["clock"] for p in g["split"]},
                    },
                }
                for g in segs
            ],
            "histogram_check": _dict(ld.doc("diagnosis").get("spans")).get("histogram_check"),
            "clocks": "engine figures: vLLM's llm_request attributes (clock engine); caller's: client spans "
            "(clock client); source spans",
        }
    )


LOAD_TEST_KEYS = (
    "tool", "run", "line_no", "requests", "successful", "failed", "duration_s", "request_rate", "concurrency",
    "throughput_rps", "ttft_mean_s", "ttft_median_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "itl_mean_s",
    "e2e_mean_s", "e2e_median_s", "e2e_p99_s", "clock", "latency_source",
)  # fmt: skip


def load_tests(ld: Loaded) -> list[dict]:
    """Each load-test tool's own summary (the load_tests table), as the tool printed it: client clock."""
    df = ld.table("load_tests")
    if not df.height:
        return []
    rows = df.sort("source", "run").to_dicts()
    return [{"source": r["source"], **{k: clean(r.get(k)) for k in LOAD_TEST_KEYS}} for r in rows]


def _gaps(ld: Loaded, s: dict) -> dict[str, str]:
    """Why each empty section is empty, so no reader mistakes 'not computed' for 'nothing found'."""
    why: dict[str, str] = {}
    diag_missing = ld.why("diagnosis")
    if diag_missing:
        why["verdict"] = diag_missing
    for key, table in (("episodes", "episodes"), ("findings", "findings")):
        if not s[key] and ld.why(table) and not ld.doc("diagnosis").get(key):
            why[key] = ld.why(table)
    for key in ("capacity", "cold_start", "output_lengths"):
        if s[key] is None:
            why[key] = (
                diag_missing or f"diagnosis.json has no '{key}' (nothing in the logs to compute it from)"
            )
    if s["ladder"] is None:
        why["ladder"] = ld.why("ladder") or "no load ladder in these inputs (no steps of rising concurrency)"
    if s["retries"]["logical_requests"] is None:
        why["retries"] = (
            ld.why("requests")
            or s["retries"]["not_observed"].get("logical_requests")
            or "no request could be counted"
        )
    if ld.why("windows"):
        why["timeline"] = ld.why("windows")
    return why


def verdict(ld: Loaded) -> list[str]:
    v = ld.doc("diagnosis").get("verdict")
    if isinstance(v, str):
        v = [ln for ln in v.splitlines() if ln.strip()]
    if isinstance(v, list) and v:
        lines = [str(x).strip() for x in v if str(x).strip()][:3]
        while len(lines) < 3:
            lines.append("–")
        return lines
    files = ld.table("files")
    parsed = int(files["lines_parsed"].sum() or 0)
    total = int(files["lines_total"].sum() or 0)
    return [
        "No verdict: the diagnosis did not run ("
        + (ld.why("diagnosis") or "diagnosis.json has no verdict")
        + ").",
        f"{files.height} input file(s) were read: {parsed:,} of {total:,} lines recognised.",
        "The tables below show what could be computed; the appendix lists the inputs.",
    ]


def claims(ld: Loaded) -> list[dict]:
    """The claims of diagnosis.json (diagnose/claims.py): each verdict, class, SLO status, cancellation and
    'nothing alarming' with its state, sentence, the facts it rests on (source, clock) and what was missing."""
    got = ld.doc("diagnosis").get("claims")
    return [clean(c) for c in got if isinstance(c, dict)] if isinstance(got, list) else []


def inputs(ld: Loaded) -> dict:
    files = ld.table("files").sort("path")
    rows = [
        {
            "path": r["path"],
            "format": r["format"],
            "kind": r["kind"],
            "replica": r["replica"],
            "confidence": num(r["confidence"]),
            "lines_total": r["lines_total"],
            "lines_parsed": r["lines_parsed"],
            "lines_unrecognized": r["lines_unrecognized"],
            "bytes": r["bytes"],
            "first_ts": iso(r["first_ts"]),
            "last_ts": iso(r["last_ts"]),
            "messages": list(r["messages"] or []),
        }
        for r in files.iter_rows(named=True)
    ]
    unrec = ld.table("unrecognized").sort(["count", "path", "shape"], descending=[True, False, False])
    return {
        "path": ld.doc("ingest").get("input"),
        "lines_total": int(files["lines_total"].sum() or 0),
        "lines_parsed": int(files["lines_parsed"].sum() or 0),
        "lines_unrecognized": int(files["lines_unrecognized"].sum() or 0),
        "files": rows,
        "unrecognized_shapes": [
            {"path": r["path"], "shape": r["shape"], "count": r["count"], "first_line_no": r["first_line_no"]}
            for r in unrec.head(MAX_SHAPES).iter_rows(named=True)
        ],
    }


def span(ld: Loaded) -> dict:
    """The time the report covers: the inputs' span, narrowed to the range given (``range``, then also
    ``inputs_start`` / ``inputs_end``)."""
    files = ld.table("files")
    anchored = timing.mtime_anchored(files)
    timed = files.filter(~pl.col("path").is_in(anchored))
    # a time the file does not state (its modification time: the copy's) never bounds the incident's span; the
    # columns are UTC datetimes: their min and max are datetimes, or None when every row is null
    lo, hi = cast("datetime | None", timed["first_ts"].min()), cast("datetime | None", timed["last_ts"].max())
    w = ld.table("windows")
    if lo is None and w.height and not anchored:
        lo, hi = cast("datetime | None", w["ts"].min()), cast("datetime | None", w["ts"].max())
    out: dict = {}
    if ld.rng:
        rng: dict[str, str | dict | None] = {"since": iso(ld.rng.since), "until": iso(ld.rng.until)}
        if ld.rng.chosen:
            rng["chosen"] = ld.rng.chosen
        out = {"range": rng, "inputs_start": iso(lo), "inputs_end": iso(hi)}
        lo, hi = ld.rng.clip(lo, hi)
    dur = (hi - lo).total_seconds() if lo is not None and hi is not None else None
    if lo is None and hi is None:  # no line had a time: said, never an epoch-0 window
        out["unknown"] = _why_no_time(ld) + (timing.anchored_words(anchored, alone=True) if anchored else "")
    elif anchored:
        out["anchored"] = timing.anchored_words(anchored, alone=False)
    if apart := timing.far_apart(timed):
        out["far_apart"] = apart
    return {"start": iso(lo), "end": iso(hi), "duration_s": num(dur), **out}


def _why_no_time(ld: Loaded) -> str:
    """Why the report covers no time: no input line carries one, and what the untimed records keep instead."""
    ev = ld.table("platform_events")
    aged = ev.filter(pl.col("ts").is_null() & pl.col("age_s").is_not_null()).height if ev.height else 0
    boot = ev.filter(pl.col("ts").is_null() & pl.col("uptime_s").is_not_null()).height if ev.height else 0
    kept = [
        f"{aged:,} kubectl record(s) keep only an age (no capture time in their file)" if aged else "",
        f"{boot:,} kernel record(s) only the seconds since boot" if boot else "",
    ]
    kept = [k for k in kept if k]
    return "no line of the inputs carries a time" + (f": {'; '.join(kept)}" if kept else "")


def assumptions(ld: Loaded, options: ReportOptions) -> dict:
    ing = ld.doc("ingest")
    notes: dict[str, list[str]] = {}
    for r in ld.table("files").sort("path").iter_rows(named=True):
        for a in r["assumptions"] or []:
            notes.setdefault(a, []).append(r["path"])
    if ing.get("memory"):  # ingest read the files in batches sized to hold --max-memory (resources.shape)
        notes.setdefault(str(ing["memory"]), [])
    for a in ld.doc("correlation").get("notes", []) or []:
        notes.setdefault(str(a), [])
    offsets = [
        {
            "source": r["source"],
            "reference": r["reference"],
            "offset_s": num(r["offset_s"]),
            "spread_s": num(r["spread_s"]),
            "n_matches": r["n_matches"],
            "method": r["method"],
            "verified": r["verified"],
        }
        for r in ld.table("clock_offsets").sort("source").iter_rows(named=True)
    ]
    return {
        "timezone": ing.get("tz", options.tz),
        "year": ing.get("year"),
        "year_source": ing.get("year_source"),
        "clock_offsets": offsets,
        "notes": [{"text": t, "files": fs} for t, fs in notes.items()],
    }


def episodes(ld: Loaded) -> list[dict]:
    t = ld.table("episodes")
    rows = list(t.iter_rows(named=True)) if t.height else list(ld.doc("diagnosis").get("episodes") or [])
    out = []
    for r in rows:
        eid = r.get("episode_id") or r.get("id")
        out.append(
            {
                "id": eid,
                "signal": r.get("signal"),
                "class": r.get("class"),
                "replica": r.get("replica"),
                "start": iso(r.get("start")),
                "end": iso(r.get("end")),
                "duration_s": num(r.get("duration_s")),
                "recovered": r.get("recovered"),
                "open_end": bool(r.get("open_end")),  # duration_s a lower bound: still on when the logs end
                "peak": num(r.get("peak")),
                "baseline": num(r.get("baseline")),
                "count": r.get("count"),
                "evidence": r.get("reason") or r.get("evidence"),
                "metrics": {k: num(r.get(k)) for k in EPISODE_METRICS if r.get(k) is not None},
                "latency_sources": {k: r[k] for k in EPISODE_SOURCES if r.get(k) is not None},
                "claim": r.get("claim_id"),
            }
        )
    return sorted(out, key=lambda e: (e["start"] or "", str(e["id"])))


def findings(ld: Loaded) -> list[dict]:
    t = ld.table("findings")
    rows = list(t.iter_rows(named=True)) if t.height else list(ld.doc("diagnosis").get("findings") or [])
    sev = severity_by(ld)
    out = [
        {
            "id": r.get("finding_id") or r.get("id"),
            "rank": r.get("rank"),
            "severity": r.get("severity"),
            "title": r.get("title"),
            "kind": r.get("kind"),
            "symptom": r.get("symptom"),
            "evidence": r.get("evidence"),
            "cause": r.get("cause"),
            "next_test": r.get("next_test"),
            "episode": r.get("episode_id") or r.get("episode"),
            "start": iso(r.get("start")),
            "end": iso(r.get("end")),
            "failed_requests": r.get("failed_requests"),
            "slowed_requests": r.get("slowed_requests"),
            "claim": r.get("claim_id"),
            "severity_by": sev.get(str(r.get("finding_id") or r.get("id"))),
        }
        for r in rows
    ]
    return sorted(out, key=lambda f: (f["rank"] if f["rank"] is not None else 1 << 30, str(f["id"])))


def retries(ld: Loaded, spans: dict | None = None) -> dict:
    """Request counts per layer and the amplification; correlation.json wins, tables fill the gaps. A layer
    the folder has no record of is None with its reason in ``not_observed`` (layers_seen.py), never 0."""
    doc = ld.doc("correlation")
    mult = _dict(doc.get("retry_multiplication"))
    flags = _dict(doc.get("flags"))
    layers = _dict(flags.get("multi_layer_retries"))
    orph = _dict(doc.get("orphans"))
    given = {
        **{k: mult.get(k) for k in ("logical_requests", "client_attempts", "gateway_requests",
                                    "gateway_attempts", "server_requests", "amplification")},
        "client_retries": layers.get("client_retries"),
        "gateway_retries": layers.get("gateway_retries"),
        "orphaned_requests": orph.get("count"),
        "orphan_s": orph.get("generation_s_after_caller_left"),
    }  # fmt: skip
    given = {k: v for k, v in given.items() if v is not None}
    counted = _count_layers(ld, {k for k in RETRY_KEYS if k not in given})
    out = {k: clean(given[k] if k in given else counted.get(k)) for k in RETRY_KEYS}
    out["source"] = "correlation.json" if given else ("tables" if counted else None)
    out["server_engine"] = layers_seen.engine(ld)  # the server rows' label: whose records they are
    out["not_observed"] = layers_seen.missing(ld, out, spans)
    for k in out["not_observed"]:
        out[k] = None
    out["factors"] = clean(mult.get("factors")) or None
    out["server_requests_elsewhere"] = clean(mult.get("server_requests_elsewhere"))
    out["gateway_other"] = layers_seen.other_calls(clean(mult.get("gateway_requests_other")))
    out["retry_layers"] = clean(layers.get("layers"))
    out["stacked_retries"] = layers.get("stacked")
    out["requests_retried_by_both"] = layers.get("requests_retried_by_both")
    out["duplicate_concurrent_retries"] = flags.get("duplicate_concurrent_retries")
    out["retries_without_backoff"] = clean(flags.get("retries_without_backoff"))
    out["retry_delays"] = clean(flags.get("retry_delays"))
    out["callers_left"] = clean(orph.get("callers_left"))
    out["aborted_after_caller_left"] = orph.get("aborted")
    # the one cancellation object (diagnose/cancellation.py); the boolean is its verdict, for old readers
    canc = _dict(_dict(ld.doc("diagnosis").get("traffic")).get("cancellation")) or None
    out["cancellation"] = clean(canc)
    traffic = _dict(ld.doc("diagnosis").get("traffic"))
    out["unfinished_requests"] = traffic.get("unfinished")
    # an amplification below 1 always with its reason (requests that never reached vLLM, a log that ends early)
    below = _dict(traffic.get("amplification_below_1"))
    out["amplification_note"] = below.get("text") if (out.get("amplification") or 1) < 1 else None
    out["cancellation_propagated"] = (
        None if not canc or canc.get("verdict") in (None, "not observed") else canc["verdict"] == "propagated"
    )
    # how the attempts fell over the requests, and the retries a gateway log states without lines of them
    # (diagnose/retry_spread.py): the stated ones are retries, not attempts the table shows
    out["retry_spread"] = clean(traffic.get("retry_spread")) or None
    stated = clean(traffic.get("gateway_stated")) or None
    out["gateway_retries_stated"] = stated
    if stated and out.get("gateway_retries") is not None:
        out["gateway_retries"] += stated["retries"]
    return out


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _count_layers(ld: Loaded, need: set[str]) -> dict:
    """Fallback counts straight from the tables, for the keys correlation.json lacks (``need``): each table
    is read only when one of its counts is needed."""
    c: dict[str, Any] = {}
    if "amplification" in need:
        need = need | {"logical_requests", "server_requests"}
    req = (
        ld.table("requests", ("origin", "orphaned_executions", "orphan_s"))
        if need & {"logical_requests", "orphaned_requests", "orphan_s"}
        else None
    )
    if req is not None and req.height:
        client_rows = req.filter(pl.col("origin") == "client")
        base = client_rows if client_rows.height else req
        c["logical_requests"] = base.height
        c["orphaned_requests"] = int((req["orphaned_executions"].fill_null(0) > 0).sum())
        c["orphan_s"] = req["orphan_s"].sum() if req["orphan_s"].null_count() < req.height else None
    ca = ld.table("client_attempts", ("attempt",)) if need & {"client_attempts", "client_retries"} else None
    if ca is not None and ca.height:
        c["client_attempts"] = ca.height
        c["client_retries"] = int((ca["attempt"].fill_null(1) > 1).sum())
    ga = (
        ld.table(
            "gateway_attempts", ("source", "request_id", "ts_end", "attempt", "status", "flags", "method")
        )
        if need & {"gateway_requests", "gateway_attempts", "gateway_retries"}
        else None
    )
    if ga is not None and ga.height:
        ga = ga.filter(~schemas.gateway_apart())  # a proxy's lines apart from its access lines: not requests
        c["gateway_requests"] = ga.select(pl.struct("source", "request_id", "ts_end").n_unique()).item()
        c["gateway_attempts"] = ga.height
        c["gateway_retries"] = int((ga["attempt"].fill_null(1) > 1).sum())
    sr = (
        ld.table("server_requests", ("endpoint", "aborted_ts"))
        if need & {"server_requests", "server_aborts"}
        else None
    )
    if sr is not None and sr.height:
        work = sr.filter(pl.col("endpoint").is_in(["completion", "chat"]) | pl.col("endpoint").is_null())
        c["server_requests"] = work.height
        c["server_aborts"] = int(work["aborted_ts"].is_not_null().sum())
    if c.get("logical_requests") and c.get("server_requests") is not None:
        c["amplification"] = c["server_requests"] / c["logical_requests"]
    return c


def ladder(ld: Loaded) -> dict | None:
    """Steps from ladder.parquet; the boundary and what broke first from diagnosis.json."""
    t = ld.table("ladder").sort("step")
    dl = _dict(ld.doc("diagnosis").get("ladder"))
    if t.height:
        steps = [clean(r) for r in t.iter_rows(named=True)]
    else:
        rows = dl.get("steps_table") if isinstance(dl.get("steps_table"), list) else dl.get("steps")
        steps = [clean({k: r.get(k) for k in _LADDER_KEYS}) for r in rows or [] if isinstance(r, dict)]
    if not steps:
        return None
    return {
        "steps": steps,
        "working_boundary": clean(dl.get("working_boundary")),
        "broke_first_at_next_step": clean(dl.get("broke_first_at_next_step")),
        "unknown_at_next_step": clean(dl.get("unknown_at_next_step")),
        "unknown_steps": clean(dl.get("unknown_steps")) or [],
        "cold_set_aside": clean(dl.get("cold_set_aside")) or [],
        "cold_whole_steps": clean(dl.get("cold_whole_steps")) or [],
        "died_in_steps": clean(dl.get("died_in_steps")) or [],
        "pressure_from_step": clean(dl.get("pressure_from_step")),
        "slo": clean(dl.get("slo")),
        "source": dl.get("source"),
    }


_LADDER_KEYS = tuple(schemas.TABLES["ladder"])
