"""The finding of a calm run (nothing above info), with notes on the shape of its stats lines."""

from __future__ import annotations

import polars as pl

from ..context import Context
from .record import _f, _pct


def _calm(ctx: Context, eps: list[dict], cap: dict) -> list[dict]:
    srv = ctx.server
    bits = []
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
            bits.append(f"running at most {int(srv['running'].max())}")
        if srv["waiting"].drop_nulls().len():
            bits.append(f"waiting at most {int(srv['waiting'].max())}")
        if srv["kv"].drop_nulls().len():
            bits.append(f"KV at most {_pct(srv['kv'].max())}")
    if ctx.pre.height:
        bits.append(f"{int(ctx.pre['preemptions'].sum())} preemptions")
    if cap.get("kv_tokens"):
        bits.append(f"KV cache {cap['kv_tokens']:,} tokens")
    if cap.get("max_concurrency_startup"):
        bits.append(
            f"start-up capacity {cap['max_concurrency_startup']:g}× requests of "
            f"{cap.get('max_concurrency_tokens') or '?'} tokens"
        )
    n_events = ctx.inputs.events.height + ctx.inputs.access_lines
    if not bits and n_events:
        bits.append(f"{n_events} server event(s) recognised, no stats line or request")
    title = "Nothing alarming" + ("" if not eps else f" ({len(eps)} minor episode(s))")
    note = _shape_note(ctx)
    if not bits and not note and n_events == 0:
        return [
            _f(
                "info",
                "Nothing to diagnose: no server, gateway or client records were recognised",
                "no stats line, request, event or access line was recognised in the input",
                "",
                "the input is in a format logscope does not read (see files.parquet / unrecognized.parquet)",
                "Add the vLLM server log (stdout of vllm serve) to the folder",
                None,
                kind="other",
            )
        ]
    return [
        _f(
            "info",
            title,
            "no episode of pressure, errors, retries or crash" if not eps else "only minor episodes",
            "; ".join(bits) + (f"; {note}" if note else ""),
            "the load stayed within what the server handles",
            "Nothing to change; to know the headroom, run a concurrency ladder",
            None,
            ctx.span_lo,
            ctx.span_hi,
            kind="other",
        )
    ]


GAP_NOTE_S = 30.0  # vLLM logs stats every 5-10 s by default; a longer silence is an idle (DEBUG) stretch


def _shape_note(ctx: Context) -> str:
    srv = ctx.server
    if srv.height < 2:
        return ""
    gaps = srv.select((pl.col("ts").diff().dt.total_seconds()).alias("g"))["g"].drop_nulls()
    notes = []
    regular = gaps.max() <= max(3 * gaps.median(), 1) and gaps.max() <= GAP_NOTE_S
    if gaps.max() > GAP_NOTE_S:
        notes.append(
            f"stats lines are irregular: gaps of {gaps.min():.0f}–{gaps.max():.0f} s between them (vLLM "
            "logs stats every few seconds while busy; idle intervals are logged at DEBUG, so the gaps "
            "are idle time, not missing data)"
        )
    one = srv["running"].max() == 1 and srv["waiting"].fill_null(0).max() == 0
    no_new = (srv["prompt_tps"].fill_null(0).slice(1) == 0).all()
    if one and no_new and regular and (srv["gen_tps"].fill_null(0) > 0).all():
        span = (srv["ts"].max() - srv["ts"].min()).total_seconds()
        notes.append(
            f"one request generating through the whole {span:.0f} s (about {srv['gen_tps'].mean():.0f} "
            "tokens/s, no new prompt): a single long generation, not an incident (cap max_tokens if "
            "unintended)"
        )
    return "; ".join(notes)
