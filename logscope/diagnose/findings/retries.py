"""Findings of the run's traffic: retries multiplying the load, orphaned work (disconnects not cancelling)."""

from __future__ import annotations

import polars as pl

from ... import clock
from .. import gateway_config, retry_spread
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Episode, Finding
from .record import make_finding, num

# retries "multiply the load" when the server ran at least this many executions per logical request; below
# it the retried attempts were failed before vLLM (by the gateway, or timed out in front of it)
MULTIPLY_MIN = 1.1


def reach(req: pl.DataFrame | None) -> dict | None:
    """Of the requests that were retried (more than one attempt at the client or the gateway), their attempts
    and how many of those reached vLLM (its executions of them): what a retries finding may say reached it."""
    if req is None:
        return None
    cols = [c for c in ("client_attempts", "gateway_attempts") if c in req.columns]
    if not req.height or not cols or "server_requests" not in req.columns:
        return None
    att = pl.max_horizontal([pl.col(c).fill_null(1) for c in cols])
    r = (
        req.filter(att > 1)
        .select(
            pl.len().alias("requests"),
            att.sum().alias("attempts"),
            pl.col("server_requests").fill_null(0).sum().alias("reached"),
        )
        .row(0, named=True)
    )
    if not r["requests"]:
        return None
    reached = min(int(r["reached"]), int(r["attempts"]))
    return {
        "retried_requests": int(r["requests"]),
        "attempts": int(r["attempts"]),
        "retried_attempts": int(r["attempts"]) - int(r["requests"]),
        "reached": reached,
        "not_reached": int(r["attempts"]) - reached,
    }


def _reach_claim(reg: Registry, r: dict | None) -> Claim | None:
    if r is None:
        return None
    return reg.add(
        Claim(
            "retries.reach",
            "retries_reach",
            "the attempts of retried requests that reached vLLM",
            "observed",
            [
                Fact(k, v, "requests", unit="attempts" if k != "retried_requests" else "requests")
                for k, v in r.items()
            ],
        )
    )


def _stated_claim(reg: Registry, stated: dict) -> Claim | None:
    """The retries a gateway log states but shows no lines of (retry_spread.stated), with the statement named."""
    if not stated:
        return None
    facts = [Fact(k, stated[k], "gateway_log", unit="requests") for k in ("requests", "retried")]
    facts += [
        Fact("retries", stated["retries"], "gateway_log", unit="attempts"),
        Fact("max_attempts", stated["max_attempts"], "gateway_log", unit="attempts"),
        Fact("statement", stated["source"], "gateway_log"),
    ]
    return reg.add(
        Claim("retries.stated", "retries_stated", "the retries a gateway log states", "observed", facts)
    )


def _reached_words(r: dict | None, tr: dict) -> str:
    """What the attempts of retried requests did, from their counts."""
    server, logical = tr.get("server_requests"), tr.get("logical_requests")
    if r is None and server is not None and logical is not None and server >= logical:
        return f"{server - logical:,} executions beyond one per request reached vLLM (no per-request counts)"
    if r is None:
        return "whether the retried attempts reached vLLM is not in the folder"
    if not r["not_reached"]:
        return (
            f"all {r['attempts']:,} attempts of the {r['retried_requests']:,} retried requests reached vLLM"
        )
    return (
        f"{r['not_reached']:,} of the {r['attempts']:,} attempts of the {r['retried_requests']:,} retried requests "
        f"never reached vLLM ({r['reached']:,} did)"
    )


