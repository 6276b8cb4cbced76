"""The oracle of tests/test_scan_vllm_requests.py: vllm_server's request lifecycle lines as parsers/_vllm_requests.py
read them with polars regexes before they moved into the compiled scanner (issue #42), kept as they were."""

from __future__ import annotations

import polars as pl
from offsets import byte_find, char_find

from logscope.numbers import to_int
from logscope.parsers._common import base_id_expr
from logscope.parsers.base import ParseContext

_PROMPT_REPR = r"""prompt: ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|None\b)"""
_PROMPT_SPAN = r"""prompt: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|None\b)"""  # _PROMPT_REPR without its group
_IDS_OPEN = r"prompt(?:_token_ids| token ids): \["  # 19 bytes either way


# request lifecycle lines: (event, how the message starts, regex of the id(s))
_REQ_KINDS = [
    ("received", "Received request ", None),
    ("added", "Added request ", None),
    ("finished", "Finished request ", None),
    # ids hold no space or comma: what follows them on the line is another record a paste glued on, cut short
    ("aborted", "Aborted request", r"^Aborted request(?:\(s\))? ((?:[^\s,]+, )*[^\s,]+?)\.?(?:\s|$)"),
    ("aborted", "Request ", r"^Request (\S+) aborted\."),
    ("failed", "Request ", r"^Request (\S+) failed\b"),
    ("preempted", "Sequence group ", r"^Sequence group (\S+) is preempted"),
    ("preempted", " Sequence group ", r"^ Sequence group (\S+) is preempted"),  # header stripped by a paste
]


def _requests(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    m = pl.col("msg")
    # vLLM's lines, pasted bare or flattened, and any python logger's carrying vLLM's words (KServe's trace logger)
    any_py = pl.col("pyname").is_not_null()
    base = df.filter(pl.col("lvl").is_not_null() | pl.col("other") | pl.col("tbs") | any_py).select(
        "seq", "line_no", pl.when(pl.col("stamped")).then(pl.col("ts")).alias("ts"), "msg"
    )  # no header: no time
    parts = []
    for event, lead, pat in _REQ_KINDS:
        sub = base.filter(m.str.starts_with(lead))
        if sub.height == 0:
            continue
        sub = sub.with_columns(pl.lit(event).alias("event"), _request_id(lead, pat).alias("request_id"))
        sub = sub.filter(pl.col("request_id").is_not_null())
        if event == "received":
            sub = _received_fields(sub, ctx)
        parts.append(sub.drop("msg"))
    if not parts:
        return base.clear()
    out = pl.concat(parts, how="diagonal_relaxed").sort("seq")
    if bool(out["request_id"].str.contains(", ", literal=True).any()):  # 'Aborted request(s) id1, id2.'
        # only the abort list holds several ids: the old code split every kind's, so a mutated 'Received request
        # , cmpl-…' gave two rows (one of no id) where the line names one request, as the scanner reads it
        ids = pl.col("request_id")
        split = pl.when(pl.col("event") == "aborted").then(ids.str.split(", ")).otherwise(pl.concat_list(ids))
        out = out.with_columns(split).explode("request_id")
    return out.with_columns(
        base_id_expr("request_id").alias("base_request_id"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    )


def _request_id(lead: str, pat: str | None) -> pl.Expr:
    """The id after ``lead``; the three commonest shapes are cut without a regex (they are most lines)."""
    m = pl.col("msg")
    if pat is not None:
        return m.str.extract(pat)
    if lead == "Received request ":  # 'Received request <id>: ...'; the cut is counted in bytes
        return (
            m.cast(pl.Binary)
            .bin.slice(len(lead), byte_find(m, ":", literal=True) - len(lead))
            .cast(pl.String)
        )
    return m.str.strip_prefix(lead).str.strip_chars_end().str.strip_suffix(".")  # 'Added request <id>.'


def _field(col: str, key: str, pat: str = r"^([0-9.]+)") -> pl.Expr:
    """Value after ``key`` (found with a literal search, then a regex on a few characters only).

    ``str.slice`` counts characters: on a line holding non-ASCII text before the key (a stop string such
    as '。'), the offset is counted in characters too."""
    c = pl.col(col)
    at = char_find(c, key, literal=True)
    return c.str.slice(at + len(key), 16).str.extract(pat)


def _received_fields(cand: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """SamplingParams fields, prompt length (and prompt, when asked) of 'Received request' lines."""
    m = pl.col("msg")
    prompt = pl.lit(None, dtype=pl.String)
    if bool(cand["msg"].str.contains("prompt: ", literal=True).any()):
        # fields are read after the prompt's repr, never from inside the prompt text. The repr is found
        # by one search (no capture groups: they are slow over a long prompt); where it sits is found
        # again as a literal, which is the same place: the repr parses one way only ('None' excepted)
        cand = cand.with_columns(
            pl.when(m.str.contains("prompt: ", literal=True))
            .then(m.str.extract_all(_PROMPT_SPAN).list.first())
            .alias("_span")
        )
        span = pl.col("_span")
        cand = cand.with_columns(
            span.str.slice(len("prompt: ")).alias("_repr"),
            pl.when(span == "prompt: None")
            .then(byte_find(m, _PROMPT_REPR))
            .otherwise(byte_find(m, span, literal=True))
            .alias("_at"),
        )
        at, raw = pl.col("_at"), m.cast(pl.Binary)
        rest = pl.concat_str(
            raw.bin.head(at).cast(pl.String),
            pl.lit("prompt: <p>"),
            raw.bin.slice(at + span.str.len_bytes()).cast(pl.String),
        )
        cut = (
            pl.when(span.is_null()).then(m.str.contains(r"^Received request \S+?: prompt: ")).otherwise(False)
        )
        cand = cand.with_columns(
            pl.when(cut).then(None).when(span.is_null()).then(m).otherwise(rest).alias("_rest")
        )
        if ctx.include_prompts:
            prompt = pl.coalesce("_repr", m.str.extract(r"^Received request \S+?: prompt: (.*?)>?$"))
            prompt = prompt.str.replace(r"^'(.*)'$", "$1").str.replace(r'^"(.*)"$', "$1")
            prompt = pl.when(prompt == "None").then(None).otherwise(prompt)
    else:
        cand = cand.with_columns(m.alias("_rest"))
    # the token ids: after the leftmost 'prompt_token_ids: [' up to the next ']' (a search, not a capture)
    rest = pl.col("_rest")
    cand = cand.with_columns(
        rest.cast(pl.Binary).bin.slice(byte_find(rest, _IDS_OPEN) + 19).cast(pl.String).alias("_after")
    )
    after = pl.col("_after")
    cand = cand.with_columns(
        after.cast(pl.Binary).bin.head(byte_find(after, "]", literal=True)).cast(pl.String).alias("_ids")
    )
    ids = pl.col("_ids")
    return cand.with_columns(
        _field("_rest", " max_tokens=").pipe(to_int).alias("max_tokens"),
        _field("_rest", "SamplingParams(n=").pipe(to_int).alias("n"),
        _field("_rest", " temperature=", r"^([0-9]+(?:\.[0-9]+)?)").cast(pl.Float64).alias("temperature"),
        (_field("_rest", " ignore_eos=", r"^(True|False)") == "True").alias("ignore_eos"),
        pl.when(ids.str.strip_chars() == "")
        .then(0)
        .otherwise(ids.str.count_matches(",", literal=True) + 1)
        .cast(pl.Int64)
        .alias("prompt_tokens"),
        prompt.alias("prompt"),
    ).drop("_rest", "_ids", "_repr", "_span", "_at", "_after", strict=False)
