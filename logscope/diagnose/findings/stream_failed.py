"""Streams that failed after the access log's 200 (``correlate.stream_failures``): the proxy's access line said 200
when the headers went out, then the body broke off (public-2 g09: the upstream's 503 'The model is overloaded'
inside a LiteLLM stream; tests/data/litellm/litellm-proxy-stream.log: an upstream cut mid-answer). A folder that
holds one is never 'nothing alarming', and its requests are not 'none failed' by their access lines' status."""

from __future__ import annotations

from ... import clock
from ...correlate.stream_failures import StreamFailure, StreamFailures
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Finding
from .record import make_finding

SHOWN = 3  # failures named one by one in the evidence; more are counted
ERROR_CHARS = 160  # of each error's text in the evidence (the whole first line is in gateway_attempts.error)


def failures(ctx: Context) -> StreamFailures:
    sf = ctx.stream_failures
    return sf if isinstance(sf, StreamFailures) else StreamFailures()


def stream_failed_findings(ctx: Context, reg: Registry) -> list[Finding]:
    sf = failures(ctx)
    if not sf.failures:
        return []
    fs = sf.failures
    n, tied = len(fs), len(sf.tied)
    statuses = sorted({f.upstream_status for f in fs if f.upstream_status is not None})
    named = [f for f in fs if f.upstream_status is not None]
    times = [f.ts for f in fs if f.ts is not None]
    lo, hi = (min(times), max(times)) if times else (None, None)
    missing = _missing(sf)
    c = reg.add(
        Claim(
            "gateway.stream_failed",
            "stream_failed",
            "streamed answers that failed after the access log's 200",
            "observed",
            [
                Fact("failed_streams", n, "gateway_log", unit="streams"),
                Fact("tied", tied, "gateway_log", unit="streams"),
                Fact("untied", n - tied, "gateway_log", unit="streams"),
                Fact("upstream_statuses", ", ".join(map(str, statuses)) or None, "gateway_log"),
                Fact("first_record", f"line {fs[0].line_no} of {fs[0].source}", "gateway_log"),
                Fact("first", lo, "gateway_log"),
                Fact("last", hi, "gateway_log"),
            ],
            missing=missing,
        )
    )
    said = (
        f"upstream status {', '.join(map(str, statuses))} named by {len(named)} of them"
        if statuses and len(named) < n
        else f"upstream status {', '.join(map(str, statuses))}"
        if statuses
        else "no upstream status named"
    )
    why = list(dict.fromkeys(f.reason for f in fs if f.reason))
    said += (": " + " / ".join(f"'{w}'" for w in why[:2]) + (" / …" if len(why) > 2 else "")) if why else ""
    shown = "; ".join(_one(f) for f in fs[:SHOWN]) + (f"; and {n - SHOWN} more" if n > SHOWN else "")
    f = make_finding(
        "medium",
        f"{n:,} stream(s) failed after the access log's 200 ({said})",
        "answers the proxy's access log counted as 200 broke off: the stream to the caller ended in an error",
        "LiteLLM's stream-error lines (written by the generator of a streamed answer's body: after its headers, so "
        f"after its access line): {shown}; {tied:,} of {n:,} tied to a request"
        + (f"; not decided: {'; '.join(missing)}" if missing else ""),
        "the upstream failed after the proxy had started answering: an access log's 200 is written when the headers "
        "go out, before the body, so it does not mean the answer completed; the callers got an error event or a cut "
        "stream, not the answer",
        "Stream through this proxy from a deployment that fails after its first chunks, with a fallback configured, "
        "and see whether the caller gets the fallback's answer or the error (LiteLLM's fallbacks act on the "
        "call, and 1.108.7 re-raises a stream's error once content was sent instead of falling back); count answers "
        "as completed by the client's record ([DONE] or a finish_reason), not by the access log's status",
        None,
        lo,
        hi,
        kind="errors",
        claim=c.id,
    )
    f["failed_requests"] = (
        n  # failed answers: the tied ones the requests table counts truncated, the others it cannot place
    )
    return [f]


def _one(f: StreamFailure) -> str:
    at = f" at {clock.hms(f.ts)}" if f.ts is not None else ""
    err = (f.error or "").strip() or "(no message)"
    err = err if len(err) <= ERROR_CHARS else err[: ERROR_CHARS - 1] + "…"
    if f.tied is not None:
        line = f"{f.tied_source} line {f.tied}" if f.tied_source not in (None, f.source) else f"line {f.tied}"
        whose = f"tied to the access line at {line}: the only 200 since the proxy's start no earlier one took"
    elif f.candidates:
        lines = ", ".join(f.labels()[:6]) + (", …" if len(f.candidates) > 6 else "")
        word = "line" if len(f.candidates) == 1 else "lines"
        # a rotated set is one log: candidates in its older files are named with their file
        its = "its file" if set(f.where) <= {f.source} else "its log (its rotated set)"
        whose = f"not tied: {len(f.candidates)} access line(s) of 200 before it in {its}, {word} {lines}"
    else:
        whose = "not tied: no access line of 200 before it in its file"
    return f"line {f.line_no} of {f.source}{at} '{err}' ({whose})"


def _missing(sf: StreamFailures) -> list[str]:
    out = []
    untied = sf.untied
    if untied:
        out.append(
            f"which request {len(untied)} of the failed streams belonged to: LiteLLM's stream-error line names no "
            "request id"
            + (
                ", and the file does not show the proxy's start (an access line may be missing before it)"
                if any(not f.from_start for f in untied)
                else ""
            )
        )
    if any(f.upstream_status is None for f in sf.failures):
        out.append(
            "the upstream's status where the error text names none (a cut connection has none to name)"
        )
    untimed = sum(f.untimed_candidates for f in sf.failures)
    if untimed:
        out.append(
            f"when {untimed} of the access lines they could belong to happened: those lines precede any LiteLLM "
            "record, and uvicorn's lines carry no time of their own"
        )
    return out


def possibly_untimed(ctx: Context) -> int:
    """Failed streams that may be requests of access lines with no time (those the untimed findings count)."""
    return sum(1 for f in failures(ctx).failures if f.untimed_candidates)
