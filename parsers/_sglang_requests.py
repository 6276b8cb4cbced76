"""SGLang's per-request lines (``--log-requests``, text and JSON formats) -> server_request_events.

Upstream (sgl-project/sglang ``python/sglang/srt/utils/request_logger.py``, before it ``tokenizer_manager.py``)::

    Receive: obj=GenerateReqInput(text=None, input_ids=[...], sampling_params={'max_new_tokens': 256, ...}, rid='...', ...)
    Finish: obj=GenerateReqInput(rid='...', ...), out={'meta_info': {'id': '...', 'finish_reason': {'type': 'abort', ...},
            'prompt_tokens': 32472, 'completion_tokens': 23297, 'e2e_latency': 1201.92, 'request_finished_ts': ...}}

The object is a dataclass printed field by field, strings by ``repr`` (a prompt stays on one line). Its field order
changed across versions (``rid`` last in 0.4, first in 0.5), ``--log-requests-level`` 0 drops the sampling params,
0 and 1 the text and ids, 2 cuts a list or string past 2048 items to ``<head> ... <tail>``. Some versions print the
lines without the logger's ``[date time]`` header (issue 25887): a Finish line then takes its own
``request_finished_ts`` (epoch seconds), else the time of the line before.

``--log-requests-format json`` prints one JSON object a line instead (``log_json`` in ``utils/log_utils.py``, to the
``--log-requests-target`` loggers: stdout or ``<dir>/<host>_<rank>.log``, ``%(message)s`` alone, so without any
header; a paste may show one in front)::

    {"timestamp": "2026-06-30T09:15:47.282730", "event": "request.received", "rid": "...", "obj": {...}}
    {"timestamp": "...", "event": "request.finished", "rid": "...", "obj": {...}, "out": {"meta_info": {...}}}

the same objects as fields (lists cut at level 2 to ``[head..., "...", tail...]``), ``timestamp`` the local time
of ``datetime.now()``. SGLang's diffusion server logs its requests through the same two calls, its object a dict
(``Receive: obj={'request_id': ..., 'sampling_params': {...}, 'prompt': ...}``, ``out={'meta_info':
{'e2e_latency': ...}, 'error': ...}``); both forms are read (tests/data/sglang/23049-...: the only public paste of
the JSON form found). The OpenAI form (``Receive OpenAI: obj=...``, ``request.received.openai``) carries no rid
and is not read.

The prompt is the user's text: fields are read from the line's tokens, one regex pass that takes every string
literal whole, so nothing inside a prompt (or an output) is ever read as a field; the prompt itself is kept only
with --include-prompts. A Finish whose ``finish_reason`` type is 'abort' (client gone, timeout, error) is an
'aborted' event; its 'received' time is the finish time less ``e2e_latency``, on the line's own clock.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from ._common import ascii_classes, base_id_expr
from .base import ParseContext

# a JSON request line of one request or of a batch (its rid a list), and of one request
_JSON_LINE = ascii_classes(
    r'\{"timestamp": "\d{4}-\d\d-\d\dT[\d:.]+", "event": "request\.(?:received|finished)", "rid": '
)
_JSON_ANY, _JSON_ONE = "^" + _JSON_LINE, "^" + _JSON_LINE + '"'
# a request line, text or JSON (the start of a record; never an event)
REQUEST_LINE = r"^(?:(?:Receive|Finish): obj=|" + _JSON_LINE + ")"
# the JSON form's own time (local, no zone)
JSON_TS = ascii_classes(
    r'^\{"timestamp": "(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?)", "event": "request\.'
)
_LIT = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
# a line's tokens, left to right: the finish reason's type, a dict entry "'key': value" (a literal or a plain value), a keyword field whose
# value is a literal or an id list, or any other literal (consumed whole: a prompt's content is never matched)
_TOKENS = ascii_classes(
    rf"""'finish_reason': \{{'type': (?:{_LIT})|'\w+': (?:{_LIT}|[^,{{}}\[\]'"]*)|(?-u:\b)(?:rid|text)=(?:{_LIT})|(?-u:\b)input_ids=\[[\d, ]*\](?: \.\.\. \[)?|{_LIT}"""
)
# GenerateReqInput (the LLM server) or the diffusion server's dict
_OBJ = ascii_classes(r"^(?:Receive|Finish): obj=(?:GenerateReqInput\(|\{'request_id': )")


def requests(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """One event per Receive line ('received') and one or two per Finish line ('finished' or 'aborted', and
    'received' at finish - e2e_latency), text or JSON; ``df`` holds the parser's rows (``msg``, ``ts``, ``ts_own``,
    ``seq``)."""
    parts = [r for r in (_text_rows(df, ctx), _json_rows(df, ctx)) if r.height]
    if not parts:
        return pl.DataFrame()
    rows = pl.concat(parts, how="vertical_relaxed").filter(pl.col("request_id").is_not_null())
    if rows.height == 0:
        return pl.DataFrame()
    end = rows.filter("_fin").with_columns(
        pl.when("_abort").then(pl.lit("aborted")).otherwise(pl.lit("finished")).alias("event")
    )
    received = pl.lit("received").alias("event")
    out = pl.concat(
        [
            rows.filter(~pl.col("_fin")).with_columns(received),
            # the Finish line's start, on its clock (Receive lines are also logged, except under
            # SGLANG_LOG_REQUEST_EXCEEDED_MS or when the log was cut): derive takes the earliest
            end.filter(pl.col("_e2e").is_not_null()).with_columns(
                (pl.col("ts") - pl.duration(microseconds=(pl.col("_e2e") * 1e6).pipe(to_int))).alias("ts"),
                received,
            ),
            end,
        ]
    ).sort("seq", "event", descending=[False, True])
    return out.select(
        "ts",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        "event",
        "request_id",
        base_id_expr("request_id").alias("base_request_id"),
        "max_tokens",
        "prompt_tokens",
        "n",
        "temperature",
        "ignore_eos",
        "prompt",
        "line_no",
        "seq",
        pl.lit("sglang").alias("engine_kind"),
    )


_ROW = [
    "ts",
    "line_no",
    "seq",
    "request_id",
    "max_tokens",
    "prompt_tokens",
    "n",
    "temperature",
    "ignore_eos",
    "prompt",
    "_fin",
    "_abort",
    "_e2e",
]


def _text_rows(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The fields of the text form's lines (``Receive: obj=...``, ``Finish: obj=..., out=...``)."""
    cand = df.filter(pl.col("msg").str.contains(_OBJ))
    if cand.height == 0:
        return pl.DataFrame()
    cand = cand.with_columns(
        pl.col("msg").str.extract_all(_TOKENS).alias("_tok"),
        pl.col("msg").str.starts_with("Finish").alias("_fin"),
    )
    # the LLM server's rid= (else the output's id), the diffusion server's 'request_id'
    rid = pl.coalesce(_kw("rid"), _entry("id", literal=True), _entry("request_id", literal=True))
    ids = (
        pl.col("_tok")
        .list.eval(pl.element().filter(pl.element().str.starts_with("input_ids=[")))
        .list.first()
    )
    n_ids = (
        pl.when(ids.str.ends_with(" ... ["))
        .then(None)  # cut at level 2: the length is not known
        .when(ids == "input_ids=[]")
        .then(0)
        .otherwise(ids.str.count_matches(",", literal=True) + 1)
    )
    epoch_end = (_entry("request_finished_ts").cast(pl.Float64, strict=False) * 1e6).pipe(to_int).cast(TS)
    return cand.with_columns(
        rid.alias("request_id"),
        _entry("max_new_tokens").pipe(to_int).alias("max_tokens"),
        pl.coalesce(_entry("prompt_tokens").pipe(to_int), n_ids).alias("prompt_tokens"),
        _entry("n").pipe(to_int).alias("n"),
        _entry("temperature").cast(pl.Float64, strict=False).alias("temperature"),
        pl.when(_entry("ignore_eos").is_in(["True", "False"]))
        .then(_entry("ignore_eos") == "True")
        .alias("ignore_eos"),
        _prompt(ctx).alias("prompt"),
        (_entry("finish_reason").str.extract(r"'type': '(\w+)'") == "abort").fill_null(False).alias("_abort"),
        _entry("e2e_latency").cast(pl.Float64, strict=False).alias("_e2e"),
        # a line without its header: its own epoch end time, else the line before's
        pl.when(pl.col("ts_own").is_null() & pl.col("_fin"))
        .then(pl.coalesce(epoch_end, "ts"))
        .otherwise("ts")
        .alias("ts"),
    ).select(_ROW)


def _json_rows(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The fields of the JSON form's lines, by JSON path (a prompt or an output is a JSON string: never read as a
    field); the line's time is its own ``timestamp`` (``ts`` of the parser's rows)."""
    cand = df.filter(pl.col("msg").str.contains(_JSON_ANY))
    if cand.height == 0:
        return pl.DataFrame()
    m = pl.col("msg")
    # the small objects first, their fields from them (one pass of the whole line each)
    cand = cand.with_columns(
        m.str.json_path_match("$.obj.sampling_params").alias("_sp"),
        m.str.json_path_match("$.out.meta_info").alias("_mi"),
        m.str.json_path_match("$.obj.input_ids").alias("_ids"),
        m.str.slice(0, 120).str.contains('"event": "request.finished"', literal=True).alias("_fin"),
    )
    sp, mi, ids = (lambda k: pl.col("_sp").str.json_path_match(f"$.{k}")), pl.col("_mi"), pl.col("_ids")
    n_ids = (
        pl.when(ids.str.contains('"..."', literal=True))
        .then(None)  # cut at level 2
        .when(ids == "[]")
        .then(0)
        .otherwise(ids.str.count_matches(",", literal=True) + 1)
    )
    prompt = (
        pl.coalesce(m.str.json_path_match("$.obj.text"), m.str.json_path_match("$.obj.prompt"))
        if ctx.include_prompts
        else pl.lit(None, dtype=pl.String)
    )
    return cand.with_columns(
        pl.when(m.str.contains(_JSON_ONE)).then(m.str.json_path_match("$.rid")).alias("request_id"),
        sp("max_new_tokens").pipe(to_int).alias("max_tokens"),
        pl.coalesce(mi.str.json_path_match("$.prompt_tokens").pipe(to_int), n_ids).alias("prompt_tokens"),
        sp("n").pipe(to_int).alias("n"),
        sp("temperature").cast(pl.Float64, strict=False).alias("temperature"),
        pl.when(sp("ignore_eos").is_in(["true", "false"]))
        .then(sp("ignore_eos") == "true")
        .alias("ignore_eos"),
        pl.when(~pl.col("_fin")).then(prompt).alias("prompt"),
        (mi.str.json_path_match("$.finish_reason.type") == "abort").fill_null(False).alias("_abort"),
        mi.str.json_path_match("$.e2e_latency").cast(pl.Float64, strict=False).alias("_e2e"),
    ).select(_ROW)


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
    return pl.when(pl.col("_fin").not_()).then(pl.coalesce(_kw("text"), _entry("prompt", literal=True)))
