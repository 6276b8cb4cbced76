"""What a log states of an answer after the gateway's 2xx, per gateway request: the one table every such statement
goes through to the request's final outcome (``assemble._outcome``: truncated). nginx's 'upstream prematurely
closed connection' after a 200 (the lab's crash: 8 streams cut by the SIGKILL) and a proxy's stream-error line tied
to its access line (LiteLLM's, ``stream_failures``) alike."""

from __future__ import annotations

import polars as pl

from . import stream_failures
from .frames import Frames, group_first, index_in_group, secs


def truncated_requests(F: Frames, errors: pl.DataFrame) -> pl.DataFrame:
    """Gateway requests logged 2xx whose upstream closed mid-response (nginx wrote the headers, then
    'upstream prematurely closed connection'). The error lines carry no request id: the N lines of one
    second and upstream mark the N shortest 2xx responses of that upstream that ended in that second."""
    err = errors.filter(
        pl.col("kind").is_in(["upstream_closed", "upstream_reset"]) & pl.col("ts").is_not_null()
    )
    ok = F.gateway_requests.filter(
        pl.col("inference") & pl.col("status").is_between(200, 299) & pl.col("t1").is_not_null()
    )
    if err.height == 0 or ok.height == 0:
        return pl.DataFrame(schema={"gr": pl.Int64})
    up = F.gateway_attempts.filter(pl.col("reached")).group_by("gr").agg(pl.col("upstream").last())
    ok = ok.join(up, on="gr", how="left").select(
        "gr", pl.col("t1").floor().alias("sec"), pl.col("upstream").fill_null(""), "bytes_sent"
    )
    n = err.group_by(
        secs("ts").floor().alias("sec"),
        pl.col("upstream").str.extract(r"^[a-z]+://([^/]+)").fill_null("").alias("upstream"),
    ).agg(pl.len().alias("n_cut"))
    cand = ok.join(n, on=["sec", "upstream"]).sort("sec", "upstream", "bytes_sent", "gr")
    cand = cand.with_columns(group_first("sec", "upstream").alias("_first")).with_columns(
        index_in_group().alias("_k")
    )
    return cand.filter(pl.col("_k") <= pl.col("n_cut")).select("gr")


CUT = "cut"  # requests.mid_stream of an nginx answer whose upstream closed mid-response


def broken_streams(F: Frames, errors: pl.DataFrame | None, marks: pl.DataFrame | None) -> pl.DataFrame:
    """The gateway requests logged 2xx whose answer a log states broke off after it (gr, mid_stream, _stream_error,
    upstream_status): nginx's cut upstreams (``truncated_requests``: 'cut') and a proxy's stream-error lines
    (``stream_failures.marks``: 'failed' where tied, with the error and the upstream status it names; 'may have
    failed' on each access line an untied one may belong to). Every such statement goes through this one table to
    the request's outcome (``_outcome``)."""
    cut = truncated_requests(F, errors) if errors is not None else pl.DataFrame(schema={"gr": pl.Int64})
    parts = [
        cut.select(
            pl.col("gr").cast(pl.Int64),
            pl.lit(CUT).alias("mid_stream"),
            pl.lit(None, pl.String).alias("_stream_error"),
            pl.lit(None, pl.Int64).alias("upstream_status"),
        )
    ]
    if marks is not None and marks.height:
        lines = F.gateway_requests.filter(pl.col("status").is_between(200, 299)).select(
            "gr", pl.col("source").cast(pl.String), pl.col("line_no").cast(pl.Int64)
        )
        parts.append(
            lines.join(marks, on=["source", "line_no"]).select(
                "gr", "mid_stream", pl.col("error").alias("_stream_error"), "upstream_status"
            )
        )
    # one statement a request: a stated cut or failure over a 'may have failed'
    both = pl.concat(parts).with_columns((pl.col("mid_stream") == stream_failures.MAYBE).alias("_maybe"))
    return both.sort("gr", "_maybe").unique("gr", keep="first", maintain_order=True).drop("_maybe")
