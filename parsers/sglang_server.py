"""SGLang server log (stdout/stderr of ``python -m sglang.launch_server``) -> server_stats, server_events,
server_request_events.

Sample (tests/data/sglang/10053-prefill-decode-access.log, https://github.com/sgl-project/sglang/issues/10053)::

    [2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.06, #queue-req: 0,

Upstream: ``configure_logger`` (``[%(asctime)s{prefix}] %(message)s``, date format ``%Y-%m-%d %H:%M:%S``, no level;
the prefix names the scheduler's ranks, `` DP0 TP0 EP0``), ``log_prefill_stats`` / ``log_decode_stats``
(``scheduler_metrics_mixin.py``; 'Prefill batch.' with a period until 2025, 'Prefill batch,' after; hybrid models
print 'full token usage' and 'swa token usage' or 'mamba usage' instead of 'token usage'), the retraction line of
``update_running_batch`` (``scheduler.py``) and the deaths: 'Scheduler hit an exception: <traceback>' (the
traceback follows raw, without the prefix), the watchdog's 'Watchdog timeout (self.watchdog_timeout=N)' (later
'Scheduler watchdog timeout (...)'), the launcher's 'Received sigquit from a child process'.

Mapped onto the vLLM tables so that episodes, the ladder and the findings read it unchanged: '#running-req' is
running, '#queue-req' waiting, 'token usage' the KV usage (the pool's used share, as vLLM's 'GPU KV cache usage'),
'gen throughput (token/s)' gen_tps, a retraction ('KV cache pool is full. Retract requests.') is SGLang's
preemption (an event, and the retracted requests counted into the next stats row's ``preemptions``). Every row
says ``engine_kind`` 'sglang'; ``engine`` holds the rank prefix ('TP0', 'DP1 TP0'). The request lines of
``--log-requests`` ('Receive: obj=...', 'Finish: obj=..., out=...', or with ``--log-requests-format json``
'{"timestamp": ..., "event": "request.received", "rid": ...}', with or without the header) are read by
``_sglang_requests.py``; a JSON line's own ``timestamp`` (microseconds) is its time.
"""

from __future__ import annotations

import re
from datetime import date

import polars as pl

from logscope.numbers import to_int

from . import _carry
from . import _lexicon as lexicon
from ._common import UVICORN_ACCESS, UVICORN_LEVEL, ascii_classes, carried_times, local_to_utc
from ._sglang_requests import JSON_TS, REQUEST_LINE, requests
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "sglang_server"
KIND = "server"
MODE = "lines"
DESCRIPTION = (
    "SGLang server log: prefill/decode stats lines, retractions, scheduler deaths and watchdog, uvicorn, "
    "request lines (--log-requests, text or JSON)"
)
SAMPLES = [
    "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.06, #queue-req: 0, ",
    "[2025-10-22 20:23:08] Prefill batch. #new-seq: 9, #new-token: 8192, #cached-token: 27, token usage: 0.00, #running-req: 0, #queue-req: 114, ",
    "[2025-12-12 08:43:59 TP0] Decode batch, #running-req: 6, #token: 1920, token usage: 0.94, cuda graph: True, gen throughput (token/s): 446.45, #queue-req: 5,",
    "[2026-09-13 16:06:07] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487",
    '[2025-09-03 18:33:31] INFO:     192.168.30.81:35262 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)",
    # 'Receive' of --log-requests (tests/data/sglang/4045-receive-request-line.log)
    (
        "[2025-03-03 17:53:04] Receive: obj=GenerateReqInput(text=None, input_ids=[151646, 198, 5405, 1614, 2"
        "5, 5538, 25713, 3795, 16, 25, 18, 17, 65, 198, 5405, 2400, 25, 220, 17, 15, 17, 20, 12, 15, 18, 12, "
        "15, 18, 51, 15, 24, 25, 20, 18, 25, 16, 24, 13, 23, 21, 16, 57, 271, 2610, 525, 264, 10950, 17847, 1"
        "3, 151644, 100633, 47815, 101562, 107380, 82894, 101437, 100968, 3837, 104719, 101914, 102513, 10037"
        "1, 11319, 151645], input_embeds=None, image_data=None, sampling_params={'temperature': 0.1, 'max_new"
        "_tokens': None, 'min_new_tokens': 0, 'stop': None, 'stop_token_ids': None, 'top_p': 0.9, 'top_k': -1"
        ", 'min_p': 0.0, 'presence_penalty': 0.0, 'frequency_penalty': 0.0, 'repetition_penalty': 1.0, 'regex"
        "': None, 'ebnf': None, 'n': 1, 'no_stop_trim': False, 'ignore_eos': False, 'skip_special_tokens': Tr"
        "ue}, rid='ced00776101841e180bf04c8dbdc4ec2', return_logprob=False, logprob_start_len=-1, top_logprob"
        "s_num=0, return_text_in_logprobs=True, stream=True, log_metrics=True, modalities=[], lora_path=None,"
        " session_params=None, custom_logit_processor=None)"
    ),
    # --log-requests-format json (tests/data/sglang/23049-diffusion-request-lines-text-and-json.log)
    (
        '[2026-06-30 09:18:30] {"timestamp": "2026-06-30T09:18:30.974658", "event": "request.received", "rid": "7547dc'
        'b2-7268-4a16-a2a4-731a503a53a1", "obj": {"request_id": "7547dcb2-7268-4a16-a2a4-731a503a53a1", "sampling_par'
        'ams": {"data_type": "DataType.VIDEO", "seed": 42, "num_inference_steps": 10, "guidance_scale": 3.0, "true_cf'
        'g_scale": null, "width": 832, "height": 480, "num_frames": 5, "fps": 24, "num_outputs_per_prompt": 1}, "promp'
        't": "A cat playing with a ball", "negative_prompt": "Bright tones, overexposed, static, blurred details, subt'
        "itles, style, works, paintings, images, static, overall gray, worst quality, low quality, JPEG compression r"
        "esidue, ugly, incomplete, extra fingers, poorly drawn hands, poorly drawn faces, deformed, disfigured, missha"
        "pen limbs, fused fingers, still picture, messy background, three legs, many people in the background, walkin"
        'g backwards"}}'
    ),
]

