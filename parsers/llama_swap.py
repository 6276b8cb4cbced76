"""llama-swap's proxy log (mostlygeek/llama-swap), with the output of the servers it runs -> ``gateway_attempts``,
``server_events``.

Samples (tests/data/llama-swap/README.md names each thread)::

    [INFO] Request 127.0.0.1 "POST /v1/chat/completions HTTP/1.1" 502 54 "Python/3.11 aiohttp/3.11.11" 2.77018715s
    [DEBUG] <qwen-coder-14B-FIM> request /upstream/qwen-coder-14B-FIM/infill - start: 0s, total: 123.181511ms
    [llama-swap] 172.18.0.1 [2025-03-20 20:41:16] "GET /upstream/gemma-3-12b/ HTTP/1.1" 200 1260534 "curl/8.5.0" 10.260119763s

Line kinds (anchors and fields):

* access, since 2025-04: ``^[LEVEL] Request <client> "<method> <path> HTTP/<v>" <status> <bytes> "<ua>" <Go duration>$``
  (no time of its own); before: ``^[llama-swap] <client> [<YYYY-MM-DD HH:MM:SS>] "..." <status> <bytes> "<ua>" <dur>$``
  (local time, when the answer ended). One gateway row each: ``request_time_s`` the duration, ``gateway`` 'llama-swap'.
* timing: ``^[DEBUG] <model> request <path> - start: <dur>, total: <dur>$`` (``Process [model]`` in mid-2025): the
  model and the upstream's times of the next access line for that path (``upstream``; ``connect_s`` = 'start', the
  wait for the model's process to be ready, a swap; ``duration_s`` = 'total').
* llama-swap's other lines (``^[LEVEL] ``) and the backend's (llama.cpp's ``INFO [ function] msg | k=v``, ``srv  ...``,
  ``slot ...``, ``main: ...``, its ggml/CUDA lines): read; the backend's own access lines (``log_server_request ...
  status=200 method="POST" path="..."``, ``srv  log_server_r: request: GET /health 127.0.0.1 200``) are
  ``server_events`` ``http_access``, and a death in its words (``fattn.cu:66: fatal error``, llama-swap's ``signal:
  aborted (core dumped)``) an ``engine_dead`` event by the event lexicon (parsers/_lexicon.py).

Go durations ('1m10.727207572s', '273.281µs') are read by their units.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from . import _lexicon as lexicon
from ._common import epoch_to_utc, local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "llama_swap"
KIND = "gateway"
MODE = "lines"
DESCRIPTION = "llama-swap proxy log (access lines, model timings) with its backends' output (their access lines, deaths)"
SAMPLES = [
    '[INFO] Request 127.0.0.1 "POST /v1/chat/completions HTTP/1.1" 200 136633 "Python/3.11 aiohttp/3.11.11" 1m10.727207572s',
    "[DEBUG] Process [deepseek-v3] request /v1/chat/completions - start: 11.260061323s, total: 1m10.727098281s",
    '[INFO] Request 127.0.0.1 "POST /v1/chat/completions HTTP/1.1" 502 54 "Python/3.11 aiohttp/3.11.11" 2.77018715s',
    "[DEBUG] No-swap, using existing process for model [deepseek-v3]",
]

_LEVEL = r"\[(?:INFO|DEBUG|WARN|ERROR)\] "
_ACCESS = (
    r"^(?:\[(?:INFO|DEBUG|WARN|ERROR)\] Request |\[llama-swap\] )(?P<addr>\S+) (?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] )?"
    r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3}) (?P<bytes>-?\d+) "(?P<ua>[^"]*)" (?P<dur>\S+)\s*$'
)
_TIMING = (
    r"^\[DEBUG\] (?:Process \[(?P<m1>[^\]]+)\]|<(?P<m2>[^>]+)>) request (?P<path>\S+) - start: (?P<start>\S+), "
    r"total: (?P<total>\S+)\s*$"
)
# the backend's lines: llama.cpp's old server log, its new one, its start-up and ggml/CUDA output
_BACKEND = (
    r"^(?:(?:INFO|WARN|ERR|VERB|DEBUG) \[\s*\w+\] .* \| |srv\s+\w+: |slot\s+\w+: |main: |llama_|llm_load_|ggml_|load_tensors:"
    r"|build: |system_info: |\S+\.(?:cu|cpp|c|h):\d+: )"
)
_BACKEND_ACCESS = (
    r'log_server_request\] request \| .*?timestamp=(?P<epoch>\d+) .*?status=(?P<status>\d{3}) method="(?P<method>[A-Z]+)" '
    r'path="(?P<path>[^"]*)"|^srv\s+log_server_r: request: (?P<m2>[A-Z]+) (?P<p2>\S+) \S+ (?P<s2>\d{3})\s*$'
)
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    mine = s.str.contains(_ACCESS) | s.str.contains(_TIMING)
    known = mine | s.str.contains("^" + _LEVEL) | s.str.contains(_BACKEND)
    g = per_head(nonblank(frame, 200), n, mine=mine.any(), m=known.mean())
    return g.select(pl.when(pl.col("mine")).then(0.4 + 0.6 * pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def go_duration(e: pl.Expr) -> pl.Expr:
    """Seconds of a Go ``time.Duration`` string ('1m10.5s', '2.77018715s', '273.281µs', '0s')."""
    parts = e.str.extract_all(r"[\d.]+(?:h|ms|m|s|µs|us|ns)")
    secs = parts.list.eval(
        pl.element().str.extract(r"^([\d.]+)").cast(pl.Float64)
        * pl.element().str.extract(r"(h|ms|m|s|µs|us|ns)$").replace_strict(_UNITS, return_dtype=pl.Float64)
    )
    return pl.when(parts.list.len() > 0).then(secs.list.sum())


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    f = lines.select("line_no", pl.col("line").str.strip_chars_end("\r"))
    s = pl.col("line")
    f = f.with_columns(
        s.str.extract_groups(_ACCESS).alias("a"),
        s.str.extract_groups(_TIMING).alias("t"),
        s.str.extract_groups(_BACKEND_ACCESS).alias("b"),
    )
    is_acc = pl.col("a").struct.field("status").is_not_null()
    is_tim = pl.col("t").struct.field("path").is_not_null()
    known = (
        is_acc
        | is_tim
        | s.str.contains("^" + _LEVEL)
        | s.str.contains(_BACKEND)
        | (s.str.strip_chars() == "")
    )
    f = f.with_columns(known.alias("ok"))
    tables: dict[str, pl.DataFrame] = {}
    notes = ["llama-swap's access lines since 2025-04 carry no time: their rows have none"]
    rows = _access(f, ctx, state)
    if rows.height:
        tables["gateway_attempts"] = rows
        if bool(rows["ts_end"].is_not_null().any()):
            notes.append(f"llama-swap's older access lines: their time is local, read as {ctx.tz} (--tz)")
    events = [_backend_access(f, ctx)]
    dead, hit = lexicon.scan(lines, ctx.source, ctx.replica, ctx.year, ctx.tz)
    events.append(dead)
    events = [e for e in events if e.height]
    if events:
        tables["server_events"] = pl.concat(events, how="diagonal_relaxed")
    ok = f["ok"] | hit if hit.len() else f["ok"]
    return ChunkResult(tables=tables, recognized=ok, assumptions=notes)


def _access(f: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    a, t = pl.col("a"), pl.col("t")
    tim = f.filter(t.struct.field("path").is_not_null()).select(
        "line_no",
        t.struct.field("path").alias("path"),
        pl.coalesce(t.struct.field("m1"), t.struct.field("m2")).alias("model"),
        go_duration(t.struct.field("start")).alias("connect_s"),
        go_duration(t.struct.field("total")).alias("duration_s"),
    )
    acc = f.filter(a.struct.field("status").is_not_null()).select("line_no", a.struct.unnest())
    if acc.height == 0:
        return acc.clear()
    # a timing line belongs to the next access line of its path (carried from the chunk before)
    prev = state.pop("timing", None)
    if prev is not None:
        tim = pl.concat([prev, tim])
    acc = acc.sort("line_no").join_asof(
        tim.sort("line_no").rename({"line_no": "_t"}).with_columns(pl.col("_t").alias("line_no")),
        on="line_no",
        by="path",
        strategy="backward",
        check_sortedness=False,
    )
    # one timing line, one access line: the first after it (a later one of the path, a 502, has none)
    first = pl.col("_t").is_not_null() & pl.col("_t").is_first_distinct()
    acc = acc.with_columns(
        pl.when(first).then(pl.col(c)).alias(c) for c in ("model", "connect_s", "duration_s")
    )
    used = acc.filter(first)["_t"]
    left = tim.filter(~pl.col("line_no").is_in(used.implode()))
    if left.height:
        state["timing"] = left.tail(100)
    dur = go_duration(pl.col("dur"))
    stamp = local_to_utc(
        pl.col("ts").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"), ctx.tz
    )
    status = pl.col("status").pipe(to_int)
    return acc.select(
        (stamp - pl.duration(microseconds=(dur * 1e6).round(0).pipe(to_int))).cast(TS).alias("ts_start"),
        stamp.cast(TS).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit("llama-swap").alias("gateway"),
        pl.col("model").alias("upstream"),
        status.alias("status"),
        # a 502 llama-swap made itself (the backend gone) is no upstream status
        pl.when(status != 502).then(status).alias("upstream_status"),
        "connect_s",
        "duration_s",
        dur.alias("request_time_s"),
        pl.when(status == 502).then(pl.lit("bad_gateway")).alias("flags"),
        "method",
        "path",
        pl.col("bytes").cast(pl.Int64, strict=False).alias("bytes_sent"),
        pl.col("ua").alias("user_agent"),
        "line_no",
    )


def _backend_access(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The backend's own access lines (llama.cpp's server): it answered, with this status."""
    b = pl.col("b")
    got = f.filter(pl.coalesce(b.struct.field("status"), b.struct.field("s2")).is_not_null())
    if got.height == 0:
        return got.clear()
    return got.select(
        epoch_to_utc(b.struct.field("epoch").cast(pl.Float64)).cast(TS).alias("ts"),
        pl.lit(False).alias("ts_inferred"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("http_access").alias("kind"),
        pl.col("line").str.slice(0, 500).alias("message"),
        "line_no",
        pl.lit(1, dtype=pl.Int64).alias("line_count"),
        pl.coalesce(b.struct.field("method"), b.struct.field("m2")).alias("http_method"),
        pl.coalesce(b.struct.field("path"), b.struct.field("p2")).alias("http_path"),
        pl.coalesce(b.struct.field("status"), b.struct.field("s2")).pipe(to_int).alias("http_status"),
    )
