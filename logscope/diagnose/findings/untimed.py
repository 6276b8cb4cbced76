"""Findings of the records that carry no time (``diagnose.untimed``): what they show, counted, with 'when' said
to be unknown. They are never episodes (nothing places them in time) and never 'nothing recognised'."""

from __future__ import annotations

import polars as pl

from ..claims import Fact, latency
from ..context import Context
from ..records import Finding
from ..untimed import Apart, read_from
from .record import make_finding, num, pct
from .stream_failed import possibly_untimed

FAILED = ("error", "timeout")
KNOWN = ("ok", "error", "timeout", "truncated")
FEW = 20  # below this many requests a p95 is the largest value: say 'up to', not 'p95'


def untimed_findings(ctx: Context) -> list[Finding]:
    u = getattr(ctx.inputs, "untimed", None)
    if u is None:
        return []
    return _requests(ctx, u.requests) + _stats(ctx, u.stats)


def _latency(ctx: Context, req: pl.DataFrame, col: str, slo: float) -> tuple[str | None, bool, list[Fact]]:
    """'TTFT up to 4.09 s (client clock)' and whether it passes the SLO, with the fact it rests on."""
    x = req.filter(pl.col(col).is_not_null())
    if not x.height:
        return None, False, []
    clocks = sorted(set(x["latency_clock"].drop_nulls().to_list()))
    srcs = sorted(set(x["latency_source"].drop_nulls().to_list()))
    v = x[col]
    few = v.len() < FEW
    top = float(v.max() if few else v.quantile(0.95, "linear"))  # type: ignore[arg-type]
    name = col.removesuffix("_s").upper() if col == "ttft_s" else "e2e"
    clock_words = " + ".join(clocks) + " clock" if clocks else "clock unknown"
    text = f"{name} {'up to' if few else 'p95'} {top:.3g} s ({clock_words}, {v.len()} request(s))"
    fact = latency(f"{col.removesuffix('_s')}_{'max' if few else 'p95'}", top, " + ".join(srcs) or None)
    return text, top > slo, [fact]


def _requests(ctx: Context, req: pl.DataFrame) -> list[Finding]:
    if not req.height:
        return []
    n = req.height
    failed = req.filter(pl.col("outcome").is_in(FAILED))
    known = int(req["outcome"].is_in(KNOWN).sum())
    # a stream that broke off after its access line's 200 may be one of these: their statuses do not say 'none failed'
    maybe = possibly_untimed(ctx)
    share = 1 - failed.height / known if known and not maybe else None
    by = failed.group_by(pl.col("status").alias("s")).len().sort(["len", "s"], descending=[True, False])
    how = ", ".join(f"{c:,} × {s if s is not None else 'no HTTP answer'}" for s, c in by.iter_rows())
    # the client's attempts, where a client counted them (a gateway's or an engine's row has none: 0 or null)
    att = req["client_attempts"].filter(req["client_attempts"] > 0)
    attempts = int(att.sum()) if att.len() else None
    retries = attempts - att.len() if attempts is not None else None
    ttft, ttft_over, f1 = _latency(ctx, req, "ttft_s", ctx.slo.ttft_s)
    e2e, e2e_over, f2 = _latency(ctx, req, "e2e_s", ctx.slo.e2e_s)
    short = share is not None and share < ctx.slo.success
    lead = (
        f"{failed.height:,} of {known:,} requests failed ({how})"
        if failed.height
        else f"{n:,} request(s) with no failing status, yet {maybe:,} stream(s) that failed after a 200 may be theirs"
        if known and maybe
        else f"{n:,} request(s), none failed"
        if known
        else f"{n:,} request(s), outcome unknown"
    )
    made = f" in {attempts:,} attempts ({retries:,} retries)" if retries else ""
    slow = [
        f"{t.split(', ')[0]}) above the SLO's {slo:g} s"
        for t, over, slo in ((ttft, ttft_over, ctx.slo.ttft_s), (e2e, e2e_over, ctx.slo.e2e_s))
        if t and over
    ]
    title = (
        f"{lead}{made}{'; ' + ', '.join(slow) if slow else ''}; when is unknown: their records carry no time"
    )
    bits = [
        Apart(n, read_from(req)).text,  # as compare says them (compare.sources.untimed)
        f"outcomes: {', '.join(f'{c} {o}' for o, c in req.group_by('outcome').len().sort('outcome').iter_rows())}",
    ]
    if attempts is not None:
        bits.append(
            f"{attempts:,} client attempts for {att.len():,} of them ({num(attempts / att.len(), 2)} each)"
        )
    bits += [t for t in (ttft, e2e) if t]
    if share is not None:
        bits.append(f"success {share:.1%} against the SLO's {ctx.slo.success:.1%}")
    elif maybe:
        bits.append(
            f"{maybe:,} stream(s) failed after an access line's 200 that may be one of these (not tied to a request)"
        )
    timed = ctx.inputs.requests.height
    if timed:  # the folder's other requests carry a time: they are counted by the other findings
        bits.append(f"{timed:,} more request(s) in the folder carry a time and are counted apart")
    sev = "medium" if short or ttft_over or e2e_over else "low" if retries else "info"
    facts = [
        Fact("requests", n, "requests", unit="requests"),
        Fact("failed", failed.height, "requests", unit="requests"),
        Fact("success_share", share, "requests", unit="share"),
        Fact("attempts", attempts, "client_records", unit="attempts"),
        Fact("failed_streams_maybe_theirs", maybe or None, "gateway_log", unit="streams"),
        *f1,
        *f2,
    ]
    return [
        make_finding(
            sev,
            title,
            "requests failed or retried" if failed.height or retries else "requests answered",
            "; ".join(bits),
            (
                "the statuses say where: 502/503 an upstream down or refusing, 504 an upstream slower than the "
                "gateway's timeout, 429 a rate limit, no HTTP answer a connection error"
                if failed.height
                else "slow answers at a load these records cannot show"
                if slow
                else "nothing in these records alone shows trouble"
            )
            + "; the records cannot say when, so not under which load",
            "Add the same records with their times (the client's log with %(asctime)s, or its JSON lines) and the "
            "server's log, so that these requests can be placed against the server's state",
            kind="errors" if failed.height else "latency" if ttft_over or e2e_over else "retries",
            facts=facts,
        )
    ]