# '[date time(.frac) RANKS] ' ('[' lost by a paste is accepted); the ranks are DP/TP/PP/EP/CP/ATTN_CP/... with numbers.
# SGLang 0.2-0.3 (2024) wrote the time alone, '[16:43:29 TP0] ': its date is anchored (``_dates``)
_HEAD = ascii_classes(
    r"^\[?(?:(?P<date>\d{4}-\d\d-\d\d) )?(?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,6}))?"
    r"(?P<rank>(?: [A-Z][A-Z_]{0,9}\d+)*)\] ?"
)
_HEAD_SPAN = ascii_classes(
    r"^\[?(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: [A-Z][A-Z_]{0,9}\d+)*\] ?"
)
# a python-logging configuration of SGLang's loggers (sglang-omni: '%(asctime)s [%(levelname)s] %(name)s: ')
_PYHEAD = ascii_classes(
    r"^(?P<date>\d{4}-\d\d-\d\d)[ T](?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,6}))? (?:- )?"
    r"\[?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\]? (?:- )?sglang[\w.]*:? (?:- )?"
)
_PYHEAD_SPAN = re.sub(r"\?P<\w+>", "?:", _PYHEAD)
# SGLang's stats and retraction lines pasted without any header (a user quoting the message alone)
_BARE = r"^(?:Prefill batch|Decode batch)[.,] #|^KV cache pool is full\. Retract requests|^Decode out of memory happened"
_UVICORN_LINE = "^" + UVICORN_LEVEL  # a uvicorn line without SGLang's header (its logger is uvicorn's own)
_KNOWN = (
    r"^(?:Prefill batch|Decode batch)[.,\[ ]|^KV cache pool is full\. Retract requests|hit an exception: "
    r"|[Ww]atchdog timeout \(self\.watchdog_timeout|^Received sigquit from a child proces"
    r"|^server_args=ServerArgs\(|^Load weight (?:begin|end)|^KV Cache is allocated|^Memory pool end"
    r"|^The server is fired up and ready to roll|^(?:Receive|Finish): obj=|^Decode out of memory happened"
    r"|^SGLang Generating!|^Prompts loaded\."
)
_TB = ascii_classes(
    r"^(?:\s|Traceback \(most recent call last\)|File \"|[A-Za-z_][\w.]*(?:Error|Exception)\b|\^+$)"
)
_ACCESS = "^" + UVICORN_LEVEL + UVICORN_ACCESS
_RETRACT = ("KV cache pool is full. Retract requests", "Decode out of memory happened")
# event kinds, first match wins: the lexicon's (parsers/_lexicon.py: the cause before the death it caused), then
# SGLang's own (a generic 'out of memory', the lifecycle, a traceback)
_KIND_RULES = [(kind, col, pat) for kind, col, pat, _ in lexicon.RULES] + [
    ("oom", "detail", r"out of memory"),
    ("server_ready", "message", r"^The server is fired up and ready to roll"),
    ("server_start", "message", r"^INFO:\s+Started server process \[\d+\]"),
    ("server_stop", "message", r"^INFO:\s+Shutting down\s*$"),
    ("error", "detail", r"Traceback \(most recent call last\)"),
]


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line").str.slice(0, 400)
    hdr = s.str.contains(_HEAD_SPAN) | s.str.contains(_PYHEAD_SPAN)
    body = s.str.replace(_HEAD_SPAN, "").str.replace(_PYHEAD_SPAN, "")
    # request lines: SGLang's own words, with or without the header (--log-requests-target prints them bare);
    # its stats lines pasted bare
    bare = s.str.contains(_BARE)
    known = (hdr & body.str.contains(_KNOWN)) | body.str.contains(REQUEST_LINE) | bare
    hdr = hdr | s.str.contains(REQUEST_LINE) | bare
    tb = ~hdr & (s.str.contains(_TB) | s.str.contains(_UVICORN_LINE))
    g = per_head(nonblank(frame, 200), n, known=known.any(), m=(hdr | tb).mean())
    # '[date time] message' alone is any python logging config
    return g.select(pl.when(pl.col("known")).then(0.3 + 0.7 * pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


# ---- entry points ------------------------------------------------------------------------------


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    df = _rows(lines, ctx, state)
    stats = _stats(df, ctx, state)
    access = _access(df, ctx)
    reqs = requests(df, ctx)
    # the last record may go on in the next chunk (or the next file of a rotated set: it keeps its file's name)
    records = _carry.hold(_carry.resume(df, ctx, state), ctx, state)
    events = _carry.named_events(_events, records, ctx)
    ev = [e for e in (access, events) if e.height]
    tables = {
        "server_stats": stats,
        "server_request_events": reqs,
        "server_events": pl.concat(ev, how="diagonal_relaxed").sort("seq") if ev else pl.DataFrame(),
    }
    # a line is recognised when it is SGLang's (its header, or its words pasted bare), or a line of a record one
    # opened (its traceback), or, before the first header, traceback-shaped (a paste starting mid-traceback)
    ok = (
        pl.col("hdr").is_not_null() | pl.col("starts") | (pl.col("rec") > 0) | pl.col("msg").str.contains(_TB)
    )
    notes = state.pop("notes", [])
    if bool(df["hdr"].is_not_null().any()):
        notes.append(f"SGLang timestamps have no zone: read as {ctx.tz} (--tz)")
    if bool(df["ts_inferred"].any()):
        notes.append(
            "SGLang lines without a header (raw tracebacks, uvicorn's own lines, stats lines pasted bare) take the "
            "time of the line before (ts_inferred)"
        )
    repairs = {"bare": int(df["bare"].sum()), "untimed": int(df["ts"].is_null().sum())}
    return ChunkResult(
        tables=tables,
        recognized=df.select(ok.fill_null(False).alias("ok"))["ok"],
        assumptions=notes,
        repairs={k: v for k, v in repairs.items() if v},
    )


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    carry, named = _carry.finished(ctx, state)
    if carry is None:
        return None
    return ChunkResult(tables={"server_events": _events(carry, named)})


# ---- rows ---------------------------------------------------------------------------------------


def _rows(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    line = pl.col("line").str.strip_chars_end("\r")
    df = lines.select("line_no", line.alias("line"))
    head = pl.col("line").str.slice(0, 160)
    df = df.with_columns(head.str.extract(f"({_HEAD_SPAN})").alias("hdr"))
    h = pl.col("hdr").str.extract_groups(_HEAD)
    fields = {k: h.struct.field(k) for k in ("date", "hms", "frac", "rank")}
    if bool(df.select(head.str.contains(_PYHEAD_SPAN).any()).item()):  # a python-logging configuration
        df = df.with_columns(pl.coalesce("hdr", head.str.extract(f"({_PYHEAD_SPAN})")).alias("hdr"))
        p = pl.col("hdr").str.extract_groups(_PYHEAD)
        fields = {k: pl.coalesce(e, p.struct.field(k)) if k != "rank" else e for k, e in fields.items()}
    df = df.with_columns(e.alias(k) for k, e in fields.items())
    df = df.with_columns(
        pl.when(pl.col("hdr").is_null())
        .then(pl.col("line"))
        .otherwise(pl.col("line").str.slice(pl.col("hdr").str.len_chars()))
        .alias("msg"),
        pl.when(pl.col("rank").str.strip_chars() != "").then(pl.col("rank").str.strip_chars()).alias("rank"),
    )
    # lines that start a record without SGLang's header: its stats words pasted bare, uvicorn's own lines (a
    # python-logging configuration leaves uvicorn's logger its format), a request line printed bare
    bare = pl.col("hdr").is_null() & pl.col("msg").str.contains(_BARE)
    starts = pl.col("hdr").is_null() & (
        pl.col("msg").str.contains(_UVICORN_LINE) | pl.col("msg").str.contains(REQUEST_LINE)
    )
    df = df.with_columns(bare.alias("bare"), (bare | starts).alias("starts"))
    df = _dates(df, ctx, state)
    naive = pl.concat_str(
        pl.col("date"),
        pl.lit(" "),
        pl.col("hms"),
        pl.lit("."),
        pl.col("frac").fill_null("0").str.pad_end(6, "0"),
    ).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    # a JSON request line's own time (microseconds; the only one when it has no header)
    own = (
        pl.col("msg")
        .str.slice(0, 100)
        .str.extract(JSON_TS)
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    )
    # a header, or a line SGLang printed without one, starts a record; raw lines (tracebacks) go on with the open one
    starts = pl.col("hdr").is_not_null() | pl.col("starts")
    return carried_times(df, local_to_utc(pl.coalesce(own, naive), ctx.tz), starts, state)


def _dates(df: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    """The date of headers that carry the time alone (SGLang 0.2-0.3, '[16:43:29 TP0]'): the day of a full time
    seen elsewhere in the folder, else of the file's modification time, for the stream's first such line; a time
    more than an hour before the previous one is the next day."""
    alone = pl.col("date").is_null() & pl.col("hms").is_not_null()
    if not bool(df.select(alone.any()).item()):
        return df
    if "day0" not in state:
        anchor, how = _anchor(ctx)
        state["day0"] = anchor
        state["notes"] = [
            f"SGLang headers with a time and no date: the first one's day is {anchor} ({how}), later days counted "
            "on at each midnight"
        ]
    hms = pl.col("hms").str.split(":").list.eval(pl.element().cast(pl.Int64))
    secs = pl.when(alone).then(hms.list.get(0) * 3600 + hms.list.get(1) * 60 + hms.list.get(2))
    df = df.with_columns(secs.alias("_s"))
    prev = pl.col("_s").forward_fill().shift(1).fill_null(pl.lit(state.get("last_secs"), dtype=pl.Int64))
    roll = (alone & ((prev - pl.col("_s")) > 3600).fill_null(False)).cum_sum() + state.get("days", 0)
    df = df.with_columns(roll.alias("_d"))
    last = df.filter(alone)
    state["last_secs"], state["days"] = int(last["_s"][-1]), int(last["_d"][-1])
    day = pl.lit(state["day0"]) + pl.duration(days=pl.col("_d"))
    return df.with_columns(
        pl.when(alone).then(day.dt.strftime("%Y-%m-%d")).otherwise(pl.col("date")).alias("date")
    ).drop("_s", "_d")


def _anchor(ctx: ParseContext) -> tuple[date, str]:
    if ctx.reference_ts is not None:
        return ctx.reference_ts.date(), "a full timestamp elsewhere in the folder"
    if ctx.file_mtime is not None:
        return ctx.file_mtime.date(), "the file's modification time"
    return date(ctx.year, 1, 1), f"1 January {ctx.year}: nothing better was known"


def _num(pat: str) -> pl.Expr:
    return pl.col("msg").str.extract(pat).cast(pl.Float64, strict=False)


def _stats(df: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    m = pl.col("msg")
    retract = df.filter(m.str.starts_with(_RETRACT[0]) | m.str.starts_with(_RETRACT[1]))
    cand = df.filter(m.str.starts_with("Prefill batch") | m.str.starts_with("Decode batch"))
    if retract.height:
        state["seen_retract"] = True
        n = retract.select("seq", _num(r"#retracted_reqs: (\d+)").fill_null(1).alias("n"))
    else:
        n = pl.DataFrame(schema={"seq": pl.Int64, "n": pl.Float64})
    pending = state.get("retracted", 0.0)
    if cand.height == 0:
        state["retracted"] = pending + float(n["n"].sum())
        return cand.clear()
    # the retracted requests since the previous stats row (known once the stream has shown a retraction)
    marks = pl.concat([n, cand.select("seq", pl.lit(None, dtype=pl.Float64).alias("n"))]).sort("seq")
    marks = marks.with_columns(pl.col("n").is_null().cum_sum().alias("_k"))  # rows after the k-th stats row
    # retractions after the last stats row wait for the next chunk's first one
    per = marks.group_by("_k").agg(pl.col("n").sum()).sort("_k")
    by_row = {int(k): float(v) for k, v in per.iter_rows()}
    counts = [by_row.get(i, 0.0) + (pending if i == 0 else 0.0) for i in range(cand.height)]
    state["retracted"] = by_row.get(cand.height, 0.0)
    first_seen = state.get("seen_retract", False)
    kv = pl.coalesce(
        _num(r"(?:^|, )token usage: ([\d.]+)"),
        pl.max_horizontal(_num(r"full token usage: ([\d.]+)"), _num(r"swa token usage: ([\d.]+)")),
    )
    new, hit = _num(r"#new-token: (\d+)"), _num(r"#cached-token: (\d+)")
    return cand.with_columns(
        pl.Series("_pre", counts, dtype=pl.Float64),
    ).select(
        "ts",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("log").alias("origin"),
        pl.lit("sglang").alias("era"),
        pl.col("rank").alias("engine"),
        pl.lit("sglang").alias("engine_kind"),
        pl.lit(None, dtype=pl.String).alias("level"),
        _num(r"#running-req: (\d+)").pipe(to_int).alias("running"),
        _num(r"#queue-req: (\d+)").pipe(to_int).alias("waiting"),
        (pl.col("_pre").pipe(to_int) if first_seen else pl.lit(None, dtype=pl.Int64)).alias("preemptions"),
        kv.alias("kv_usage"),
        _num(r"input throughput \(token/s\): ([\d.]+)").alias("prompt_tps"),
        _num(r"gen throughput \(token/s\): ([\d.]+)").alias("gen_tps"),
        # SGLang 0.3 printed its 'cache hit rate: N%'; later the counts alone
        pl.coalesce(
            (_num(r"cache hit rate: ([\d.]+)%") / 100).round(6),
            pl.when(new + hit > 0).then((hit / (new + hit)).round(6)),
        ).alias("prefix_hit"),
        "line_no",
        "seq",
    )


def _access(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    a = df.filter(
        (pl.col("hdr").is_not_null() | pl.col("starts")) & pl.col("msg").str.contains(' - "', literal=True)
    )
    if a.height == 0:
        return pl.DataFrame()
    a = a.with_columns(pl.col("msg").str.extract_groups(_ACCESS).alias("a")).unnest("a")
    return a.filter(pl.col("status").is_not_null()).select(
        "ts",
        "ts_inferred",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("http_access").alias("kind"),
        pl.col("msg").str.extract(r"^([A-Z]+):").alias("level"),
        pl.col("rank").alias("process"),
        pl.col("msg").str.slice(0, 500).alias("message"),
        "line_no",
        pl.lit(1, dtype=pl.Int64).alias("line_count"),
        "seq",
        pl.col("method").alias("http_method"),
        pl.col("path").alias("http_path"),
        pl.col("status").pipe(to_int).alias("http_status"),
        pl.col("addr").alias("client_addr"),
        pl.lit("sglang").alias("engine_kind"),
    )


def _events(frame: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    if frame.height == 0:
        return pl.DataFrame()
    g = _carry.grouped(frame, pl.col("rank").first().alias("process"))
    kind = pl.lit(None, dtype=pl.String)
    for name, col, pat in reversed(_KIND_RULES):
        kind = pl.when(pl.col(col).str.contains(ascii_classes(pat))).then(pl.lit(name)).otherwise(kind)
    # a request line is no event, whatever its prompt or output says ('out of memory', a traceback)
    kind = pl.when(pl.col("message").str.contains(REQUEST_LINE)).then(None).otherwise(kind)
    g = g.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
    if g.height == 0:
        return pl.DataFrame()
    pre, d = pl.col("kind") == "preemption", pl.col("detail")
    return g.select(
        "ts",
        "ts_inferred",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        "kind",
        "process",
        pl.col("message").str.slice(0, 500),
        pl.col("detail").str.slice(0, 4000),
        "line_no",
        "line_count",
        "seq",
        pl.when(pre).then(lexicon.preemption_mode(d)).alias("preemption_mode"),
        pl.lit("sglang").alias("engine_kind"),
        *lexicon.fields(pl.col("kind"), d),
    )
