"""openai_client's grouping of event rows into attempts as it was before the compiled scanner took it (issue #42):
polars windows over the thread (the anchors, their running count) and a group-by of the rows into attempts. The oracle
of tests/test_scan_openai_attempts.py: ``_assemble`` here is the parser's with this grouping, the rest its own."""

from __future__ import annotations

import polars as pl

from logscope.parsers import openai_client as oc
from logscope.parsers._openai_lines import _EV_SCHEMA

_FINAL = ["final_conn", "final_timeout"]  # a request's last error as the application logged it
_OUTCOME = ["response", "httpx", "timeout", "conn_error", *_FINAL]


def _assemble(ev: pl.DataFrame, ctx, state: dict, final: bool):
    debug = bool(state.get("debug"))
    if not ev["seq"].is_sorted():
        ev = ev.sort("seq")
    inherit = pl.col("kind").is_in(["exc", *_FINAL])
    key = pl.col("thread").fill_null("") if debug else pl.coalesce(pl.col("thread"), oc._route(pl.col("url")))
    ev = ev.with_columns(pl.when(inherit).then(None).otherwise(key).forward_fill().alias("tk")).with_columns(
        pl.col("tk").fill_null("")
    )
    ev = ev.with_columns(pl.col("tk").cast(pl.Categorical).to_physical().alias("tid"))
    if debug:
        pre = pl.col("kind").is_in(oc._PRE)
        anchor = pre & ~pre.shift(1).over("tid").fill_null(False)
    else:
        endish = pl.col("kind").is_in(["httpx", "retrying", *_FINAL])
        prev = pl.when(endish).then(pl.col("kind")).forward_fill().shift(1).over("tid")
        prev_status = pl.when(endish).then(pl.col("status")).forward_fill().shift(1).over("tid")
        after_failure = (prev == "httpx") & (prev_status >= 400).fill_null(False)
        anchor = pl.col("kind").is_in(["httpx", *_FINAL]) | (
            (pl.col("kind") == "retrying") & ~after_failure.fill_null(False)
        )
    ev = ev.with_columns(anchor.cum_sum().over("tid").alias("att"))
    att = _attempts(ev.filter(pl.col("att") > 0), debug)
    att = oc._counted(att.sort("tk", "first_seq"))
    att = att.with_columns(oc._runs().alias("_g"))
    att = oc._closed(att, state, final)
    carry_keys = att.filter(~pl.col("closed")).select("tid", "att")
    carry = ev.join(carry_keys, on=["tid", "att"], how="semi").select(list(_EV_SCHEMA))
    done = att.filter(pl.col("closed"))
    if not done.height:
        return {}, carry
    attempts, requests = oc._tables(done, ctx, state)
    return {"client_attempts": attempts, "client_requests": requests}, carry


def _attempts(ev: pl.DataFrame, debug: bool) -> pl.DataFrame:
    k = pl.col("kind")
    out_ts = pl.col("ts").filter(k.is_in(_OUTCOME)).min()
    return ev.group_by("tid", "att").agg(
        pl.col("tk").first(),
        pl.col("thread").drop_nulls().first().alias("thr"),
        pl.col("seq").min().alias("first_seq"),
        pl.col("line_no").min(),
        (
            pl.col("ts").filter(k.is_in(oc._PRE)).min()
            if debug
            else pl.lit(None, dtype=pl.Datetime("us", "UTC"))
        ).alias("ts_start"),
        pl.coalesce(out_ts, pl.col("ts").filter(k == "retrying").min()).alias("ts_out"),
        (k.is_in(_OUTCOME) | (k == "retrying")).any().alias("has_out"),
        pl.col("rt").drop_nulls().first(),
        pl.col("url").drop_nulls().first(),
        pl.col("max_tokens").drop_nulls().first(),
        pl.col("status").filter(k.is_in(["response", "httpx"])).drop_nulls().first(),
        (k == "timeout").any().alias("timed_out"),
        pl.col("err")
        .filter((k == "exc") & (pl.col("err") != "HTTPStatusError"))
        .drop_nulls()
        .last()
        .alias("exc"),
        pl.col("err").filter(k.is_in(["timeout", "conn_error", *_FINAL])).drop_nulls().first().alias("err"),
        (k == "retrying").any().alias("retried"),
        pl.col("max_retries").drop_nulls().first(),
        pl.col("delay").filter(k == "retrying").drop_nulls().first().alias("delay_after"),
        k.is_in(["raise_timeout", "final_timeout"]).any().alias("gave_up_timeout"),
        k.is_in(["raise_conn", "final_conn"]).any().alias("gave_up_conn"),
        (k == "reraise").any().alias("reraised"),
        (k == "done").any().alias("has_done"),
        pl.col("rid").drop_nulls().first(),
        pl.col("lab_status").filter(k == "done").first(),
        pl.col("lab_err").filter(k == "done").first(),
        pl.col("latency").drop_nulls().first(),
        pl.col("ts").filter(k == "done").first().alias("done_ts"),
        ((k == "response").sum() > 1).alias("dup_resp"),
        ((k == "httpx").sum() > 1).alias("dup_httpx"),
        ((k == "timeout").sum() > 1).alias("dup_to"),
    )
