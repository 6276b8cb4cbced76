"""The oracle of tests/test_scan_openai_lines.py: openai_client's lines as parsers/_openai_lines.py read them with polars
regexes before they moved into the compiled scanner (issue #42), kept as they were."""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.parsers._common import local_to_utc
from logscope.parsers.base import ParseContext

_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
# what may come before a record's time: a colour code a paste kept without its ESC ('[37m'), a bracket of the
# application's own ('[277.618 ms] ' before '[2024-04-25 09:36:21,443.443]')
_LEAD = r"(?:\x1b?\[[0-9;]*m)?(?:\[[^\]\[]{0,20}\] )?"
_TS = (
    rf"^{_LEAD}\[?(?P<date>\d{{4}}-\d\d-\d\d)[T ](?P<time>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{{1,9}}))?"
    r"(?P<tz>Z|[+-]\d\d:?\d\d)?"
)
_PREFIXED = rf"^{_LEAD}\[?\d{{4}}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|^{_LEVEL}:"
# an application's console lines with an ISO time of their own ('  ✗ [2026-06-09T18:53:31.458Z] Coach failed')
_CONSOLE = r"^\s*(?:\S{1,3}\s+)?\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?\] "
# the SDK's last words when it gives up on a request, as the application logs them (its exception's message):
# APIConnectionError 'Connection error.', APITimeoutError 'Request timed out.'
_FINAL_CONN = r"APIConnectionError|\bConnection error\."
_FINAL_TIMEOUT = r"APITimeoutError|\bRequest timed out\."
_FINAL_STATUS = r"(?:^|: )Error code: \d{3}\b"
# message starts we know; the prefix before them is empty or ends with a blank or ':'
_STARTS = [
    "Building HTTP request: ",
    "Request options: ",
    "Sending HTTP Request: ",
    "HTTP Request: ",
    "HTTP Response: ",
    "Encountered ",
    "Retrying ",
    "Raising (?:timeout|connection) error",
    "Re-raising status error",
    "Not retrying",
    r"\d+ retr(?:y|ies) left",
    "request_id: ",
    r"request \S+ done status=",
    r"phase \S+ start mode=",
]
_MSG = rf"^(?P<prefix>(?:.*?[\s:])?)(?P<msg>(?:{'|'.join(_STARTS)}).*)$"
# _MSG's capture groups are slow over whole lines: the start is searched instead, without the '\d+ retr'
# branch (a leading class turns off the regex crate's literal prefilter), which is searched only in
# lines holding ' retr'; lines where that search does not settle it (non-ASCII, odd prefixes) use _MSG
_STARTS_LIT = "(?:" + "|".join(s for s in _STARTS if not s.startswith("\\d")) + ")"
_STARTS_RETRIES = r"\d+ retr(?:y|ies) left"
# other lines of the httpx / httpcore loggers (connect_tcp.started, load_ssl_context...): known noise
_NOISE = rf"^(?:\[?\d{{4}}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|{_LEVEL}:).*?(?:^|[\s\[:])(?:httpcore2?|httpx2?)(?:\.\w+)*(?:[\s:\]]|$)"
_THREAD = r"\[([^\[\]]+)\][\s:-]*$"
_EXC = r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Timeout|Exit|Interrupt))(?::|$)"

_BUILD = r"^Building HTTP request: method=\S+ retries_taken=(\d+)"
_OPTIONS_URL = r"^Request options: .*?'url': '([^']*)'"
_OPTIONS_MAXTOK = r"^Request options: .*?'max_tokens': (\d+)"
_SEND = r"^Sending HTTP Request: \S+(?: (\S+))?"
_HTTPX = r'^HTTP Request: \S+ (\S+) "HTTP/[\d.]+ (\d{3})'
_RESPONSE = r'^HTTP Response: \S+ (?:(\S+) ")?(\d{3})'
_STATUS_ERR = r"^Encountered (?:an HTTP status error: \d+|httpx\.HTTPStatusError)"
_TIMEOUT = r"^Encountered (?:a timeout exception: (\w+)|httpx\.TimeoutException)"
_CONN = r"^Encountered (?:exception: (\w+)|Exception)\s*$"
# url, delay and max retries of a 'Retrying request' line, one pass
_RETRYING = r"^Retrying request(?: to (\S+))? in ([\d.]+) seconds(?: \(retry \d+ of (\d+)\))?"
# the lab's '%(asctime)s' with milliseconds, zoneless: one strptime instead of _TS's groups (ASCII digits)
_TS_FAST = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} "
_DONE = r"^request (?P<rid>\S+) done status=(?P<st>\S+) err=(?P<err>.*?) latency=(?P<lat>[\d.]+)\s*$"
_PHASE = r"^phase (?P<ph>\S+) start mode=(?P<mode>\w+) value=(?P<val>[\d.]+) duration=(?P<dur>[\d.]+)s"