def traffic_findings(ctx: Context, eps: list[Episode], tr: dict, reg: Registry) -> list[Finding]:
    out = []
    amp = tr.get("amplification")
    stated = tr.get("gateway_stated") or {}  # retries a gateway log states but shows no lines of
    # the gateway's retries: its attempt counts (LiteLLM's failure lines are in both), or what its log states
    # (HAProxy's %rc, one line per request, is in the stated count only)
    gw_retries = max(tr.get("gateway_retries") or 0, stated.get("retries", 0))
    retries = (tr.get("client_retries") or 0) + gw_retries
    # retries stand out in time when an episode has them as its signal or a companion; the finding is then
    # 'during' the episode where most retried requests were (not the first that has some)
    stands_out = any(
        e["signal"] == "retries" or any(c["signal"] == "retries" for c in e["details"]["companions"])
        for e in eps
    )
    per_logical = (
        (tr["client_attempts"] / tr["logical_requests"])
        if tr.get("client_attempts") and tr.get("logical_requests")
        else None
    )
    # retries are a finding when they stand out in time (an episode), or when they multiply the work at the
    # server or at the client, whatever their timing (a regime of retries that lasts all day is no outlier)
    shown = (
        stands_out
        or (amp or 0) >= ctx.th.amplification_high
        or (per_logical or 0) >= ctx.th.amplification_high
    )
    # retries only a gateway log's own count tells (LiteLLM's 'Retried: 10 times' on each failure): evidence,
    # ranked low, below what they answered (public-2 g01: the rate-limited upstream)
    told = not shown and stated.get("max_attempts", 0) >= ctx.th.amplification_high
    if retries and (shown or told):
        ep_r = next((e for e in eps if e["signal"] == "retries"), None) or _busiest(ctx, eps, _retried())
        layers = [n for n, c in (("client", tr.get("client_retries")), ("gateway", gw_retries)) if c]
        multi = len(layers) > 1
        sp = tr.get("retry_spread") or {}
        made = (
            f": {_spread_words(sp, paren=False)}"
            if sp.get("retried")
            else f" ({num(per_logical, 2)} per request)"
            if per_logical
            else ""
        )
        ev = (
            (
                f"{tr.get('logical_requests')} logical requests made {tr['client_attempts']} client attempts{made}; "
                if tr.get("client_attempts")
                else f"{tr.get('logical_requests')} logical requests (client attempts not observed: no client log); "
            )
            + (
                f"vLLM received {tr['server_requests']} ({num(amp, 2)} per logical request); "
                if tr.get("server_requests") is not None
                else "vLLM's requests not observed (no server log); "
            )
            + f"client retries {tr.get('client_retries') or 0}, gateway retries {gw_retries}"
        )
        if stated:
            ev += (
                f" ({stated['retries']:,} of them stated by the gateway log, not shown as attempts: "
                f"{stated['source']} on {stated['retried']:,} of its {stated['requests']:,} requests, up to "
                f"{stated['max_attempts']:,} attempts)"
            )
        if tr.get("timeouts"):  # requests that ended in a timeout, and attempts that did (each retry its own)
            att = ((tr.get("cancellation") or {}).get("callers_left") or {}).get("client")
            ev += f"; {tr['timeouts']:,} requests ended in a client timeout" + (
                f" ({att:,} attempts abandoned by the client)"
                if att is not None and att != tr["timeouts"]
                else ""
            )
        if ep_r is not None:
            ev += f"; mostly during {ep_r['episode_id']} ({clock.hms_range(ep_r['start'], ep_r['end'])})"
        canc = (tr.get("cancellation") or {}).get("text")
        if canc:
            ev += f"; {canc}"
        nt = _retry_change(ctx, multi, tr)
        rr = reach(getattr(getattr(ctx, "inputs", None), "requests", None))
        claim = _reach_claim(reg, rr) or _stated_claim(reg, stated)
        heavy = (amp or 0) >= ctx.th.amplification_high
        multiplies = amp is not None and amp >= MULTIPLY_MIN
        if multiplies:
            title = f"Retries multiply the load ({num(amp, 2)}× executions per request at the server)"
            symptom = (
                "timeouts and errors are retried while the server is already overloaded, so load grows "
                "when capacity is short"
            )
            cause = (
                "retries"
                + (" at several layers (" + " and ".join(layers) + ")" if multi else "")
                + " re-send work the overloaded server has already queued, prefilled or preempted"
            )
            if multi and gateway_config.retries_post(getattr(ctx, "gateway_conf", None)) == []:
                # nginx re-sends no POST that reached vLLM: its retries re-sent no work (orphan: 12 failovers from
                # the dead upstream were counted among the layers that re-send queued work)
                cause = (
                    "the client's retries re-send work the overloaded server has already queued, prefilled or "
                    f"preempted; the gateway's {gw_retries:,} are failovers before any upstream had the request "
                    "(nginx.conf re-sends no POST that reached one)"
                )
        elif amp is not None:
            # about one execution per request (or fewer): what the retried attempts did, from their counts
            mostly_not = rr is not None and rr["not_reached"] * 2 > rr["attempts"]
            server, logical = tr.get("server_requests") or 0, tr.get("logical_requests") or 0
            reached = (
                f" ({rr['not_reached']:,} of their {rr['attempts']:,} attempts never reached vLLM)"
                if rr is not None and mostly_not
                else f" ({rr['reached']:,} of their {rr['attempts']:,} attempts reached vLLM)"
                if rr is not None
                # no per-request counts: the executions beyond one per request are retried attempts that reached it
                else f" ({server:,} executions at the server for {logical:,} requests: "
                f"{max(0, server - logical):,} retried attempts reached it)"
                if server >= logical
                else ""
            )
            title = _joined(_head(tr, per_logical), reached)
            if tr.get("gateway_5xx"):
                symptom = f"requests were retried against a gateway that failed some with 5xx itself; {_reached_words(rr, tr)}"
                of = f" of its {tr['gateway_requests']:,}" if tr.get("gateway_requests") else ""
                cause = (
                    f"the gateway answered {tr['gateway_5xx']:,}{of} requests over the range with 5xx itself "
                    "(upstream marked down or timed out) and the callers retried them"
                ) + (
                    # the gateway's own retries are no caller's (traced-2r-kill: 3 client retries, 23 failovers)
                    f"; {gw_retries:,} of the retries are the gateway's own, to another upstream within one request"
                    if gw_retries
                    else ""
                )
            else:
                symptom = f"requests were retried; {_reached_words(rr, tr)}"
                cause = (
                    "the retried attempts ended before vLLM (client timeouts, connection errors); the gateway "
                    "answered no 5xx itself"
                    if mostly_not
                    else "the callers gave up on attempts vLLM was still working on (client timeouts) and sent "
                    "them again: each retry is more work for the server"
                )
            ev += f"; {_reached_words(rr, tr)}"
        else:
            title = _head(tr, per_logical)
            symptom = (
                "timeouts and errors were retried; the server log is not here to tell how much reached it"
            )
            cause = (
                "retries"
                + (" at several layers (" + " and ".join(layers) + ")" if multi else "")
                + " re-send requests that timed out or failed, adding load when capacity is short"
            )
        rf = tr.get("retried_for") or {}
        by_gw = "source" in rf  # the gateway's retried lines, not the client's attempts, say what was retried
        if retry_spread.rate_limited(rf):
            # the retries followed a 429: a limit, not a timeout or a slow server (public-2 c01, c02; g01's router)
            symptom = symptom.replace(
                "timeouts and errors were retried", "requests answered 429 were retried"
            )
            cause = _limited_cause(rf)
            who = "the gateway" if by_gw else "the client"
            nt = (
                "Keep the request rate under the limit that answers 429 (or raise the quota), and let "
                f"{who} back off on 429 as long as the answer's Retry-After says rather than retry within "
                "seconds; then replay the same traffic"
            )
        elif retry_spread.said_nothing(rf):
            # nothing names what was retried: no timeout is assumed (a client timeout raised for 429s helps none)
            symptom = symptom.replace("timeouts and errors were retried", "requests were retried")
            cause = cause.replace("requests that timed out or failed", "requests") + (
                "; what the retried attempts ended in is not in the folder (no client attempts, and no gateway "
                "line that states retries names an error or a failing status)"
            )
            nt = nt.replace(_TIMEOUT_CLAUSE, _UNKNOWN_CLAUSE)
        out.append(
            make_finding(
                "high" if heavy or (multi and multiplies) else "low" if told else "medium",
                title,
                symptom,
                ev,
                cause,
                nt,
                ep_r,
                kind="retries",
                claim=claim.id if claim is not None else None,
            )
        )
    orph = tr.get("orphaned_executions")
    if orph and orph >= ctx.th.orphans_share * (tr.get("server_requests") or orph):
        ep_o = next((e for e in eps if e["signal"] == "orphans"), None) or _busiest(
            ctx, eps, pl.col("orphaned_executions").fill_null(0) > 0
        )
        ev = f"{orph:,} server executions kept running after their caller gave up"
        if tr.get("orphan_s"):
            ev += f" ({tr['orphan_s']:.0f} s of generation for nobody)"
        ev += _orphan_stretches(eps, orph)
        ev += (
            f"; vLLM logged {tr.get('server_aborts') or 0} aborts; gateway 499: {tr.get('gateway_499') or 0}"
        )
        out.append(
            make_finding(
                "high",
                f"Orphaned work: {orph:,} executions ran for callers that had left",
                "requests abandoned by their callers keep generating on the server, keeping it saturated",
                ev,
                "client disconnects do not reach vLLM (the gateway keeps the upstream request open, "
                "e.g. nginx proxy_ignore_client_abort on), so abandoned work is never cancelled",
                cancel_change(ctx),
                ep_o,
                kind="orphans",
                claim="cancellation" if reg.get("cancellation") is not None else None,
            )
        )
    return out


