"""The oracle of tests/test_client_jsonl_flush.py: client_jsonl's lab-record flush on polars as it was before the
compiled scanner took it (issue #42: scan/src/lab.rs; windows over (file, rid), joins on two integer keys, the
attempts' outcome as expressions), and its time conversion before it was made cheaper (a time expression naming its
number eight times), kept as they were; and of tests/test_scan_client_jsonl.py: its records as
polars decoded them (`_json_records`: `str.json_decode`, the attempt records with their keys alone), before the
compiled scanner read them (issue #42)."""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.parsers._common import decode_json, epoch_to_utc, local_to_utc
from logscope.parsers.base import ParseContext
from logscope.parsers.client_jsonl import (
    ATTEMPT_KINDS,
    DTYPE,
    FILE,
    KEYS,
    LAB_KINDS,
    _b,
    _err_class,
    _f,
    _i,
    _lab_phase_table,
)

_TIMEOUT_TOL = 0.99


def ts_expr(c: str, tz: str) -> pl.Expr:
    """Epoch seconds (or ms/us/ns by magnitude), or ISO 8601 (with zone, else ``tz``) -> UTC."""
    v = pl.col(c).str.strip_chars()
    num = v.cast(pl.Float64, strict=False)
    secs = (
        pl.when(num > 1e17)
        .then(num / 1e9)
        .when(num > 1e14)
        .then(num / 1e6)
        .when(num > 1e11)
        .then(num / 1e3)
        .otherwise(num)
    )
    # ISO 8601 only where the value is not a number (the number wins the coalesce below)
    iso = pl.when(num.is_null()).then(v).str.replace(" ", "T").str.replace(r"Z$", "+00:00")
    zoned = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_zone="UTC")
    naive = local_to_utc(iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False), tz)
    return pl.coalesce(epoch_to_utc(secs), zoned, naive).cast(pl.Datetime("us", "UTC"))