# (kind, how the message starts, regex it must match too), first match wins; a regex only runs on
# the messages starting with its lead
_KINDS = [
    ("build", "Building HTTP request: ", None),
    ("options", "Request options: ", None),
    ("send", "Sending HTTP Request: ", None),
    ("httpx", "HTTP Request: ", None),
    ("response", "HTTP Response: ", None),
    ("status_error", "Encountered ", _STATUS_ERR),
    ("timeout", "Encountered ", _TIMEOUT),
    ("conn_error", "Encountered ", _CONN),
    ("retrying", "Retrying request", None),
    ("raise_timeout", "Raising timeout error", None),
    ("raise_conn", "Raising connection error", None),
    ("reraise", "Re-raising status error", None),
    ("done", "request ", _DONE),
    ("phase", "phase ", _PHASE),
]
_EV_SCHEMA = {
    "seq": pl.Int64,
    "line_no": pl.Int64,
    "ts": pl.Datetime("us", "UTC"),
    "thread": pl.String,
    "kind": pl.String,
    "rt": pl.Int64,
    "url": pl.String,
    "status": pl.Int64,
    "err": pl.String,
    "max_retries": pl.Int64,
    "max_tokens": pl.Int64,
    "rid": pl.String,
    "lab_status": pl.Int64,
    "lab_err": pl.String,
    "latency": pl.Float64,
    "ph": pl.String,
    "ph_mode": pl.String,
    "ph_value": pl.Float64,
    "ph_dur": pl.Float64,
    "delay": pl.Float64,
}


def _timestamp(g: pl.Expr, tz: str) -> pl.Expr:
    """Date, time, fraction and optional zone groups -> UTC."""
    naive = (g.struct.field("date") + " " + g.struct.field("time")).str.to_datetime(
        "%Y-%m-%d %H:%M:%S", strict=False
    )
    frac = (
        g.struct.field("frac").str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    )
    naive = naive + pl.duration(microseconds=frac)
    z = g.struct.field("tz")
    zz = z.str.replace(":", "")
    offset_min = zz.str.slice(1, 2).cast(pl.Int64, strict=False) * 60 + zz.str.slice(3, 2).cast(
        pl.Int64, strict=False
    )
    offset_min = pl.when(zz.str.starts_with("-")).then(-offset_min).otherwise(offset_min)
    zoned = (naive - pl.duration(minutes=offset_min)).dt.replace_time_zone("UTC")
    return (
        pl.when(z.is_null())
        .then(local_to_utc(naive, tz))
        .when(z == "Z")
        .then(naive.dt.replace_time_zone("UTC"))
        .otherwise(zoned)
        .cast(pl.Datetime("us", "UTC"))
    )


# every message starts with one of _STARTS, so its first 9 characters settle the kinds whose lead is
# all they need ('Retrying ' also opens 'Retrying due to ...': that kind is checked with its whole lead)
_HEAD9 = {lead[:9]: kind for kind, lead, rx in _KINDS if rx is None and kind != "retrying"}


def _kind_expr(msg: pl.Expr) -> pl.Expr:
    parts = [msg.str.head(9).replace_strict(_HEAD9, default=None, return_dtype=pl.String)]
    by_lead: dict[str, list[tuple[str, str | None]]] = {}
    for kind, lead, rx in _KINDS:
        if rx is not None or kind == "retrying":
            by_lead.setdefault(lead, []).append((kind, rx))
    # leads exclude each other: each is one when() over all rows (a chained otherwise() gathers the rest)
    for lead, rules in by_lead.items():
        expr = pl.lit(None, dtype=pl.String)
        for kind, rx in reversed(rules):
            expr = pl.when(msg.str.contains(rx)).then(pl.lit(kind)).otherwise(expr) if rx else pl.lit(kind)
        parts.append(pl.when(msg.str.starts_with(lead)).then(expr))
    return pl.coalesce(parts)