def _spread_words(sp: dict, paren: bool = True) -> str:
    """'1 of 2 requests retried (up to 3 attempts)': how the attempts fell over the requests (retry_spread)."""
    most = sp.get("most") or f"up to {sp['max_attempts']:,} attempts"
    return f"{sp['retried']:,} of {sp['requests']:,} requests retried" + (
        f" ({most})" if paren else f", {most}"
    )


def _head(tr: dict, per_logical: float | None) -> str:
    """The title's head: how many requests were retried and how often at most, from the requests' own counts
    (a mean per request read as if every request tried that often: c02's '2 attempts per request' was 3 + 1),
    else from what a gateway log states; the mean only where no per-request count is known."""
    sp, stated = tr.get("retry_spread") or {}, tr.get("gateway_stated") or {}
    if sp.get("retried"):
        return "Retries: " + _spread_words(sp)
    if stated.get("retried"):
        return (
            f"Retries: {stated['retried']:,} of {stated['requests']:,} gateway requests retried (up to "
            f"{stated['max_attempts']:,} attempts, as the log states)"
        )
    return f"Retries: {num(per_logical, 2)} attempts per request" if per_logical else "Retries"


def _joined(head: str, more: str) -> str:
    """``head`` and its ' (...)' suffix in one parenthesis when the head ends with one."""
    if head.endswith(")") and more.startswith(" ("):
        return head[:-1] + "; " + more[2:]
    return head + more


