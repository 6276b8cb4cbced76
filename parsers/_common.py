"""Helpers shared by format modules: request ids and timestamps (all polars expressions)."""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS

# vLLM request-id prefixes added in front of the X-Request-Id (or a random uuid)
ID_PREFIX = r"^(?:chatcmpl-|cmpl-|chat-|embd-|pool-|score-|tokn-|tokenize-|classify-|resp_|resp-|rerank-)"


def ascii_classes(pattern: str) -> str:
    r"""``pattern`` with ``\d`` and ``\w`` written as ASCII classes (``[0-9]``, ``[A-Za-z0-9_]``).

    What the parsers read with them (stamps, counts, ids, module and exception names) is ASCII, and a
    Unicode class makes a regex several times costlier to build: polars keeps 32 compiled patterns per
    thread of its pool, which every stream shares, so most patterns are built again for every chunk."""
    out: list[str] = []
    i, cls_start = 0, -1  # cls_start: where the open character class began in ``out``, else -1
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            inner = {"d": "0-9", "w": "A-Za-z0-9_"}.get(n)
            out.append(pattern[i : i + 2] if inner is None else inner if cls_start >= 0 else f"[{inner}]")
            i += 2
            continue
        if c == "[" and cls_start < 0:
            cls_start = len(out)
        elif (
            c == "]" and cls_start >= 0 and "".join(out[cls_start:]) not in ("[", "[^")
        ):  # '[]...]' holds ']'
            cls_start = -1
        out.append(c)
        i += 1
    return "".join(out)


# uvicorn's access line, the message after its level prefix (vLLM's and SGLang's API servers, LiteLLM, the vLLM router)
UVICORN_ACCESS = (
    ascii_classes(  # KServe's access format puts the process id after the client (' 1647689 - "')
        r'(?P<addr>\S+)(?: \d+)? - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})'
    )
)
UVICORN_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+"  # its level prefix: 'INFO:     '


def base_id_expr(col: str | pl.Expr) -> pl.Expr:
    """The part of a vLLM request id that came from the client/gateway X-Request-Id.

    ``cmpl-<id>-0``, ``cmpl-<id>-0-1a2b3c4d`` (0.14+ engine suffix), ``chatcmpl-<id>``,
    ``chat-<id>`` -> ``<id>``. A chat id carrying the 0.14+ suffix (``chatcmpl-<id>-1a2b3c4d``)
    cannot be told apart from an id that really ends that way; derive.py settles those by
    matching against the ids of Received lines.
    """
    e = pl.col(col) if isinstance(col, str) else col
    is_cmpl = e.str.starts_with("cmpl-")
    stripped = e.str.replace(ID_PREFIX, "")
    # completions: <id>-<index>[-<8hex>]
    cmpl = stripped.str.replace(r"-[0-9]+-[0-9a-f]{8}$", "").str.replace(r"-[0-9]+$", "")
    return pl.when(e.is_null()).then(None).when(is_cmpl).then(cmpl).otherwise(stripped)


def endpoint_expr(col: str | pl.Expr) -> pl.Expr:
    e = pl.col(col) if isinstance(col, str) else col
    return (
        pl.when(e.str.starts_with("chatcmpl-") | e.str.starts_with("chat-"))
        .then(pl.lit("chat"))
        .when(e.str.starts_with("cmpl-"))
        .then(pl.lit("completion"))
        .when(e.str.starts_with("tokenize-") | e.str.starts_with("tokn-"))
        .then(pl.lit("tokenize"))
        .when(e.str.starts_with("embd-"))
        .then(pl.lit("embedding"))
        .otherwise(pl.lit("other"))
    )


def tgi_endpoint_expr(col: str | pl.Expr) -> pl.Expr:
    """The endpoint of a TGI request, named by its route ('chat_completions@<stamp>', parsers/tgi_router.py)."""
    route = (pl.col(col) if isinstance(col, str) else col).str.extract(r"^(\w+)@")
    return (
        pl.when(route == "chat_completions")
        .then(pl.lit("chat"))
        .when(route.is_in(["generate", "generate_stream", "compat_generate", "completions"]))
        .then(pl.lit("completion"))
        .otherwise(pl.lit("other"))
    )


