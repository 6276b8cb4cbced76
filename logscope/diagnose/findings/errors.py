"""Findings of failed requests: errors at the gateway or client, an upstream that never answers, requests for a
model the server does not serve."""

from __future__ import annotations

import polars as pl

from ... import clock
from ...scalars import time_or_none
from .. import failures
from ..claims import facts
from ..context import Context
from ..records import Episode, Finding
from .record import clock_time, make_finding, pct, requests_phrase

# vLLM's answer to a request naming a model it does not serve (serving_engine ``_check_model``: 404 NotFoundError);
# the chat endpoint logs it ('ERROR ... [serving_chat.py:135] Error with model object='error' message='The model
# `X` does not exist.' ...'), the completions endpoint only answers it (its access line: 404 Not Found)
_NO_MODEL = r"The model `(.{0,300}?)` does not exist"
NO_MODEL_SHARE = (
    0.05  # of the access lines: past it the finding is medium (a client half of whose requests fail)
)


def error_finding(ctx: Context, ep: Episode) -> Finding:
    """An errors episode: its count is its failed requests, each once (diagnose/failures.py), by kind."""
    failed, ended, by, layer = failures.kinds(ctx, ep["start"], ep["end"])
    kinds = (
        f"{failed:,} of the {ended:,} requests that ended in it failed ({by}; {layer}.parquet)"
        if failed
        else ", ".join(
            f"{k.replace('_', ' ')} {ep['details'][k]}"
            for k in ("gateway_5xx", "gateway_499")
            if ep["details"].get(k)
        )
    )
    sev = "high" if ep["class"] == "sustained" else "medium"
    return make_finding(
        sev,
        f"Errors {clock.hms_range(ep['start'], ep['end'])}: {ep['count']:,} failed",
        f"{ep['count']:,} failed requests in {ep['duration_s']:.0f} s",
        "; ".join(x for x in [ep["reason"], kinds, requests_phrase(ep)] if x),
        *_cause(ctx, ep),
        ep,
        kind="errors",
    )


def _signs(ctx: Context, ep: Episode) -> list[str] | None:
    """What the server showed in the episode's range that can slow or refuse requests (a near-full KV cache,
    requests waiting, preemptions, a stall beside it); None when no server stats cover the range."""
    d = ep["details"]
    comps = {c["signal"] for c in d.get("companions") or []}
    out = []
    if ep["kv_max"] is not None and ep["kv_max"] >= ctx.th.kv_full:
        out.append(f"KV up to {pct(ep['kv_max'])}")
    if ep["waiting_max"]:
        out.append(f"up to {ep['waiting_max']:.0f} waiting")
    if d.get("preemptions"):
        out.append(f"{d['preemptions']:,} preemptions")
    if "stall" in comps:
        out.append("a stall")
    if not out and ep["kv_max"] is None and ep["waiting_max"] is None and d.get("preemptions") is None:
        return None
    return out


def _cause(ctx: Context, ep: Episode) -> tuple[str, str]:
    """(cause, next test) from what failed and what the server showed in the range: callers that gave up (client
    timeouts) are told from an upstream that failed (5xx, no answer), and what the server showed is named, never
    denied (abort-ignored's timeouts, beside KV up to 98 % and 4 waiting, once read 'no pressure sign')."""
    bad, _, _ = failures.failures(ctx)
    got = bad.filter(pl.col("ts").is_between(ep["start"], ep["end"]))
    timeouts = int((got["kind"] == failures.TIMEOUT).sum()) if got.height else 0
    signs = _signs(ctx, ep)
    server = (
        "the server's state in the range is not in the folder (no stats line or metrics)"
        if signs is None
        else f"the server showed {', '.join(signs)}"
        if signs
        else "the server showed no near-full cache, waiting request or preemption in the range"
    )
    if got.height and timeouts * 2 > got.height:  # mostly callers that gave up
        return (
            f"callers gave up before an answer ({timeouts:,} of {got.height:,} failures are client timeouts) "
            f"while {server}: the answers took longer than the callers' timeout allows",
            "Compare the callers' timeout with the e2e p95 of the requests that succeeded in this range: raise the "
            "timeout above it (or lower max_tokens) and replay the same traffic"
            + ("; if the server's queue or preemptions stay, test a lower --max-num-seqs" if signs else ""),
        )
    return (
        f"failures at the gateway or client (upstream unreachable, refused or timed out) while {server}",
        "Look at the gateway's error log for this range: if it marks the upstream down (no live upstreams), "
        "add an active health check so one slow reply does not take the upstream out",
    )


