"""What the callers saw: their requests' final outcomes by HTTP status, and why the server ran fewer
executions than there were requests when it did (an amplification below 1 is never shown bare).

One object (diagnosis.json ``traffic.outcomes`` and ``traffic.amplification_below_1``) that the report, summary.md,
summary.json and the terminal all render.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from .. import clock
from ..correlate.broken import READ_TIMEOUT
from ..correlate.stream_failures import FAILED, MAYBE, StreamFailures
from . import stated, tables, untimed
from .stated import ENGINE_END

SOURCE = {
    "correlated": "client (gateway where no client log covers a request)",
    "client": "client",
    "server": "server log",
}


def rows(out: Path, inp: tables.Inputs) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The logical requests whose outcomes are counted, and the engine's executions that may state them: every
    row of the correlated table in the range with a time, those the engine placed by their end alone too (vLLM
    V0's 'Finished request' with no 'Received' line: public 05's two), as compare counts them; else the inputs'."""
    keys = ("request_id", "base_request_id", "finished_ts", "aborted_ts", "failed_ts")
    sreq = tables.read(out, "server_requests", keys, rng=inp.rng)
    if inp.requests_origin != "correlated":
        return inp.requests, sreq
    # a row with no time at all is counted apart (diagnose.untimed), as compare counts it
    return tables.read(out, "requests", where=untimed.timed(), rng=inp.rng), sreq


def apart(out: Path, inp: tables.Inputs) -> dict | None:
    """The logical requests ``rows`` leaves out for want of a time, as the outcomes state them beside their table:
    the retries' count holds them (public-2 g09: 'logical requests 2' under 'What callers saw' of 1). None: none."""
    if inp.requests_origin != "correlated":
        return None
    got = untimed.apart(tables.read(out, "requests", ("ts_start", "ts_end", "origin")))
    return None if got is None else {"requests": got.requests, "text": got.text}


def analyse(
    req: pl.DataFrame,
    origin: str | None,
    streams: StreamFailures | None = None,
    server_requests: pl.DataFrame | None = None,
) -> dict | None:
    """Final outcomes of the logical requests, each with its HTTP status as the caller saw it, the record that
    stated it (``stated_by``: caller, gateway, engine; diagnose.stated, as compare reads it), and what a missing
    status means (``status_text``): no caller's or gateway's record at all, or a record that gives none. A
    truncated answer says what broke it off (requests.mid_stream); ok answers a failed stream no evidence tied
    may belong to are counted beside (``uncertain``), from ``streams`` (stream_failures: why it is not tied)."""
    if not req.height or "outcome" not in req.columns:
        return None
    req = stated.of(req, server_requests if server_requests is not None else pl.DataFrame())
    status = pl.col("status") if "status" in req.columns else pl.lit(None, pl.Int64)
    mid = pl.col("mid_stream") if "mid_stream" in req.columns else pl.lit(None, pl.String)
    up = pl.col("upstream_status") if "upstream_status" in req.columns else pl.lit(None, pl.Int64)
    said = pl.col("mid_stream_evidence") if "mid_stream_evidence" in req.columns else pl.lit(None, pl.String)
    recorded = stated.recorded(req)
    outcome = pl.col("stated_outcome").fill_null("unknown").alias("outcome")
    groups = (
        req.group_by(
            outcome,
            status.alias("status"),
            pl.when(outcome == "truncated").then(mid).alias("how"),
            "stated_by",
        )
        .agg(
            pl.len().alias("n"),
            recorded.sum().alias("recorded"),
            up.drop_nulls().unique().sort().alias("up"),
            said.drop_nulls().unique().sort().alias("said"),
        )
        .sort(["outcome", "status", "how", "stated_by"], nulls_last=True)
    )
    by_outcome = {o: int(n) for o, n in req.group_by(outcome).len().iter_rows()}
    return {
        "requests": req.height,
        "by_outcome": dict(sorted(by_outcome.items())),
        "by_status": [
            {
                "outcome": o,
                "status": s,
                "requests": int(n),
                "status_text": _status_text(o, s, int(n), int(k), how, list(u), by),
                "stated_by": by,  # the record that stated the outcome (None: unknown)
                # the error lines that state the break-off (file:line), as the requests table ties them
                **({"evidence": sorted(e, key=_place)} if e else {}),
            }
            for o, s, how, by, n, k, u, e in groups.iter_rows()
        ],
        "source": SOURCE.get(origin or "", origin) if _callers(req) else ENGINE_ONLY,
        "uncertain": uncertain(req, streams),
    }


# the correlated requests of a folder with no caller's or gateway's record: 'as seen by the client' named a record
# that is not there (TGI 1374, SGLang 23049, vllm-public 05)
ENGINE_ONLY = "engine log alone (no caller's or gateway's record in the folder)"


def _callers(req: pl.DataFrame) -> bool:
    """Whether any request has a caller's or a gateway's record (its origin: the layer its row came from)."""
    return "origin" not in req.columns or bool(req["origin"].is_in(["client", "gateway"]).any())


def _place(line: str) -> tuple[str, int]:
    """'file:line' in file order (line 99 before line 127)."""
    f, _, n = line.rpartition(":")
    return (f, int(n)) if n.isdigit() else (line, 0)


