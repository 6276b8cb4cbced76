"""Client records as JSON lines (or CSV) -> ``client_attempts``, ``client_requests``, ``client_phases``.

Two shapes:

* the lab client's own records (/work/shared/fixtures/lab/*/client-*.jsonl), written by its httpx
  request/response hooks and after each call::

    {"kind": "attempt_send", "t": 1795940955.1313837, "client": "storm", "rid": "storm-r-00001", "retry_count": "0", "url": "http://127.0.0.1:8080/v1/completions"}

  plus ``attempt_response``, ``request``, ``phase_start``, ``phase_end``, ``client_done``. An attempt
  with no response timed out or lost its connection (the hooks never saw a response).
* logscope's generic per-attempt schema (docs/client-schema.md): one object per HTTP attempt with
  ``ts_start``, ``ts_end``, ``request_id``, ``logical_request_id``, ``attempt``, ``status``, ``error``,
  ``timed_out``, ``ttft_s``, ``prompt_tokens``, ``output_tokens``, ``max_tokens``, ``concurrency``,
  ``client``; also accepted as CSV with that header.

JSON is decoded by the compiled scanner (``_scan.JsonKeys``, scan/src/jsonl.rs: the strings of the keys in KEYS,
as polars' ``str.json_decode`` with an all-String schema gave them), a chunk at a time, then cast. Rows that need
later records (attempts waiting for their ``request`` record, generic logical requests) are carried in ``state``.

Many small files of a folder are parsed as one chunk (``FILE_KEYED``, logscope/ingest/batches.py): every record,
carried row and table row is keyed by its file (``_file``), so that no request, phase or timeout of one file is
joined to another's; read alone, a stream is file 0.
"""

from __future__ import annotations

import io

import polars as pl

from logscope import _scan
from logscope.numbers import to_int

from ._common import epoch_to_utc, local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "client_jsonl"
KIND = "client"
DESCRIPTION = "client attempt/request records as JSON lines or CSV (lab client, logscope generic schema)"
MODE = "lines"
SPEED = 58  # MB/s on one core (bench/, 1 GB folder): orders the streams
FILE_KEYED = True  # small files parsed together, each keyed by its ``FILE`` (parsers/base.py)
FILE = "_file"  # the file of a batch a line is from; every state and output row carries it
SAMPLES = [
    '{"kind": "attempt_send", "t": 1795940955.1313837, "client": "storm", "rid": "storm-r-00001", "retry_count": "0", "url": "http://127.0.0.1:8080/v1/completions"}',
    '{"kind": "attempt_response", "t": 1795941069.0770197, "client": "storm", "rid": "storm-r-00479", "retry_count": "0", "status": 502}',
    '{"kind": "phase_start", "t": 1795940954.7197623, "client": "storm", "phase": 0, "mode": "r", "value": 1.5, "duration_s": 45.0}',
]

# the traced lab client (../shared/lab/lab_client_traced.py) adds each attempt's span (attempt_span: its trace and
# span ids, the traceparent it sent) and the flush of its spans at the end
LAB_KINDS = [
    "attempt_send",
    "attempt_response",
    "attempt_span",
    "request",
    "phase_start",
    "phase_end",
    "client_done",
    "spans_flushed",
]
GENERIC_COLUMNS = [
    "ts_start",
    "ts_end",
    "request_id",
    "logical_request_id",
    "attempt",
    "status",
    "error",
    "timed_out",
    "ttft_s",
    "prompt_tokens",
    "output_tokens",
    "max_tokens",
    "concurrency",
    "client",
]
_LAB_KEYS = [
    "kind",
    "t",
    "client",
    "rid",
    "retry_count",
    "url",
    "status",
    "phase",
    "send",
    "end",
    "latency_s",
    "error",
    "max_tokens",
    "stream",
    "completion_tokens",
    "ttft_s",
    "client_timeout_s",
    "max_retries",
    "mode",
    "value",
    "duration_s",
]
KEYS = list(dict.fromkeys(_LAB_KEYS + GENERIC_COLUMNS + ["e2e_s", "url", "phase", "trace_id", "span_id"]))
DTYPE = pl.Struct({k: pl.String for k in KEYS})
# the lab client's attempt records, most of its lines, hold only these keys (and only these are read of them): such a
# record (its text naming the kind, `_ATTEMPT_HINT`) gives these alone, as when polars decoded them with these alone
ATTEMPT_KINDS = ["attempt_send", "attempt_response"]
ATTEMPT_KEYS = ["kind", "t", "client", "rid", "retry_count", "url", "status", "trace_id"]
_ATTEMPT_HINT = r'"kind"\s*:\s*"attempt_(?:send|response)"'