# an upstream status the gateway writes itself when no answer came (nginx: 502 refused or reset, 504 timed out),
# told from the upstream's own 502/504 by the upstream's header time (nginx's $upstream_header_time is '-' when
# no header came); a status any other way (429, 500, 503 …) is the upstream's answer
_NO_ANSWER = (502, 504)

# Envoy's %RESPONSE_FLAGS% of an attempt that got no answer (Envoy's access-log docs), said beside the count
_ENVOY_FLAGS = {
    "UF": "upstream connection failure",
    "UH": "no healthy upstream host",
    "UO": "upstream overflow (circuit breaker)",
    "URX": "upstream retry limit reached",
    "UC": "upstream connection terminated",
    "UT": "upstream request timeout",
    "UR": "upstream remote reset",
    "LR": "connection local reset",
    "NR": "no route",
}


def gateway_error_findings(ctx: Context) -> list[Finding]:
    """Upstreams that returned no success to any of their (at least 3) attempts: those that never answered (no
    status, or the gateway's own 502/504 with no header) are told from those that answered every attempt with an
    error (g01's LiteLLM router: 429 rate limits, which once read 'never answered')."""
    ga = ctx.inputs.gateway
    if ga.height == 0 or ga["upstream"].null_count() == ga.height:
        return []
    us = pl.col("upstream_status")
    header = pl.col("header_s").is_not_null() if "header_s" in ga.columns else pl.lit(False)
    answered = us.is_not_null() & (header | ~us.is_in(_NO_ANSWER))
    per = (
        ga.with_columns(answered.alias("_answered"))
        .group_by("upstream")  # a category (diagnose.tables): grouped first, its few values then read as text
        .agg(
            pl.len().alias("n"),
            (us.is_between(200, 399)).sum().alias("ok"),
            pl.col("_answered").sum().alias("answered"),
            us.filter(pl.col("_answered")).alias("statuses"),
            pl.col("ts_end").min().alias("lo"),
            pl.col("ts_end").max().alias("hi"),
            # a gateway retry after the attempt: its own count says a later attempt of the request followed it
            (pl.col("attempt") < pl.col("attempts_total")).sum().alias("retried_after"),
            pl.col("attempts_total").is_not_null().sum().alias("counted"),
            pl.col("flags").drop_nulls().alias("flags"),
        )
        .with_columns(pl.col("upstream").cast(pl.String))
        .filter(pl.col("upstream").str.contains(":") & (pl.col("ok") == 0) & (pl.col("n") >= 3))
        .sort("upstream")
    )
    return [_never_answered(r) if r["answered"] == 0 else _refused(r) for r in per.iter_rows(named=True)]


def _flags_said(flags: list[str]) -> str:
    """Envoy's flags of the attempts, counted, with their meaning: '; Envoy flag UF (upstream connection failure)
    × 3'."""
    by: dict[str, int] = {}
    for f in flags:
        for one in f.split(","):
            if one in _ENVOY_FLAGS:
                by[one] = by.get(one, 0) + 1
    return "".join(f"; Envoy flag {k} ({_ENVOY_FLAGS[k]}) × {v}" for k, v in sorted(by.items()))


def _retries_said(r: dict) -> str:
    """What the gateway did after each attempt, as far as its log counts attempts (nginx's $upstream_* lists do;
    Envoy's default line does not: public-2 g04 read 'each costs … a gateway retry' of three separate calls)."""
    if not r["counted"]:
        return "; whether the gateway retried them is not in its log (no attempt count)"
    if not r["retried_after"]:
        return "; the gateway retried none of them"
    return f"; {r['retried_after']} of them followed by a gateway retry"


def _never_answered(r: dict) -> Finding:
    return make_finding(
        "low",
        f"Upstream {r['upstream']} never answered ({r['n']:,} attempts)",
        "the gateway kept sending attempts to an upstream that never returned a response",
        f"{r['n']:,} attempts {clock.hms_range(r['lo'], r['hi'])}, none answered (no upstream status, or the "
        f"gateway's own 502/504 with no response header){_flags_said(r['flags'])}{_retries_said(r)}",
        "a dead member of the upstream group",
        "Remove it from the upstream group (or give the gateway an active health check)",
        None,
        r["lo"],
        r["hi"],
        kind="other",
        facts=facts(
            "gateway_log",
            upstream=r["upstream"],
            attempts=r["n"],
            answered=0,
            retried_after=r["retried_after"] if r["counted"] else None,
            first=r["lo"],
            last=r["hi"],
        ),
    )


