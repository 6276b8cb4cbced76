"""A per-request table a person pasted (their own client's results: request, TTFT, latency, tokens, status) ->
``client_requests`` and ``client_attempts``, one row per request.

Sample (public-2 c06, vllm-project/vllm#31602)::

    Request ID  |  TTFT (s)  |  Total latency (s)  |  Token throughput (tok/s)  |  ...  |  Output token num  |  Status
    ---

    - req_1     4.0879      6.5550         20.59              54.72           48.67             129.30            3768           135        success

Line kinds: the header (column names separated by ``|``, or by two spaces or more; one must name a time to first
token or a latency, one a request or a status, and none a summary: a mean, a percentile, a rate, requests); rules (``---``, ``|---|---|``) and blank lines; a row (its cells
separated by ``|`` or by white space, after a list marker ``-``/``*`` a Markdown paste may have kept), as many
cells as the header has names. Columns are mapped by their names: request id (``request``, ``id``), TTFT (``ttft``,
``first token``), latency (``latency``, ``e2e``, ``duration``), prompt tokens (``input``/``prompt`` + ``token``),
output tokens (``output``/``completion`` + ``token`` but not a throughput), status (``status``, ``result``); a unit
in parentheses (``(s)``, ``(ms)``) scales the times. A status word of success (success, ok, succeeded) is read as
HTTP 200, a number as itself, any other word as the request's error. The program is not named: client ``custom``.
No times: the rows have no place on the timeline.
"""

from __future__ import annotations

import re

import polars as pl

from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "request_table"
KIND = "client"
DESCRIPTION = "a pasted per-request table of a person's own client (request, TTFT, latency, tokens, status)"
MODE = "document"
SAMPLES = [  # public-2 c06 (vllm#31602), cut to its first columns in the header
    "Request ID  |  TTFT (s)  |  Total latency (s)  |  Token throughput (tok/s)  |  Output token throughput (tok/s)  |"
    "  Character throughput (char/s)  |  Output character throughput (char/s)  |  Input token num  |  Output token "
    "num  |  Status",
    "- req_1     4.0879      6.5550         20.59              54.72           48.67             129.30            "
    "3768           135        success",
]

CLIENT = "custom"
_HEADER = r"(?i)^\|?\s*[A-Za-z][^|]*(?:\s*\|\s*[A-Za-z][^|]*){2,}\|?\s*$"
_TIMECOL = r"(?i)(?:ttft|first token|latency|e2e)"
_KEYCOL = r"(?i)(?:request|status)"
# a summary's columns (a mean, a percentile, a count of requests, a rate): each row is many requests, not one (the
# benchmark tables people paste: tests/data/pasted-aggregates)
_AGGCOL = r"(?i)\b(?:mean|median|avg|average|p\d{2,3}(?:\.\d+)?|percentile|stdev|requests|rate)\b"
_RULE = r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$"
_LEAD = r"^\s*(?:[-*]\s+|\|\s*)"
_NUM = r"^-?\d+(?:\.\d+)?$"
OK_WORDS = ("success", "succeeded", "ok", "successful")
# column -> (name pattern, excluded when the name also matches)
_MAP = {
    "request_id": (r"(?i)request|^\s*id\b", r"(?i)token|throughput|latency|ttft"),
    "ttft": (r"(?i)ttft|first token", None),
    "latency": (r"(?i)latency|e2e|duration", r"(?i)token latency|itl|inter"),
    "prompt_tokens": (r"(?i)(?:input|prompt).*token", r"(?i)throughput|/s"),
    "output_tokens": (r"(?i)(?:output|completion|generated).*token", r"(?i)throughput|/s"),
    "status": (r"(?i)status|result", None),
}