def _stats(ctx: Context, st: pl.DataFrame) -> list[Finding]:
    """The server's state on lines with no time (s02: SGLang's 'Decode batch.' pasted alone)."""
    if not st.height:
        return []
    kv = st.select(pl.coalesce("kv_usage", "gpu_kv_usage").max()).item()
    run, wait, top_gen = st.select(
        pl.col("running").max(), pl.col("waiting").max(), pl.col("gen_tps").max()
    ).row(0)
    engines = ", ".join(sorted({e for e in st["engine_kind"].drop_nulls().to_list()})) or "the server"
    state = [
        f"{run:,} running" if run is not None else None,
        f"{wait:,} waiting" if wait is not None else None,
    ]
    state.append(f"KV / token usage up to {pct(kv)}" if kv is not None else None)
    if top_gen is not None:
        state.append(f"{num(float(top_gen))} tokens/s generated")
    queue = (wait or 0) >= ctx.th.waiting_min
    full = kv is not None and kv >= ctx.th.kv_full
    what = (
        " and ".join(w for w, on in (("a queue", queue), ("a near-full cache", full)) if on)
        or "the server's state"
    )
    lines = ", ".join(str(x) for x in st["line_no"].drop_nulls().to_list()[:6])
    return [
        make_finding(
            "medium" if queue or full else "info",
            f"{what[0].upper()}{what[1:]} on {st.height} {engines} stats line(s) with no time: "
            + ", ".join(s for s in state if s),
            f"{what} at one or more moments the log does not date",
            f"{st.height} stats line(s) without a timestamp ({', '.join(sorted(set(st['source'].to_list())))}"
            + (f", line(s) {lines}" if lines else "")
            + "): "
            + ", ".join(s for s in state if s),
            "more requests than the server admits at once"
            if queue
            else "the cache filling with the running requests"
            if full
            else "nothing in these lines alone shows trouble",
            "Add the server's log with its timestamps (or its /metrics scrapes) to know when this was and for how "
            "long; then measure capacity with a concurrency ladder at this traffic's lengths",
            kind="pressure" if queue or full else "other",
            facts=[
                Fact("stats_lines", st.height, "server_stats"),
                Fact("running_max", run, "server_stats"),
                Fact("waiting_max", wait, "server_stats"),
                Fact("kv_max", kv, "server_stats", unit="share"),
            ],
        )
    ]
