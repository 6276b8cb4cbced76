"""LiteLLM proxy log (text or ``json_logs``) -> ``gateway_attempts``.

Sample (LiteLLM 1.108.7 ``litellm --config``, LITELLM_LOG=INFO, tests/data/litellm/litellm-proxy.log)::

    09:51:42 - LiteLLM Router:INFO: router.py:4244 - litellm.acompletion(model=openai/tiny)\\x1b[31m Exception litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.\\x1b[0m

Formats: LiteLLM's own handler (``HH:MM:SS - <logger>:<LEVEL>: <file>:<line> - <message>``, continuation
lines and tracebacks until the next record, ANSI colours stripped), the stdlib form
``YYYY-MM-DD HH:MM:SS,mmm - LiteLLM Router - INFO - ...`` ([observed] in the format notes), the JSON
lines of ``litellm_settings: json_logs: true`` (``message``, ``level``, ``timestamp``, ``component``),
and uvicorn's access lines ``INFO:     127.0.0.1:56698 - "POST /v1/chat/completions HTTP/1.1" 200 OK``.
Messages: ``litellm/router.py`` and ``litellm/router_utils/fallback_event_handlers.py`` (BerriAI/litellm).

Rows (told apart by ``flags``), because the text carries no request id on router lines and
concurrent requests interleave, so attempts cannot be grouped into requests:

* ``attempt``: one deployment call, ``litellm.acompletion(model=X) 200 OK`` (upstream_status 200) or
  ``... Exception <error>`` (flags ``attempt,exception``, error = the exception text). These describe
  upstream attempts; ``attempt`` / ``attempts_total`` stay null (unknown without an id).
* ``retry`` / ``fallback``: the router's ``Retrying request with num_retries: N``, ``Trying to fallback``,
  ``Falling back to model_group = X`` (upstream = X), ``Successful fallback``, ``No fallback model
  group found``, ``Error occurred while trying to do fallbacks`` lines: not attempts, kept as rows
  with their text in ``error`` so retry/fallback storms are visible on the timeline.
* ``failed``: the proxy's ``_handle_llm_api_exception(): ... litellm_call_id=<id> - <error>``: the
  request failed; request_id = LiteLLM's call id, attempts_total = ``LiteLLM Retried: N`` + 1.
* ``failed,stream``: ``async_data_generator(): Exception occured - <error>``: a streamed answer failed after its
  headers, so after its access line's 200 (no id names the request); upstream_status = the status the error names.
* flags null: a uvicorn access line, the downstream answer (status, method, path).

``gateway_errors``: uvicorn's ``Started server process [N]`` (kind ``start``) and ``Shutting down`` (kind
``shutdown``): what says a file holds the proxy's access lines from its start (diagnose.stream_failures).

Time: text records carry only ``HH:MM:SS``. The date is anchored on the file's modification time (the
last record's day, in --tz) and counted back over midnight rollovers, so text rows are held until
``finish``; uvicorn access lines take the previous record's time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import polars as pl

from logscope.numbers import to_int
from logscope.scalars import int_or_none
from logscope.schemas import TS

from ._common import UVICORN_ACCESS, UVICORN_LEVEL, local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "litellm"
KIND = "gateway"
DESCRIPTION = "LiteLLM proxy log: router attempts, retries, fallbacks, failures (text or json_logs)"
MODE = "lines"
SAMPLES = [
    "09:51:42 - LiteLLM Router:INFO: router.py:4244 - litellm.acompletion(model=openai/tiny)\x1b[31m Exception litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.\x1b[0m",
    "09:51:49 - LiteLLM Router:INFO: fallback_event_handlers.py:816 - Falling back to model_group = backup",
    'INFO:     127.0.0.1:56698 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    '{"message": "Falling back to model_group = backup", "level": "INFO", "timestamp": "2026-11-29T09:53:31.306900", "component": "LiteLLM Router", "logger": "fallback_event_handlers.py:816"}',
]

_ANSI = r"(?:\x1b)?\[[0-9;]*m|\x1b"
_TEXT_HEAD = (
    r"^(?P<hms>\d{2}:\d{2}:\d{2}) - (?P<logger>LiteLLM[A-Za-z ]*):(?P<level>[A-Z]+): \S+:\d+ - (?P<msg>.*)$"
)
_STD_HEAD = (
    r"^(?P<date>\d{4}-\d{2}-\d{2}) (?P<hms>\d{2}:\d{2}:\d{2}),(?P<ms>\d{3}) - "
    r"(?P<logger>LiteLLM[A-Za-z ]*) - (?P<level>[A-Z]+) - (?P<msg>.*)$"
)
_UVICORN = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s{2,}\S"
_ACCESS = "^" + UVICORN_LEVEL + UVICORN_ACCESS
_JSON = r'^\{"message": .*"timestamp": "\d{4}-\d{2}-\d{2}T'
# uvicorn's lifecycle lines (text: 'INFO:     Started server process [8572]'; json_logs: the message alone)
_LIFE = r"^(?:INFO:\s+)?(Started server process|Shutting down)(?: \[\d+\])?\s*$"
_LIFE_KIND = {"Started server process": "start", "Shutting down": "shutdown"}
_DETECT_TEXT = r"^\d{2}:\d{2}:\d{2} - LiteLLM(?: [A-Za-z]+)?:[A-Z]+: \S+:\d+ - "
_DETECT_JSON = r'^\{"message": .*"component": "(?:LiteLLM|uvicorn)'
_ATTEMPT = r"^(?P<fn>[\w.]+)\(model=(?P<model>[^)]*)\)\s*(?:(?P<ok>200 OK)|Exception (?P<err>.*))\s*$"
_FALLBACK = r"(?i)fall(?:ing )?back|fallbacks"
_CALL_ID = r"(?s)_handle_llm_api_exception\(\).*?litellm_call_id=(?P<cid>[0-9a-fA-F-]+) - (?P<err>.*)$"
_RETRIED = r"LiteLLM Retried: (\d+) times"
_MODEL_GROUP = r"Falling back to model_group = (\S+)|Received Model Group=(\S+)"
# the proxy's own failure of a request it was answering
_PROXY_FAIL = r"(?s)^(?:[\w.]+\.)?\w+\(\): Exception occ?ur+ed - ?(?P<err>.*)$"
# ... in the generator that writes a streamed answer's body (proxy_server.py / common_request_processing.py
# 'async_data_generator', 'async_assistants_data_generator'): it runs after the response's headers went out, so
# after uvicorn's access line said 200 (public-2 g09, tests/data/litellm/litellm-proxy-stream.log)
_STREAM_FAIL = r"^(?:[\w.]+\.)?\w*data_generator\(\): Exception occ?ur+ed\b"
# a status the error text names: a number (the upstream's body, 'Error code: 429', status_code=503), else LiteLLM's
# exception class (litellm/exceptions.py: each class carries its status)
_CODE_IN_TEXT = r"(?:Error code:? |status_code[=:] ?|\\?\"code\\?\": ?|'code': )(\d{3})\b"
_CLASSES = {
    "RateLimitError": 429,
    "AuthenticationError": 401,
    "PermissionDeniedError": 403,
    "NotFoundError": 404,
    "BadRequestError": 400,
    "ContextWindowExceededError": 400,
    "UnprocessableEntityError": 422,
    "Timeout": 408,
    "InternalServerError": 500,
    "ServiceUnavailableError": 503,
    "BadGatewayError": 502,
}
_CLASS = r"litellm\.(" + "|".join(_CLASSES) + r")\b"
_NO_ANSWER = (
    r"(?i)Exception - (?:Connection error|Request timed out|Timeout|Connection refused|Cannot connect)"
)


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    g = per_head(
        nonblank(frame),
        n,
        text=share(_DETECT_TEXT),
        std=share(_STD_HEAD),
        js=share(_DETECT_JSON),
        uvicorn=share(_UVICORN),
    )
    best = pl.max_horizontal(pl.col("text") + pl.col("std"), "js")
    # a LiteLLM log is mostly its own records, plus uvicorn lines and continuations
    more = pl.min_horizontal(pl.lit(1.0), best + 0.5 * pl.col("uvicorn") + 0.3)
    return g.select(pl.when(best > 0).then(more).otherwise(best)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _classify(msg: pl.Expr, level: pl.Expr) -> list[pl.Expr]:
    """Row columns from a record's message (ANSI already stripped)."""
    att = msg.str.extract_groups(_ATTEMPT)
    call = msg.str.extract_groups(_CALL_ID)
    is_att = att.struct.field("fn").is_not_null()
    is_fail = call.struct.field("cid").is_not_null()
    proxy_fail = msg.str.extract_groups(_PROXY_FAIL).struct.field("err")
    is_fail = is_fail | proxy_fail.is_not_null()
    is_retry = msg.str.contains(r"Retrying request with num_retries")
    is_fb = msg.str.contains(_FALLBACK) & ~is_att & ~is_fail
    # the class says the provider's status only when the provider answered ('OpenAIException - <its message>'),
    # not when no answer came ('Connection error.', a timeout: LiteLLM made that status itself)
    answered = msg.str.contains(r"\w+Exception - ") & ~msg.str.contains(_NO_ANSWER)
    code = pl.coalesce(
        msg.str.extract(_CODE_IN_TEXT).cast(pl.Int64, strict=False),
        pl.when(answered).then(
            msg.str.extract(_CLASS).replace_strict(_CLASSES, default=None, return_dtype=pl.Int64)
        ),
    )
    retried = msg.str.extract(_RETRIED, 1).pipe(to_int) + 1
    flags = (
        pl.when(is_att & att.struct.field("ok").is_not_null())
        .then(pl.lit("attempt"))
        .when(is_att)
        .then(pl.lit("attempt,exception"))
        .when(is_fail & msg.str.contains(_STREAM_FAIL))
        .then(pl.lit("failed,stream"))
        .when(is_fail)
        .then(pl.lit("failed"))
        .when(is_retry)
        .then(pl.lit("retry"))
        .when(is_fb)
        .then(pl.lit("fallback"))
    )
    first_line = msg.str.split("\n").list.first()
    return [
        flags.alias("flags"),
        pl.when(is_att)
        .then(att.struct.field("model"))
        .otherwise(pl.coalesce(msg.str.extract(_MODEL_GROUP, 1), msg.str.extract(_MODEL_GROUP, 2)))
        .alias("upstream"),
        pl.when(is_att & att.struct.field("ok").is_not_null())
        .then(pl.lit(200, pl.Int64))
        .when(is_att | is_fail | is_fb)
        .then(code)  # the status the error text names
        .alias("upstream_status"),
        pl.when(is_att)
        .then(att.struct.field("err"))
        .when(is_fail)
        .then(pl.coalesce(call.struct.field("err"), proxy_fail).str.split("\n").list.first())
        .when(is_retry | is_fb)
        .then(first_line)
        .str.slice(0, 500)
        .alias("error"),
        call.struct.field("cid").alias("request_id"),
        # 'LiteLLM Retried: N times' on a failure or on one deployment's exception: N + 1 attempts
        pl.when(is_fail | (is_att & att.struct.field("ok").is_null())).then(retried).alias("attempts_total"),
    ]


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    line = pl.col("line").str.strip_suffix("\r")
    # JSON lines keep their escapes until decoded; text lines lose their colours now
    is_json = lines["line"].str.contains(_JSON)
    f = lines.with_columns(
        pl.when(pl.lit(is_json)).then(line).otherwise(line.str.replace_all(_ANSI, "")).alias("clean")
    )
    js = f.filter(is_json)
    txt = f.filter(~is_json)
    tables: dict[str, pl.DataFrame] = {}
    assumptions: list[str] = []
    rec_ok = pl.repeat(False, f.height, dtype=pl.Boolean, eager=True)
    if js.height:
        rows, life = _json_rows(js, ctx)
        if rows.height:
            tables["gateway_attempts"] = rows
        if life.height:
            tables["gateway_errors"] = life
        assumptions.append(f"LiteLLM json_logs timestamps have no zone: read as {ctx.tz} (--tz)")
    if txt.height:
        ok_txt = _text_chunk(txt, ctx, state)
        rec_ok = f.select(pl.col("line_no").is_in(ok_txt.implode())).to_series()
    ok = (pl.Series(is_json) | rec_ok).alias("ok")
    return ChunkResult(tables=tables, recognized=ok, assumptions=assumptions)