def _lab_flush(pend: pl.DataFrame, ctx: ParseContext, state: dict, final: bool) -> dict[str, pl.DataFrame]:
    """Emit attempts and requests of every rid whose ``request`` record has arrived; carry the rest.

    A rid reused later in the file (a client restarted into the same file) is another request: rows
    belong to the first ``request`` record of their rid that follows them (``gen``).
    """
    is_req = (pl.col("kind") == "request").cast(pl.Int64)
    if not pend["seq"].is_sorted():  # carried rows then new ones: usually in order already (seq is unique)
        pend = pend.sort("seq")
    # one grouping by (file, rid) gives each row its generation (the requests before it), the requests of the rid,
    # and the rid's first row (`_r`): (_r, gen) names a request as (file, rid, gen) does, in two integers, so the
    # joins below are on integers (its windows hash one key where they hashed three, a join its strings)
    by = [FILE, "rid"]
    pend = pend.with_columns(
        (is_req.cum_sum().over(by) - is_req).alias("gen"),
        is_req.sum().over(by).alias("_reqs"),
        pl.col("seq").first().over(by).alias("_r"),
    )
    # ready: a request of its generation has come (or the log ended); a row without a rid never is
    ready_row = pl.col("rid").is_not_null() & (pl.lit(final) | (pl.col("gen") < pl.col("_reqs")))
    ready = pend.filter(ready_row)
    # rows of later generations are renumbered from 0 when they are looked at again
    state["lab_pending"] = pend.filter(~ready_row).drop("gen", "_reqs", "_r")
    if not ready.height:
        return {}
    k = ["_r", "gen"]
    phases = _lab_phase_table(state.get("lab_phases"))
    req = (
        ready.filter(pl.col("kind") == "request")
        .unique(k, keep="last")
        .select(
            *k,
            FILE,
            "rid",
            pl.col("seq").alias("r_seq"),
            pl.col("client").alias("r_client"),
            pl.col("phase").alias("r_phase"),
            ts_expr("send", ctx.tz).alias("r_send"),
            ts_expr("end", ctx.tz).alias("r_end"),
            _i("status").alias("r_status"),
            _err_class("error").alias("r_error"),
            _f("latency_s").alias("r_latency"),
            _i("max_tokens").alias("max_tokens"),
            _b("stream").alias("stream"),
            _i("completion_tokens").alias("output_tokens"),
            _f("ttft_s").alias("r_ttft"),
            _f("client_timeout_s").alias("timeout_s"),
            _i("max_retries").alias("max_retries"),
        )
        .join(phases, left_on=[FILE, "r_phase"], right_on=[FILE, "phase"], how="left")
    )
    send = (
        ready.filter(pl.col("kind") == "attempt_send")
        .select(
            *k,
            FILE,
            "rid",
            _i("retry_count").alias("rc"),
            "client",
            "url",
            "line_no",
            "seq",
            ts_expr("t", ctx.tz).alias("ts_start"),
            pl.col("trace_id") if "trace_id" in ready.columns else pl.lit(None, pl.String).alias("trace_id"),
        )
        .unique([*k, "rc"], keep="first")
    )
    spans = (
        ready.filter(pl.col("kind") == "attempt_span")
        .select(*k, _i("retry_count").alias("rc"), pl.col("trace_id").alias("s_trace"), "span_id")
        .unique([*k, "rc"], keep="first")
        if "span_id" in ready.columns
        else None
    )
    resp = (
        ready.filter(pl.col("kind") == "attempt_response")
        .select(
            *k,
            _i("retry_count").alias("rc"),
            ts_expr("t", ctx.tz).alias("resp_ts"),
            _i("status").alias("status"),
        )
        .unique([*k, "rc"], keep="first")
    )
    # the client's timeout setting, from its request records so far: a request left without one (in flight when a
    # killed client's log ended) had the same when the client used one (not so with the lab's --timeout-mix)
    seen = state.setdefault("lab_timeouts", {})  # (file, client): its one timeout so far, or None
    per = (
        req.filter(pl.col("timeout_s").is_not_null())
        .group_by(FILE, "r_client")
        .agg(pl.col("timeout_s").unique())
    )
    for file, client, values in per.iter_rows():
        one = values[0] if len(values) == 1 else None
        seen[file, client] = one if seen.get((file, client), one) == one else None
    known = pl.DataFrame(
        [(f, c, t) for (f, c), t in seen.items() if t is not None],
        schema={FILE: pl.Int64, "client": pl.String, "known_timeout": pl.Float64},
        orient="row",
    )
    att = (
        send.join(resp, on=[*k, "rc"], how="left")
        .join(
            spans
            if spans is not None
            else send.select(*k, "rc")
            .clear()
            .with_columns(pl.lit(None, pl.String).alias("s_trace"), pl.lit(None, pl.String).alias("span_id")),
            on=[*k, "rc"],
            how="left",
        )
        .join(req.drop(FILE, "rid", "r_seq"), on=k, how="left")
        .join(known, on=[FILE, "client"], how="left")
        .with_columns(pl.col("timeout_s").fill_null(pl.col("known_timeout")))
        .sort(*k, "rc")
    )
    # a request's attempts are a run of rows in retry order (unique, a null first): the next row of the run holds the
    # next send; the last row holds the largest retry count (a null one is no count: unknown)
    more = (pl.col("_r") == pl.col("_r").shift(-1)) & (pl.col("gen") == pl.col("gen").shift(-1))
    more = more.fill_null(False)
    att = att.with_columns(
        pl.when(more).then(pl.col("ts_start").shift(-1)).alias("next_send"),
        pl.when(pl.col("rc").is_not_null()).then(~more).alias("is_last"),
    )
    att = _lab_attempt_outcome(att)
    attempts = att.sort("seq").select(
        "ts_start",
        "ts_end",
        pl.lit(ctx.source).alias("source"),
        pl.coalesce("client", "r_client").alias("client"),
        pl.col("rid").alias("logical_request_id"),
        pl.col("rid").alias("request_id"),
        (pl.col("rc") + 1).alias("attempt"),
        "status",
        "error",
        "timed_out",
        pl.when(pl.col("is_last") & (pl.col("status") == 200)).then(pl.col("r_ttft")).alias("ttft_s"),
        ((pl.col("ts_end") - pl.col("ts_start")).dt.total_microseconds() / 1e6).alias("e2e_s"),
        "max_tokens",
        pl.when(pl.col("is_last")).then(pl.col("output_tokens")).alias("output_tokens"),
        "concurrency",
        pl.lit("exact").alias("grouping"),
        pl.lit(1.0).alias("grouping_confidence"),
        "url",
        "line_no",
        pl.coalesce("s_trace", "trace_id").alias("trace_id"),
        "span_id",
        FILE,
    )
    n_att = send.group_by(k).agg(pl.len().alias("attempts"), pl.col("seq").min().alias("first_seq"))
    requests = (
        req.join(n_att, on=k, how="left")
        .sort("first_seq", "r_seq")  # a request whose sends came before the log's start: at its record
        .select(
            pl.col("rid").alias("logical_request_id"),
            pl.lit(ctx.source).alias("source"),
            pl.col("r_client").alias("client"),
            pl.col("r_send").alias("ts_start"),
            pl.col("r_end").alias("ts_end"),
            pl.col("r_status").alias("status"),
            pl.col("r_error").alias("error"),
            pl.col("r_error").str.contains("Timeout").fill_null(False).alias("timed_out"),
            "attempts",
            pl.col("r_ttft").alias("ttft_s"),
            pl.col("r_latency").alias("e2e_s"),
            "max_tokens",
            "output_tokens",
            "timeout_s",
            "max_retries",
            "stream",
            "concurrency",
            pl.col("r_phase").alias("phase"),
            FILE,
        )
    )
    return {"client_attempts": attempts, "client_requests": requests}


