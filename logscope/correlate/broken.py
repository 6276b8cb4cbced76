"""What a log states of an answer after the gateway's 2xx, per gateway request: the one table every such statement
goes through to the request's final outcome (``assemble._outcome``: truncated). nginx's 'upstream prematurely
closed connection' after a 200 (the lab's crash: 8 streams cut by the SIGKILL), nginx's own read timeout after a 200
('upstream timed out ... while reading upstream': spike-read-timeout's 11 streams) and a proxy's stream-error line tied
to its access line (LiteLLM's, ``stream_failures``) alike."""

from __future__ import annotations

import polars as pl

from . import stream_failures
from .exprs import group_first, index_in_group, secs
from .frames import Frames
from .ingest_tables import BODY_TIMEOUT

CUT = "cut"  # requests.mid_stream of an nginx answer whose upstream closed mid-response
READ_TIMEOUT = "read_timeout"  # ... that nginx cut itself: its proxy_read_timeout fired mid-response


def truncated_requests(F: Frames, errors: pl.DataFrame) -> pl.DataFrame:
    """Gateway requests logged 2xx whose answer nginx's error log says broke off after its headers (gr,
    mid_stream, _evidence): the upstream closed mid-response ('upstream prematurely closed connection': 'cut'), or
    nginx's own proxy_read_timeout fired while it relayed the body ('upstream timed out ... while reading
    upstream': 'read_timeout'; a timeout before the headers reads 'while reading response header' and is a 504).
    The error lines carry no request id: the N lines of one second, upstream and kind mark the N shortest 2xx
    responses of that upstream that ended in that second, the k-th line the k-th (its file and line: _evidence)."""
    how = (
        pl.when(pl.col("kind").is_in(["upstream_closed", "upstream_reset"]))
        .then(pl.lit(CUT))
        .when((pl.col("kind") == "upstream_timeout") & pl.col(BODY_TIMEOUT).fill_null(False))
        .then(pl.lit(READ_TIMEOUT))
    )
    if (
        BODY_TIMEOUT not in errors.columns
    ):  # a table read without it (a slice's empty one): no timeout is placed
        errors = errors.with_columns(pl.lit(None, pl.Boolean).alias(BODY_TIMEOUT))
    err = errors.with_columns(how.alias("mid_stream")).filter(
        pl.col("mid_stream").is_not_null() & pl.col("ts").is_not_null()
    )
    ok = F.gateway_requests.filter(
        pl.col("inference") & pl.col("status").is_between(200, 299) & pl.col("t1").is_not_null()
    )
    if err.height == 0 or ok.height == 0:
        return pl.DataFrame(schema={"gr": pl.Int64, "mid_stream": pl.String, "_evidence": pl.String})
    up = F.gateway_attempts.filter(pl.col("reached")).group_by("gr").agg(pl.col("upstream").last())
    ok = ok.join(up, on="gr", how="left").select(
        "gr", pl.col("t1").floor().alias("sec"), pl.col("upstream").fill_null(""), "bytes_sent"
    )
    keys = ["sec", "upstream", "mid_stream"]
    lines = (
        err.select(
            secs("ts").floor().alias("sec"),
            pl.col("upstream").str.extract(r"^[a-z]+://([^/]+)").fill_null("").alias("upstream"),
            "mid_stream",
            pl.format("{}:{}", pl.col("source"), pl.col("line_no")).alias("_evidence"),
            "line_no",
        )
        .sort(*keys, "line_no")
        .with_columns(group_first(*keys).alias("_first"))
        .with_columns(index_in_group().alias("_k"))
    )
    cand = (
        ok.join(lines.select(keys).unique(), on=["sec", "upstream"])
        .sort(*keys, "bytes_sent", "gr")
        .with_columns(group_first(*keys).alias("_first"))
        .with_columns(index_in_group().alias("_k"))
    )
    got = cand.join(lines.select(*keys, "_k", "_evidence"), on=[*keys, "_k"])
    # a request two kinds of line of one second could mark is one line's (the closed upstream's, then the timeout's)
    return (
        got.sort("gr", "mid_stream")
        .unique("gr", keep="first", maintain_order=True)
        .select(pl.col("gr").cast(pl.Int64), "mid_stream", "_evidence")
    )


def broken_streams(F: Frames, errors: pl.DataFrame | None, marks: pl.DataFrame | None) -> pl.DataFrame:
    """The gateway requests logged 2xx whose answer a log states broke off after it (gr, mid_stream, _stream_error,
    upstream_status, _evidence: the error line that states it): nginx's cuts (``truncated_requests``: 'cut',
    'read_timeout') and a proxy's stream-error lines
    (``stream_failures.marks``: 'failed' where tied, with the error and the upstream status it names; 'may have
    failed' on each access line an untied one may belong to). Every such statement goes through this one table to
    the request's outcome (``_outcome``)."""
    cut = (
        truncated_requests(F, errors)
        if errors is not None
        else pl.DataFrame(schema={"gr": pl.Int64, "mid_stream": pl.String, "_evidence": pl.String})
    )
    parts = [
        cut.select(
            "gr",
            "mid_stream",
            pl.lit(None, pl.String).alias("_stream_error"),
            pl.lit(None, pl.Int64).alias("upstream_status"),
            "_evidence",
        )
    ]
    if marks is not None and marks.height:
        lines = F.gateway_requests.filter(pl.col("status").is_between(200, 299)).select(
            "gr", pl.col("source").cast(pl.String), pl.col("line_no").cast(pl.Int64)
        )
        parts.append(
            lines.join(marks, on=["source", "line_no"]).select(
                "gr",
                "mid_stream",
                pl.col("error").alias("_stream_error"),
                "upstream_status",
                pl.lit(None, pl.String).alias(
                    "_evidence"
                ),  # the line tied is the access line, not the error's
            )
        )
    # one statement a request: a stated cut or failure over a 'may have failed'
    both = pl.concat(parts).with_columns((pl.col("mid_stream") == stream_failures.MAYBE).alias("_maybe"))
    return both.sort("gr", "_maybe").unique("gr", keep="first", maintain_order=True).drop("_maybe")
