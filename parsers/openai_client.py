"""Python logging of openai-python / httpx (any logging prefix) -> ``client_attempts``, ``client_requests``,
``client_phases``.

Sample (/work/shared/fixtures/lab/retry-storm/client-storm.log)::

    2026-11-29T08:30:27.389 INFO openai._base_client [Thread-213 (one_request)] Retrying request in 0.398376 seconds (retry 1 of 3)

Messages come from ``src/openai/_base_client.py`` (openai/openai-python): ``Building HTTP request:
method=POST retries_taken=N``, ``Sending HTTP Request``, ``HTTP Response: POST 200``, ``Encountered a
timeout exception: ReadTimeout``, ``Retrying request in X seconds (retry k of m)`` (before 2026-08:
``Retrying request to /path in X seconds``, ``Request options: {...}``, ``Encountered Exception`` +
traceback), ``Raising timeout error``, ``Re-raising status error``; httpx's INFO line ``HTTP Request:
POST <url> "HTTP/1.1 200 OK"``. The prefix is whatever the application's logging config writes
(the lab's ``%(asctime)s %(levelname)s %(name)s [%(threadName)s]``, the SDK's own
``[%(asctime)s - %(name)s:%(lineno)d - %(levelname)s]`` with OPENAI_LOG, ``%(asctime)s - %(name)s -
%(levelname)s - %(message)s``...). The lab client's own ``labclient`` lines (``request <id> done
status=.. err=.. latency=..`` and ``phase N start mode=c value=V duration=Ds``) are parsed too.

No line names a request: attempts are grouped into logical requests per thread name, an attempt
with ``retries_taken=0`` (or, on old SDKs, one not preceded by a ``Retrying`` line) starting a new
one. Grouping is done on compact event rows carried in ``state`` until a logical request is closed
(its thread moved on, or a ``done`` line named it), so memory stays bounded by the open requests.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from ._common import local_to_utc
from .base import ChunkResult, ParseContext

NAME = "openai_client"
KIND = "client"
DESCRIPTION = "openai-python / httpx client logging (retries, timeouts; attempts rebuilt per thread)"
MODE = "lines"
SPEED = 63  # MB/s on one core (bench/, 1 GB folder): orders the streams
SAMPLES = [
    "2026-11-29T08:29:15.127 DEBUG openai._base_client [Thread-1 (one_request)] Building HTTP request: method=POST retries_taken=0",
    "2026-11-29T08:30:27.389 DEBUG openai._base_client [Thread-213 (one_request)] Encountered a timeout exception: ReadTimeout",
    "2026-11-29T08:30:27.389 INFO openai._base_client [Thread-213 (one_request)] Retrying request in 0.398376 seconds (retry 1 of 3)",
    '2026-11-29T08:29:16.883 INFO httpx [Thread-1 (one_request)] HTTP Request: POST http://127.0.0.1:8080/v1/completions "HTTP/1.1 200 OK"',
    "2026-11-29T08:34:23.637 DEBUG openai._base_client [w00] Encountered an HTTP status error: 502",
    "2026-11-29T08:29:16.894 INFO labclient [Thread-1 (one_request)] request storm-r-00001 done status=200 err=None latency=1.772",
]

CLIENT = "openai-python"
_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"
_TS = r"^\[?(?P<date>\d{4}-\d\d-\d\d)[T ](?P<time>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d\d:?\d\d)?"
_PREFIXED = rf"^\[?\d{{4}}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|^{_LEVEL}:"
# message starts we know; the prefix before them is empty or ends with a blank or ':'
_STARTS = [
    "Building HTTP request: ", "Request options: ", "Sending HTTP Request: ", "HTTP Request: ", "HTTP Response: ",
    "Encountered ", "Retrying ", "Raising (?:timeout|connection) error", "Re-raising status error", "Not retrying",
    r"\d+ retr(?:y|ies) left", "request_id: ", r"request \S+ done status=", r"phase \S+ start mode=",
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
_PRE = ["build", "options", "send"]
_DONE_WAIT = timedelta(minutes=15)  # longest stream we wait for before closing a request without its 'done' line
_OUTCOME = ["response", "httpx", "timeout", "conn_error"]
_EV_SCHEMA = {
    "seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us", "UTC"), "thread": pl.String,
    "kind": pl.String, "rt": pl.Int64, "url": pl.String, "status": pl.Int64, "err": pl.String,
    "max_retries": pl.Int64, "max_tokens": pl.Int64, "rid": pl.String, "lab_status": pl.Int64,
    "lab_err": pl.String, "latency": pl.Float64, "ph": pl.String, "ph_mode": pl.String,
    "ph_value": pl.Float64, "ph_dur": pl.Float64, "delay": pl.Float64,
}


def detect(head: list[str]) -> float:
    lines = [h for h in head if h.strip()]
    if not lines:
        return 0.0
    s = pl.Series(lines, dtype=pl.String)
    known = s.str.contains(r"(?:^|[\s:\]])(?:Building HTTP request: method=|Sending HTTP Request: |HTTP Response: \S+ |"
                           r"Retrying request |Encountered (?:a timeout|an HTTP status|exception|Exception)|"
                           r"HTTP Request: \S+ \S+ \"HTTP/)")
    noise = s.str.contains(_NOISE) | s.str.contains(r"(?:^|[\s:\]])request \S+ done status=|(?:^|\s)labclient\s")
    if not known.any():
        return 0.0
    return min(0.95, 0.5 + 0.5 * float((known | noise).mean() or 0.0))


def _timestamp(g: pl.Expr, tz: str) -> pl.Expr:
    """Date, time, fraction and optional zone groups -> UTC."""
    naive = (g.struct.field("date") + " " + g.struct.field("time")).str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False)
    frac = g.struct.field("frac").str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    naive = naive + pl.duration(microseconds=frac)
    z = g.struct.field("tz")
    zz = z.str.replace(":", "")
    offset_min = (zz.str.slice(1, 2).cast(pl.Int64, strict=False) * 60 + zz.str.slice(3, 2).cast(pl.Int64, strict=False))
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
    df = df.with_columns(pl.when(at.is_not_null() & ~pl.col("_fast")).then(ln.str.extract_groups(_MSG)).alias("_slow"))
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
    df = _split(lines.select(
        "line_no",
        (line.str.strip_suffix("\r") if cr else line).alias("l"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"),
    ))
    msg, kind, ln = pl.col("msg"), pl.col("kind"), pl.col("l")
    df = df.with_columns(_kind_expr(msg).alias("kind"))
    df = df.with_columns(pl.when(kind.is_null()).then(ln.str.contains(_PREFIXED)).otherwise(True).alias("prefixed"))
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
    ok = df.select((msg.is_not_null() | cont | noise).alias("ok")).to_series()

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
        (pl.lit(None) if all_fast else pl.when(~pl.col("_fast_ts")).then(ln.str.extract_groups(_TS))).alias("_t"),
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
    fast_naive = ln.str.head(19).str.to_datetime("%Y-%m-%dT%H:%M:%S", strict=False, time_unit="us") + pl.duration(
        milliseconds=ln.str.slice(20, 3).cast(pl.Int64))
    fast_ts = local_to_utc(fast_naive, ctx.tz).cast(pl.Datetime("us", "UTC"))
    ev = ev.select(
        "seq",
        "line_no",
        (fast_ts if all_fast else pl.when(pl.col("_fast_ts")).then(fast_ts).otherwise(_timestamp(pl.col("_t"), ctx.tz)))
        .alias("ts"),
        pl.when(thread.str.contains(r"^\d{4}-| - ")).then(None).otherwise(thread).alias("thread"),
        kind.fill_null("exc"),
        pl.when(on("build")).then(msg.str.extract(_BUILD, 1)).cast(pl.Int64).alias("rt"),
        pl.coalesce(
            pl.col("_send"), pl.col("_httpx").struct.field("1"), pl.col("_resp").struct.field("1"),
            pl.when(on("options")).then(msg.str.extract(_OPTIONS_URL, 1)), retry.struct.field("1"),
        ).alias("url"),
        pl.coalesce(pl.col("_httpx").struct.field("2"), pl.col("_resp").struct.field("2")).cast(pl.Int64)
        .alias("status"),
        pl.when(kind.is_null())
        .then(pl.col("exc"))
        .when(on("timeout"))
        .then(pl.coalesce(msg.str.extract(_TIMEOUT, 1), pl.lit("TimeoutException")))
        .when(on("conn_error"))
        .then(msg.str.extract(_CONN, 1))
        .alias("err"),
        retry.struct.field("3").cast(pl.Int64).alias("max_retries"),
        retry.struct.field("2").cast(pl.Float64).alias("delay"),
        pl.when(on("options")).then(msg.str.extract(_OPTIONS_MAXTOK, 1)).cast(pl.Int64).alias("max_tokens"),
        done.struct.field("rid").alias("rid"),
        done.struct.field("st").cast(pl.Int64, strict=False).alias("lab_status"),
        pl.when(lab_err != "None").then(lab_err.str.extract(r"^([A-Za-z_]\w*)", 1)).alias("lab_err"),
        done.struct.field("lat").cast(pl.Float64).alias("latency"),
        ph.struct.field("ph").alias("ph"),
        pl.when(ph.struct.field("mode") == "c").then(pl.lit("concurrency"))
        .when(ph.struct.field("mode") == "r").then(pl.lit("rate"))
        .otherwise(ph.struct.field("mode")).alias("ph_mode"),
        ph.struct.field("val").cast(pl.Float64).alias("ph_value"),
        ph.struct.field("dur").cast(pl.Float64).alias("ph_dur"),
    )
    return ev.select(list(_EV_SCHEMA)).cast(_EV_SCHEMA), ok  # fixed column order: carried rows are concatenated


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    ev, ok = _events(lines, ctx, state)
    if ev.height and ev["ts"].null_count() == ev.filter(pl.col("kind") != "exc").height:
        state["no_ts"] = True
    phases = ev.filter(pl.col("kind") == "phase")
    if phases.height:
        state["phases"] = pl.concat([state.get("phases", phases.clear()), phases])
    carried = state.get("events")
    ev = ev.filter(pl.col("kind") != "phase")
    ev = pl.concat([carried, ev]) if carried is not None else ev
    if ev.filter(pl.col("kind").is_in(_PRE)).height:
        state["debug"] = True
    tables, state["events"] = _assemble(ev, ctx, state, final=False)
    res = ChunkResult(tables=tables, recognized=ok, assumptions=_assumptions(ctx, state))
    return res


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    ev = state.get("events")
    tables: dict[str, pl.DataFrame] = {}
    if ev is not None and ev.height:
        tables, state["events"] = _assemble(ev, ctx, state, final=True)
    ph = _phases(state.get("phases"), ctx)
    if ph is not None:
        tables["client_phases"] = ph
    return ChunkResult(tables=tables, assumptions=_assumptions(ctx, state)) if tables else None


def _assumptions(ctx: ParseContext, state: dict) -> list[str]:
    out = [
        f"client log timestamps have no zone: read as {ctx.tz} (--tz)",
        "attempts grouped into logical requests per thread name: an attempt with retries_taken=0 "
        "(openai 'Building HTTP request' line) starts a new logical request; without that counter, one not "
        "preceded by a 'Retrying request' line does",
        "an attempt ends at its 'HTTP Response'/'HTTP Request' (headers), timeout or connection-error line; "
        "the last attempt of a request named by a 'request <id> done' line ends at that line (end of the body)",
    ]
    if state.get("no_ts"):
        out.append("lines without a timestamp (logging's default format): attempt and request times unknown")
    if not state.get("debug"):
        out.append("no DEBUG 'Sending HTTP Request' lines: attempts are rebuilt from httpx 'HTTP Request' and "
                   "'Retrying request' lines, their start times are unknown, and a last attempt that timed "
                   "out without a retry leaves no line")
    return out


def _assemble(ev: pl.DataFrame, ctx: ParseContext, state: dict, final: bool):
    """Group event rows into attempts and logical requests; return tables of the closed ones + rows to carry."""
    debug = bool(state.get("debug"))
    if not ev["seq"].is_sorted():  # carried rows then new ones: usually in order already (seq is unique)
        ev = ev.sort("seq")
    ev = ev.with_columns(
        pl.when(pl.col("kind") == "exc").then(None).otherwise(pl.col("thread").fill_null("")).forward_fill().alias("tk")
    ).with_columns(pl.col("tk").fill_null(""))
    # windows and groups per thread use an integer code of the name (several times cheaper than the string)
    ev = ev.with_columns(pl.col("tk").cast(pl.Categorical).to_physical().alias("tid"))
    if debug:
        pre = pl.col("kind").is_in(_PRE)
        anchor = pre & ~pre.shift(1).over("tid").fill_null(False)
    else:
        # INFO only: an httpx line is an attempt; a 'Retrying' line not following a failed httpx line is an
        # attempt that ended without response (timeout / connection error)
        endish = pl.col("kind").is_in(["httpx", "retrying"])
        prev = pl.when(endish).then(pl.col("kind")).forward_fill().shift(1).over("tid")
        prev_status = pl.when(endish).then(pl.col("status")).forward_fill().shift(1).over("tid")
        after_failure = (prev == "httpx") & (prev_status >= 400).fill_null(False)
        anchor = (pl.col("kind") == "httpx") | ((pl.col("kind") == "retrying") & ~after_failure.fill_null(False))
    ev = ev.with_columns(anchor.cum_sum().over("tid").alias("att"))
    att = _attempts(ev.filter(pl.col("att") > 0), debug)
    new = pl.when(pl.col("rt").is_not_null()).then(pl.col("rt") == 0).otherwise(
        ~pl.col("retried").shift(1).over("tid").fill_null(False)
    ) | pl.col("has_done").shift(1).over("tid").fill_null(False)
    att = att.sort("tk", "first_seq").with_columns(new.cast(pl.Int64).cum_sum().over("tid").alias("lg"))
    att = att.with_columns(_runs().alias("_g"))
    att = att.with_columns(_closed(att, state, final).alias("closed"))
    carry_keys = att.filter(~pl.col("closed")).select("tid", "att")
    carry = ev.join(carry_keys, on=["tid", "att"], how="semi").select(list(_EV_SCHEMA))
    done = att.filter(pl.col("closed"))
    if not done.height:
        return {}, carry
    attempts, requests = _tables(done, ctx, state)
    return {"client_attempts": attempts, "client_requests": requests}, carry


def _runs() -> pl.Expr:
    """Id of each logical request (thread, lg) in a frame sorted by thread and first event: its attempts are
    one run of rows, and windows over an integer are several times cheaper than over (name, lg)."""
    tk, lg = pl.col("tk"), pl.col("lg")
    return ((tk != tk.shift(1)) | (lg != lg.shift(1))).fill_null(True).cum_sum()


def _closed(att: pl.DataFrame, state: dict, final: bool) -> pl.Expr:
    """A logical request is complete when a 'done' line named it, its thread moved on, or its last attempt
    ended it (2xx/3xx, Raising/Re-raising). When the log has 'done' lines, wait for one up to _DONE_WAIT."""
    grp = "_g"
    if att.filter(pl.col("has_done")).height:
        state["done_lines"] = True
    ended = (
        (pl.col("status").is_between(200, 399) & ~pl.col("retried"))
        | pl.col("gave_up_timeout") | pl.col("gave_up_conn") | pl.col("reraised")
    ).last().over(grp)
    if state.get("done_lines"):
        newest = att["ts_out"].max()
        ended = ended & (pl.col("ts_out").max().over(grp) < pl.lit(newest) - _DONE_WAIT) if newest else pl.lit(False)
    moved_on = pl.col("lg") < pl.col("lg").max().over("tid")
    return pl.col("has_done").any().over(grp) | moved_on | ended.fill_null(False) | final


def _attempts(ev: pl.DataFrame, debug: bool) -> pl.DataFrame:
    k = pl.col("kind")
    out_ts = pl.col("ts").filter(k.is_in(_OUTCOME)).min()
    return ev.group_by("tid", "att").agg(
        pl.col("tk").first(),
        pl.col("seq").min().alias("first_seq"),
        pl.col("line_no").min(),
        (pl.col("ts").filter(k.is_in(_PRE)).min() if debug else pl.lit(None, dtype=pl.Datetime("us", "UTC"))).alias(
            "ts_start"
        ),
        pl.coalesce(out_ts, pl.col("ts").filter(k == "retrying").min()).alias("ts_out"),
        (k.is_in(_OUTCOME) | (k == "retrying")).any().alias("has_out"),
        pl.col("rt").drop_nulls().first(),
        pl.col("url").drop_nulls().first(),
        pl.col("max_tokens").drop_nulls().first(),
        pl.col("status").filter(k.is_in(["response", "httpx"])).drop_nulls().first(),
        (k == "timeout").any().alias("timed_out"),
        # the traceback's last exception class; HTTPStatusError adds nothing to the status
        pl.col("err").filter((k == "exc") & (pl.col("err") != "HTTPStatusError")).drop_nulls().last().alias("exc"),
        pl.col("err").filter(k.is_in(["timeout", "conn_error"])).drop_nulls().first().alias("err"),
        (k == "retrying").any().alias("retried"),
        pl.col("max_retries").drop_nulls().first(),
        pl.col("delay").filter(k == "retrying").drop_nulls().first().alias("delay_after"),
        (k == "raise_timeout").any().alias("gave_up_timeout"),
        (k == "raise_conn").any().alias("gave_up_conn"),
        (k == "reraise").any().alias("reraised"),
        (k == "done").any().alias("has_done"),
        pl.col("rid").drop_nulls().first(),
        pl.col("lab_status").filter(k == "done").first(),
        pl.col("lab_err").filter(k == "done").first(),
        pl.col("latency").drop_nulls().first(),
        pl.col("ts").filter(k == "done").first().alias("done_ts"),
        # more than one outcome of a kind inside one attempt: lines of two requests interleaved
        ((k == "response").sum() > 1).alias("dup_resp"),
        ((k == "httpx").sum() > 1).alias("dup_httpx"),
        ((k == "timeout").sum() > 1).alias("dup_to"),
    )


def _tables(att: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    # att comes from _assemble sorted by thread and first event (a filter of that order): no sort again
    grp = "_g"
    att = att.with_columns(_runs().alias(grp)).with_columns(
        pl.int_range(1, pl.len() + 1).over(grp).alias("attempt"),
        pl.len().over(grp).alias("n_att"),
        pl.col("line_no").first().over(grp).alias("lg_line"),
        pl.col("rid").drop_nulls().last().over(grp).alias("lg_rid"),
        # the delay the SDK announced after the previous attempt failed
        pl.col("delay_after").shift(1).over(grp).alias("retry_delay_s"),
    )
    last = pl.col("attempt") == pl.col("n_att")
    anomaly = (
        (pl.col("rt").is_not_null() & (pl.col("rt") != pl.col("attempt") - 1))
        | (~pl.col("has_out") & ~last)
        | pl.col("dup_resp") | pl.col("dup_httpx") | pl.col("dup_to")
    )
    base = pl.when(pl.col("rt").is_null().any().over(grp)).then(0.8).otherwise(1.0)
    if not state.get("debug"):  # INFO only: a last attempt that failed without a response is invisible
        base = pl.lit(0.6)
    base = pl.when(pl.col("tk") == "").then(base * 0.9).otherwise(base)  # no thread names: sequential client assumed
    conf = pl.when(anomaly.any().over(grp)).then(0.5).otherwise(base)
    lid = pl.coalesce(pl.col("lg_rid"), pl.lit(f"{ctx.source}:") + pl.col("lg_line").cast(pl.String))
    attempt_err = pl.coalesce(
        pl.col("exc"), pl.col("err"), pl.when(last & pl.col("has_done")).then(pl.col("lab_err")),
        # INFO only: retried without an httpx line = no response (timeout or connection error)
        pl.when(pl.col("retried") & pl.col("status").is_null()).then(pl.lit("NoResponse")),
    )
    ts_end = pl.when(last & pl.col("done_ts").is_not_null()).then(pl.col("done_ts")).otherwise(pl.col("ts_out"))
    att = att.with_columns(
        lid.alias("logical_request_id"),
        conf.alias("grouping_confidence"),
        attempt_err.alias("error"),
        ts_end.alias("ts_end"),
    )
    att = _with_phase(att, state, ctx)
    attempts = att.select(
        "ts_start", "ts_end", pl.lit(ctx.source).alias("source"), pl.lit(CLIENT).alias("client"),
        "logical_request_id", pl.lit(None, dtype=pl.String).alias("request_id"), "attempt", "status", "error",
        "timed_out",
        ((pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6).alias("e2e_s"),
        "max_tokens", "concurrency", "phase", pl.when(pl.col("tk") != "").then(pl.col("tk")).alias("thread"),
        "retry_delay_s", pl.lit("inferred").alias("grouping"), "grouping_confidence", "url", "line_no",
    )
    final_err = pl.coalesce(
        pl.col("lab_err").filter(pl.col("has_done")).last(),
        pl.when(pl.col("gave_up_timeout").last()).then(pl.lit("APITimeoutError"))
        .when(pl.col("gave_up_conn").last()).then(pl.lit("APIConnectionError")),
        pl.when(pl.col("has_done").any()).then(None).otherwise(pl.col("error").last()),
    )
    requests = att.group_by(grp).agg(
        pl.col("logical_request_id").first(),
        pl.col("ts_start").min(),
        pl.col("ts_end").last(),
        pl.coalesce(pl.col("lab_status").filter(pl.col("has_done")).last(),
                    pl.when(pl.col("has_done").any()).then(None).otherwise(pl.col("status").last())).alias("status"),
        final_err.alias("error"),
        pl.col("attempt").max().alias("attempts"),
        pl.col("latency").drop_nulls().last().alias("lab_latency"),
        pl.col("max_tokens").drop_nulls().first(),
        pl.col("max_retries").drop_nulls().first(),
        pl.col("concurrency").first(),
        pl.col("phase").first(),
        pl.col("first_seq").min(),
    ).with_columns(
        (pl.col("error").str.contains("Timeout") | (pl.col("error") == "APITimeoutError")).fill_null(False)
        .alias("timed_out"),
        pl.coalesce(
            pl.col("lab_latency"), (pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6
        ).alias("e2e_s"),
    ).sort("first_seq")
    requests = requests.select(
        "logical_request_id", pl.lit(ctx.source).alias("source"), pl.lit(CLIENT).alias("client"), "ts_start",
        "ts_end", "status", "error", "timed_out", "attempts", "e2e_s", "max_tokens", "max_retries", "concurrency",
        "phase",
    )
    return attempts.sort("line_no"), requests


def _with_phase(att: pl.DataFrame, state: dict, ctx: ParseContext) -> pl.DataFrame:
    """Phase label and concurrency of the phase each logical request started in (labclient phase lines)."""
    ph = state.get("phases")
    if ph is None or not ph.height:
        return att.with_columns(pl.lit(None, dtype=pl.Int64).alias("concurrency"),
                                pl.lit(None, dtype=pl.String).alias("phase"))
    ph = ph.sort("ts").select(
        pl.col("ts").alias("ph_ts"), pl.col("ph").alias("phase"),
        pl.when(pl.col("ph_mode") == "concurrency").then(pl.col("ph_value").round(0).cast(pl.Int64))
        .alias("concurrency"),
    )
    start = pl.coalesce(pl.col("ts_start").min(), pl.col("ts_end").min()).over("_g").alias("_lg_ts")
    att = att.with_columns(start).sort("_lg_ts", nulls_last=True)
    return att.join_asof(ph, left_on="_lg_ts", right_on="ph_ts", strategy="backward").drop("_lg_ts", "ph_ts")


def _phases(ph: pl.DataFrame | None, ctx: ParseContext) -> pl.DataFrame | None:
    if ph is None or not ph.height:
        return None
    ph = ph.sort("seq")
    end = pl.coalesce(pl.col("ts").shift(-1), pl.col("ts") + pl.duration(microseconds=(pl.col("ph_dur") * 1e6)))
    return ph.select(
        pl.lit(ctx.source).alias("source"), pl.lit(CLIENT).alias("client"), pl.col("ph").alias("phase"),
        pl.col("ts").alias("ts_start"), end.alias("ts_end"), pl.col("ph_mode").alias("mode"),
        pl.col("ph_value").alias("value"),
        pl.lit("exact: phase start lines; end = next phase start, the last one start + its stated duration")
        .alias("anchoring"),
    )
