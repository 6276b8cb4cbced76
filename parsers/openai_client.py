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
Lines are read into those event rows in ``_openai_lines``; this module groups them (each thread's rows into attempts
in one pass of the compiled scanner, scan/src/attempts.rs; attempts into logical requests here).
"""

from __future__ import annotations

import polars as pl

from logscope import _scan
from logscope.numbers import to_int

from ._openai_lines import _EV_SCHEMA, _NOISE, _events
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "openai_client"
KIND = "client"
DESCRIPTION = "openai-python / httpx client logging (retries, timeouts; attempts rebuilt per thread)"
MODE = "lines"
SPEED = 63  # MB/s on one core (bench/, 1 GB folder): orders the streams
# whether the log is at DEBUG ('Sending HTTP Request' lines) changes how its attempts are grouped: a first chunk
# without one (16 KiB of a log cut mid-request) grouped them as an INFO log's until the next chunk
HEAD_STATE = True
SAMPLES = [
    "2026-11-29T08:29:15.127 DEBUG openai._base_client [Thread-1 (one_request)] Building HTTP request: method=POST retries_taken=0",
    "2026-11-29T08:30:27.389 DEBUG openai._base_client [Thread-213 (one_request)] Encountered a timeout exception: ReadTimeout",
    "2026-11-29T08:30:27.389 INFO openai._base_client [Thread-213 (one_request)] Retrying request in 0.398376 seconds (retry 1 of 3)",
    '2026-11-29T08:29:16.883 INFO httpx [Thread-1 (one_request)] HTTP Request: POST http://127.0.0.1:8080/v1/completions "HTTP/1.1 200 OK"',
    "2026-11-29T08:34:23.637 DEBUG openai._base_client [w00] Encountered an HTTP status error: 502",
    "2026-11-29T08:29:16.894 INFO labclient [Thread-1 (one_request)] request storm-r-00001 done status=200 err=None latency=1.772",
]

CLIENT = "openai-python"
_PRE = ["build", "options", "send"]
# longest stream we wait for before closing a request without its 'done' line (microseconds)
_DONE_WAIT_US = 15 * 60 * 1_000_000
# the event rows' columns the compiled scanner groups into attempts (scan/src/attempts.rs), with `key` and `ts`
_ATT_COLUMNS = [
    "kind",
    "thread",
    "url",
    "err",
    "rid",
    "lab_err",
    "seq",
    "line_no",
    "rt",
    "status",
    "max_retries",
]
_ATT_COLUMNS += ["max_tokens", "lab_status", "latency", "delay"]


def _route(url: pl.Expr) -> pl.Expr:
    """The path of a URL less its scheme, host, API version and query ('http://h:9000/v1/responses' -> '/responses')."""
    return (
        url.str.replace(r"^[A-Za-z]+://[^/]+", "")
        .str.replace(r"\?.*$", "")
        .str.replace(r"^/v\d+(/.+)$", "$1")
    )


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    known = s.str.contains(
        r"(?:^|[\s:\]])(?:Building HTTP request: method=|Sending HTTP Request: |HTTP Response: \S+ |"
        r"Retrying request |Encountered (?:a timeout|an HTTP status|exception|Exception)|"
        r"HTTP Request: \S+ \S+ \"HTTP/)"
    )
    noise = s.str.contains(_NOISE) | s.str.contains(
        r"(?:^|[\s:\]])request \S+ done status=|(?:^|\s)labclient\s"
    )
    g = per_head(nonblank(frame), n, any=known.any(), m=(known | noise).mean())
    return g.select(
        pl.when(pl.col("any")).then(pl.min_horizontal(pl.lit(0.95), 0.5 + 0.5 * pl.col("m"))).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    files = state.setdefault(
        "files", []
    )  # (first seq, name) of each file of the stream: a rotated set has several
    if not files or files[-1][1] != ctx.source:
        files.append((state.get("seq", 0), ctx.source))
    ev, ok = _events(lines, ctx, state)
    # the file's event rows and those of them with a time ('no_ts' is the whole file's, not a chunk's)
    told = ev.filter(pl.col("kind") != "exc")
    state["n_events"] = state.get("n_events", 0) + told.height
    state["n_timed"] = state.get("n_timed", 0) + told.height - told["ts"].null_count()
    phases = ev.filter(pl.col("kind") == "phase")
    if phases.height:
        state["phases"] = pl.concat([state.get("phases", phases.clear()), phases])
    carried = state.get("events")
    ev = ev.filter(pl.col("kind") != "phase")
    ev = pl.concat([carried, ev]) if carried is not None else ev
    if ev.filter(pl.col("kind").is_in(_PRE)).height:
        state["debug"] = True
    tables, state["events"] = _assemble(ev, ctx, state, final=False)
    # what the whole file shows (DEBUG lines, times, announced retries) is said at ``finish``: a chunk's state so far
    # said "no DEBUG lines" of a log whose DEBUG lines came in a later chunk
    return ChunkResult(tables=tables, recognized=ok, assumptions=_assumed(ctx))


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    if not state.get("files"):  # no line read (the second format of a mixed file that had none)
        return None
    ev = state.get("events")
    tables: dict[str, pl.DataFrame] = {}
    if ev is not None and ev.height:
        tables, state["events"] = _assemble(ev, ctx, state, final=True)
    ph = _phases(state.get("phases"), ctx, state.get("files") or [(0, ctx.source)])
    if ph is not None:
        tables["client_phases"] = ph
    return ChunkResult(tables=tables, assumptions=_assumptions(ctx, state))


def _assumed(ctx: ParseContext) -> list[str]:
    """What every reading of the log assumes, whatever its lines."""
    return [
        f"client log timestamps have no zone: read as {ctx.tz} (--tz)",
        "attempts grouped into logical requests per thread name: an attempt with retries_taken=0 "
        "(openai 'Building HTTP request' line) starts a new logical request; without that counter, one not "
        "preceded by a 'Retrying request' line does",
        "an attempt ends at its 'HTTP Response'/'HTTP Request' (headers), timeout or connection-error line; "
        "the last attempt of a request named by a 'request <id> done' line ends at that line (end of the body)",
    ]


def _assumptions(ctx: ParseContext, state: dict) -> list[str]:
    """The whole file's: what every reading assumes, what its lines (all read) showed, then what its requests did,
    in this order."""
    out = _assumed(ctx)
    if state.get("other_records"):
        out.append(
            "records of the application's other loggers and its console lines (no client event) were read as such"
        )
    if state.get("n_events") and not state.get("n_timed"):
        out.append("lines without a timestamp (logging's default format): attempt and request times unknown")
    if not state.get("debug"):
        out.append(
            "no DEBUG 'Sending HTTP Request' lines: attempts are rebuilt from httpx 'HTTP Request' and "
            "'Retrying request' lines, their start times are unknown (a request is placed at its first logged line, "
            "its e2e unknown), and a last attempt that timed out without a retry leaves no line"
        )
    if state.get("announced"):
        out.append(
            "N 'Retrying request ... in S seconds' lines are N + 1 attempts: the attempt a request's last one "
            "announced, with no line of its own after it, is a row whose outcome is unknown"
        )
    return out


def _assemble(ev: pl.DataFrame, ctx: ParseContext, state: dict, final: bool):
    """Group event rows into attempts and logical requests; return tables of the closed ones + rows to carry."""
    debug = bool(state.get("debug"))
    if not ev["seq"].is_sorted():  # carried rows then new ones: usually in order already (seq is unique)
        ev = ev.sort("seq")
    # each row's thread and attempt, each attempt's figures: one pass of the compiled scanner over the rows in order
    # (scan/src/attempts.rs). With no thread names an INFO log's requests are told apart by their route (the URL's
    # path less its version: '/v1/responses' is '/responses')
    key = ev.get_column("thread")
    if not debug:
        key = ev.select(pl.coalesce(pl.col("thread"), _route(pl.col("url")))).to_series()
    cols = {c: ev.get_column(c) for c in _ATT_COLUMNS}
    cols |= {"key": key, "ts": ev.get_column("ts").dt.epoch("us")}
    # and each attempt's logical request (`lg`, its run `_g`), closed when a 'done' line named it, its thread moved on,
    # or its last attempt ended it (2xx/3xx, Raising/Re-raising): in a log with 'done' lines not before _DONE_WAIT_US past
    # its last outcome; `_open_end`: closed only because the log ended (a killed client), never 'ok' by a header's 200
    got, rows, done_lines = _scan.openai_attempts(
        cols, debug, bool(state.get("done_lines")), final, _DONE_WAIT_US
    )
    if done_lines:
        state["done_lines"] = True
    att = _placed(pl.DataFrame(got).with_columns(pl.col("_g").set_sorted()), ev, ctx, state)
    # the rows of the attempts left open, in order (a row before its thread's first attempt is none)
    carried = (~att.get_column("closed")).gather(pl.DataFrame(rows).get_column("a")).fill_null(False)
    carry = ev.filter(carried).select(list(_EV_SCHEMA))
    done = att.filter(pl.col("closed"))
    if not done.height:
        return {}, carry
    attempts, requests = _tables(done, ctx, state)
    return {"client_attempts": attempts, "client_requests": requests}, carry


def _placed(att: pl.DataFrame, ev: pl.DataFrame, ctx: ParseContext, state: dict) -> pl.DataFrame:
    """Each attempt's file (``src``) and line: those of its first row. A rotation (copytruncate) cuts a request, or an
    attempt, between two files: the rows carried from ``client.log.1`` keep their line numbers there, so the line
    alone (the scanner's smallest) named a line of ``client.log`` that is something else."""
    files = state.get("files") or [(0, ctx.source)]
    if len(files) == 1:
        return att.with_columns(pl.lit(ctx.source).alias("src"))
    first = att.get_column("first_seq")
    # ``ev`` is sorted by seq, which is unique and numbers the stream's rows on across its files
    line = ev.get_column("line_no").gather(ev.get_column("seq").search_sorted(first))
    return att.with_columns(line.alias("line_no"), _file_of(first, files).alias("src"))


def _file_of(seq: pl.Series, files: list[tuple[int, str]]) -> pl.Series:
    """The name of the file each row (by its ``seq``) is in: the last file that began at or before it."""
    k = pl.Series([s for s, _ in files]).search_sorted(seq, side="right") - 1
    return pl.Series([n for _, n in files], dtype=pl.String).gather(k)


def _runs() -> pl.Expr:
    """Id of each logical request (thread, lg) in a frame sorted by thread and first event: its attempts are
    one run of rows, and windows over an integer are several times cheaper than over (name, lg)."""
    tk, lg = pl.col("tk"), pl.col("lg")
    # a running count from 1: sorted, so a grouping by it takes its groups as slices (`_per_run`)
    return ((tk != tk.shift(1)) | (lg != lg.shift(1))).fill_null(True).cum_sum().set_sorted()


def _per_run(att: pl.DataFrame, *aggs: pl.Expr) -> pl.DataFrame:
    """``att`` with each logical request's ``aggs`` on every row of it: one grouping by ``_g`` (its runs counted from
    1) and a gather, where a window over ``_g`` hashes every row once per expression (several times the time)."""
    per = att.group_by("_g", maintain_order=True).agg(*aggs).drop("_g")
    return att.hstack(per.select(pl.all().gather(att["_g"] - 1)))


def _announced(att: pl.DataFrame, state: dict) -> pl.DataFrame:
    """N 'Retrying request ... in S seconds' lines are N + 1 attempts: a request whose last attempt announced a retry
    that no line of it follows (the log ends, or the SDK's next lines were not logged) gets that attempt, its outcome
    unknown (``att`` sorted by thread and first event; the added rows sort after their request's last)."""
    if state.get("debug"):
        # a DEBUG log writes every attempt's 'Sending HTTP Request': one it does not show was not sent (a client
        # killed during the retry's delay sent nothing more)
        return att
    last = pl.col("first_seq") == pl.col("first_seq").max().over(_runs())
    tail = att.filter(last & pl.col("retried") & ~pl.col("has_done"))
    if tail.height == 0:
        return att
    state["announced"] = True
    unknown = {"status": None, "exc": None, "err": None, "delay_after": None, "rt": None, "ts_start": None}
    unknown |= {"ts_out": None, "lab_status": None, "lab_err": None, "latency": None, "done_ts": None}
    no = ("retried", "has_out", "timed_out", "gave_up_timeout", "gave_up_conn", "reraised", "dup_resp")
    nxt = tail.with_columns(
        *[pl.lit(v, dtype=tail.schema[c]).alias(c) for c, v in unknown.items()],
        *[pl.lit(False).alias(c) for c in (*no, "dup_httpx", "dup_to")],
    )
    both = pl.concat([att.with_columns(pl.lit(0).alias("_n")), nxt.with_columns(pl.lit(1).alias("_n"))])
    return both.sort("tk", "first_seq", "_n").drop("_n")


def _tables(att: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    # att comes from _assemble sorted by thread and first event (a filter of that order): no sort again
    grp = "_g"
    att = _announced(att, state)
    att = _per_run(
        att.with_columns(_runs().alias(grp)).with_row_index("_i"),
        pl.col("_i").first().alias("_i0"),
        pl.len().alias("n_att"),
        pl.col("line_no").first().alias("lg_line"),
        pl.col("src").first().alias("lg_src"),
        pl.col("rid").drop_nulls().last().alias("lg_rid"),
        pl.col("rt").is_null().any().alias("_rt_gap"),
        pl.col("thr").is_null().all().alias("_no_thr"),
    )
    attempt = (pl.col("_i") - pl.col("_i0")).cast(pl.Int64) + 1
    att = att.with_columns(
        attempt.alias("attempt"),
        # the delay the SDK announced after the previous attempt failed (the row before, in the same request)
        pl.when(attempt > 1).then(pl.col("delay_after").shift(1)).alias("retry_delay_s"),
    )
    last = pl.col("attempt") == pl.col("n_att")
    anomaly = (
        (pl.col("rt").is_not_null() & (pl.col("rt") != pl.col("attempt") - 1))
        | (~pl.col("has_out") & ~last)
        | pl.col("dup_resp")
        | pl.col("dup_httpx")
        | pl.col("dup_to")
    )
    att = _per_run(att.with_columns(anomaly.alias("_anomaly")), pl.col("_anomaly").any().alias("_odd"))
    base = pl.when(pl.col("_rt_gap")).then(0.8).otherwise(1.0)
    if not state.get("debug"):  # INFO only: a last attempt that failed without a response is invisible
        base = pl.lit(0.6)
    base = (
        pl.when(pl.col("_no_thr")).then(base * 0.9).otherwise(base)
    )  # no thread names: sequential client assumed
    conf = pl.when(pl.col("_odd")).then(0.5).otherwise(base)
    # named by the file and line where it began (a rotation may have put its later attempts in the next file)
    lid = pl.coalesce(pl.col("lg_rid"), pl.col("lg_src") + ":" + pl.col("lg_line").cast(pl.String))
    attempt_err = pl.coalesce(
        pl.col("exc"),
        pl.col("err"),
        pl.when(last & pl.col("has_done")).then(pl.col("lab_err")),
        # INFO only: retried without an httpx line = no response (timeout or connection error)
        pl.when(pl.col("retried") & pl.col("status").is_null()).then(pl.lit("NoResponse")),
    )
    ts_end = (
        pl.when(last & pl.col("done_ts").is_not_null()).then(pl.col("done_ts")).otherwise(pl.col("ts_out"))
    )
    att = att.with_columns(
        lid.alias("logical_request_id"),
        conf.alias("grouping_confidence"),
        attempt_err.alias("error"),
        ts_end.alias("ts_end"),
    )
    att = _with_phase(att, state, ctx)
    attempts = att.select(
        "ts_start",
        "ts_end",
        pl.col("src").alias("source"),
        pl.lit(CLIENT).alias("client"),
        "logical_request_id",
        pl.lit(None, dtype=pl.String).alias("request_id"),
        "attempt",
        "status",
        "error",
        # a stream that timed out after its headers (the request's last attempt, ended by the SDK's or the lab
        # client's timeout): the caller left on it, as on a timeout before any answer (traced-2r-kill: 35)
        (
            pl.col("timed_out")
            | (last & pl.col("gave_up_timeout"))
            | (last & pl.col("has_done") & pl.col("lab_err").str.contains("Timeout").fill_null(False))
        ).alias("timed_out"),
        ((pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6).alias("e2e_s"),
        "max_tokens",
        "concurrency",
        "phase",
        pl.col("thr").alias("thread"),
        "retry_delay_s",
        pl.lit("inferred").alias("grouping"),
        "grouping_confidence",
        "url",
        "line_no",
        "first_seq",
    )
    final_err = pl.coalesce(
        pl.col("lab_err").filter(pl.col("has_done")).last(),
        pl.when(pl.col("gave_up_timeout").last())
        .then(pl.lit("APITimeoutError"))
        .when(pl.col("gave_up_conn").last())
        .then(pl.lit("APIConnectionError")),
        pl.when(pl.col("has_done").any()).then(None).otherwise(pl.col("error").last()),
    )
    requests = (
        att.group_by(grp)
        .agg(
            pl.col("logical_request_id").first(),
            pl.col("lg_src").first().alias("source"),
            # INFO-level logs have no send time: the request starts, for the timeline, at its first logged line
            # (its first response or retry), and its e2e is unknown
            pl.coalesce(pl.col("ts_start").min(), pl.col("ts_out").min()).alias("ts_start"),
            pl.col("ts_start").min().is_not_null().alias("_sent"),
            pl.col("ts_end").last(),
            pl.coalesce(
                pl.col("lab_status").filter(pl.col("has_done")).last(),
                pl.when(pl.col("has_done").any()).then(None).otherwise(pl.col("status").last()),
            ).alias("status"),
            final_err.alias("error"),
            pl.col("attempt").max().alias("attempts"),
            pl.col("latency").drop_nulls().last().alias("lab_latency"),
            pl.col("max_tokens").drop_nulls().first(),
            pl.col("max_retries").drop_nulls().first(),
            pl.col("concurrency").first(),
            pl.col("phase").first(),
            pl.col("first_seq").min(),
            pl.col("_open_end").any().alias("unfinished"),
        )
        .with_columns(
            (pl.col("error").str.contains("Timeout") | (pl.col("error") == "APITimeoutError"))
            .fill_null(False)
            .alias("timed_out"),
            pl.coalesce(
                pl.col("lab_latency"),
                pl.when("_sent").then((pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6),
            ).alias("e2e_s"),
        )
        .sort("first_seq")
    )
    requests = requests.select(
        "logical_request_id",
        "source",
        pl.lit(CLIENT).alias("client"),
        "ts_start",
        "ts_end",
        "status",
        "error",
        "timed_out",
        "attempts",
        "e2e_s",
        "max_tokens",
        "max_retries",
        "concurrency",
        "phase",
        "unfinished",
    )
    # in the stream's order: a rotated set's line numbers start again in each file
    return attempts.sort("first_seq", "attempt").drop("first_seq"), requests


def _with_phase(att: pl.DataFrame, state: dict, ctx: ParseContext) -> pl.DataFrame:
    """Phase label and concurrency of the phase each logical request started in (labclient phase lines)."""
    ph = state.get("phases")
    if ph is None or not ph.height:
        return att.with_columns(
            pl.lit(None, dtype=pl.Int64).alias("concurrency"), pl.lit(None, dtype=pl.String).alias("phase")
        )
    ph = ph.sort("ts").select(
        pl.col("ts").alias("ph_ts"),
        pl.col("ph").alias("phase"),
        pl.when(pl.col("ph_mode") == "concurrency")
        .then(pl.col("ph_value").round(0).pipe(to_int))
        .alias("concurrency"),
    )
    start = pl.coalesce(pl.col("ts_start").min(), pl.col("ts_end").min()).alias("_lg_ts")
    att = _per_run(att, start).sort("_lg_ts", nulls_last=True)
    return att.join_asof(ph, left_on="_lg_ts", right_on="ph_ts", strategy="backward").drop("_lg_ts", "ph_ts")


# the last phase's end is its stated duration, not a record: a client that extends its phase (the lab's traced
# client waits for a replica's restart) ends it later, and a file recording the end (its JSON lines) says so
PHASE_ANCHORING = "exact: phase start lines; end = next phase start, the last one start + its stated duration"


def _phases(ph: pl.DataFrame | None, ctx: ParseContext, files: list[tuple[int, str]]) -> pl.DataFrame | None:
    if ph is None or not ph.height:
        return None
    ph = ph.sort("seq")
    # each phase named by the file of its line (a rotated set's phases are all given at the end, in the last file's)
    src = _file_of(ph.get_column("seq"), files) if len(files) > 1 else pl.lit(ctx.source)
    end = pl.coalesce(
        pl.col("ts").shift(-1), pl.col("ts") + pl.duration(microseconds=(pl.col("ph_dur") * 1e6))
    )
    return ph.select(
        src.alias("source"),
        pl.lit(CLIENT).alias("client"),
        pl.col("ph").alias("phase"),
        pl.col("ts").alias("ts_start"),
        end.alias("ts_end"),
        pl.col("ph_mode").alias("mode"),
        pl.col("ph_value").alias("value"),
        pl.lit(PHASE_ANCHORING).alias("anchoring"),
    )