def uncertain(req: pl.DataFrame, streams: StreamFailures | None) -> dict | None:
    """How many ok answers may hide a stream that failed after its 200 (one no evidence tied to its request),
    and why it is not tied: 'ok' is not said as if certain. None when no ok answer may."""
    if "mid_stream" not in req.columns or streams is None or not streams.untied:
        return None
    ok = req.filter(pl.col("outcome") == "ok")
    may = int((ok["mid_stream"] == MAYBE).sum())
    if not may:
        return None
    n = min(len(streams.untied), may)
    why = ["LiteLLM's stream-error line names no request id"]
    if any(f.from_start and len(f.candidates) > 1 for f in streams.untied):
        why.append("more than one access line of 200 since the proxy's start could be its request's")
    if any(not f.from_start for f in streams.untied):
        why.append(
            "its file does not show the proxy's start (an access line before the excerpt may be its request's)"
        )
    text = (
        f"Up to {n:,} of the {ok.height:,} ok answers may be streams that failed after their 200: {n:,} "
        f"failure(s) not tied to a request, any of {may:,} ok answers could be theirs, because "
        + "; ".join(why)
    )
    return {"failed_streams": n, "ok": ok.height, "may_include": may, "text": text}


def _status_text(
    outcome: str,
    status: int | None,
    n: int,
    recorded: int,
    how: str | None = None,
    up: list | None = None,
    by: str | None = None,
) -> str:
    """The status column's words: the status, or why there is none. An unknown outcome with no status is told
    apart by whether the caller or the gateway logged the request (g01's LiteLLM router and c03's lm-eval did,
    with no status; vLLM's own lines or spans alone did not). A truncated answer's: its 2xx at the gateway and
    what broke it off (correlate.broken.broken_streams), whatever status the caller's record gives."""
    if outcome == "truncated":
        if how == FAILED:
            named = f" (upstream status {', '.join(map(str, up))})" if up else ""
            return f"{status if status is not None else '2xx'} at the gateway, failed mid-stream{named}"
        if how == READ_TIMEOUT:
            return f"{status if status is not None else '2xx'} at the gateway, {READ_TIMEOUT_TEXT}"
        return CUT if status is None else f"{status} at the gateway, the answer cut mid-response"
    if status is not None:
        return str(status)
    if (
        by == "engine" and outcome == "ok"
    ):  # TGI's 'Success', SGLang's 'Finish', vLLM V0's 'Finished request': no HTTP status
        return ENGINE_END
    if outcome != "unknown":
        return "no HTTP answer"
    return stated.Unknown(n, recorded).why  # as compare says it


def below_one(req: pl.DataFrame, amplification: float | None, server_end: datetime | None) -> dict | None:
    """Why the server saw fewer executions than logical requests, from the requests that never reached it:
    answered by the gateway, timed out or unfinished before vLLM had them, or after the server log ends."""
    if amplification is None or amplification >= 1 or not req.height or "server_requests" not in req.columns:
        return None
    none = req.filter(pl.col("server_requests").fill_null(0) == 0)
    reasons: list[dict] = []  # {"requests": n, "why": text}
    if server_end is not None:
        late = none.filter(pl.col("ts_start") > server_end)
        if late.height:
            reasons.append(
                {"requests": late.height, "why": f"sent after the server log ends ({clock.hms(server_end)})"}
            )
            none = none.filter(pl.col("ts_start") <= server_end)
    status = pl.col("status") if "status" in none.columns else pl.lit(None, pl.Int64)
    for outcome, st, n in (
        sorted(
            none.group_by(pl.col("outcome").fill_null("unknown"), status.alias("s")).len().iter_rows(),
            key=lambda r: -r[2],
        )[:6]
        if none.height
        else []
    ):
        reasons.append({"requests": int(n), "why": _why(outcome, st)})
    never = sum(r["requests"] for r in reasons)
    text = (
        (
            f"below 1: {never:,} of {req.height:,} logical requests never reached vLLM ("
            + "; ".join(f"{r['requests']:,} {r['why']}" for r in reasons)
            + ")"
        )
        if never
        else "below 1 although every request matched a vLLM execution: a join missed (see correlation.json)"
    )
    return {"never_reached_server": never, "reasons": reasons, "text": text}


def _why(outcome: str, status: int | None) -> str:
    if outcome == "error":
        return (
            "failed with no HTTP answer (a connection error)"
            if status is None
            else f"answered {status} by the gateway"
            if status >= 500
            else f"answered {status}"
        )
    return {
        "timeout": "timed out before vLLM received them",
        "unfinished": "in flight when the client log ends",
        "ok": "answered ok with no vLLM line matched (a join missed)",
    }.get(outcome, f"ended '{outcome}' with no vLLM line matched")


# a truncated request had an answer: its headers went out (2xx in the gateway's log), its body was cut (the lab's crash
# read "truncated | no HTTP answer" for the 8 streams nginx logged 200 before the server died under them)
CUT = "2xx at the gateway, the answer cut mid-response"
# a stream nginx cut itself after its 2xx: its proxy_read_timeout fired between two reads of the body (spike-read-timeout:
# 11 streams the client saw as APIConnectionError, that read 'error (no HTTP answer)')
READ_TIMEOUT_TEXT = "then cut by the gateway's read timeout (nginx error log: 'upstream timed out ... while reading upstream')"
SAID = ("failed mid-stream", "read timeout")  # a truncated row whose words name what broke it off


def words(o: dict | None) -> str:
    """'1,716 requests: 1,200 ok, 278 error (502), …': one line for the terminal and the verdict."""
    if not o:
        return ""
    parts = []
    for r in o["by_status"]:
        st = (
            ""
            if (r["outcome"] in ("ok", "unfinished") and r.get("stated_by") != "engine")
            or (r["outcome"] == "truncated" and not any(w in (r.get("status_text") or "") for w in SAID))
            else f" ({r.get('status_text') or _status_text(r['outcome'], r['status'], r['requests'], 0)})"
        )
        parts.append(f"{r['requests']:,} {r['outcome']}{st}")
    more = f"; {o['uncertain']['text']}" if o.get("uncertain") else ""
    return f"{o['requests']:,} requests: " + ", ".join(parts) + more
