"""Text Generation Inference (TGI) log, text output: the launcher's lines (``text-generation-launcher``: shards,
download, the shards' Python logs it forwards) and the router's (``text_generation_router``, ``_v3``) in one
stream -> server_request_events, server_events.

Samples (tests/data/unseen/tgi-*, four TGI issues, 1.3 to 3.0.2)::

    2023-12-22T00:21:24.202169Z  INFO compat_generate{default_return_full_text=true}:generate{parameters=GenerateParameters { ... max_new_tokens: Some(40), ... } total_time="2.458150804s" validation_time="13.678487ms" queue_time="184.26µs" inference_time="2.444288229s" time_per_token="61.107205ms" seed="None"}: text_generation_router::server: router/src/server.rs:289: Success
    2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start

Upstream (huggingface/text-generation-inference ``router/src/logging.rs``, ``launcher/src/main.rs``): tracing's
``fmt`` layer, full format: an RFC 3339 UTC stamp, the level padded to five, the open spans
(``name{field=value ...}:name2: ``), the target, the router's ``file:line`` (the launcher writes none), the message,
the event's fields (``rank=0``); ANSI colours unless LOG_COLORIZE=1 (cut here). A message of several lines (a
shard's traceback the launcher forwards) goes on raw on the next lines. ``--json-output`` writes one JSON object a
line instead (tracing-subscriber's JSON: "timestamp", "level", the message at the top (the router) or in "fields"
(the launcher), "target"); such a line is read as the text line it stands for: the same stamp, level, target and
message, so the same rules. One real excerpt of it was found whole (tests/data/unseen/tgi-gke-*: the router's
start-up), none with a request's 'Success' or a shard's death: a JSON line's span fields (the request's times)
are not read, and its Success gives no request event (its times would be unknown).

Each request the router answers is one 'Success' line at its end (``generate_internal`` / ``generate_stream``),
its span holding its times, Rust ``Duration`` debug text ('2.458150804s', '13.678487ms', '184.26µs'):
``total_time`` from the router's receipt to the answer, ``validation_time`` to its queueing, ``queue_time`` from
there to the batch that took it, ``inference_time``. They are read as the request's events on the router's clock:
'received' (the stamp less total_time), 'added' (received plus validation_time: it entered the queue) and
'finished' (the stamp); the durations are from the router's monotonic clock, the stamp its wall clock, so the
three times are the router's, never the client's. TGI logs no request id: a request is named by its span and the
stamp of its end ('generate@2023-12-22T00:21:24.202169Z'). 'Request failed during generation' (the router's
``send_error``, one a request) is a 'failed' request event, never a server event (the batch's own error line,
``text_generation_client`` / ``_v3::client`` 'Server error: ...', is that one). Shard deaths ('Shard process was
signaled to shutdown with signal 4', 'Shard 0 failed to start', 'Webserver Crashed', 'Error: ShardCannotStart')
are engine_dead events; OOM and the other phrases are the lexicon's (parsers/_lexicon.py).
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int

from . import _carry
from . import _lexicon as lexicon
from ._common import ascii_classes, carried_times
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "tgi_router"
KIND = "server"
MODE = "lines"
DESCRIPTION = (
    "Text Generation Inference (TGI) launcher and router log (text output): each request's Success line and its "
    "times, failed requests, shard deaths, OOM"
)
SAMPLES = [
    # tests/data/unseen/tgi-1374-... (TGI 1.3.3, https://github.com/huggingface/text-generation-inference/issues/1374)
    "2023-12-22T00:21:24.202169Z  INFO compat_generate{default_return_full_text=true}:generate{parameters=Generate"
    "Parameters { best_of: None, temperature: None, repetition_penalty: None, top_k: None, top_p: None, typical_p: "
    "None, do_sample: false, max_new_tokens: Some(40), return_full_text: Some(false), stop: [], truncate: None, wat"
    'ermark: false, details: true, decoder_input_details: false, seed: None, top_n_tokens: None } total_time="2.45'
    '8150804s" validation_time="13.678487ms" queue_time="184.26\u00b5s" inference_time="2.444288229s" time_per_token'
    '="61.107205ms" seed="None"}: text_generation_router::server: router/src/server.rs:289: Success',
    # tests/data/unseen/tgi-1627-... (issue 1627)
    "2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to "
    "shutdown with signal 4 rank=0",
    "2024-03-06T17:53:31.149443Z ERROR text_generation_launcher: Shard 0 failed to start",
    # tests/data/unseen/tgi-2593-... (TGI 3.0.2, issue 2593)
    "2025-05-26T10:46:34.737206Z ERROR batch{batch_size=1}:prefill:clear_cache{batch_id=Some(620)}:clear_cache{ba"
    "tch_id=Some(620)}: text_generation_router_v3::client: backends/v3/src/client/mod.rs:45: Server error: Unexpect"
    "ed <class 'RuntimeError'>: CUDA error: an illegal memory access was encountered",
    # tests/data/unseen/tgi-gke-... (TGI 1.4.3 --json-output, https://github.com/IshmeetMehta/llm-on-gke)
    '{"timestamp":"2024-03-09T05:08:19.961136Z","level":"INFO","message":"Setting max batch total tokens to 133696'
    '","target":"text_generation_router","filename":"router/src/main.rs","line_number":328}',
]

_ANSI = r"\x1b\[[0-9;]*m"
_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z"
# the stamp and the level (tracing pads it to five: 'Z  INFO', 'Z ERROR')
_HEAD = ascii_classes(rf"^(?P<stamp>{_STAMP}) +(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) ")
_HEAD_SPAN = ascii_classes(rf"^{_STAMP} +(?:TRACE|DEBUG|INFO|WARN|ERROR) ")
# after the open spans (none, or 'a{...}:b: '): TGI's target, the router's file:line, the message. The spans end at
# the first ': text_generation_' (a literal split: a span's fields hold ': ' in GenerateParameters' debug text)
_BODY = ascii_classes(
    r"^(?P<target>text_generation_[a-z0-9_]+(?:::[a-z0-9_]+)*): (?:(?P<file>[\w./-]+\.rs):\d+: )?(?P<msg>.*)$"
)
# detection: a TGI target after the spans (of a head line's first 600 characters)
_TARGET = ascii_classes(
    r"^(?:.*?: )??text_generation_(?:router|launcher|client)[a-z0-9_]*(?:::[a-z0-9_]+)*: "
)
_END = ascii_classes(r"\}: text_generation_router[a-z0-9_]*::server: (?:[\w./-]+\.rs:\d+: )?Success$")
# --json-output: a line of tracing's JSON (a paste may indent it), its target TGI's (anywhere in the line: the
# launcher's Args message runs long)
_JSON_HEAD = ascii_classes(
    r'^\s*\{"timestamp":"\d{4}-\d\d-\d\dT[^"]*Z","level":"(?:TRACE|DEBUG|INFO|WARN|ERROR)",'
)
_JSON_TARGET = r'"target":"text_generation_(?:router|launcher|client)[a-z0-9_]*(?:::[a-z0-9_]+)*"'
# a raw line of a forwarded traceback (a paste may start inside one)
_TB = ascii_classes(
    r"^(?:\s|Traceback \(most recent call last\)|File \"|[A-Za-z_][\w.]*(?:Error|Exception)\b|Error: \w+$)"
)
# a duration field of the request's span: Rust's Duration debug text, its quotes unescaped (a user's string in
# the parameters' debug text has its quotes escaped: never matched)
_DUR = r'[{{ ]{name}="(?P<v>[\d.]+)(?P<u>ns|[\u00b5\u03bcu]s|ms|s)"'
_UNIT_S = {"ns": 1e-9, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
# the span that holds the times is the last one opened before them ('compat_generate{..}:generate{.. total_time=..'):
# its name is the request's route ('generate', 'generate_stream', 'chat_completions')
_SPAN_OPEN = ascii_classes(r"(?:^|:)\w+\{")
_FAILED = "Request failed during generation: "
# the launcher's and the router's own words, first match wins after the lexicon's (the cause before the death)
_OWN_RULES = [
    (
        "engine_dead",
        "detail",
        r"Shard process was signaled to shutdown|Shard \d+ failed to start|Shard \d+ crashed|Webserver Crashed"
        r"|(?m:^Error: (?:ShardCannotStart|ShardFailed|WebserverFailed)$)",  # the launcher's exit, a raw line
    ),
    ("capacity", "message", r"^Setting max batch total tokens to \d+"),
    ("server_ready", "message", r"^Connected$"),
    ("server_start", "message", r"^Args \{|^Starting shard(?: rank=\d+)?$"),
    ("server_stop", "message", r"^Shutting down shards$|^signal received, starting graceful shutdown"),
    ("error", "level", r"^ERROR$"),
]
_KIND_RULES = [(kind, col, pat) for kind, col, pat, _ in lexicon.RULES] + _OWN_RULES
OOM_BATCH = "oom_batch"  # the kind of a batch's OOM, which TGI survives


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line").str.slice(0, 600).str.replace_all(_ANSI, "")
    hdr = s.str.contains(_HEAD_SPAN)
    js = s.str.contains(_JSON_HEAD)
    # a request's Success line: its target follows the span's parameters, past the head's first 600 characters
    known = hdr & (
        s.str.replace(_HEAD_SPAN, "").str.contains(_TARGET) | pl.col("line").str.tail(120).str.contains(_END)
    )
    known = known | js & pl.col("line").str.contains(_JSON_TARGET)
    g = per_head(nonblank(frame, 200), n, known=known.any(), m=(hdr | js | s.str.contains(_TB)).mean())
    return g.select(pl.when(pl.col("known")).then(0.3 + 0.7 * pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    df = _rows(lines, state)
    reqs = _requests(df, ctx)
    # the last record may go on in the next chunk (or the next file of a rotated set: it keeps its file's name)
    records = _carry.hold(_carry.resume(df, ctx, state), ctx, state)
    # a header line, a line of a record one opened, or (before the first header) a traceback's line
    ok = pl.col("stamp").is_not_null() | (pl.col("rec") > 0) | pl.col("msg").str.contains(_TB)
    notes = []
    if bool(df["ts_inferred"].any()):
        notes.append("TGI lines without a stamp (a forwarded traceback) take the time of the line before")
    return ChunkResult(
        tables={"server_request_events": reqs, "server_events": _carry.named_events(_events, records, ctx)},
        recognized=df.select(ok.fill_null(False).alias("ok"))["ok"],
        assumptions=notes,
    )


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    carry, named = _carry.finished(ctx, state)
    if carry is None:
        return None
    return ChunkResult(tables={"server_events": _events(carry, named)})


def _rows(lines: pl.DataFrame, state: dict) -> pl.DataFrame:
    line = pl.col("line").str.strip_chars_end("\r").str.replace_all(_ANSI, "")
    df = lines.select("line_no", line.alias("line"))
    df = df.with_columns(pl.col("line").str.extract_groups(_HEAD).alias("h")).unnest("h")
    js = pl.col("line").str.contains(_JSON_HEAD)
    jv = pl.col("line").str.strip_chars()
    df = df.with_columns(
        js.alias("_json"),
        pl.when(js).then(jv.str.json_path_match("$.timestamp")).alias("_jstamp"),
        pl.when(js).then(jv.str.json_path_match("$.level")).alias("_jlevel"),
        pl.when(js).then(jv.str.json_path_match("$.target")).alias("_jtarget"),
        pl.when(js)
        .then(pl.coalesce(jv.str.json_path_match("$.fields.message"), jv.str.json_path_match("$.message")))
        .alias("_jmsg"),
    )
    df = df.with_columns(
        pl.coalesce("_jstamp", "stamp").alias("stamp"), pl.coalesce("_jlevel", "level").alias("level")
    )
    rest = pl.when(pl.col("stamp").is_not_null()).then(pl.col("line").str.replace(_HEAD_SPAN, ""))
    parts = (pl.lit(": ") + rest).str.splitn(": text_generation_", 2)
    df = df.with_columns(
        parts.struct.field("field_0").str.strip_prefix(": ").alias("spans"),
        (pl.lit("text_generation_") + parts.struct.field("field_1")).str.extract_groups(_BODY).alias("b"),
    ).unnest("b")
    df = df.with_columns(
        # a header line without a TGI target (another crate's): its message is the rest of the line
        pl.coalesce("msg", rest, pl.col("line")).alias("msg"),
        pl.when(pl.col("target").is_not_null()).then("spans").alias("spans"),
    )
    # a JSON line stands for its text line: its target and message (its span fields are not read: see above)
    df = df.with_columns(
        pl.when("_json").then("_jtarget").otherwise("target").alias("target"),
        pl.when("_json").then(pl.coalesce("_jmsg", pl.lit(""))).otherwise("msg").alias("msg"),
        pl.when("_json").then(None).otherwise("spans").alias("spans"),
    ).drop("_jstamp", "_jlevel", "_jtarget", "_jmsg")
    own = pl.col("stamp").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", strict=False, time_unit="us")
    return carried_times(df, own.dt.replace_time_zone("UTC"), pl.col("stamp").is_not_null(), state)


def _seconds(spans: pl.Expr, name: str) -> pl.Expr:
    """A duration field of the request's span in seconds (its last occurrence: the span's own, after the
    parameters)."""
    raw = spans.str.extract_all(_DUR.format(name=name)).list.last()
    g = raw.str.extract_groups(_DUR.format(name=name))
    unit = g.struct.field("u").replace_strict(_UNIT_S, default=None, return_dtype=pl.Float64)
    return g.struct.field("v").cast(pl.Float64, strict=False) * unit


def _requests(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """'received', 'added' and 'finished' of each Success line, 'failed' of each failed request."""
    t = pl.col("target")
    done = (pl.col("msg").str.strip_chars() == "Success") & t.str.ends_with("::server")
    failed = pl.col("msg").str.starts_with(_FAILED) & t.str.starts_with("text_generation_router")
    cand = df.filter(pl.col("stamp").is_not_null() & ~pl.col("_json") & (done | failed))
    if cand.height == 0:
        return pl.DataFrame()
    sp = pl.col("spans")
    cand = cand.with_columns(
        done.alias("_done"),
        _seconds(sp, "total_time").alias("_total"),
        _seconds(sp, "validation_time").alias("_valid"),
        sp.str.split('total_time="')
        .list.first()
        .str.extract_all(_SPAN_OPEN)
        .list.last()
        .str.extract(r"(\w+)\{")
        .alias("_route"),
        # GenerateParameters' numbers come before its strings (stop, grammar): the first match is the request's
        sp.str.extract(r"max_new_tokens: (?:Some\()?(\d+)").pipe(to_int).alias("max_tokens"),
        sp.str.extract(r"temperature: Some\(([\d.]+)\)").cast(pl.Float64, strict=False).alias("temperature"),
    )
    rid = pl.concat_str(pl.coalesce("_route", pl.lit("request")), pl.lit("@"), pl.col("stamp"))
    cand = cand.with_columns(rid.alias("request_id"))
    received = (pl.col("ts") - pl.duration(microseconds=(pl.col("_total") * 1e6).round().pipe(to_int))).alias(
        "ts"
    )
    added = (pl.col("ts") + pl.duration(microseconds=(pl.col("_valid") * 1e6).round().pipe(to_int))).alias(
        "ts"
    )
    ok = cand.filter("_done")
    start = ok.filter(pl.col("_total").is_not_null()).with_columns(
        received, pl.lit("received").alias("event")
    )
    parts = [
        start,
        start.filter(pl.col("_valid").is_not_null()).with_columns(added, pl.lit("added").alias("event")),
        ok.with_columns(pl.lit("finished").alias("event")),
        cand.filter(~pl.col("_done")).with_columns(pl.lit("failed").alias("event")),
    ]
    order = {"received": 0, "added": 1, "finished": 2, "failed": 2}
    out = pl.concat([p.select(_REQ_COLUMNS) for p in parts]).with_columns(
        pl.col("event").replace_strict(order, return_dtype=pl.Int8).alias("_o")
    )
    return (
        out.sort("seq", "_o")
        .drop("_o")
        .select(
            "ts",
            pl.lit(ctx.source).alias("source"),
            pl.lit(ctx.replica).alias("replica"),
            "event",
            "request_id",
            pl.col("request_id").alias("base_request_id"),
            "max_tokens",
            "temperature",
            "line_no",
            "seq",
            pl.lit("tgi").alias("engine_kind"),
        )
    )


_REQ_COLUMNS = ["ts", "event", "request_id", "max_tokens", "temperature", "line_no", "seq"]


def _events(frame: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    if frame.height == 0:
        return pl.DataFrame()
    g = _carry.grouped(frame, pl.col("level").first(), pl.col("target").first().alias("process"))
    # a request's own lines are request events: its failure (one a request; the batch's error is the event),
    # its Success, its Input/Output at debug level (the user's text); left out before the rules read them (most
    # of a busy log's lines)
    own = pl.col("message").str.starts_with(_FAILED) | pl.col("process").str.ends_with("::server") & pl.col(
        "message"
    ).str.contains(r"^(?:Success$|Input: |Output: )")
    g = g.filter(~own.fill_null(False))
    kind = pl.lit(None, dtype=pl.String)
    for name, col, pat in reversed(_KIND_RULES):
        kind = pl.when(pl.col(col).str.contains(ascii_classes(pat))).then(pl.lit(name)).otherwise(kind)
    # an OOM in TGI is a batch's: its shard answers the router with the error and both go on (a death is its own
    # line, an engine_dead rule above); 'oom' would read as the engine's death (diagnose/findings/batch_oom.py)
    kind = pl.when(kind == "oom").then(pl.lit(OOM_BATCH)).otherwise(kind)
    g = g.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
    if g.height == 0:
        return pl.DataFrame()
    d = pl.col("detail")
    sig = d.str.extract(r"signaled to shutdown with signal (\d+)").cast(pl.Int64, strict=False)
    fields = lexicon.fields(pl.col("kind"), d)
    return g.select(
        "ts",
        "ts_inferred",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        "kind",
        "level",
        "process",
        pl.col("message").str.slice(0, 500),
        d.str.slice(0, 4000),
        "line_no",
        "line_count",
        "seq",
        pl.when(pl.col("kind") == "capacity")
        .then(pl.col("message").str.extract(r"tokens to (\d+)").pipe(to_int))
        .alias("kv_tokens"),
        pl.lit("tgi").alias("engine_kind"),
        *[e for e in fields if e.meta.output_name() != "signal"],
        pl.coalesce(
            sig.replace_strict(lexicon.SIGNALS, default=None, return_dtype=pl.String),
            next(e for e in fields if e.meta.output_name() == "signal"),
        ).alias("signal"),
    )