def decoder(hint: str = _ATTEMPT_HINT) -> _scan.JsonKeys:
    return _scan.JsonKeys(KEYS, "kind", ATTEMPT_KINDS, ATTEMPT_KEYS, hint)


_DECODER = decoder()
_LAB_DETECT = (
    r'^\s*\{.*"kind":\s*"(?:attempt_send|attempt_response|request|phase_start|phase_end|client_done)"'
)
_GENERIC_DETECT = (
    r'^\s*\{.*"logical_request_id"\s*:.*"attempt"\s*:|^\s*\{.*"attempt"\s*:.*"logical_request_id"\s*:'
)
_CSV_HEADER = r"^\ufeff?ts_start,(?:[a-z_0-9]+,)*[a-z_0-9]+\s*$"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    line = pl.col("line")
    csv = line.str.contains(_CSV_HEADER) & line.str.contains("logical_request_id", literal=True)
    g = per_head(nonblank(frame), n, lab=share(_LAB_DETECT), generic=share(_GENERIC_DETECT), csv=csv.first())
    csv_score = pl.when(pl.col("csv")).then(0.9).otherwise(0.0)
    return g.select(pl.max_horizontal(0.97 * pl.col("lab"), 0.95 * pl.col("generic"), csv_score)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _f(c: str) -> pl.Expr:
    return pl.col(c).cast(pl.Float64, strict=False)


def _i(c: str) -> pl.Expr:
    return pl.col(c).cast(pl.Float64, strict=False).round(0).pipe(to_int)


def _b(c: str) -> pl.Expr:
    v = pl.col(c).str.to_lowercase()
    return pl.when(v.is_in(["true", "1", "yes"])).then(True).when(v.is_in(["false", "0", "no"])).then(False)


def _err_class(c: str) -> pl.Expr:
    """'APITimeoutError: Request timed out.' -> 'APITimeoutError'."""
    return pl.col(c).str.extract(r"^\s*([^:]+?)\s*(?::|$)", 1)


def ts_expr(c: str, tz: str) -> pl.Expr:
    """Epoch seconds (or ms/us/ns by magnitude), or ISO 8601 (with zone, else ``tz``) -> UTC."""
    # on the column as a whole: an expression tree names the number several times and polars computes each
    # (no common subexpression inside when/then), 10.5 ms for 32,000 times where this takes ~3
    return pl.col(c).map_batches(lambda s: _times(s, tz), return_dtype=_UTC)


_UTC = pl.Datetime("us", "UTC")


def _times(s: pl.Series, tz: str) -> pl.Series:
    f = pl.DataFrame({"v": s.str.strip_chars()}).with_columns(num=pl.col("v").cast(pl.Float64, strict=False))
    num = pl.col("num")
    secs = (
        pl.when(num > 1e17)
        .then(num / 1e9)
        .when(num > 1e14)
        .then(num / 1e6)
        .when(num > 1e11)
        .then(num / 1e3)
        .otherwise(num)
    )
    f = f.with_columns(secs=secs)
    epoch = epoch_to_utc(pl.col("secs"))
    if not f.select((num.is_null() & pl.col("v").is_not_null()).any()).item():
        return f.select(epoch.cast(_UTC)).to_series().alias(s.name)  # every time a number: no ISO text
    # ISO 8601 only where the value is not a number (the number wins the coalesce below)
    iso = pl.when(num.is_null()).then(pl.col("v")).str.replace(" ", "T").str.replace(r"Z$", "+00:00")
    zoned = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_zone="UTC")
    naive = local_to_utc(iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False), tz)
    return f.select(pl.coalesce(epoch, zoned, naive).cast(_UTC)).to_series().alias(s.name)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    batch = FILE in lines.columns
    if batch:  # a CSV file's lines are no JSON object: left unrecognised, the file is read again alone
        state["csv_header"] = None
    if "csv_header" not in state:
        first = lines.filter(pl.col("line").str.strip_chars() != "").head(1)
        head = first["line"].item() if first.height else ""
        state["csv_header"] = head.lstrip("\ufeff").strip().split(",") if _is_csv_header(head) else None
    if state["csv_header"]:
        recs, ok = _csv_records(lines, state)
    else:
        recs, ok = _json_records(lines)
    recs = (
        recs.join(lines.select("line_no", FILE), on="line_no", how="left")
        if batch
        else recs.with_columns(pl.lit(0, pl.Int64).alias(FILE))
    )
    seq0 = state.get("seq", 0)  # order across chunks and rotated files (line numbers restart per file)
    recs = recs.with_columns((pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"))
    state["seq"] = seq0 + recs.height
    tables: dict[str, pl.DataFrame] = {}
    assumptions: list[str] = []
    lab = recs.filter(pl.col("kind").is_in(LAB_KINDS))
    if lab.height or state.get("lab_pending") is not None:
        tables.update(_lab(lab, ctx, state))
        assumptions += LAB_ASSUMPTIONS
    generic = recs.filter(pl.col("kind").is_null() & pl.col("ts_start").is_not_null())
    if generic.height:
        tables.update(_generic(generic, ctx, state))
        assumptions.append(
            "generic client schema (docs/client-schema.md): grouping exact, zoneless ISO times "
            f"read as {ctx.tz}"
        )
    return ChunkResult(tables=tables, recognized=ok, assumptions=assumptions)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    tables: dict[str, pl.DataFrame] = {}
    pend = state.get("lab_pending")
    if pend is not None and pend.height:
        tables.update(_lab_flush(pend, ctx, state, final=True))
    ph = state.get("lab_phases")
    if ph is not None and ph.height:
        tables["client_phases"] = _lab_phases(ph, ctx)
    agg = state.get("generic_requests")
    if agg is not None and agg.height:
        tables["client_requests"] = (
            pl.concat([tables["client_requests"], _generic_requests(agg, ctx)], how="diagonal_relaxed")
            if "client_requests" in tables
            else _generic_requests(agg, ctx)
        )
    return ChunkResult(tables=tables) if tables else None


def _is_csv_header(line: str) -> bool:
    s = line.lstrip("\ufeff").strip()
    return bool(s) and s.startswith("ts_start,") and "logical_request_id" in s


def _json_records(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """``line_no`` and every key of KEYS of each line that is one JSON object and decodes (a line holding a
    newline is none), and whether each line gave a record."""
    dec = pl.DataFrame(_DECODER.decode(lines["line"]))
    recs = dec.select(lines["line_no"].gather(dec["row"]), *KEYS).filter(
        pl.col("kind").is_in(LAB_KINDS) | (pl.col("kind").is_null() & pl.col("ts_start").is_not_null())
    )
    ok = lines.select(pl.col("line_no").is_in(recs["line_no"].implode())).to_series()
    return recs, ok


def _csv_records(lines: pl.DataFrame, state: dict) -> tuple[pl.DataFrame, pl.Series]:
    header = state["csv_header"]
    body = lines.filter(~pl.col("line").str.contains(_CSV_HEADER) & (pl.col("line").str.strip_chars() != ""))
    text = "\n".join(body["line"].to_list())  # one string handed to polars' CSV reader, no per-line work
    try:
        df = pl.read_csv(io.StringIO(text), has_header=False, new_columns=header, infer_schema=False)
    except (pl.exceptions.PolarsError, ValueError):
        return pl.DataFrame(schema=dict(DTYPE.to_schema()) | {"line_no": pl.Int64}), pl.Series(
            [False] * lines.height
        )
    if df.height != body.height:  # quoted newlines: row alignment lost, keep the rows, line numbers unknown
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("line_no"))
    else:
        df = df.with_columns(body["line_no"])
    for k in KEYS:
        if k not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.String).alias(k))
    ok = lines.select(
        pl.col("line").str.contains(_CSV_HEADER) | pl.col("line_no").is_in(body["line_no"].implode())
    )
    return df.select("line_no", *KEYS), ok.to_series()


