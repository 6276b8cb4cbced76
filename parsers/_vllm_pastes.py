"""vllm_server's repairs of logs as people paste them (issue threads, chats, terminals):

* a markdown lead in front of a line (quote ``> ``, list ``- ``, table ``| ``, bold ``**``, inline code, a
  pager's ``....``), removed only where what follows is vLLM's own text, so a log's own line is never cut;
* records cut at a fixed width (a terminal, a web form, a store that breaks lines at 1000 characters): a line
  without any header right after a record whose grammar says it is not finished (a stats line that does not
  end on its last field, a ``Received request`` line before its closing ``.``, a speculative-decoding line) is
  joined to it, in the text the fields are read from;
* records flattened onto one line are split where a header starts (``_vllm_lines._parse``).

Every repair is counted (``ChunkResult.repairs``) and said in the file's messages by ingest.
"""

from __future__ import annotations

import polars as pl

from ._common import ascii_classes
from ._vllm_prefix import PROCESS_CUT

_MD_FIRST = r"^[>*+|`.-]"  # the first character of every lead: the rest runs only on the chunks that have one
_MD_LEAD = r"^(?:>[ \t]?|[-*+|][ \t]+|\*\*|`+|\.{3,})+"
_MD_TAIL = r"(?:`+|\*\*|[ \t]+\|)[ \t]*$"
# what vLLM writes at the start of a line (header, process prefix, uvicorn, its own messages)
_VLLM_START = ascii_classes(
    rf"^(?:{PROCESS_CUT} |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: \d\d-\d\d \d\d:\d\d:\d\d |: +)"
    r"|Engine \d+: |\d+ Engines Aggregated: |Avg prompt throughput: |SpecDecoding metrics: |Speculative metrics: "
    r"|Sequence group \S+ is preempted|(?:Received|Added|Finished|Aborted) request|Traceback \(most recent call"
    r"|[A-Za-z_][\w.]*(?:Error|Exception): )"
)
# a speculative-decoding line ends on a rate ('%'), a count ('tokens', V1 0.8), a period (V0), a per-position
# rate ('0.712', V1 0.9-0.10) or ', ' (V1 0.8.0's trailing separator)
_SPEC_END = r"(?:%|tokens|\.|[0-9]\.[0-9]{3}|, )[ \t]*$"
# the fields that follow 'Accepted: N tokens' on a speculative-decoding line
_SPEC_NEXT = r"^\s?,?\s?(?:Drafted: \d+ tokens|Per-position acceptance rate: |Avg Draft acceptance rate: )"