def _json_rows(js: pl.DataFrame, ctx: ParseContext) -> tuple[pl.DataFrame, pl.DataFrame]:
    g = js.select(
        "line_no",
        pl.col("clean").str.json_path_match("$.message").str.replace_all(_ANSI, "").alias("msg"),
        pl.col("clean").str.json_path_match("$.level").alias("level"),
        pl.col("clean").str.json_path_match("$.timestamp").alias("stamp"),
        pl.col("clean").str.json_path_match("$.component").alias("component"),
    )
    ts = local_to_utc(
        pl.col("stamp").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", time_unit="us", strict=False), ctx.tz
    )
    acc = pl.col("msg").str.extract_groups("^" + UVICORN_ACCESS)
    is_acc = (pl.col("component") == "uvicorn.access") & acc.struct.field("status").is_not_null()
    life = pl.when(pl.col("component") == "uvicorn.error").then(pl.col("msg").str.extract(_LIFE, 1))
    g = g.with_columns(
        *_classify(pl.col("msg"), pl.col("level")),
        ts.alias("ts"),
        acc.alias("acc"),
        is_acc.alias("is_acc"),
        life.alias("life"),
    )
    return _finish_rows(g.filter(pl.col("flags").is_not_null() | pl.col("is_acc")), ctx), _life_rows(g, ctx)


