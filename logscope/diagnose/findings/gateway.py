"""Findings of what the gateway alone shows: an upstream that was down or refusing (its error log, when the
folder holds no access log), and requests that failed with no episode to hold them (too few for an error
episode, too many for 'nothing alarming')."""

from __future__ import annotations

import polars as pl

from ... import clock, schemas
from ...scalars import float_value, time_or_none, time_value
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Finding
from ..tables import FAILED_OUTCOMES
from .record import make_finding

# nginx error-log kinds (parsers/nginx_error.py) that mean a request or an attempt did not get an answer
DOWN = {
    "no_live_upstreams": "no live upstreams",
    "connect_failed": "connect() failed",
    "upstream_timeout": "upstream timed out",
}


def gateway_down_findings(ctx: Context, reg: Registry) -> list[Finding]:
    """The gateway's error log, when no access log says what the callers got: requests nginx could send to no
    upstream ('no live upstreams': answered 502), attempts refused or timed out, by upstream, from when."""
    if ctx.inputs.gateway.height:
        return []
    ge = ctx.gateway_trouble.filter(pl.col("kind").is_in(list(DOWN)) & pl.col("ts").is_not_null())
    if not ge.height:
        return []
    by = dict(ge.group_by("kind").len().iter_rows())
    no_live, refused, timed = (int(by.get(k, 0)) for k in DOWN)
    ups = sorted(u for u in ge["upstream"].cast(pl.String).drop_nulls().unique().to_list() if u)
    # from when: the requests that failed ('no live upstreams'), else every refused or timed-out attempt (a dead
    # member of the group refuses all along; the outage is when no member was left)
    down = ge.filter(pl.col("kind") == "no_live_upstreams") if no_live else ge
    lo, hi = time_value(down["ts"].min()), time_or_none(down["ts"].max())
    c = reg.add(
        Claim(
            "gateway.upstream_down",
            "upstream_down",
            "the gateway's upstreams, from its error log",
            "observed",
            [
                Fact("first", lo, "gateway_log"),
                Fact("last", hi, "gateway_log"),
                Fact("failed_requests", no_live, "gateway_log", unit="requests"),
                Fact("refused", refused, "gateway_log", unit="attempts"),
                Fact("timed_out", timed, "gateway_log", unit="attempts"),
                Fact("upstreams", ", ".join(ups) or None, "gateway_log"),
            ],
            missing=["the gateway's access log (what each caller got)"],
        )
    )
    parts = []
    if no_live:
        parts.append(f"{no_live:,} request(s) found no live upstream (nginx answers them 502)")
    for kind, what in (
        ("connect_failed", "connection attempt(s) refused (connect() failed)"),
        ("upstream_timeout", "attempt(s) timed out waiting for the upstream"),
    ):
        k = ge.filter(pl.col("kind") == kind)
        if k.height:
            parts.append(
                f"{k.height:,} {what} {clock.hms_range(time_or_none(k['ts'].min()), time_or_none(k['ts'].max()))}"
            )
    outage = no_live or timed
    title = (
        f"Upstream down from {clock.hms(lo)}: {no_live:,} request(s) failed with no live upstream"
        if no_live
        else f"Upstream refusing or timing out from {clock.hms(lo)}: {refused + timed:,} attempt(s)"
    )
    return [
        make_finding(
            "high" if outage else "medium",
            title + f" ({clock.hms_range(lo, hi)})",
            "the gateway could not reach its upstream: callers got errors instead of answers",
            "; ".join(parts)
            + (f"; upstream(s) {', '.join(ups)}" if ups else "")
            + " (the gateway's error log; no access log in the folder, so what each caller got is not here)",
            "the upstream server was down or refusing connections (a crashed or restarting vLLM, a wrong port), "
            "or too slow to answer within the gateway's timeout",
            "Look at the upstream's own log for this range (did vLLM die or restart at "
            f"{clock.hms(lo)}?) and add the gateway's access log to the folder to count what the callers got",
            None,
            lo,
            hi,
            kind="errors",
            claim=c.id,
        )
    ]


