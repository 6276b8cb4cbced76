"""Why a client attempt has no engine span, and where an engine replica's spans and log stop.

vLLM writes a request's ``llm_request`` span when the request finishes, and exports spans in batches every 5 s
(its BatchSpanProcessor). So an attempt whose trace holds no engine span either never reached an engine, was
aborted there (vLLM writes no span for an aborted request), was in flight when its replica died, or finished
in the last batch a killed process never sent. A SIGKILL leaves no death line in vLLM's log: the death is read
from what the folder does show, each piece named in the reason:

- the replica's log stops: the last line of a process whose next banner comes with no shutdown between (a
  restart), or the log's end with the gateway's errors for its upstream after it;
- its spans stop: the last engine span its service exported before the restart;
- the gateway's errors naming its upstream (nginx 'upstream prematurely closed connection', 'recv() failed',
  'connect() failed') from its last line on, and the callers' connection errors on the attempts it held.

A replica is tied to its spans' service by the request ids both name (the engine span's ``gen_ai.request.id``,
the log's ``Received request``) and to the gateway's upstream address by the X-Request-Id the gateway sent it,
never by a name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

import polars as pl

from .. import clock
from ..scalars import time_or_none, time_value

BATCH_S = 5.0  # vLLM's BatchSpanProcessor exports every 5 s: a killed process loses up to this much of spans
LOG_TICK_S = 1.0  # vLLM stamps whole seconds: a line at 03:24:34 was written before 03:24:35
AFTER_S = 60.0  # the gateway's errors for a stopped upstream, read this long after its last line
_TP = r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$"
_HOSTPORT = r"^(?:[a-z]+://)?([^/\s]+)"
_UPSTREAM_KINDS = {
    "upstream_closed": "upstream prematurely closed connection",
    "upstream_reset": "recv() failed (connection reset)",
    "connect_failed": "connect() failed (connection refused)",
    "upstream_disabled": "upstream server temporarily disabled",
    "upstream_timeout": "upstream timed out",
}
CLASSES = ("aborted", "cut by death", "spans lost", "never reached", "not exported", "unknown")


@dataclass
class Stop:
    """Where one replica's process stopped without a shutdown, and what in the folder shows it."""

    replica: str
    log_last: datetime  # the last line of the process (whole seconds)
    how: str  # 'restart' (a new banner with no shutdown between) | 'log ends'
    restart: datetime | None = None  # the next banner
    service: str | None = None  # its spans' service.name
    upstream: str | None = None  # its address at the gateway
    spans_last: datetime | None = None  # the end of the last engine span it exported before the restart
    # the gateway's end of the last request whose engine span it exported (gateway clock, like the attempts it
    # is compared with: the spans' own clock may be skewed against the gateway's)
    spans_covered_until: datetime | None = None
    gateway_errors: dict[str, int] = field(default_factory=dict)  # error kind -> lines naming its upstream
    gateway_errors_first: datetime | None = None
    last_scrape: datetime | None = None  # its last metrics sample (the API server answered /metrics)
    evidence: list[str] = field(default_factory=list)

    def doc(self) -> dict:
        d = asdict(self)
        for k in (
            "log_last",
            "restart",
            "spans_last",
            "spans_covered_until",
            "gateway_errors_first",
            "last_scrape",
        ):
            d[k] = None if d[k] is None else d[k].isoformat()
        return d


def _majority(pairs: pl.DataFrame, key: str, val: str) -> dict[str, str]:
    """key -> the value most of its rows name."""
    if pairs.height == 0:
        return {}
    top = (
        pairs.drop_nulls([key, val])
        .group_by(key, val)
        .agg(pl.len().alias("n"))
        .sort([key, "n", val], descending=[False, True, False])
        .unique(key, keep="first", maintain_order=True)
    )
    return dict(zip(top[key].to_list(), top[val].to_list(), strict=True))