def _source(g: pl.DataFrame, ctx: ParseContext) -> pl.Expr:
    """The file a row was read from: a held text row's own (``_source``), else the chunk's."""
    return (pl.col("_source") if "_source" in g.columns else pl.lit(ctx.source)).alias("source")


def _life_rows(g: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """uvicorn's start and stop lines (column ``life``) as ``gateway_errors`` rows."""
    g = g.filter(pl.col("life").is_not_null())
    return g.select(
        pl.col("ts").cast(TS).alias("ts"),
        _source(g, ctx),
        pl.lit("litellm").alias("gateway"),
        pl.lit("info").alias("level"),
        pl.col("life").replace_strict(_LIFE_KIND, return_dtype=pl.String).alias("kind"),
        pl.col("life").alias("message"),
        pl.lit("uvicorn").alias("logger"),
        "line_no",
    )


def _finish_rows(g: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    acc = pl.col("acc")
    return g.select(
        pl.col("ts").cast(TS).alias("ts_start"),
        pl.col("ts").cast(TS).alias("ts_end"),
        _source(g, ctx),
        pl.lit("litellm").alias("gateway"),
        "request_id",
        "attempts_total",
        "upstream",
        pl.when(pl.col("is_acc")).then(acc.struct.field("status").pipe(to_int)).alias("status"),
        "upstream_status",
        "flags",
        "error",
        pl.when(pl.col("is_acc")).then(acc.struct.field("method")).alias("method"),
        pl.when(pl.col("is_acc")).then(acc.struct.field("path")).alias("path"),
        "line_no",
    )


def _carry(e: pl.Expr, value) -> pl.Expr:
    """Fill the chunk's leading nulls with what the previous chunk ended on."""
    return e if value is None else e.fill_null(pl.lit(value))


def _text_chunk(txt: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.Series:
    """Parse text lines; rows are buffered in ``state`` (the date is known only at the end)."""
    head = pl.col("clean").str.extract_groups(_TEXT_HEAD)
    std = pl.col("clean").str.extract_groups(_STD_HEAD)
    f = txt.with_columns(head.alias("h"), std.alias("s"))
    f = f.with_columns(
        pl.coalesce(pl.col("h").struct.field("hms"), pl.col("s").struct.field("hms")).alias("hms"),
        pl.col("s").struct.field("date").alias("date"),
        pl.col("s").struct.field("ms").alias("ms"),
        pl.coalesce(pl.col("h").struct.field("msg"), pl.col("s").struct.field("msg")).alias("msg"),
        pl.coalesce(pl.col("h").struct.field("level"), pl.col("s").struct.field("level")).alias("level"),
        pl.col("clean").str.contains(_UVICORN).alias("is_uv"),
    )
    is_head = pl.col("hms").is_not_null()
    # record kind carried forward: continuation lines belong to the last LiteLLM record
    kind = pl.when(is_head).then(pl.lit("litellm")).when(pl.col("is_uv")).then(pl.lit("uvicorn"))
    secs = (
        pl.col("hms")
        .str.split(":")
        .list.eval(pl.element().pipe(to_int))
        .list.to_struct(fields=["H", "M", "S"])
    )
    f = f.with_columns(
        kind.alias("kind"),
        is_head.cum_sum().alias("_rec"),
        pl.when(is_head)
        .then(secs.struct.field("H") * 3600 + secs.struct.field("M") * 60 + secs.struct.field("S"))
        .alias("secs"),
    )
    # midnight rollover: a record more than an hour earlier than the previous one starts a new day
    prev = _carry(pl.col("secs").shift(1), state.get("last_secs"))
    heads = f.filter(is_head).with_columns(((prev - pl.col("secs")) > 3600).fill_null(False).alias("roll"))
    heads = heads.with_columns((pl.col("roll").cum_sum() + state.get("day", 0)).alias("day"))
    f = f.join(heads.select("line_no", "day"), on="line_no", how="left")
    f = f.with_columns(
        _carry(pl.col("kind").fill_null(strategy="forward"), state.get("last_kind")),
        _carry(pl.col("hms").fill_null(strategy="forward"), state.get("last_hms")).alias("hms_ff"),
        _carry(pl.col("day").fill_null(strategy="forward"), state.get("day", 0)).alias("day"),
        _carry(pl.col("date").fill_null(strategy="forward"), state.get("last_date")).alias("date"),
        (pl.col("_rec") + state.get("rec", 0)).alias("rec"),
    )
    ok = f.filter(is_head | pl.col("is_uv") | (pl.col("kind") == "litellm"))["line_no"]
    acc = pl.col("clean").str.extract_groups(_ACCESS)
    life = pl.col("clean").str.extract(_LIFE, 1)
    rows = f.filter(is_head | acc.struct.field("status").is_not_null() | life.is_not_null()).with_columns(
        *_classify(pl.col("msg"), pl.col("level")),
        acc.alias("acc"),
        acc.struct.field("status").is_not_null().alias("is_acc"),
        pl.when(~is_head).then(life).alias("life"),
    )
    rows = rows.filter(pl.col("flags").is_not_null() | pl.col("is_acc") | pl.col("life").is_not_null())
    retried = f.filter(pl.col("kind") == "litellm").select(
        "rec", pl.col("clean").str.extract(_RETRIED, 1).pipe(to_int).alias("n")
    )
    # held to the stream's end (its date): each row keeps its own file's name (a rotated set's files are one stream)
    rows = rows.drop("h", "s", "clean").with_columns(pl.lit(ctx.source).alias("_source"))
    state.setdefault("text_rows", []).append(rows)
    state.setdefault("retried", []).append(retried.drop_nulls())
    last = f.tail(1)
    if heads.height:
        state["last_secs"] = heads["secs"][-1]
        state["day"] = heads["day"][-1]
    state["last_kind"] = last["kind"][0]
    state["last_hms"] = last["hms_ff"][0]
    state["last_date"] = last["date"][0]
    state["rec"] = int_or_none(f["rec"].max()) or 0
    return ok


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    frames = state.pop("text_rows", [])
    if not frames or not sum(fr.height for fr in frames):
        return None
    rows = pl.concat(frames, how="vertical_relaxed")
    retried = pl.concat(state.pop("retried", []))
    n = retried.group_by("rec").agg(pl.col("n").max())
    rows = rows.join(n, on="rec", how="left").with_columns(
        pl.when(pl.col("flags").str.starts_with("failed"))
        .then(pl.coalesce("attempts_total", pl.col("n") + 1))
        .otherwise(pl.col("attempts_total"))
        .alias("attempts_total")
    )
    assumptions = []
    anchor, how = _anchor_date(ctx)
    last_day = state.get("day", 0)
    day0 = pl.lit(anchor) - pl.duration(days=last_day - pl.col("day"))
    date = pl.coalesce(pl.col("date").str.to_date("%Y-%m-%d", strict=False), day0)
    stamp = date.cast(pl.Datetime("us")) + pl.col("hms_ff").str.to_time("%H:%M:%S", strict=False).cast(
        pl.Duration("us")
    )
    stamp = stamp + pl.duration(milliseconds=pl.col("ms").pipe(to_int).fill_null(0))
    rows = rows.with_columns(local_to_utc(stamp, ctx.tz).alias("ts"))
    if rows["date"].is_null().any():
        assumptions.append(
            f"LiteLLM text records carry only HH:MM:SS: the last record's day is {anchor} ({how}), earlier days "
            f"counted back over midnight rollovers; times read as {ctx.tz} (--tz)"
        )
    if rows["is_acc"].any():
        assumptions.append("uvicorn access lines carry no time: they take the previous LiteLLM record's time")
    tables = {"gateway_attempts": _finish_rows(rows.filter(pl.col("life").is_null()), ctx)}
    life = _life_rows(rows, ctx)
    if life.height:
        tables["gateway_errors"] = life
    return ChunkResult(tables=tables, assumptions=assumptions)


def _anchor_date(ctx: ParseContext):
    """Day of the last record: the file's modification time, else a reference stamp, else the year."""
    if ctx.file_mtime is not None:
        return ctx.file_mtime.astimezone(ZoneInfo(ctx.tz)).date(), "the file's modification time"
    if ctx.reference_ts is not None:
        return ctx.reference_ts.astimezone(
            ZoneInfo(ctx.tz)
        ).date(), "a full timestamp elsewhere in the folder"
    return (datetime(ctx.year, 1, 1) + timedelta(0)).date(), f"1 January {ctx.year}: nothing better was known"
