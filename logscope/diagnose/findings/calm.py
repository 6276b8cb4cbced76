"""The finding of a calm run (nothing above info), with notes on the shape of its stats lines."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import polars as pl

from ... import schemas
from ...scalars import float_value
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Finding
from .record import make_finding, pct


def _served(ctx: Context) -> tuple[int | None, str | None, int]:
    """(requests served, where that was read, the server's stats samples): the evidence of normal serving."""
    req, srv = ctx.inputs.requests, ctx.server
    samples = srv.height
    if req.height and "outcome" in req.columns:
        ok = int(req["outcome"].is_in(["ok", "truncated"]).sum())
        if ok:
            return ok, "requests", samples
    sr = ctx.inputs.server_requests
    if sr.height and "finished_ts" in sr.columns:
        done = int(sr["finished_ts"].is_not_null().sum())
        if done:
            return done, "engine_log", samples
    if ctx.inputs.access_served:  # vLLM's own access lines: a POST answered 2xx (not a GET of /v1/models)
        return ctx.inputs.access_served, "engine_log", samples
    ga = ctx.inputs.gateway
    if ga.height and "status" in ga.columns:  # the gateway's answers, its own lines apart
        # one row a request: HAProxy's or Traefik's retried line is its last attempt (schemas.gateway_request_row)
        first = ga.filter(schemas.gateway_request_row() & pl.col("status").is_between(200, 299))
        if first.height:
            return first.height, "gateway_log", samples
    return None, None, samples


def _engine_seen(ctx: Context) -> str | None:
    """Where the engine's own state was read (its stats lines, its request lines or events, its access lines, its
    executions joined to the requests), or None: 'no preemption, queue or crash' is a fact of the engine's records,
    never of a gateway's alone."""
    inp = ctx.inputs
    if ctx.server.height:
        return "server_stats"
    if inp.server_requests.height or inp.events.height or inp.access_lines:
        return "engine_log"
    req = inp.requests
    if req.height and "server_requests" in req.columns and (req["server_requests"].fill_null(0) > 0).any():
        return "requests"
    return None


def calm_claim(ctx: Context, eps: list) -> Claim:
    """'Nothing alarming' needs evidence of normal serving (requests served, or a server seen up on its stats
    lines) and the engine's own records: without them it is unknown, naming what is missing."""
    served, src, samples = _served(ctx)
    engine = _engine_seen(ctx)
    seen = (
        f"{served:,} request(s) served"
        if served
        else f"the server seen up on {samples:,} stats line(s)"
        if samples
        else None
    )
    missing = [] if seen else ["request served and no server stats line (nothing shows the server serving)"]
    if engine is None:
        missing.append(
            "record of the engine (no vLLM or SGLang log, metrics or spans): its preemptions, queue and crashes "
            "were not observed"
        )
    return Claim(
        "calm",
        "calm",
        "nothing alarming in the range",
        "nothing alarming" if not missing else "unknown",
        [
            Fact("served", served or (0 if samples else None), src, unit="requests"),
            Fact("normal_serving", seen, src or ("server_stats" if samples else None)),
            Fact("engine_seen", engine is not None if engine else None, engine),
            Fact("server_samples", samples, "server_stats"),
            Fact("episodes", len([e for e in eps if e["class"] != "context"])),
        ],
        missing=missing,
    )


def calm_findings(ctx: Context, eps: list, cap: dict, reg: Registry) -> list[Finding]:
    srv = ctx.server
    bits = []
    claim = reg.add(calm_claim(ctx, eps))
    seen = claim.value("normal_serving")
    n = ctx.inputs.requests.height
    if n:
        oc = ctx.inputs.requests.group_by("outcome").len().sort("outcome")
        known = ", ".join(f"{c} {o}" for o, c in oc.iter_rows() if o != "unknown")
        bits.append(f"{n} request{'s' if n != 1 else ''}" + (f" ({known})" if known else ""))
        ab = ctx.inputs.server_requests["aborted_ts"].is_not_null().sum()
        if ab:
            bits.append(f"{ab} aborted by the caller (vLLM 'Aborted request')")
    if srv.height:
        if srv["running"].drop_nulls().len():
            bits.append(f"running at most {int(cast(float, srv['running'].max()))}")
        if srv["waiting"].drop_nulls().len():
            bits.append(f"waiting at most {int(cast(float, srv['waiting'].max()))}")
        if srv["kv"].drop_nulls().len():
            bits.append(f"KV at most {pct(cast(float, srv['kv'].max()))}")
    if ctx.pre.height:
        bits.append(f"{int(ctx.pre['preemptions'].sum()):,} preemptions")
    if cap.get("kv_tokens"):
        bits.append(f"KV cache {cap['kv_tokens']:,} tokens")
    if cap.get("max_concurrency_startup"):
        bits.append(
            f"start-up capacity {cap['max_concurrency_startup']:g}× requests of "
            f"{cap.get('max_concurrency_tokens') or '?'} tokens"
        )
    n_events = (
        ctx.inputs.events.height
        + ctx.inputs.access_lines
        + ctx.inputs.gateway.height
        + ctx.gateway_trouble.height
    )
    if not bits and n_events:
        bits.append(f"{n_events} server event(s) recognised, no stats line or request")
    shown = [e for e in eps if e["class"] != "context"]
    title = (
        "Nothing alarming" + ("" if not shown else f" ({len(shown)} minor episode(s))")
        if claim.state == "nothing alarming"
        else "Nothing alarming cannot be said: the engine's records are not in the folder"
        if seen
        else "Nothing alarming cannot be said: nothing shows the server serving"
    )
    note = _shape_note(ctx)
    u = getattr(ctx.inputs, "untimed", None)
    parsed = dict(u.parsed) if u is not None else {}
    if not bits and not note and n_events == 0 and sum(parsed.values()):
        # lines were recognised, yet none is a dated stats line, request, event or access line: say what was read
        # (n05: a speculative-decoding metrics line alone), never 'nothing recognised'
        read_ = ", ".join(f"{n:,} {f}" for f, n in parsed.items())
        return [
            make_finding(
                "info",
                f"Nothing to diagnose in the {sum(parsed.values()):,} recognised line(s): no dated stats line, "
                "request, event or access line among them",
                "the lines read say nothing of load, pressure, errors or crashes",
                f"lines recognised by format: {read_} (files.parquet; what they hold is in its tables)",
                "the folder holds other records of the server (speculative-decoding or cache figures, start-up "
                "lines) but not its state over time",
                "Add the vLLM server log over the incident (stdout of vllm serve, with its stats lines) or its "
                "/metrics scrapes",
                None,
                kind="other",
                claim=claim.id,
            )
        ]
    if not bits and not note and n_events == 0:
        return [
            make_finding(
                "info",
                "Nothing to diagnose: no server, gateway or client records were recognised",
                "no stats line, request, event or access line was recognised in the input",
                "",
                "the input is in a format logscope does not read (see files.parquet / unrecognized.parquet)",
                "Add the vLLM server log (stdout of vllm serve) to the folder",
                None,
                kind="other",
                claim=claim.id,
            )
        ]
    return [
        make_finding(
            "info",
            title,
            "no episode of pressure, errors, retries or crash" if not shown else "only minor episodes",
            "; ".join(bits) + (f"; {note}" if note else ""),
            "the load stayed within what the server handles"
            if claim.state == "nothing alarming"
            else f"{seen}, but the folder holds no record of the engine's state"
            if seen
            else "the folder holds no record of requests served or of the server's state",
            "Nothing to change; to know the headroom, run a concurrency ladder"
            if claim.state == "nothing alarming"
            else "Add the engine's log (stdout of vllm serve) or its /metrics scrapes for this range"
            if seen
            else "Add the vLLM server log (stdout of vllm serve) or the gateway's access log for this range",
            None,
            ctx.span_lo,
            ctx.span_hi,
            kind="other",
            claim=claim.id,
        )
    ]


GAP_NOTE_S = 30.0  # vLLM logs stats every 5-10 s by default; a longer silence is an idle (DEBUG) stretch


def _shape_note(ctx: Context) -> str:
    srv = ctx.server
    if srv.height < 2:
        return ""
    gaps = srv.select((pl.col("ts").diff().dt.total_seconds()).alias("g"))["g"].drop_nulls()
    notes = []
    widest, usual = cast(float, gaps.max()), cast(float, gaps.median())  # seconds between stats lines
    regular = widest <= max(3 * usual, 1) and widest <= GAP_NOTE_S
    if widest > GAP_NOTE_S:
        notes.append(
            f"stats lines are irregular: gaps of {float_value(gaps.min()):.0f}–{widest:.0f} s between them (vLLM "
            "logs stats every few seconds while busy; idle intervals are logged at DEBUG, so the gaps "
            "are idle time, not missing data)"
        )
    one = srv["running"].max() == 1 and srv["waiting"].fill_null(0).max() == 0
    no_new = (srv["prompt_tps"].fill_null(0).slice(1) == 0).all()
    if one and no_new and regular and (srv["gen_tps"].fill_null(0) > 0).all():
        span = (cast(datetime, srv["ts"].max()) - cast(datetime, srv["ts"].min())).total_seconds()
        notes.append(
            f"one request generating through the whole {span:.0f} s (about {float_value(srv['gen_tps'].mean()):.0f} "
            "tokens/s, no new prompt): a single long generation, not an incident (cap max_tokens if "
            "unintended)"
        )
    return "; ".join(notes)