def replica_map(spans: pl.DataFrame, t: dict[str, pl.DataFrame]) -> tuple[dict[str, str], dict[str, str]]:
    """(replica -> its spans' service, replica -> its upstream host:port at the gateway)."""
    sr = t["server_requests"].select("base_request_id", "replica").drop_nulls()
    eng = spans.filter(pl.col("layer") == "engine").select("service", pl.col("base_request_id"))
    svc = _majority(eng.join(sr, on="base_request_id"), "replica", "service")
    ga = t["gateway_attempts"].select(
        pl.col("request_id").alias("base_request_id"),
        pl.col("upstream").str.extract(_HOSTPORT, 1).alias("upstream"),
    )
    up = _majority(ga.join(sr, on="base_request_id"), "replica", "upstream")
    return svc, up


def _lines(t: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """(replica, ts) of every line a server log stamped: its events, stats and request lines (not the times
    ingest inferred for unstamped lines, nor metrics scrapes)."""
    ev = t["server_events"]
    if "ts_inferred" in ev.columns:
        ev = ev.filter(~pl.col("ts_inferred").fill_null(False))
    parts = [ev.select("replica", "ts")]
    if "server_stats" in t:
        parts.append(t["server_stats"].filter(pl.col("origin") == "log").select("replica", "ts"))
    sr = t["server_requests"]
    parts += [sr.select("replica", pl.col(c).alias("ts")) for c in ("received_ts", "aborted_ts")]
    return pl.concat(parts).drop_nulls()


def stops(spans: pl.DataFrame, t: dict[str, pl.DataFrame]) -> list[Stop]:
    """Every process of a replica that stopped with no shutdown: before a new banner, or where its log ends
    with the gateway's errors for its upstream after it."""
    svc, up = replica_map(spans, t)
    ev = t["server_events"].drop_nulls(["replica", "ts"])
    lines = _lines(t)
    gerr = (
        t["gateway_errors"]
        .filter(pl.col("kind").is_in(list(_UPSTREAM_KINDS)))
        .with_columns(pl.col("upstream").str.extract(_HOSTPORT, 1).alias("hp"))
    )
    out: list[Stop] = []
    for replica in sorted(lines["replica"].unique().to_list()):
        banners = sorted(ev.filter((pl.col("replica") == replica) & (pl.col("kind") == "version"))["ts"])
        shut = ev.filter((pl.col("replica") == replica) & (pl.col("kind") == "server_stop"))["ts"]
        mine = lines.filter(pl.col("replica") == replica)["ts"]
        bounds = [*banners[1:], None]
        for lo, hi in zip(banners or [None], bounds, strict=False):
            keep = pl.Series([True] * mine.len())
            if lo is not None:
                keep &= mine >= lo
            if hi is not None:
                keep &= mine < hi
            inside = mine.filter(keep)
            if inside.len() == 0:
                continue
            last = time_value(inside.max())
            if ((shut >= (lo or last)) & (shut <= last + timedelta(seconds=LOG_TICK_S))).any():
                continue  # a shutdown: not a death
            s = Stop(replica, last, "restart" if hi is not None else "log ends", restart=hi)
            s.service, s.upstream = svc.get(replica), up.get(replica)
            _evidence(s, spans, gerr, t)
            if s.how == "log ends" and not s.gateway_errors:
                continue  # the recording ended: nothing says the process died
            out.append(s)
    return out


def _evidence(s: Stop, spans: pl.DataFrame, gerr: pl.DataFrame, t: dict[str, pl.DataFrame]) -> None:
    end = s.restart or s.log_last + timedelta(seconds=AFTER_S)
    # the gateway's errors while it was down: from its last line to the restarted server's readiness
    ready = (
        t["server_events"]
        .filter(
            (pl.col("replica") == s.replica)
            & pl.col("kind").is_in(["server_ready", "server_listen"])
            & (pl.col("ts") > end)
        )["ts"]
        .min()
        if s.restart
        else None
    )
    down_until = ready or s.log_last + timedelta(seconds=AFTER_S)
    if "server_stats" in t:
        sc = t["server_stats"].filter(
            (pl.col("replica") == s.replica)
            & (pl.col("origin") != "log")
            & (pl.col("ts") >= s.log_last)
            & (pl.col("ts") < end)
        )
        s.last_scrape = sc["ts"].max() if sc.height else None  # type: ignore[assignment]
    if s.service is not None:
        mine = spans.filter(
            (pl.col("service") == s.service) & (pl.col("layer") == "engine") & (pl.col("role") != "startup")
        )
        mine = mine.filter(pl.col("end") < end)
        s.spans_last = mine["end"].max() if mine.height else None  # type: ignore[assignment]
    if s.upstream is not None:
        g = gerr.filter(
            (pl.col("hp") == s.upstream) & (pl.col("ts") >= s.log_last) & (pl.col("ts") <= down_until)  # type: ignore[operator]
        )
        s.gateway_errors = dict(sorted(g.group_by("kind").len().iter_rows(), key=lambda kv: -kv[1]))
        s.gateway_errors_first = time_or_none(g["ts"].min()) if g.height else None
    ev = [
        f"{s.replica}'s log stops at {clock.hms(s.log_last)} with no shutdown line"
        + (f" (a new banner at {clock.hms(s.restart)})" if s.restart else " (the log ends)")
    ]
    if s.last_scrape is not None:
        ev.append(f"its metrics were last scraped at {clock.hms(s.last_scrape, ms=True)}")
    if s.spans_last is not None:
        ev.append(f"its spans ({s.service}) stop at {clock.hms(s.spans_last, ms=True)} (their own clock)")
    if s.gateway_errors:
        kinds = ", ".join(f"{n} × {_UPSTREAM_KINDS[k]}" for k, n in s.gateway_errors.items())
        first = s.gateway_errors_first
        since = f" from {clock.hms(first)}" if first is not None else ""  # lines without a time
        ev.append(f"the gateway logged {kinds} for {s.upstream}{since}")
    s.evidence = ev


def classify(
    att: pl.DataFrame, spans: pl.DataFrame, t: dict[str, pl.DataFrame], found: list[Stop]
) -> pl.DataFrame:
    """``att`` (client attempt spans with ``has_engine``) with ``why`` (the reason, its evidence named) and
    ``why_class`` (one of CLASSES) for those with no engine span."""
    ga = t["gateway_attempts"].with_columns(
        pl.col("traceparent").str.extract(_TP, 1).alias("trace_id"),
        pl.col("traceparent").str.extract(_TP, 2).alias("span_id"),
        pl.col("upstream").str.extract(_HOSTPORT, 1).alias("hp"),
    )
    gw = (
        ga.drop_nulls("span_id")
        .sort("ts_start", "attempt", nulls_last=True)
        .group_by("trace_id", "span_id")
        .agg(
            pl.col("status").last().alias("gw_status"),
            pl.col("upstream_status").drop_nulls().last().alias("up_status"),
            pl.col("hp").drop_nulls().last().alias("gw_upstream"),
            pl.col("request_id").first().alias("gw_id"),
            pl.col("ts_start").min().alias("gw_start"),
            pl.col("ts_end").max().alias("gw_end"),
        )
    )
    sr = (
        t["server_requests"]
        .select(
            pl.col("base_request_id").alias("gw_id"),
            pl.col("replica").alias("srv_replica"),
            "received_ts",
            "aborted_ts",
            "finished_ts",
            # vLLM's 'Request ... failed (engine dead)': null where the table predates the column
            pl.col("failed_ts")
            if "failed_ts" in t["server_requests"].columns
            else pl.lit(None, pl.Datetime("us", "UTC")).alias("failed_ts"),
        )
        .drop_nulls("gw_id")
        .unique("gw_id")
    )
    ca = t["client_attempts"].select(
        "trace_id",
        "span_id",
        pl.col("error").alias("cl_error"),
        pl.col("timed_out").alias("cl_timeout"),
        pl.lit(True).alias("cl_seen"),
    )
    x = (
        att.join(gw, on=["trace_id", "span_id"], how="left")
        .join(sr, on="gw_id", how="left")
        .join(
            ca.drop_nulls(["trace_id", "span_id"]).unique(["trace_id", "span_id"]),
            on=["trace_id", "span_id"],
            how="left",
        )
    )
    eng = spans.filter((pl.col("layer") == "engine") & (pl.col("role") == "request")).select(
        "trace_id", pl.col("parent_span_id").alias("span_id"), pl.col("service").alias("eng_service")
    )
    x = x.join(eng.unique(["trace_id", "span_id"]), on=["trace_id", "span_id"], how="left")
    for s in found:
        _covered(s, x)
    rows = []
    ordered = sorted(found, key=lambda s: s.log_last)
    svc, _ = replica_map(spans, t)
    for r in x.iter_rows(named=True):
        rows.append((None, None) if r["has_engine"] else _why(r, ordered, svc))
    return x.with_columns(
        pl.Series("why_class", [c for c, _ in rows], dtype=pl.String),
        pl.Series("why", [w for _, w in rows], dtype=pl.String),
    )


def _covered(s: Stop, x: pl.DataFrame) -> None:
    """The gateway's end of the last attempt the replica's exported spans cover, before it stopped: on the
    gateway's clock, the clock of the attempts it is compared with."""
    if s.service is None:
        return
    stop = s.log_last + timedelta(seconds=LOG_TICK_S)
    ends = x.filter((pl.col("eng_service") == s.service) & (pl.col("gw_end") < stop))["gw_end"]
    if ends.len():
        s.spans_covered_until = time_value(ends.max())
        s.evidence.append(
            f"the last request its spans cover ended at {clock.hms(s.spans_covered_until, ms=True)} (the gateway's "
            "line)"
        )


def _stop_for(stops: list[Stop], replica: str | None, at: datetime | None) -> Stop | None:
    """The first stop of the replica at or after ``at`` (the request reached it before it stopped)."""
    for s in stops:
        if s.replica == replica and at is not None and s.log_last + timedelta(seconds=LOG_TICK_S) >= at:
            return s
    return None


def _lost_or_unknown(r: dict, s: Stop, end: datetime) -> tuple[str, str]:
    """A request that ended on a replica less than one export batch before it stopped: its span lost with the
    batch only when the folder shows both that it finished (the caller got its answer) and that the replica's
    exports stopped before it (the last request its spans cover ended earlier, on the gateway's clock)."""
    hms, rep, err = clock.hms, r["srv_replica"], r["cl_error"]
    head = f"ended on {rep} at {hms(end, ms=True)} (the gateway's line), less than {BATCH_S:.0f} s before its log stopped at {hms(s.log_last)}"
    missing = []
    if err:
        missing.append(f"the caller got {err}, not its answer")
    elif r["gw_status"] is None or not 200 <= int(r["gw_status"]) < 300:
        missing.append(f"the gateway answered {r['gw_status'] or 'nothing'}, not a success")
    cov = s.spans_covered_until
    if cov is None:
        missing.append(
            f"no span of {s.service or rep} joins a gateway line, so nothing shows when its exports stopped"
        )
    elif cov >= end:
        missing.append(
            f"its spans cover a request that ended later ({hms(cov, ms=True)}): the batch that would hold this one was sent"
        )
    seen = ", the caller got its answer" if r["cl_seen"] else ""
    if missing or cov is None:
        return "unknown", f"unknown: {head}; not shown lost with a batch: " + "; ".join(
            missing
        ) + " [engine log, gateway log, spans]"
    return "spans lost", (
        f"spans lost: finished on {rep} at {hms(end, ms=True)} (the gateway's line{seen}), less than "
        f"{BATCH_S:.0f} s before its log stopped at {hms(s.log_last)}, after the last request its spans cover "
        f"({hms(cov, ms=True)}); vLLM exports spans every {BATCH_S:.0f} s and a killed process loses the batch it "
        "had not sent [engine log, gateway log, " + ("client record, " if seen else "") + "spans]"
    )


def _why(r: dict, found: list[Stop], svc: dict[str, str]) -> tuple[str, str]:
    """(class, reason) of one attempt with no engine span; ``found`` in time order. A reason names the records
    it rests on; a replica's stop is told once, with its evidence, in the summary's ``stops``."""
    hms = clock.hms
    rep, recv, end = r["srv_replica"], r["received_ts"], r["gw_end"] or r["end"]
    err = r["cl_error"]
    timed_out = r["cl_timeout"] or "timeout" in str(err or "").lower()
    if r["aborted_ts"] is not None:
        caller = f" after the caller timed out ({err or 'timeout'})" if timed_out else ""
        return "aborted", (
            f"aborted: {rep} logged its abort at {hms(r['aborted_ts'])}{caller}; vLLM writes no span for a "
            "request it aborts [engine log, client record]"
        )
    if r.get("failed_ts") is not None:
        # the engine's own word: V1 fails every request in flight when its engine core dies, and vLLM writes no
        # span for a request it did not finish; its API server may then shut down cleanly (no stop to find)
        return "cut by death", (
            f"cut by the death of {rep}'s engine: {rep} logged at {hms(r['failed_ts'])} that it failed the request "
            "(vLLM's 'Request ... failed (engine dead)')"
            + (f", received at {hms(recv)}" if recv is not None else "")
            + (f"; the caller got {err}" if err else "")
            + " [engine log"
            + (", client record]" if err else "]")
        )
    if recv is not None:
        s = _stop_for(found, rep, recv)
        if s is not None and end is not None:
            tick = timedelta(seconds=LOG_TICK_S)
            conn = "connection" in str(err or "").lower()
            if end >= s.log_last + tick or conn:
                return "cut by death", (
                    f"cut by the death of {rep}: received at {hms(recv)}, still running when its log stopped at "
                    f"{hms(s.log_last)} with no shutdown line; the gateway's line ends at {hms(end, ms=True)}"
                    + (f"; the caller got {err}" if err else "")
                    + " [engine log, gateway log"
                    + (", client record]" if err else "]")
                )
            if (s.log_last + tick - end).total_seconds() <= BATCH_S + LOG_TICK_S:
                return _lost_or_unknown(r, s, end)
        if rep not in svc:  # none of its requests has a span here: its exports are not in the folder at all
            return "unknown", (
                f"unknown: reached {rep} (its log names the request at {hms(recv)}), and no span in the folder "
                f"names a request of {rep}: whether it exported spans, and where they went, is not in the folder "
                "[engine log, spans]"
            )
        return "not exported", (
            f"reached {rep} (its log names the request at {hms(recv)}) and was neither aborted nor cut by a "
            "death the logs show: its span was not exported (sampling, or the exporter's queue) [engine log]"
        )
    if r["gw_status"] is not None:
        # the stop of the replica behind this upstream that came before the gateway sent it
        never = datetime.max.replace(tzinfo=UTC)
        s = next(
            (
                s
                for s in reversed(found)
                if s.upstream == r["gw_upstream"]
                and r["gw_start"] is not None
                and s.log_last <= r["gw_start"] < (s.restart or never)
            ),
            None,
        )
        if s is not None:
            # the log stamps whole seconds: its last line was written before log_last + 1 s
            gap = max(0.0, (r["gw_start"] - s.log_last).total_seconds() - LOG_TICK_S)
            return "never reached", (
                f"never reached an engine: the gateway sent it to {s.replica} ({s.upstream}) at "
                f"{hms(r['gw_start'], ms=True)}, at least {gap:.1f} s after {s.replica}'s log stopped, and answered "
                f"{r['gw_status']}; {s.replica}'s log has no record of it [gateway log, engine log]"
            )
        up = r["up_status"] if r["up_status"] is not None else "none"
        return "never reached", (
            f"never reached an engine: the gateway answered {r['gw_status']} from "
            f"{r['gw_upstream'] or 'no upstream'} (upstream status {up}) and no engine log names it [gateway log]"
        )
    return "unknown", "unknown: no gateway or engine record names this attempt"
