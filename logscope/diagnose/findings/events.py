"""Findings of single server events: requests too long, a failed start-up, untimed preemption warnings."""

from __future__ import annotations

import re

import polars as pl

from ...scalars import int_or_none, int_value, time_or_none
from .. import preemption_count
from ..claims import facts
from ..context import Context
from ..records import Finding
from .record import clock_time, make_finding

KV_REFUSED = "The server cannot start: max_model_len needs more KV cache than there is"
# the line of a start-up failure's record that says what did not fit (V0 message, V1 ValueError)
_KV_SAID = re.compile(r"max seq len|max_model_len|KV cache", re.IGNORECASE)


def _kv_said(detail: str) -> str:
    """What a start-up failure's record says did not fit: from its first line naming it (a V1 traceback
    opens with 'File ...' lines), lines of a hard-wrapped paste (80 characters and more) joined back."""
    lines = detail.split("\n")
    at = next((i for i, ln in enumerate(lines) if _KV_SAID.search(ln)), None)
    if at is None:
        return detail
    out: list[str] = []
    for prev, ln in zip([None, *lines[at:]], lines[at:], strict=False):
        if prev is not None and len(prev) >= 80:  # the paste's wrap: the line goes on
            out[-1] += ln
        else:
            out.append(ln.strip())
    return " ".join(out)


def event_findings(ctx: Context) -> list[Finding]:
    ev = ctx.inputs.events
    out = []
    # in time order (then file and line): which line a finding quotes must not hang on the files' order
    ev = ev.sort(["ts", "source", "line_no"], nulls_last=True, maintain_order=True)
    itl = ev.filter(pl.col("kind") == "input_too_long")
    if itl.height:
        out.append(
            make_finding(
                "low",
                f"{itl.height} request(s) rejected as longer than the model's context",
                "requests rejected with 400 because prompt + max_tokens exceed max_model_len",
                f"first at {clock_time(time_or_none(itl['ts'].min()))}: {(itl['message'][0] or '')[:200]}",
                "the client sends prompts (plus max_tokens) longer than --max-model-len",
                "Cap prompt + max_tokens at the client to max_model_len (truncate or summarise long inputs)",
                None,
                itl["ts"].min(),
                itl["ts"].max(),
                facts=facts("engine_log", requests=itl.height, first=time_or_none(itl["ts"].min())),
            )
        )
    kvi = ev.filter(pl.col("kind") == "kv_insufficient")
    if kvi.height:
        r = kvi.row(kvi.height - 1, named=True)  # the latest
        text = _kv_said(r["detail"] or r["message"] or "")
        if kvi.height > 1:
            text = f"{kvi.height} failed start-ups; the latest ({r['source']}): {text}"
        cap = ev.filter(pl.col("kind") == "capacity")
        ok = cap.filter(pl.col("max_concurrency") >= 1)["max_concurrency_tokens"].drop_nulls()
        hint = f"; a run with max_model_len {int_value(ok.max())} did start" if ok.len() else ""
        mml = r["max_model_len"]
        out.append(
            make_finding(
                "critical",
                KV_REFUSED,
                f"start-up failed: one sequence of max_model_len{' ' + str(mml) if mml else ''} tokens does "
                "not fit in the KV cache",
                f"{text[:300]}{hint}",
                "the memory left for the KV cache after the weights is smaller than one max-length sequence",
                "Start with a shorter --max-model-len (at most the estimated maximum vLLM printed, or the KV "
                "cache's token count)",
                None,
                r["ts"],
                r["ts"],
                kind="startup",
                facts=facts("engine_log", failed_starts=kvi.height, max_model_len=mml, at=r["ts"]),
            )
        )
    untimed = ev.filter((pl.col("kind") == "preemption") & pl.col("ts").is_null())
    if untimed.height and not ctx.pre.height and not ctx.warnings.height:
        cum = int_or_none(untimed["cumulative_preemptions"].max())
        out.append(
            make_finding(
                "low",
                # the count is vLLM's counter where a line carries it (vllm-public 04: 101), a floor otherwise
                preemption_count.untimed_words(untimed.height, cum),
                "vLLM V0 reported preemptions: the KV cache ran out for running requests",
                (
                    f"total_num_cumulative_preemption={cum} ({cum} preemptions since the engine started; V0 prints "
                    "one warning per 50 preemptions)"
                    if cum is not None
                    else "no line carries total_num_cumulative_preemption (V0 prints one warning per 50 "
                    "preemptions)"
                )
                + "; the line carries no timestamp, so no episode can be placed",
                "the KV cache is too small for the admitted requests at some point",
                "Keep the full log lines (timestamps) and measure capacity with a concurrency ladder",
                None,
                kind="pressure",
                facts=facts("engine_log", warning_lines=untimed.height, cumulative_preemptions=cum),
            )
        )
    out += _untimed_deaths(ctx, ev)
    return out


# the exception a death's record ends in ('AsyncEngineDeadError: Task finished unexpectedly', 'EngineDeadError: …')
_RAISED = re.compile(r"(\w*(?:DeadError|Error|Exception)): ([^\n]{0,160}?)(?:\.\s|$|\n)")


def _untimed_deaths(ctx: Context, ev: pl.DataFrame) -> list[Finding]:
    """A fatal record (an engine's death, a fatal OOM or timeout) that carries no time, where no timed death is in
    the folder: the death is said, its time unknown (tests/data/vllm-pastes 5697: a flattened AsyncEngineDeadError
    traceback with no timestamp read 'Nothing alarming cannot be said: nothing shows the server serving')."""
    fatal = pl.col("fatal").fill_null(False) if "fatal" in ev.columns else pl.lit(False)
    dead = ev.filter(fatal & pl.col("ts").is_null())
    if dead.height == 0 or ctx.life.deaths or ev.filter(fatal & pl.col("ts").is_not_null()).height:
        return []
    text = dead["detail"][0] or dead["message"][0] or ""
    said = _RAISED.findall(text)
    what = f"{said[-1][0]}: {said[-1][1].strip()}" if said else (dead["message"][0] or "")[:160]
    kinds = sorted(set(dead["kind"].drop_nulls().to_list()))
    return [
        make_finding(
            "critical",
            f"Engine died ({what[:120]}); when is unknown: its record carries no time",
            "the engine's own record says it died",
            f"{dead.height} fatal record(s) ({', '.join(kinds)}) with no timestamp: {what}",
            "the engine loop ended (the traceback above the error names what raised); its time, the load then and "
            "whether it came back are not in the folder",
            "Add the server's log with its timestamps around the death (and the lines before it) to place it against "
            "the load and see whether the server restarted",
            None,
            kind="crash",
            facts=facts("engine_log", fatal_records=dead.height, error=what, kinds="+".join(kinds)),
        )
    ]