def _refused(r: dict) -> Finding:
    """An upstream that answered, with an error every time: what it said is the finding, not silence."""
    by: dict[int, int] = {}
    for s in r["statuses"]:
        by[int(s)] = by.get(int(s), 0) + 1
    said = ", ".join(f"{k} × {v}" for k, v in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])))
    silent = r["n"] - r["answered"]
    also = f"; {silent} with no upstream status" if silent else ""
    limited = 429 in by
    return make_finding(
        "medium" if limited else "low",
        f"Upstream {r['upstream']} answered none of its {r['n']:,} attempts with success ({said}{also})",
        "no attempt sent to this upstream came back with a success",
        f"{r['n']:,} attempts {clock.hms_range(r['lo'], r['hi'])}: {r['answered']:,} answered with an error "
        f"({said}){also}, none with success",
        "the upstream rate-limits these calls (429: its request or token quota)"
        if limited
        else "the upstream is up but fails these requests",
        "Keep the request rate to this upstream under its limit (or raise its quota), and let the gateway back off "
        "on 429 rather than retry at once; then replay the same traffic"
        if limited
        else "Read the upstream's own log for these times: it answered, so the error it sent names the cause",
        None,
        r["lo"],
        r["hi"],
        kind="other",
        facts=facts(
            "gateway_log",
            upstream=r["upstream"],
            attempts=r["n"],
            answered=r["answered"],
            statuses=said,
            no_status=silent,
            first=r["lo"],
            last=r["hi"],
        ),
    )


def unknown_model_findings(ctx: Context) -> list[Finding]:
    """Requests for a model the server does not serve: client errors, counted by model where the log names it."""
    ev = ctx.inputs.events
    said = ev.filter((pl.col("kind") == "error") & pl.col("message").str.contains(_NO_MODEL)).select(
        "ts", pl.col("message").str.extract(_NO_MODEL).alias("model")
    )
    nf = (
        ctx.inputs.not_found if ctx.inputs.not_found is not None else pl.DataFrame(schema={"ts": pl.Datetime})
    )
    # a chat request logs the error and its 404 access line, a completion only the access line
    n = max(said.height, nf.height)
    if n == 0:
        return []
    by = said.group_by("model").agg(pl.len().alias("n")).sort(["n", "model"], descending=[True, False])
    models = ", ".join(f"`{m[:80]}` ({k})" for m, k in by.head(5).iter_rows()) + (
        ", …" if by.height > 5 else ""
    )
    times = pl.concat([said["ts"], nf["ts"].cast(said["ts"].dtype)]).drop_nulls()
    lo, hi = (time_or_none(times.min()), time_or_none(times.max())) if times.len() else (None, None)
    # the access lines are the requests the server answered (a chat request's error line without its access line
    # in a cut excerpt is one more)
    share = n / max(ctx.inputs.access_lines, n) if ctx.inputs.access_lines else None
    sev = "medium" if share is not None and share >= NO_MODEL_SHARE else "low"
    named = (
        f": {models}" if by.height else " (the log does not name it: the completions endpoint logs no error)"
    )
    evidence = (
        f"{said.height} 'does not exist' error line(s), {nf.height} 404 answer(s) on /v1/completions or "
        f"/v1/chat/completions from {clock_time(lo)} to {clock_time(hi)}"
        + (f", {share * 100:.1f} % of the requests the server answered" if share is not None else "")
    )
    return [
        make_finding(
            sev,
            f"{n} request(s) asked for a model the server does not serve{named}",
            f"{n} requests answered 404 Not Found: the model they name is not served here (client errors, no "
            "work done)",
            evidence,
            "the client (or a gateway route) sends a model name other than the served one: a path instead of "
            "--served-model-name, an old name after a redeploy, or the wrong upstream",
            "Send the name /v1/models lists (or add it with --served-model-name)",
            None,
            lo,
            hi,
            kind="errors",
            facts=facts("engine_log", requests=n, error_lines=said.height, answers_404=nf.height),
        )
    ]