def _split(line: str) -> list[str]:
    """The names of a header line (its one Python-side split: the header is one line of the file)."""
    cells = line.strip().strip("|").split("|") if "|" in line else re.split(r"\s{2,}", line.strip())
    return [c.strip() for c in cells]


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    head = (
        s.str.contains(_HEADER)
        & s.str.contains(_TIMECOL)
        & s.str.contains(_KEYCOL)
        & ~s.str.contains(_AGGCOL)
    )
    g = per_head(nonblank(frame), n, head=head.any(), rule=s.str.contains(_RULE).any())
    return g.select(pl.when(pl.col("head")).then(0.6).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _columns(names: list[str]) -> dict[str, tuple[int, float]]:
    """column -> (index of its cell, factor to seconds or 1) for the names of a header."""
    out: dict[str, tuple[int, float]] = {}
    for col, (want, unless) in _MAP.items():
        for i, name in enumerate(names):
            if i in {j for j, _ in out.values()}:
                continue
            if re.search(want, name) and not (unless and re.search(unless, name)):
                out[col] = (i, 1e-3 if re.search(r"\(ms\)", name) else 1.0)
                break
    return out


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    s = pl.Series("line", text.split("\n"), dtype=pl.String)
    if text.endswith("\n"):
        s = s.head(s.len() - 1)
    df = pl.DataFrame({"line": s.str.strip_chars_end("\r")}).with_row_index("line_no", 1)
    line = pl.col("line")
    is_head = line.str.contains(_HEADER) & line.str.contains(_TIMECOL) & line.str.contains(_KEYCOL)
    heads = df.filter(is_head)
    if not heads.height:
        return ChunkResult(lines_parsed=0)
    names = _split(heads["line"][0])
    cols = _columns(names)
    first = int(heads["line_no"][0])
    body = line.str.replace(_LEAD, "").str.strip_chars().str.strip_chars("|")
    cells = (
        pl.when(body.str.contains(r"\|")).then(body.str.split("|")).otherwise(body.str.extract_all(r"\S+"))
    )
    df = df.with_columns(cells.list.eval(pl.element().str.strip_chars()).alias("cells"))
    row = (pl.col("line_no") > first) & (pl.col("cells").list.len() == len(names)) & ~line.str.contains(_RULE)
    known = (pl.col("line_no") == first) | row | line.str.contains(_RULE) | (line.str.strip_chars() == "")
    parsed = int(df.select((known & (pl.col("line_no") >= first)).sum()).item())
    rows = df.filter(row)

    def cell(col: str, dtype=pl.Float64) -> pl.Expr:
        if col not in cols:
            return pl.lit(None, dtype=dtype)
        i, f = cols[col]
        v = pl.col("cells").list.get(i)
        return (v.cast(pl.Float64, strict=False) * f) if dtype == pl.Float64 else v.cast(dtype, strict=False)

    word = cell("status", pl.String).str.to_lowercase()
    status = pl.when(word.is_in(OK_WORDS)).then(200).otherwise(word.cast(pl.Int64, strict=False))
    rid = cell("request_id", pl.String)
    out = rows.select(
        pl.coalesce(rid, pl.format("row{}", pl.col("line_no"))).alias("request_id"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(CLIENT).alias("client"),
        status.cast(pl.Int64).alias("status"),
        pl.when(status.is_null() & word.is_not_null()).then(word).alias("error"),
        cell("ttft").alias("ttft_s"),
        cell("latency").alias("e2e_s"),
        cell("prompt_tokens").cast(pl.Int64).alias("prompt_tokens"),
        cell("output_tokens").cast(pl.Int64).alias("output_tokens"),
        "line_no",
    ).with_columns(
        pl.format("table:{}:{}", pl.lit(ctx.source), pl.col("request_id")).alias("logical_request_id")
    )
    requests = out.select(
        "logical_request_id", "source", "client", "status", "error", pl.lit(1).alias("attempts"),
        "ttft_s", "e2e_s", "prompt_tokens", "output_tokens",
    )  # fmt: skip
    attempts = out.select(
        "source", "client", "logical_request_id", "request_id", pl.lit(1).alias("attempt"), "status", "error",
        "ttft_s", "e2e_s", "prompt_tokens", "output_tokens", pl.lit("exact").alias("grouping"), "line_no",
    )  # fmt: skip
    mapped = ", ".join(f"{c} <- '{names[i]}'" for c, (i, _) in cols.items())
    return ChunkResult(
        tables={"client_requests": requests, "client_attempts": attempts} if out.height else {},
        lines_parsed=parsed,
        assumptions=[
            f"a pasted per-request table (client '{CLIENT}', no times): columns mapped by name: {mapped}; a "
            "status word of success is HTTP 200"
        ],
    )