def _from_gateway(ga: pl.DataFrame) -> pl.DataFrame:
    """The gateway's requests (first attempts) as outcomes, when no request table was correlated: its answer's
    status is what the caller got (5xx and 4xx failed), its span the request's."""
    if not ga.height or "status" not in ga.columns:
        return pl.DataFrame()
    first = ga.filter(schemas.gateway_request_row())  # one row a request, whatever the gateway
    return first.select(
        "ts_start",
        "ts_end",
        "status",
        pl.when(pl.col("status") < 400).then(pl.lit("ok")).otherwise(pl.lit("error")).alias("outcome"),
        (pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds().truediv(1e6).alias("e2e_s"),
    )


def failed_findings(ctx: Context, reg: Registry) -> list[Finding]:
    """Requests that failed with no episode of errors to hold them: too few for an episode (a lone 504 after
    60 s), yet the success share is below the SLO's, so 'nothing alarming' cannot be said."""
    req = ctx.inputs.requests
    if not req.height or "outcome" not in req.columns:
        req = _from_gateway(ctx.inputs.gateway)
    if not req.height or "outcome" not in req.columns:
        return []
    failed = req.filter(pl.col("outcome").is_in(FAILED_OUTCOMES))
    known = int(req["outcome"].is_in(["ok", "error", "timeout", "truncated"]).sum())
    if not failed.height or not known:
        return []
    share = 1 - failed.height / known
    if share >= ctx.slo.success:
        return []
    st = pl.col("status") if "status" in failed.columns else pl.lit(None, pl.Int64)
    by = failed.group_by(st.alias("s")).len().sort("len", descending=True)
    how = ", ".join(f"{n:,} × {s if s is not None else 'no HTTP answer'}" for s, n in by.iter_rows())
    e2e = failed["e2e_s"].drop_nulls() if "e2e_s" in failed.columns else pl.Series([], dtype=pl.Float64)
    lo = time_or_none(failed["ts_start"].min())
    hi = time_or_none(failed["ts_end"].max()) if "ts_end" in failed.columns else None
    c = reg.add(
        Claim(
            "requests.failed",
            "failed_requests",
            "the requests' success share against the SLO",
            "not met",
            [
                Fact("failed", failed.height, "requests", unit="requests"),
                Fact("requests", known, "requests", unit="requests"),
                Fact("success_share", share, "requests", unit="share"),
                Fact("statuses", how, "requests"),
            ],
            {"slo_success": ctx.slo.success},
        )
    )
    after = f", after up to {float_value(e2e.max()):.3g} s" if e2e.len() else ""
    return [
        make_finding(
            "medium",
            f"{failed.height:,} of {known:,} requests failed ({how}{after})",
            f"success {share:.1%}, below the SLO's {ctx.slo.success:.1%}, with too few failures for an error episode",
            f"{failed.height:,} failed request(s) from {clock.hms(lo) if lo else '?'}"
            + (f" to {clock.hms(hi)}" if hi else "")
            + f"; by status: {how} (as the callers saw them, requests.parquet)",
            *_where_and_test([s for s, _ in by.iter_rows()]),
            None,
            lo,
            hi or lo,
            kind="errors",
            claim=c.id,
        )
    ]


# what each failing status says of where the request failed, and what to read or change for it: said only for the
# statuses that failed (public-2 g06, one 403 from the gateway's auth plugin, was told 'for 504, compare the gateway's
# proxy_read_timeout …')
_SAYS = {
    502: ("502 an upstream down or refusing", ""),
    503: ("503 an upstream down or refusing", ""),
    504: (
        "504 an upstream slower than the gateway's timeout",
        "compare the gateway's proxy_read_timeout with the server's e2e latency at this load",
    ),
    429: ("429 a rate limit", "compare the request rate with the limit that answered 429"),
    401: ("401 an authorization refusal", "check the caller's API key and the gateway's auth policy"),
    403: (
        "403 an authorization refusal (the gateway's or the server's auth policy, before the model)",
        "check the caller's credentials and the gateway's auth policy (its response details name the rule)",
    ),
    None: ("no HTTP answer a connection error", ""),
}


def _where_and_test(statuses: list) -> tuple[str, str]:
    said = [_SAYS.get(s, (f"{s} an answer of the gateway or the server", "")) for s in statuses]
    tests = list(dict.fromkeys(t for _, t in said if t))
    return (
        "the failures' statuses say where: " + ", ".join(w for w, _ in said),
        "Read the gateway's and the server's logs for these requests' times"
        + "".join(f"; {t}" for t in tests),
    )