def local_to_utc(naive: pl.Expr, tz: str) -> pl.Expr:
    """Naive local datetimes (zone ``tz``) to UTC; ambiguous/non-existent DST times resolved early/forward."""
    if tz in ("UTC", "Z", "+00:00"):
        return naive.dt.replace_time_zone("UTC").cast(TS)
    return (
        naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .cast(TS)
    )


def epoch_to_utc(seconds: pl.Expr) -> pl.Expr:
    """Float epoch seconds to UTC datetime (microseconds)."""
    # past ~year 287,000 a time has no microsecond count in an i64: null (an outlier), never an overflow error
    us = pl.when(seconds.abs() < 9e12).then((seconds * 1_000_000).round(0)).cast(pl.Int64, strict=False)
    return pl.from_epoch(us, time_unit="us").dt.replace_time_zone("UTC")


def decode_json(s: pl.Series, dtype: pl.DataType) -> pl.Series:
    """``str.json_decode`` that turns undecodable lines into nulls (halving the batch around them)."""
    try:
        return s.str.json_decode(dtype)
    except pl.exceptions.PolarsError:
        if s.len() <= 1:
            return pl.Series(s.name, [None] * s.len(), dtype=dtype)
        mid = s.len() // 2
        return pl.concat([decode_json(s.slice(0, mid), dtype), decode_json(s.slice(mid), dtype)])


def json_fields(lines: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """line_no and the string value of each key of JSON ``lines``, decoded once per line; a line holding
    a value of another type (an object where a string belongs) is read key by key as a JSON path, as
    before (a path match per key parsed each line once per key: Traefik 15 -> 100 MB/s, Envoy 12 -> 117)."""
    dtype = pl.Struct({k: pl.String for k in keys})
    f = lines.select("line_no", "line", decode_json(lines["line"], dtype).alias("j"))
    odd = f["j"].is_null()
    if bool(odd.any()):
        line = pl.col("line")
        slow = f.filter(odd).with_columns(
            pl.struct([line.str.json_path_match(f"$['{k}']").alias(k) for k in keys]).alias("j")
        )
        f = pl.concat([f.filter(~odd), slow]).sort("line_no")
    return f.select("line_no", "j").unnest("j")


def bad_times(df: pl.DataFrame, raw: str, parsed: str) -> tuple[int, str | None]:
    """Rows whose written time ``raw`` gave no ``parsed`` time (an impossible date, a local time in a DST
    gap), and the first as an example ('line 3: 2026/02/29 08:24:58') for ``ChunkResult.bad_times``."""
    bad = df.filter(pl.col(raw).is_not_null() & pl.col(parsed).is_null())
    if bad.height == 0:
        return 0, None
    first = bad.row(0, named=True)
    where = f"line {first['line_no']}: " if first.get("line_no") is not None else ""
    return bad.height, f"{where}{first[raw]}"


def carried_times(df: pl.DataFrame, ts_own: pl.Expr, starts: pl.Expr, state: dict) -> pl.DataFrame:
    """``df`` with each line's ``seq``, its record ``rec`` (``starts`` opens the next; 0: none opened yet) and its
    time: ``ts_own``, the line's own, else the last one before it, else the first after it (``ts_inferred``).
    Sequence, record and last time are carried across chunks in ``state``: a traceback's lines go on with the
    record and take the time of a header cut off into the chunk before."""
    seq0, rec0 = state.get("seq", 0), state.get("rec", 0)
    df = df.with_columns(
        ts_own.cast(TS).alias("ts_own"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"),
        (starts.cum_sum().cast(pl.Int64) + rec0).alias("rec"),
    )
    df = df.with_columns(
        pl.col("ts_own")
        .forward_fill()
        .fill_null(pl.lit(state.get("last_ts"), dtype=TS))
        .backward_fill()
        .alias("ts"),
        pl.col("ts_own").is_null().alias("ts_inferred"),
    )
    state["seq"] = seq0 + df.height
    if df.height:
        state["rec"] = int(df["rec"][-1])
        last = df["ts"].drop_nulls()
        if last.len():
            state["last_ts"] = last[-1]
    return df
