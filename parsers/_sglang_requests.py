"""SGLang's per-request lines (``--log-requests``, text format) -> server_request_events.

Upstream (sgl-project/sglang ``python/sglang/srt/utils/request_logger.py``, before it ``tokenizer_manager.py``)::

    Receive: obj=GenerateReqInput(text=None, input_ids=[...], sampling_params={'max_new_tokens': 256, ...}, rid='...', ...)
    Finish: obj=GenerateReqInput(rid='...', ...), out={'meta_info': {'id': '...', 'finish_reason': {'type': 'abort', ...},
            'prompt_tokens': 32472, 'completion_tokens': 23297, 'e2e_latency': 1201.92, 'request_finished_ts': ...}}

The object is a dataclass printed field by field, strings by ``repr`` (a prompt stays on one line). Its field order
changed across versions (``rid`` last in 0.4, first in 0.5), ``--log-requests-level`` 0 drops the sampling params,
0 and 1 the text and ids, 2 cuts a list or string past 2048 items to ``<head> ... <tail>``. Some versions print the
lines without the logger's ``[date time]`` header (issue 25887): a Finish line then takes its own
``request_finished_ts`` (epoch seconds), else the time of the line before.

The prompt is the user's text: fields are read from the line's tokens, one regex pass that takes every string
literal whole, so nothing inside a prompt (or an output) is ever read as a field; the prompt itself is kept only
with --include-prompts. A Finish whose ``finish_reason`` type is 'abort' (client gone, timeout, error) is an
'aborted' event; its 'received' time is the finish time less ``e2e_latency``, on the line's own clock.
"""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS

from ._common import ascii_classes, base_id_expr
from .base import ParseContext

REQUEST_LINE = ascii_classes(r"^(?:Receive|Finish): obj=")
_LIT = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
# a line's tokens, left to right: the finish reason's type, a dict entry "'key': value" (a literal or a plain value), a keyword field whose
# value is a literal or an id list, or any other literal (consumed whole: a prompt's content is never matched)
_TOKENS = ascii_classes(
    rf"""'finish_reason': \{{'type': (?:{_LIT})|'\w+': (?:{_LIT}|[^,{{}}\[\]'"]*)|(?-u:\b)(?:rid|text)=(?:{_LIT})|(?-u:\b)input_ids=\[[\d, ]*\](?: \.\.\. \[)?|{_LIT}""")
_OBJ = ascii_classes(r"^(?:Receive|Finish): obj=GenerateReqInput\(")


def requests(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """One event per Receive line ('received') and one or two per Finish line ('finished' or 'aborted', and
    'received' at finish - e2e_latency); ``df`` holds the parser's rows (``msg``, ``ts``, ``ts_own``, ``seq``)."""
    cand = df.filter(pl.col("msg").str.contains(_OBJ))
    if cand.height == 0:
        return pl.DataFrame()
    cand = cand.with_columns(pl.col("msg").str.extract_all(_TOKENS).alias("_tok"),
                             pl.col("msg").str.starts_with("Finish").alias("_fin"))
    rid = pl.coalesce(_kw("rid"), _entry("id", literal=True))
    ids = pl.col("_tok").list.eval(pl.element().filter(pl.element().str.starts_with("input_ids=["))).list.first()
    n_ids = (pl.when(ids.str.ends_with(" ... [")).then(None)  # cut at level 2: the length is not known
             .when(ids == "input_ids=[]").then(0)
             .otherwise(ids.str.count_matches(",", literal=True) + 1))
    epoch_end = (_entry("request_finished_ts").cast(pl.Float64, strict=False) * 1e6).cast(pl.Int64).cast(TS)
    rows = cand.with_columns(
        rid.alias("request_id"),
        _entry("max_new_tokens").cast(pl.Int64, strict=False).alias("max_tokens"),
        pl.coalesce(_entry("prompt_tokens").cast(pl.Int64, strict=False), n_ids).alias("prompt_tokens"),
        _entry("n").cast(pl.Int64, strict=False).alias("n"),
        _entry("temperature").cast(pl.Float64, strict=False).alias("temperature"),
        pl.when(_entry("ignore_eos").is_in(["True", "False"])).then(_entry("ignore_eos") == "True").alias("ignore_eos"),
        _prompt(ctx).alias("prompt"),
        (_entry("finish_reason").str.extract(r"'type': '(\w+)'") == "abort").fill_null(False).alias("_abort"),
        _entry("e2e_latency").cast(pl.Float64, strict=False).alias("_e2e"),
        # a line without its header: its own epoch end time, else the line before's
        pl.when(pl.col("ts_own").is_null() & pl.col("_fin")).then(pl.coalesce(epoch_end, "ts")).otherwise("ts")
        .alias("ts"),
    ).filter(pl.col("request_id").is_not_null())
    if rows.height == 0:
        return pl.DataFrame()
    end = rows.filter("_fin").with_columns(
        pl.when("_abort").then(pl.lit("aborted")).otherwise(pl.lit("finished")).alias("event"))
    received = pl.lit("received").alias("event")
    out = pl.concat([
        rows.filter(~pl.col("_fin")).with_columns(received),
        # the Finish line's start, on its clock (Receive lines are also logged, except under
        # SGLANG_LOG_REQUEST_EXCEEDED_MS or when the log was cut): derive takes the earliest
        end.filter(pl.col("_e2e").is_not_null()).with_columns(
            (pl.col("ts") - pl.duration(microseconds=(pl.col("_e2e") * 1e6).cast(pl.Int64))).alias("ts"), received),
        end,
    ]).sort("seq", "event", descending=[False, True])
    return out.select(
        "ts", pl.lit(ctx.source).alias("source"), pl.lit(ctx.replica).alias("replica"), "event", "request_id",
        base_id_expr("request_id").alias("base_request_id"), "max_tokens", "prompt_tokens", "n", "temperature",
        "ignore_eos", "prompt", "line_no", "seq", pl.lit("sglang").alias("engine_kind"),
    )


def _unquote(e: pl.Expr) -> pl.Expr:
    """A ``repr`` literal's content (escapes left as printed)."""
    return e.str.slice(1, e.str.len_chars() - 2)


def _kw(key: str) -> pl.Expr:
    """The literal value of the object's keyword field ``key=`` (the first one: the request's, not the output's)."""
    tok = pl.col("_tok").list.eval(pl.element().filter(pl.element().str.starts_with(f"{key}="))).list.first()
    return _unquote(tok.str.strip_prefix(f"{key}="))


def _entry(key: str, literal: bool = False) -> pl.Expr:
    """The value of the first dict entry ``'key': value``; None when printed ``None``."""
    head = f"'{key}': "
    tok = pl.col("_tok").list.eval(pl.element().filter(pl.element().str.starts_with(head))).list.first()
    val = tok.str.strip_prefix(head).str.strip_chars()
    if literal:
        return pl.when(val.str.contains(r"^['\"]")).then(_unquote(val))
    return pl.when(val != "None").then(val)


def _prompt(ctx: ParseContext) -> pl.Expr:
    """The request's ``text`` (the prompt), only when the user asked for prompts."""
    if not ctx.include_prompts:
        return pl.lit(None, dtype=pl.String)
    return pl.when(pl.col("_fin").not_()).then(_kw("text"))
