"""lm-evaluation-harness against an API (``local-completions``, ``local-chat-completions``): its progress bar, and
the records of its API model glued onto it -> ``client_attempts``, ``client_requests``, ``load_tests``.

Samples (public-2 c03, tenstorrent/tt-inference-server#661; instructlab/eval#197, lm-eval run by ilab)::

    Requesting API:  99%|█████████▉| 1000/1008 [2:06:27<07:46, 58.35s/it]2025-09-14:21:36:58,994 ERROR    [api_models.py:408] Exception:TimeoutError(), undefined, retrying.
    2025-09-14:21:36:59,014 INFO     [api_models.py:452] Retry attempt 1
    Requesting API:   0%|    | 52/56168 [00:16<2:48:58,  5.54it/s]WARNING 2024-12-12 20:57:37,031 lm-eval:347: API request failed with error message: Internal Server Error. Retrying...

Line kinds (a line may be a bar with a record glued after it: tqdm rewrites its line with ``\\r`` and the record's
newline ends it):

* the progress bar: ``<desc>: NN%|<bar>| n/total [elapsed<remaining, rate]``; ``Requesting API`` is the
  requests (total: how many the run sends; elapsed: how long it ran);
* a record, in lm-eval's own format ``YYYY-MM-DD:HH:MM:SS,mmm LEVEL [file.py:N] message`` or behind another
  program's logging (``LEVEL YYYY-MM-DD HH:MM:SS,mmm lm-eval:N: message``), local time (the folder's zone);
* the retry messages: ``Exception:<error>(), <detail>, retrying.`` and ``API request failed with error message:
  <reason>. Retrying...`` end an attempt (a reason phrase gives its status: Internal Server Error -> 500; a
  TimeoutError is a timeout); ``Retry attempt N`` starts attempt N+1.

lm-eval logs no request id and no success: a request is rebuilt from its failures, consecutive failures while the
bar stands still being one request's retries (grouping 'inferred'); each failure announces a retry, so a request
of N failures made N+1 attempts, the last one's outcome unlogged.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int

from ._common import local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "lm_eval"
KIND = "client"
DESCRIPTION = (
    "lm-evaluation-harness API runs: its progress bar and retry records (attempts, a load_tests row)"
)
MODE = "document"
SAMPLES = [
    "Requesting API:  99%|██████████▉| 999/1008 [2:05:19<08:08, 54.29s/it]",
    "2025-09-14:21:36:59,014 INFO     [api_models.py:452] Retry attempt 1",
    "WARNING 2024-12-12 20:57:38,197 lm-eval:347: API request failed with error message: Internal Server Error. "
    "Retrying...",
]

CLIENT = "lm-eval-harness"
_BAR = (
    r"^(?P<desc>[^|\n]*?):?\s*(?P<pct>\d+)%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+) "
    r"\[(?P<elapsed>[\d:]+)<[^,\]]*,\s*[^\]]*\](?P<rest>.*)$"
)
_NATIVE = r"^(?P<ts>\d{4}-\d\d-\d\d:\d\d:\d\d:\d\d,\d{3}) (?P<level>[A-Z]+)\s+\[[\w.]+:\d+\] (?P<msg>.*)$"
_HOSTED = r"^(?P<level>[A-Z]+) (?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) lm-eval:\d+: (?P<msg>.*)$"
_FAIL = (
    r"^(?:Exception:(?P<exc>\w+)\(.*, retrying\.|API request failed with error message: (?P<reason>.*?)\.? "
    r"Retrying\.\.\.)\s*$"
)
_RETRY = r"^Retry attempt (\d+)\s*$"
REASONS = {
    "Bad Request": 400,
    "Unauthorized": 401,
    "Forbidden": 403,
    "Not Found": 404,
    "Request Timeout": 408,
    "Too Many Requests": 429,
    "Internal Server Error": 500,
    "Bad Gateway": 502,
    "Service Unavailable": 503,
    "Gateway Timeout": 504,
}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    rest = s.str.extract(_BAR, 6).fill_null(s)
    g = per_head(
        nonblank(frame),
        n,
        api=s.str.contains(r"^Requesting API:\s*\d+%\|").any(),
        rec=(rest.str.contains(_NATIVE) | rest.str.contains(_HOSTED)).mean(),
        bar=s.str.contains(_BAR).mean(),
    )
    return g.select(
        pl.when(pl.col("api") & (pl.col("rec") + pl.col("bar") >= 0.6))
        .then(0.9)
        .when(pl.col("rec") >= 0.6)
        .then(0.6)
        .otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _secs(hms: pl.Expr) -> pl.Expr:
    """tqdm's elapsed ``[H:]MM:SS`` in seconds."""
    parts = hms.str.split(":").list.eval(pl.element().pipe(to_int))
    return (
        parts.list.eval(pl.element().reverse())
        .list.eval(pl.element() * pl.lit(60).pow(pl.int_range(pl.len())).cast(pl.Int64))
        .list.sum()
        .cast(pl.Float64)
    )


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    s = pl.Series("line", text.split("\n"), dtype=pl.String)
    if text.endswith("\n"):
        s = s.head(s.len() - 1)
    df = pl.DataFrame({"line": s.str.strip_chars_end("\r")}).with_row_index("line_no", 1)
    df = df.with_columns(pl.col("line_no").cast(pl.Int64), pl.col("line").str.extract_groups(_BAR).alias("b"))
    df = df.unnest("b").with_columns(pl.coalesce("rest", "line").alias("rec"))
    native = pl.col("rec").str.extract_groups(_NATIVE)
    hosted = pl.col("rec").str.extract_groups(_HOSTED)
    df = df.with_columns(native.alias("a"), hosted.alias("h")).with_columns(
        pl.coalesce(
            pl.col("a")
            .struct.field("ts")
            .str.strptime(pl.Datetime("us"), "%Y-%m-%d:%H:%M:%S,%3f", strict=False),
            pl.col("h")
            .struct.field("ts")
            .str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S,%3f", strict=False),
        ).alias("naive"),
        pl.coalesce(pl.col("a").struct.field("msg"), pl.col("h").struct.field("msg")).alias("msg"),
        pl.col("n").pipe(to_int).forward_fill().fill_null(0).alias("progress"),
    )
    df = df.with_columns(local_to_utc(pl.col("naive"), ctx.tz).alias("ts")).with_columns(
        pl.col("msg").str.extract_groups(_FAIL).alias("f"),
        pl.col("msg").str.extract(_RETRY).pipe(to_int).alias("retry_n"),
    )
    known = (
        pl.col("desc").is_not_null() & (pl.col("rest") == "")
        | pl.col("msg").is_not_null()
        | (pl.col("line") == "")
    )
    parsed = int(df.select(known.sum()).item())
    fails = (
        df.unnest("f")
        .filter(pl.col("exc").is_not_null() | pl.col("reason").is_not_null())
        .with_columns(
            # a new request when the bar moved since the previous failure
            (pl.col("progress") != pl.col("progress").shift(1)).fill_null(True).cum_sum().alias("req"),
        )
        .with_columns((pl.int_range(pl.len()) + 1).over("req").alias("attempt"))
    )
    out = _tables(df, fails, ctx) if fails.height else {}
    lt = _load_test(df, ctx.source)
    if lt.height:
        out["load_tests"] = lt
    return ChunkResult(
        tables=out,
        lines_parsed=parsed,
        assumptions=(
            [
                "lm-eval logs no request id and no success: a request is rebuilt from its consecutive failures "
                "while the progress bar stands still (grouping inferred); its last attempt's outcome is not logged"
            ]
            if fails.height
            else []
        ),
    )