# ---------------------------------------------------------------- lab client records
LAB_ASSUMPTIONS = [
    "lab client records: rid is the logical request and the X-Request-Id of every attempt; attempt = retry_count+1",
    "an attempt ends at its attempt_response (headers), the last one at the request's end (end of the body)",
    "an attempt with no attempt_response timed out when it lasted >= 99 % of client_timeout_s (until the next "
    "attempt or the request end), else lost its connection; its end is send + client_timeout_s (capped at the "
    "next attempt's send)",
]


def _lab(lab: pl.DataFrame, ctx: ParseContext, state: dict) -> dict[str, pl.DataFrame]:
    ph = lab.filter(pl.col("kind").is_in(["phase_start", "phase_end"]))
    if ph.height:
        prev = state.get("lab_phases")
        state["lab_phases"] = pl.concat([prev, ph]) if prev is not None else ph
    rows = lab.filter(pl.col("kind").is_in(["attempt_send", "attempt_response", "attempt_span", "request"]))
    prev = state.get("lab_pending")
    pend = pl.concat([prev, rows]) if prev is not None else rows
    return _lab_flush(pend, ctx, state, final=False)


def _lab_flush(pend: pl.DataFrame, ctx: ParseContext, state: dict, final: bool) -> dict[str, pl.DataFrame]:
    """Emit attempts and requests of every rid whose ``request`` record has arrived; carry the rest.

    A rid reused later in the file (a client restarted into the same file) is another request: rows
    belong to the first ``request`` record of their rid that follows them (its generation). The grouping, the
    attempts' order and outcome are one pass in the compiled scanner (scan/src/lab.rs); the values it reads are
    converted here, each record's on its own.
    """
    if not pend["seq"].is_sorted():  # carried rows then new ones: usually in order already (seq is unique)
        pend = pend.sort("seq")
    # a request record that names a rid is its generation's one, and ready; its fields, converted on these alone
    req = pend.filter((pl.col("kind") == "request") & pl.col("rid").is_not_null()).select(
        FILE,
        "client",
        "phase",
        ts_expr("send", ctx.tz).cast(pl.Int64).alias("send"),
        ts_expr("end", ctx.tz).cast(pl.Int64).alias("end"),
        _err_class("error").alias("error"),
        _f("latency_s").alias("latency"),
        _i("max_tokens").alias("max_tokens"),
        _b("stream").alias("stream"),
        _i("completion_tokens").alias("output_tokens"),
        _f("ttft_s").alias("ttft"),
        _f("client_timeout_s").alias("timeout"),
        _i("max_retries").alias("max_retries"),
    )
    opt = [
        pl.col(c) if c in pend.columns else pl.lit(None, pl.String).alias(c) for c in ("trace_id", "span_id")
    ]
    rows = pend.select(
        "kind",
        pl.col(FILE).cast(pl.Int64),
        "rid",
        "seq",
        "line_no",
        "client",
        "url",
        *opt,
        _i("retry_count").alias("rc"),
        ts_expr("t", ctx.tz).cast(pl.Int64).alias("t"),
        _i("status").alias("status"),
    )
    # none ready: no request record with a rid, and the log goes on (or no row has a rid)
    if not req.height and not (final and rows["rid"].null_count() < rows.height):
        state["lab_pending"] = pend
        return {}
    # the client's timeout setting, from its request records so far: a request left without one (in flight when a
    # killed client's log ended) had the same when the client used one (not so with the lab's --timeout-mix)
    seen = state.setdefault("lab_timeouts", {})  # (file, client): its one timeout so far, or None
    per = req.filter(pl.col("timeout").is_not_null()).group_by(FILE, "client").agg(pl.col("timeout").unique())
    for file, client, values in per.iter_rows():
        one = values[0] if len(values) == 1 else None
        seen[file, client] = one if seen.get((file, client), one) == one else None
    known = [(f, c, t) for (f, c), t in seen.items() if t is not None and c is not None]
    phases = _lab_phase_table(state.get("lab_phases")).filter(pl.col("phase").is_not_null())
    att, requests, carry = _scan.lab_flush(
        rows.to_dict(),
        req.drop(FILE, "client").to_dict(),
        phases.rows(),
        known,
        final,
        ctx.source,
    )
    # rows of later generations are renumbered from 0 when they are looked at again
    state["lab_pending"] = pend.filter(pl.DataFrame(carry).get_column("carry"))
    requests = pl.DataFrame(requests).with_columns(pl.col("attempts").cast(pl.UInt32))
    return {"client_attempts": pl.DataFrame(att), "client_requests": requests}