def _split(df: pl.DataFrame) -> pl.DataFrame:
    """Columns ``prefix`` and ``msg``: the groups of _MSG, found with a search where that settles them."""
    ln = pl.col("l")
    at = pl.min_horizontal(
        ln.str.find(_STARTS_LIT),
        pl.when(ln.str.contains(" retr", literal=True)).then(ln.str.find(_STARTS_RETRIES)),
    )
    df = df.with_columns(at.alias("_at"), (ln.str.len_bytes() == ln.str.len_chars()).alias("_ascii"))
    at = pl.col("_at")
    head = ln.str.head(at)  # ASCII: the byte offset is the character offset
    # the leftmost start is the match when it opens the line or follows a blank or ':'
    fast = pl.col("_ascii") & ((at == 0) | head.str.contains(r"[\s:]$"))
    df = df.with_columns(fast.fill_null(False).alias("_fast"))
    # one use per with_columns: a repeated expression is computed once on all rows, outside its when()
    df = df.with_columns(
        pl.when(at.is_not_null() & ~pl.col("_fast")).then(ln.str.extract_groups(_MSG)).alias("_slow")
    )
    slow = pl.col("_slow")
    return df.with_columns(
        pl.when(pl.col("_fast")).then(head).otherwise(slow.struct.field("prefix")).alias("prefix"),
        pl.when(pl.col("_fast")).then(ln.str.slice(at)).otherwise(slow.struct.field("msg")).alias("msg"),
    ).drop("_at", "_ascii", "_fast", "_slow")


