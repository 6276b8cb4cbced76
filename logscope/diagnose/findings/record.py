"""The finding record and the phrases every family's text is made of (times, shares, an episode's figures)."""

from __future__ import annotations

from datetime import datetime

from ... import clock
from .. import load_words
from ..claims import NAMED_SOURCE
from ..records import Episode, Finding
from ..wording import secs


def clock_time(ts: datetime | None) -> str:
    return clock.hms(ts) if ts is not None else "?"


def pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.1f} %"


def num(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "?"
    return str(int(x)) if float(x).is_integer() else f"{x:.{nd}f}"


def make_finding(
    severity: str,
    title: str,
    symptom: str,
    evidence: str,
    cause: str,
    next_test: str,
    ep: Episode | None = None,
    start=None,
    end=None,
    kind: str = "other",
    claim: str | None = None,
    facts: list | None = None,
) -> Finding:
    """A finding (``records.Finding``); an episode's states that episode's class claim unless ``claim`` names
    another."""
    return Finding(
        severity=severity,
        title=title,
        symptom=symptom,
        evidence=evidence,
        cause=cause,
        next_test=next_test,
        kind=kind,
        episode_id=ep["episode_id"] if ep else None,
        start=ep["start"] if ep else start,
        end=ep["end"] if ep else end,
        claim_id=claim or (ep.get("claim_id") if ep else None),
        facts=list(facts or []),
    )


def stands_for(
    f: Finding, n: int, title_noun: str, what: str, first: datetime, last: datetime, names: str = ""
) -> None:
    """Turn the finding of the first of ``n`` like episodes into the finding of all of them."""
    f["title"] = f"{f['title']} — the first of {n} {title_noun}"
    f["evidence"] = (
        f"{n} {what} from {clock_time(first)} to {clock.hms_after(first, last)}{names}; the first: {f['evidence']}"
    )


def state_phrase(ep: Episode) -> str:
    parts = []
    if ep["running_max"] is not None:
        parts.append(f"running up to {num(ep['running_max'])} (mean {num(ep['running_mean'])})")
    if ep["waiting_max"] is not None:
        parts.append(f"waiting up to {num(ep['waiting_max'])}")
    if ep["kv_max"] is not None:
        parts.append(f"KV up to {pct(ep['kv_max'])}")
    return ", ".join(parts) + engines_note(ep)


def engines_note(ep: Episode) -> str:
    """Data-parallel engines' stats lines (V1 'Engine 000:', 'Engine 001:' …) are summed per second: the figures say
    so, or a reader looks for 82 running where the lines say 51 and 31 (public-2 n01)."""
    n = ((ep.get("details") or {}).get("state_during") or {}).get("engines_max")
    if not n or n < 2 or (ep["running_max"] is None and ep["waiting_max"] is None):
        return ""
    return f" ({n} engines: running and waiting summed over them, KV the fullest's)"


def _latency(ep: Episode, f: str) -> str:
    """A p95 with its clock: a histogram's as its bucket (its interpolation is no figure: 589 s inside 160-640 s
    when no request took 265 s), a per-request one in seconds."""
    clock = ep.get(f"{f}_clock")
    on = f", {clock} clock" if clock else ""
    bucket = ep.get(f"{f}_p95_bucket")
    if ep.get(f"{f}_source") == "metrics histogram" and bucket:
        return f"in {bucket} (vLLM's histogram{on})"
    src = " + ".join(NAMED_SOURCE.get(p.strip(), p.strip()) for p in (ep.get(f"{f}_source") or "").split("+"))
    src = f", {src}" if src.strip() else ""
    x = ep[f"{f}_p95"]
    said = secs(x) if x < 0.1 else f"{num(x, 2)} s"  # a few ms in ms: '0.00 s' read as no time at all
    return said + (f" ({clock} clock{src})" if clock else " (clock unknown)")


def requests_phrase(ep: Episode) -> str:
    parts = []
    # the class's reason may already give the rates (before, as it began, during, after): never two sets of
    # arrival rates in one card
    reason = ep.get("reason") or ""
    said = "/s before" in reason or "/s during" in reason or f"{load_words.during(ep)} during" in reason
    if (ep["arrival_rate_during"] is not None or load_words.short(ep)) and not said:
        during = load_words.during(ep) if load_words.short(ep) else f"{num(ep['arrival_rate_during'], 2)}/s"
        before = (
            "no baseline"
            if ep["arrival_rate_before"] is None
            else f"{num(ep['arrival_rate_before'], 2)}/s before"
        )
        parts.append(f"arrivals {before} → {during} during")
    for f, name in (("ttft", "TTFT"), ("e2e", "e2e")):
        if ep[f"{f}_p95"] is not None:
            # none of them succeeded: their e2e is the time to their failure, no answer's latency (lab crash read
            # 'e2e p95 3.36 s (client clock, client_records), success 0.0 %' of 502s and cut streams)
            failed = " to their failure" if f == "e2e" and ep["success_share"] == 0 else ""
            parts.append(f"{name} p95 {_latency(ep, f)}{failed}")
    if ep["success_share"] is not None:
        parts.append(f"success {pct(ep['success_share'])}")
    return ", ".join(parts)