def _lab_attempt_outcome(att: pl.DataFrame) -> pl.DataFrame:
    no_resp = pl.col("resp_ts").is_null()
    until = pl.when(pl.col("is_last")).then(pl.col("r_end")).otherwise(pl.col("next_send"))
    lasted = (until - pl.col("ts_start")).dt.total_microseconds() / 1e6
    # no response, an end known and the timeout not: whether it timed out or lost its connection is unknown
    unknown = no_resp & lasted.is_not_null() & pl.col("timeout_s").is_null()
    timed_out = (
        # the request's last attempt ended in a timeout error: the caller left on it, even when its headers had come
        # (a stream that timed out mid-body: traced-2r-kill's 35 APITimeoutError after a 200)
        pl.when(pl.col("is_last") & pl.col("r_error").str.contains("Timeout").fill_null(False))
        .then(True)
        .when(unknown)
        .then(None)
        .otherwise(no_resp & (lasted >= pl.col("timeout_s") * _TIMEOUT_TOL).fill_null(False))
    )
    by_timeout = pl.col("ts_start") + pl.duration(microseconds=(pl.col("timeout_s") * 1e6).pipe(to_int))
    ts_end = (
        pl.when(pl.col("is_last") & pl.col("r_end").is_not_null())
        .then(pl.col("r_end"))  # body/stream end
        .when(~no_resp)
        .then(pl.col("resp_ts"))
        .when(lasted.is_null())  # in flight when the log ended (a killed client): no end
        .then(None)
        .otherwise(pl.min_horizontal(by_timeout, pl.col("next_send")))
    )
    error = (
        pl.when(pl.col("is_last") & pl.col("r_error").is_not_null())
        .then(pl.col("r_error"))
        .when(no_resp & timed_out)
        .then(pl.lit("Timeout"))
        .when(no_resp & ~timed_out & lasted.is_not_null())  # unknown (null) or in flight: no error said
        .then(pl.lit("ConnectionError"))
    )
    return att.with_columns(timed_out.alias("timed_out"), ts_end.alias("ts_end"), error.alias("error"))


ATTEMPT_DTYPE = pl.Struct(
    {k: pl.String for k in ["kind", "t", "client", "rid", "retry_count", "url", "status", "trace_id"]}
)
_ATTEMPT_HINT = r'"kind"\s*:\s*"attempt_(?:send|response)"'
_OBJECT_OPEN, _OBJECT_CLOSE = r"^\s*\{", r"\}\s*$"


def _json_records(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    line = pl.col("line")
    obj = lines.filter(
        line.str.contains(_OBJECT_OPEN)
        & line.str.contains(_OBJECT_CLOSE)
        & ~line.str.contains("\n", literal=True)
    )
    recs = _decoded(obj)
    recs = recs.filter(
        pl.col("kind").is_in(LAB_KINDS) | (pl.col("kind").is_null() & pl.col("ts_start").is_not_null())
    )
    ok = lines.select(pl.col("line_no").is_in(recs["line_no"].implode())).to_series()
    return recs, ok


def _decoded(obj: pl.DataFrame) -> pl.DataFrame:
    """``line_no`` and every key of KEYS of each JSON object line that decodes. A line that names an attempt
    kind is decoded with ATTEMPT_DTYPE, and again with all keys when its record turns out not to be an attempt
    (the hint is a text match: it could sit in a nested object)."""

    def full(rows: pl.DataFrame) -> pl.DataFrame:
        dec = decode_json(rows["line"], DTYPE)
        return (
            rows.select("line_no").with_columns(dec.alias("r")).filter(pl.col("r").is_not_null()).unnest("r")
        )

    hint = obj.select(pl.col("line").str.contains(_ATTEMPT_HINT)).to_series()
    if not hint.any():
        return full(obj)
    hinted = obj.filter(hint)
    att = hinted.select("line_no", decode_json(hinted["line"], ATTEMPT_DTYPE).alias("r")).unnest("r")
    is_att = att["kind"].is_in(ATTEMPT_KINDS).fill_null(False)
    again = hinted.filter(~is_att)  # another kind, no kind at the top level, or no JSON
    rest = full(pl.concat([obj.filter(~hint), again]) if again.height else obj.filter(~hint))
    # the two in line order; the keys no row holds are added after the sort, which costs by the column (and
    # a concat and sort cost a third of merge_sorted's)
    held = [k for k in KEYS if k in att.columns or rest[k].null_count() < rest.height]

    def cols(df: pl.DataFrame) -> list[pl.Expr]:
        return [
            pl.col(k) if k in df.columns else pl.lit(None, pl.String).alias(k) for k in ["line_no", *held]
        ]

    both = pl.concat([att.filter(is_att).select(cols(att)), rest.select(cols(rest))]).sort("line_no")
    return both.select(
        "line_no", *(pl.col(k) if k in held else pl.lit(None, pl.String).alias(k) for k in KEYS)
    )