def _lab_phase_table(ph: pl.DataFrame | None) -> pl.DataFrame:
    sch = pl.Schema({FILE: pl.Int64, "phase": pl.String, "concurrency": pl.Int64})
    if ph is None or not ph.height:
        return pl.DataFrame(schema=sch)
    return (
        ph.filter(pl.col("kind") == "phase_start")
        .unique([FILE, "phase"], keep="last")
        .select(FILE, "phase", pl.when(pl.col("mode") == "c").then(_i("value")).alias("concurrency"))
        .cast(sch)
    )


def _lab_phases(ph: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    starts = ph.filter(pl.col("kind") == "phase_start").unique([FILE, "phase"], keep="last")
    ends = (
        ph.filter(pl.col("kind") == "phase_end")
        .unique([FILE, "phase"], keep="last")
        .select(FILE, "phase", ts_expr("t", ctx.tz).alias("end_ts"))
    )
    mode = pl.col("mode")
    return (
        starts.join(ends, on=[FILE, "phase"], how="left")
        .with_columns(ts_expr("t", ctx.tz).alias("ts_start"))
        .sort(FILE, "ts_start")
        .select(
            pl.lit(ctx.source).alias("source"),
            "client",
            "phase",
            "ts_start",
            pl.coalesce(
                "end_ts",
                pl.col("ts_start") + pl.duration(microseconds=(_f("duration_s") * 1e6).pipe(to_int)),
            ).alias("ts_end"),
            pl.when(mode == "c")
            .then(pl.lit("concurrency"))
            .when(mode == "r")
            .then(pl.lit("rate"))
            .otherwise(mode)
            .alias("mode"),
            _f("value").alias("value"),
            pl.lit("exact: phase_start / phase_end records").alias("anchoring"),
            FILE,
        )
    )


# ---------------------------------------------------------------- generic schema
def _generic(g: pl.DataFrame, ctx: ParseContext, state: dict) -> dict[str, pl.DataFrame]:
    a = g.select(
        ts_expr("ts_start", ctx.tz).alias("ts_start"),
        ts_expr("ts_end", ctx.tz).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.col("client").fill_null("generic"),
        pl.coalesce("logical_request_id", "request_id").alias("logical_request_id"),
        "request_id",
        _i("attempt").fill_null(1).alias("attempt"),
        _i("status").alias("status"),
        pl.when(pl.col("error").str.strip_chars() != "").then(pl.col("error")).alias("error"),
        _b("timed_out").fill_null(False).alias("timed_out"),
        _f("ttft_s").alias("ttft_s"),
        _i("prompt_tokens").alias("prompt_tokens"),
        _i("max_tokens").alias("max_tokens"),
        _i("output_tokens").alias("output_tokens"),
        _i("concurrency").alias("concurrency"),
        pl.lit("exact").alias("grouping"),
        pl.lit(1.0).alias("grouping_confidence"),
        "url",
        "line_no",
        FILE,
    ).with_columns(((pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6).alias("e2e_s"))
    # running per-logical aggregate (merged across chunks, emitted at finish)
    part = (
        a.sort("attempt")
        .group_by(FILE, "logical_request_id")
        .agg(
            pl.col("client").first(),
            pl.col("ts_start").min(),
            pl.col("ts_end").max(),
            pl.len().alias("attempts"),
            pl.col("attempt").max().alias("last_attempt"),
            *(pl.col(c).last().alias(c) for c in ("status", "error", "timed_out", "ttft_s", "output_tokens")),
            *(
                pl.col(c).drop_nulls().first().alias(c)
                for c in ("prompt_tokens", "max_tokens", "concurrency")
            ),
            pl.col("line_no").min().alias("first_line"),
        )
    )
    prev = state.get("generic_requests")
    # the merged rows' columns come in the aggregation's order, not the chunk's: a second chunk's concat failed
    state["generic_requests"] = _merge_generic(
        pl.concat([prev, part.select(prev.columns)]) if prev is not None else part
    )
    return {"client_attempts": a}


def _merge_generic(part: pl.DataFrame) -> pl.DataFrame:
    last = pl.col("last_attempt").arg_max()
    return part.group_by(FILE, "logical_request_id").agg(
        pl.col("client").first(),
        pl.col("ts_start").min(),
        pl.col("ts_end").max(),
        pl.col("attempts").sum(),
        *(pl.col(c).get(last).alias(c) for c in ("status", "error", "timed_out", "ttft_s", "output_tokens")),
        pl.col("last_attempt").max(),
        *(pl.col(c).drop_nulls().first().alias(c) for c in ("prompt_tokens", "max_tokens", "concurrency")),
        pl.col("first_line").min(),
    )


def _generic_requests(agg: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    return agg.sort("first_line", "ts_start").select(
        "logical_request_id",
        pl.lit(ctx.source).alias("source"),
        "client",
        "ts_start",
        "ts_end",
        "status",
        "error",
        "timed_out",
        "attempts",
        "ttft_s",
        ((pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6).alias("e2e_s"),
        "prompt_tokens",
        "max_tokens",
        "output_tokens",
        "concurrency",
        FILE,
    )