def _tables(df: pl.DataFrame, fails: pl.DataFrame, ctx: ParseContext) -> dict[str, pl.DataFrame]:
    # 'Retry attempt N' starts attempt N+1 of the request before it
    starts = (
        df.filter(pl.col("retry_n").is_not_null())
        .select("line_no", "ts", (pl.col("retry_n") + 1).alias("attempt"))
        .join_asof(fails.select("line_no", "req").sort("line_no"), on="line_no", strategy="backward")
        .select("req", "attempt", pl.col("ts").alias("announced"))
    )
    lid = pl.format("lm-eval:{}:{}", pl.lit(ctx.source), pl.col("req"))
    status = pl.col("reason").replace_strict(REASONS, default=None, return_dtype=pl.Int64)
    failed = fails.select(
        "req",
        "attempt",
        pl.col("ts").alias("ts_end"),
        status.alias("status"),
        pl.coalesce("exc", "reason").alias("error"),
        (pl.col("exc") == "TimeoutError").fill_null(False).alias("timed_out"),
        "line_no",
    )
    last = failed.group_by("req").agg(
        (pl.col("attempt").max() + 1).alias("attempt"), pl.col("ts_end").last().alias("prev_end")
    )
    att = pl.concat([failed, last.drop("prev_end")], how="diagonal").sort("req", "attempt")
    att = (
        att.with_columns(pl.col("ts_end").shift(1).over("req").alias("prev_end"))
        .join(starts, on=["req", "attempt"], how="left")
        .with_columns(pl.coalesce("announced", "prev_end").alias("ts_start"))
    )
    attempts = att.select(
        "ts_start",
        "ts_end",
        pl.lit(ctx.source).alias("source"),
        pl.lit(CLIENT).alias("client"),
        lid.alias("logical_request_id"),
        "attempt",
        "status",
        "error",
        "timed_out",
        pl.lit("inferred").alias("grouping"),
        pl.lit(0.5).alias("grouping_confidence"),
        "line_no",
    )
    requests = attempts.group_by("logical_request_id", maintain_order=True).agg(
        pl.col("source").first(),
        pl.col("client").first(),
        pl.min_horizontal(pl.col("ts_start").min(), pl.col("ts_end").min()).alias("ts_start"),
        pl.col("attempt").max().alias("attempts"),
    )
    return {"client_attempts": attempts, "client_requests": requests}


def _load_test(df: pl.DataFrame, source: str) -> pl.DataFrame:
    """The API requests' bar: how many the run sends, how long it ran (its last update)."""
    bar = df.filter(pl.col("desc").str.strip_chars() == "Requesting API")
    if not bar.height:
        return pl.DataFrame()
    last = bar.tail(1)
    return last.select(
        pl.lit(source).alias("source"),
        pl.lit(CLIENT).alias("tool"),
        pl.lit(1, dtype=pl.Int64).alias("run"),
        pl.col("total").pipe(to_int).alias("requests"),
        _secs(pl.col("elapsed")).alias("duration_s"),
        pl.lit("client").alias("clock"),
        pl.lit("load_test").alias("latency_source"),
        bar.select(pl.col("line_no").min()).to_series().alias("line_no"),
    )