def _orphan_stretches(eps: list[Episode], total: int) -> str:
    """'; 47 of them 02:07:52–02:09:00 (beside E3, E4), 6 02:07:00–02:07:03 (beside E1), 2 alone': where the run's
    orphaned executions fall, so the episodes' smaller counts (a stretch each) add up to the finding's."""
    at: dict[tuple, dict] = {}
    for e in eps:
        for c in [e] if e["signal"] == "orphans" else (e.get("details") or {}).get("companions") or []:
            if c["signal"] == "orphans":
                got = at.setdefault((c["start"], c["end"]), {"count": int(c["count"]), "eps": []})
                got["eps"].append(e["episode_id"])
    if not at:
        return ""
    parts = [
        f"{v['count']} {clock.hms_range(a, b)} (beside {', '.join(dict.fromkeys(v['eps']))})"
        for (a, b), v in sorted(at.items(), key=lambda kv: -kv[1]["count"])
    ]
    rest = total - sum(v["count"] for v in at.values())
    return f"; of them {', '.join(parts)}" + (f", {rest} outside any stretch" if rest > 0 else "")


def _retried() -> pl.Expr:
    return (pl.col("client_attempts").fill_null(1) > 1) | (pl.col("gateway_attempts").fill_null(1) > 1)


def _busiest(ctx: Context, eps: list[Episode], which: pl.Expr) -> Episode | None:
    """The episode during which most of the requests ``which`` selects started (at least half of them), or
    None: a run's retries or orphaned work are 'during E1' only where they mostly were, never because E1 is the
    first episode that has some as a companion (a one-sample blip after the incident once took them)."""
    if not eps:
        return None
    req = ctx.inputs.requests
    if not req.height or "ts_start" not in req.columns:
        return None
    ts = req.filter(which)["ts_start"].drop_nulls()
    if not ts.len():
        return None
    best, n_best = None, 0
    for e in eps:
        if e["class"] == "crash" or e["start"] is None:
            continue
        n = int(((ts >= e["start"]) & (ts <= (e["end"] or e["start"]))).sum())
        if n > n_best:
            best, n_best = e, n
    return best if n_best * 2 >= ts.len() else None


