"""vllm_server's request lifecycle lines (received, added, finished, aborted...) -> server_request_events.

The lines' kinds and fields (ids, a received request's settings and prompt length) are read by the compiled scanner
in one pass over the chunk's messages: their description is ``_vllm_requests.toml``. One more kind is read here:
``--enable-log-outputs`` (0.10.2+, tests/data/unseen/vllm-29208-v0.11.1-received-no-prompt-added-generated-response.log)::

    Generated response chatcmpl-1708...: output: 'Hello! ...', output_token_ids: [...], finish_reason: stop

written once a request is done ('(streaming complete)' after the id for a stream); '(streaming delta)' lines are the
pieces of a stream still under way, no end."""

from __future__ import annotations

import functools

import polars as pl

from logscope.numbers import MAX_ABS

from . import _kinds
from ._common import base_id_expr
from .base import ParseContext

# a prompt cut short by a paste or a pager: no repr closes it, and the settings after it are not read
_CUT_PROMPT = r"^Received request \S+?: prompt: "
_FIELDS = ("max_tokens", "n", "temperature", "ignore_eos", "prompt_tokens")
# RequestLogger.log_outputs: 'Generated response %s%s: output: %r, ...', the %s after the id '', ' (streaming delta)'
# or ' (streaming complete)'; the output may be cut by a paste, the id and what follows it are enough
_GENERATED_LEAD = "Generated response "
_GENERATED = r"^Generated response (\S+?)( \(streaming delta\))?(?: \(streaming complete\))?: output: "


@functools.cache
def _events() -> pl.Series:
    """The server_request_events ``event`` of each kind, by the kind's index."""
    return pl.Series("event", [k["event"] for k in _kinds.spec(__file__)["kind"]], dtype=pl.String)


def _requests(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    # vLLM's lines, pasted bare or flattened, and any python logger's carrying vLLM's words (KServe's trace logger)
    any_py = pl.col("pyname").is_not_null()
    base = df.filter(pl.col("lvl").is_not_null() | pl.col("other") | pl.col("tbs") | any_py).select(
        "seq", "line_no", pl.when(pl.col("stamped")).then(pl.col("ts")).alias("ts"), "msg"
    )  # no header: no time
    _, rows = _kinds.rows(__file__, base.select(pl.col("msg").alias("line")))
    out = base.select(pl.all().gather(rows["row"])).with_columns(
        _events().gather(rows["kind"]).alias("event"),
        rows["request_id"],
        *(rows[c] for c in (*_FIELDS, "prompt")),
    )
    done = _generated(base)
    if done.height:
        out = pl.concat([out, done], how="diagonal_relaxed").sort("seq")
    if out.height == 0:
        return base.clear()
    received = pl.col("event") == "received"
    if bool(out.select(received.any()).item()):
        out = _received_fields(out, ctx)
    else:
        out = out.drop(*_FIELDS, "prompt")
    return out.drop("msg").with_columns(
        base_id_expr("request_id").alias("base_request_id"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    )


def _generated(base: pl.DataFrame) -> pl.DataFrame:
    """A request's end as ``--enable-log-outputs`` writes it: a 'finished' row per 'Generated response' line that is
    no stream's delta."""
    lines = base.filter(pl.col("msg").str.starts_with(_GENERATED_LEAD))
    if lines.height == 0:
        return lines.clear().with_columns(
            pl.lit(None, pl.String).alias("event"), pl.lit(None, pl.String).alias("request_id")
        )
    got = lines.with_columns(pl.col("msg").str.extract_groups(_GENERATED).alias("_g")).unnest("_g")
    return got.filter(pl.col("1").is_not_null() & pl.col("2").is_null()).select(
        "seq", "line_no", "ts", "msg", pl.lit("finished").alias("event"), pl.col("1").alias("request_id")
    )


def _received_fields(out: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """A received request's settings, as they are written (a count past 2**53 is none); none when its prompt was cut
    short (no repr closes it: what follows may be the prompt's text); its prompt, when asked."""
    m, repr_ = pl.col("msg"), pl.col("prompt")
    cut = repr_.is_null() & m.str.contains("prompt: ", literal=True)
    if bool(out.select(cut.any()).item()):
        cut = cut & m.str.contains(_CUT_PROMPT)
    else:
        cut = pl.lit(False)
    prompt = pl.lit(None, dtype=pl.String)
    if ctx.include_prompts:
        prompt = pl.coalesce(repr_, m.str.extract(r"^Received request \S+?: prompt: (.*?)>?$"))
        prompt = prompt.str.replace(r"^'(.*)'$", "$1").str.replace(r'^"(.*)"$', "$1")
        prompt = pl.when(prompt == "None").then(None).otherwise(prompt)

    def kept(c: str) -> pl.Expr:
        return pl.when(~cut).then(pl.col(c))

    return out.with_columns(
        *(kept(c).pipe(lambda e: pl.when(e.abs() <= MAX_ABS).then(e)).alias(c) for c in ("max_tokens", "n")),
        kept("temperature"),
        (kept("ignore_eos") == "True").alias("ignore_eos"),
        kept("prompt_tokens"),
        pl.when(pl.col("event") == "received").then(prompt).alias("prompt"),
    )