def _events(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.Series]:
    """One row per meaningful line, plus the recognised-line mask."""
    seq0 = state.get("seq", 0)
    line = pl.col("line")
    cr = bool(lines.select(line.str.ends_with("\r").any()).item())
    df = _split(
        lines.select(
            "line_no",
            (line.str.strip_suffix("\r") if cr else line).alias("l"),
            (pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"),
        )
    )
    msg, kind, ln = pl.col("msg"), pl.col("kind"), pl.col("l")
    df = df.with_columns(_kind_expr(msg).alias("kind"))
    df = df.with_columns(
        pl.when(kind.is_null()).then(ln.str.contains(_PREFIXED)).otherwise(True).alias("prefixed")
    )
    # traceback lines after an 'Encountered ...' record (exc_info=True in older SDKs)
    enc = pl.when(pl.col("prefixed")).then(msg.fill_null("").str.starts_with("Encountered "))
    df = df.with_columns(
        (~pl.col("prefixed") & enc.forward_fill().fill_null(state.get("in_exc", False))).alias("cont")
    )
    last_prefixed = df.filter(pl.col("prefixed")).tail(1)
    if last_prefixed.height:
        state["in_exc"] = bool((last_prefixed["msg"].fill_null("").str.starts_with("Encountered ")).item())
    state["seq"] = seq0 + df.height
    cont = pl.col("cont")
    noise = pl.when(msg.is_null() & ~cont).then(ln.str.contains(_NOISE)).otherwise(False)
    # a record of another logger of the application (its prefix read, its text no client event), its console lines
    other = (
        pl.when(msg.is_null() & ~cont).then(pl.col("prefixed") | ln.str.contains(_CONSOLE)).otherwise(False)
    )
    # the error that ended a request, in whatever line the application wrote it
    final = pl.when(kind.is_null() & ~cont).then(
        pl.when(ln.str.contains(_FINAL_TIMEOUT))
        .then(pl.lit("final_timeout"))
        .when(ln.str.contains(_FINAL_CONN))
        .then(pl.lit("final_conn"))
        # an APIStatusError's message ('Error code: 502 - {...}'): the SDK gave up on that status
        .when(ln.str.contains(_FINAL_STATUS))
        .then(pl.lit("reraise"))
    )
    df = df.with_columns(pl.coalesce(kind, final).alias("kind"))
    ok = df.select((msg.is_not_null() | cont | noise | other | kind.is_not_null()).alias("ok")).to_series()
    n_other = int(df.select((other & kind.is_null()).sum()).item())
    if n_other:
        state["other_records"] = state.get("other_records", 0) + n_other

    exc = pl.when(cont).then(ln.str.extract(_EXC, 1))
    ev = df.with_columns(exc.alias("exc")).filter(kind.is_not_null() | pl.col("exc").is_not_null())

    def on(*kinds: str) -> pl.Expr:
        return kind.is_in(kinds) if len(kinds) > 1 else kind == kinds[0]

    # each regex runs once (a repeated expression would be computed on every row, outside its when()),
    # on the rows of the kind whose message it reads (its lead excludes the others)
    ev = ev.with_columns(ln.str.contains(_TS_FAST).alias("_fast_ts"))
    # the general stamp (a capture pass, then ~15 steps) only in the plan when some row needs it: a when() runs
    # its branch on its rows alone, but the branch's steps still cost on none (the parser over the bench's
    # three openai-python logs, one core: 4.40 -> 4.17-4.28 CPU s)
    all_fast = bool(ev["_fast_ts"].all())
    ev = ev.with_columns(
        (pl.lit(None) if all_fast else pl.when(~pl.col("_fast_ts")).then(ln.str.extract_groups(_TS))).alias(
            "_t"
        ),
        pl.col("prefix").str.extract(_THREAD, 1).alias("_thread"),
        pl.when(on("send")).then(msg.str.extract(_SEND, 1)).alias("_send"),
        pl.when(on("httpx")).then(msg.str.extract_groups(_HTTPX)).alias("_httpx"),
        pl.when(on("response")).then(msg.str.extract_groups(_RESPONSE)).alias("_resp"),
        pl.when(on("retrying")).then(msg.str.extract_groups(_RETRYING)).alias("_retry"),
        pl.when(on("done")).then(msg.str.extract_groups(_DONE)).alias("_done"),
        pl.when(on("phase")).then(msg.str.extract_groups(_PHASE)).alias("_ph"),
    )
    thread = pl.col("_thread")
    done, ph, retry = pl.col("_done"), pl.col("_ph"), pl.col("_retry")
    lab_err = done.struct.field("err")
    # a format with '%.f' takes polars' slow strptime path: the milliseconds are added apart
    fast_naive = ln.str.head(19).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S", strict=False, time_unit="us"
    ) + pl.duration(milliseconds=ln.str.slice(20, 3).pipe(to_int))
    fast_ts = local_to_utc(fast_naive, ctx.tz).cast(pl.Datetime("us", "UTC"))
    ev = ev.select(
        "seq",
        "line_no",
        (
            fast_ts
            if all_fast
            else pl.when(pl.col("_fast_ts")).then(fast_ts).otherwise(_timestamp(pl.col("_t"), ctx.tz))
        ).alias("ts"),
        pl.when(thread.str.contains(r"^\d{4}-| - ")).then(None).otherwise(thread).alias("thread"),
        kind.fill_null("exc"),
        pl.when(on("build")).then(msg.str.extract(_BUILD, 1)).pipe(to_int).alias("rt"),
        pl.coalesce(
            pl.col("_send"),
            pl.col("_httpx").struct.field("1"),
            pl.col("_resp").struct.field("1"),
            pl.when(on("options")).then(msg.str.extract(_OPTIONS_URL, 1)),
            retry.struct.field("1"),
        ).alias("url"),
        pl.coalesce(pl.col("_httpx").struct.field("2"), pl.col("_resp").struct.field("2"))
        .pipe(to_int)
        .alias("status"),
        pl.when(kind.is_null())
        .then(pl.col("exc"))
        .when(on("final_conn"))
        .then(pl.lit("APIConnectionError"))
        .when(on("final_timeout"))
        .then(pl.lit("APITimeoutError"))
        .when(on("timeout"))
        .then(pl.coalesce(msg.str.extract(_TIMEOUT, 1), pl.lit("TimeoutException")))
        .when(on("conn_error"))
        .then(msg.str.extract(_CONN, 1))
        .alias("err"),
        retry.struct.field("3").pipe(to_int).alias("max_retries"),
        retry.struct.field("2").cast(pl.Float64).alias("delay"),
        pl.when(on("options")).then(msg.str.extract(_OPTIONS_MAXTOK, 1)).pipe(to_int).alias("max_tokens"),
        done.struct.field("rid").alias("rid"),
        done.struct.field("st").pipe(to_int).alias("lab_status"),
        pl.when(lab_err != "None").then(lab_err.str.extract(r"^([A-Za-z_]\w*)", 1)).alias("lab_err"),
        done.struct.field("lat").cast(pl.Float64).alias("latency"),
        ph.struct.field("ph").alias("ph"),
        pl.when(ph.struct.field("mode") == "c")
        .then(pl.lit("concurrency"))
        .when(ph.struct.field("mode") == "r")
        .then(pl.lit("rate"))
        .otherwise(ph.struct.field("mode"))
        .alias("ph_mode"),
        ph.struct.field("val").cast(pl.Float64).alias("ph_value"),
        ph.struct.field("dur").cast(pl.Float64).alias("ph_dur"),
    )
    return ev.select(list(_EV_SCHEMA)).cast(
        _EV_SCHEMA
    ), ok  # fixed column order: carried rows are concatenated