def strip_markdown(lines: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """``lines`` with the markdown lead (and its closing mark) removed where vLLM's text follows; how many."""
    if lines.height == 0 or not bool(lines["line"].str.contains(_MD_FIRST).any()):
        return lines, 0
    line = pl.col("line")
    rest = line.str.replace(_MD_LEAD, "")
    hit = (
        line.str.contains(_MD_FIRST)
        & (rest.str.len_bytes() < line.str.len_bytes())
        & rest.str.contains(_VLLM_START)
    )
    n = int(lines.select(hit.sum()).item())
    if n == 0:
        return lines, 0
    return lines.with_columns(
        pl.when(hit).then(rest.str.replace(_MD_TAIL, "")).otherwise(line).alias("line")
    ), n


def _grammar() -> pl.Expr:
    """1 a stats line, 2 a speculative-decoding line, 3 a 'Received request' line, else 0 (literal tests only)."""
    m = pl.col("msg")
    stats = (
        m.str.starts_with("Avg prompt throughput: ")
        | m.str.starts_with("Throughput: ")
        | (
            (m.str.starts_with("Engine ") | m.str.contains(" Engines Aggregated: ", literal=True))
            & m.str.contains("Avg prompt throughput: ", literal=True)
        )
    )
    spec = m.str.starts_with("SpecDecoding metrics: ") | m.str.starts_with("Speculative metrics: ")
    return (
        pl.when(stats)
        .then(1)
        .when(spec)
        .then(2)
        .when(m.str.starts_with("Received request "))
        .then(3)
        .otherwise(0)
        .cast(pl.Int8)
    )


def _finished(kind: pl.Expr) -> pl.Expr:
    """The text of a row ends as its record's grammar ends (``kind`` from ``_grammar``)."""
    m = pl.col("msg").str.strip_chars_end()
    stats = m.str.ends_with("%") | m.str.ends_with("%.") | m.str.ends_with(" reqs")
    recv = m.str.ends_with(".") | m.str.ends_with(">")  # '>': the line a pager cut (it stays as it is)
    return (
        pl.when(kind == 1)
        .then(stats)
        .when(kind == 2)
        .then(pl.col("msg").str.contains(_SPEC_END))
        .when(kind == 3)
        .then(recv)
        .otherwise(True)
    )


def separator(prev: pl.Expr, cur: pl.Expr) -> pl.Expr:
    """What a wrap took out between two pieces: nothing when it cut a word (the usual fixed-width cut), a space
    when the first piece ends on ',' ';' or ':' and the second starts on a character (a cut at a word break)."""
    return (
        pl.when(prev.str.contains(r"[,;:]$") & cur.str.contains(r"^\S"))
        .then(pl.lit(" "))
        .otherwise(pl.lit(""))
    )


def join_wraps(df: pl.DataFrame, tb_strong: str, noise: str) -> tuple[pl.DataFrame, int]:
    """Rows without any header that continue an unfinished stats, speculative-decoding or request record are
    joined to it: the record's row gets the whole text, each joined row an empty message and ``joined``."""
    m = pl.col("msg")
    headless = (
        pl.col("lvl").is_null()
        & pl.col("uv").is_null()
        & pl.col("pyname").is_null()
        & pl.col("cts").is_null()
    )
    # only the rows without a header and those just before them are looked at (few in a log as vLLM wrote it)
    h = df.select(headless.alias("h")).to_series()
    idx = (h | h.shift(-1, fill_value=False)).arg_true()
    none = df.with_columns(pl.lit(False).alias("joined"))
    if idx.len() == 0:
        return none, 0
    s = pl.DataFrame({"_i": idx, "_h": h.gather(idx), "msg": df["msg"].gather(idx)})
    kind = _grammar()
    s = s.with_columns(
        kind.alias("_k"), (pl.col("_h") & (m.str.strip_chars() != "") & (kind == 0)).alias("_b")
    )
    # a run: a row with a header (or a grammar's first words) and the header-less rows right after it; rows
    # apart in the frame are in different runs (a header-less row's previous row is always in ``near``)
    gap = pl.col("_i").diff().fill_null(1) != 1
    s = s.with_columns((~pl.col("_b") | gap).cum_sum().alias("_run"))
    s = s.filter((pl.col("_k").first().over("_run") > 0) & (pl.len().over("_run") > 1))
    if s.height == 0:
        return none, 0
    s = s.with_columns(pl.col("_k").first().over("_run").alias("_g"))
    # a row ends the joining when its text is finished, or when it is a traceback or a progress bar of its own
    stop = pl.col("_b") & (m.str.contains(tb_strong) | m.str.contains(noise))
    # a speculative-decoding line may look finished where a wrap cut it ('Accepted: 0 tokens' / ' Drafted: 176
    # tokens, ...' with the comma lost, vllm#40350): the next row's first words say it goes on
    goes_on = (pl.col("_g") == 2) & m.shift(-1).over("_run").str.contains(_SPEC_NEXT).fill_null(False)
    s = s.with_columns(stop.alias("_stop"), (stop | (_finished(pl.col("_g")) & ~goes_on)).alias("_blk"))
    before = pl.col("_blk").cast(pl.Int32).cum_sum().shift(1, fill_value=0).over("_run")
    s = s.with_columns((pl.col("_b") & ~pl.col("_stop") & (before == 0)).alias("joined"))
    n = int(s["joined"].sum())
    if n == 0:
        return none, 0
    s = s.with_columns(separator(m.shift(1).over("_run"), m).alias("_sep"))
    piece = pl.when(pl.col("joined")).then(pl.col("_sep") + m).when(~pl.col("_b")).then(m)
    text = (
        s.filter(~pl.col("_b") | pl.col("joined"))
        .group_by("_run")
        .agg(pl.col("_i").first(), piece.str.join("").alias("_text"))
    )
    joined = s.filter("joined")["_i"]
    msg = df["msg"].scatter(text["_i"], text["_text"]).scatter(joined, "")
    flag = pl.repeat(False, df.height, eager=True).alias("joined").scatter(joined, True)
    return df.with_columns(msg, flag), n