_TIMEOUT_CLAUSE = (
    ", and set the client timeout above the server's p95 latency under load so a slow answer is not abandoned "
    "and re-sent"
)
# when nothing says what the retries followed: find that out before changing a timeout or a limit
_UNKNOWN_CLAUSE = (
    "; what the retried attempts ended in is not in the folder: add the client's log (or a gateway log naming "
    "each attempt's status) before changing a timeout or a rate limit"
)


def _limited_cause(rf: dict) -> str:
    """Who was rate-limited and how the retried attempts ended, with the statement they are read from."""
    if "source" not in rf:
        return (
            f"the callers were rate-limited: all {rf['rate_limited']:,} retried attempt(s) were answered 429 "
            "(Too Many Requests), none timed out; a retry seconds later meets the same limit"
        )
    rest = [
        f"{rf['other_status']:,} in another failure" if rf["other_status"] else "",
        f"{rf['unknown']:,} naming no failure" if rf.get("unknown") else "",
    ]
    more = "".join(f", {w}" for w in rest if w)
    return (
        f"the upstream rate-limited the gateway: {rf['rate_limited']:,} of the {rf['attempts']:,} retried "
        f"request(s) ended in a 429 (Too Many Requests){more}, none timed out, by {rf['source']}; a retry "
        "seconds later meets the same limit"
    )


def _retry_change(ctx: Context, multi: bool, tr: dict) -> str:
    """The one change to test for retries, naming a gateway setting only where the folder's configuration has
    it (a finding told readers to drop a non_idempotent their nginx.conf did not hold)."""
    bounded = "bound retries to one or two with jittered exponential backoff" + _TIMEOUT_CLAUSE
    if not multi:
        return bounded[0].upper() + bounded[1:]
    post = gateway_config.retries_post(getattr(ctx, "gateway_conf", None))
    if post is None:
        return (
            "Retry at one layer only: the gateway's configuration is not in the folder; check whether it "
            "re-sends POSTs (nginx: non_idempotent in proxy_next_upstream; Envoy: retry_on with reset or 5xx) "
            "and keep one layer's bounded retries: " + bounded
        )
    if post:
        ports = ", ".join(f":{p}" for p in post)
        pnu = ctx.gateway_conf["listeners"][post[0]]["proxy_next_upstream"]  # type: ignore[index]
        return (
            f"Retry at one layer only: drop non_idempotent from proxy_next_upstream on {ports} (nginx.conf: "
            f"'{pnu}'), so nginx stops re-sending POSTs, and keep the client's bounded retries with jittered "
            "backoff"
        )
    return (
        "Retry at one layer only: nginx here re-sends no POST (no non_idempotent in proxy_next_upstream): its "
        "retries are failovers after connect errors; " + bounded
    )


def cancel_change(ctx: Context) -> str:
    """The change that propagates disconnects, naming nginx's setting only where the folder's nginx.conf has it."""
    conf = getattr(ctx, "gateway_conf", None)
    if conf is None:
        return (
            "Propagate client disconnects: the gateway's configuration is not in the folder; check whether it "
            "keeps the upstream request open after the client leaves (nginx: proxy_ignore_client_abort on; "
            "Envoy: no stream idle/cancel propagation) and turn that off, so vLLM aborts abandoned requests"
        )
    on = [p for p in conf["ports"] if conf["listeners"][p]["proxy_ignore_client_abort"] == "on"]
    if on:
        ports = ", ".join(f":{p}" for p in on)
        return (
            f"Propagate client disconnects: set proxy_ignore_client_abort off on {ports} (nginx.conf has it on), "
            "so a client that leaves makes vLLM abort its request"
        )
    return (
        "Propagate client disconnects: nginx.conf already has proxy_ignore_client_abort off, so find where the "
        "disconnect is lost (a buffering proxy in front, a client that never closes its connection) and "
        "confirm vLLM logs 'Aborted request' when a caller leaves"
    )
