"""openai_client's grouping of event rows into attempts and logical requests as it was before the compiled scanner
took it (issue #42): polars windows over the thread (the anchors, their running count), a group-by of the rows into
attempts, the requests counted on runs (``_counted``) and closed (``_closed``). The oracle of
tests/test_scan_openai_attempts.py: ``_assemble`` here is the parser's with this grouping, the rest (``_tables``) its
own."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from logscope.parsers import openai_client as oc
from logscope.parsers._openai_lines import _EV_SCHEMA

_FINAL = ["final_conn", "final_timeout"]  # a request's last error as the application logged it
_OUTCOME = ["response", "httpx", "timeout", "conn_error", *_FINAL]
_DONE_WAIT = timedelta(minutes=15)


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
    att = _counted(att.sort("tk", "first_seq"))
    att = att.with_columns(oc._runs().alias("_g"))
    att = _closed(att, state, final)
    att = oc._placed(att, ev, ctx, state)  # each attempt's file: the parser's own, as ``_tables``
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


def _counted(att: pl.DataFrame) -> pl.DataFrame:
    """``att`` (sorted by thread and first event) with ``lg``: the running count of its thread's logical requests, one
    starting at an attempt with retries_taken=0 (without that counter: one not following a 'Retrying' attempt) or
    after a 'done' line. A thread's attempts are one run of rows: the attempt before and the count within the run are
    a shift and a cumulative sum checked against the run's start, where windows over the thread hashed it three times
    (2.2 -> 0.5 ms a 36,000-line chunk)."""
    same = (pl.col("tid") == pl.col("tid").shift(1)).fill_null(False)

    def before(c: str) -> pl.Expr:
        return pl.when(same).then(pl.col(c).shift(1)).fill_null(False)

    new = pl.when(pl.col("rt").is_not_null()).then(pl.col("rt") == 0).otherwise(~before("retried"))
    att = att.with_columns((new | before("has_done")).cast(pl.Int64).alias("_n"))
    att = att.with_columns(pl.col("_n").cum_sum().alias("_cs"))
    run_base = pl.when(~same).then(pl.col("_cs") - pl.col("_n")).forward_fill()
    return att.with_columns((pl.col("_cs") - run_base).alias("lg")).drop("_n", "_cs")


def _closed(att: pl.DataFrame, state: dict, final: bool) -> pl.DataFrame:
    """``closed``: a logical request is complete when a 'done' line named it, its thread moved on, or its last attempt
    ended it (2xx/3xx, Raising/Re-raising); when the log has 'done' lines, wait for one up to _DONE_WAIT.
    ``_open_end``: closed only because the log ended, in flight when it did (a killed client), never 'ok' by a
    header's 200."""
    if att.filter(pl.col("has_done")).height:
        state["done_lines"] = True
    ended_by = (
        (pl.col("status").is_between(200, 399) & ~pl.col("retried"))
        | pl.col("gave_up_timeout")
        | pl.col("gave_up_conn")
        | pl.col("reraised")
    )
    att = oc._per_run(
        att,
        ended_by.last().alias("_ended"),
        pl.col("ts_out").max().alias("_out"),
        pl.col("has_done").any().alias("_done"),
    )
    ended = pl.col("_ended")
    if state.get("done_lines"):
        newest = att["ts_out"].max()
        ended = ended & (pl.col("_out") < pl.lit(newest) - _DONE_WAIT) if newest else pl.lit(False)
    moved_on = pl.col("lg") < pl.col("lg").max().over("tid")
    closed = pl.col("_done") | moved_on | ended.fill_null(False)
    return att.with_columns(
        (closed | final).alias("closed"), (pl.lit(final) & ~closed).alias("_open_end")
    ).drop("_ended", "_out", "_done")
