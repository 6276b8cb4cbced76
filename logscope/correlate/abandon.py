"""Attempts whose caller left before the answer, and what the server did with each (the facts of the cancellation
claim).

An attempt is abandoned by its caller when the client timed out on it (``client_timeout``), when the client's log
ended with it in flight (``client_stopped``: a killed client), when the gateway logged 499 for it and the client's
log says neither (``gateway_499``), or when the gateway gave up on its upstream (``gateway_upstream_timeout``: 504 or
'timed out'). Each is counted once, whether or not a vLLM execution was matched to it. Its execution is the one that
was running when the caller left (the gateway request's latest execution started by then); one execution left by
both the client and, later, the gateway is the client's. Then, against the time the caller left:

* ``aborted``: vLLM aborted it within the race window (CANCEL_RACE_S plus its stamps' resolution);
* ``finished_in_race``: it ended before, or within CANCEL_RACE_S after (plus the resolution of vLLM's stamps when its
  end is one: a V0 finish line), done before an abort could arrive;
* ``ran_on``: it ran on past the window, for nobody (``after_s``: until its end or late abort; null when no end
  is known);
* ``unmatched``: no execution was matched to it, with why (it never reached vLLM: the gateway made no connection;
  no gateway request matched it; no vLLM request line matched; no vLLM request line in the input).
"""

from __future__ import annotations

import polars as pl

from ..scalars import float_value
from .frames import Frames
from .reach import NO_GATEWAY_LINE, NO_SERVER_LINE, NO_SERVER_LOG

# seconds in which a caller leaving and the server ending or aborting the request are one race
CANCEL_RACE_S = 1.0
CLASSES = ("client_timeout", "client_stopped", "gateway_499", "gateway_upstream_timeout")
OUTCOMES = ("aborted", "finished_in_race", "ran_on", "unmatched")
NEVER_REACHED = "never reached vLLM (the gateway made no connection)"
SLACK_S = 0.05  # an execution received this soon after the caller left was running when it left (stamp noise)

COLUMNS = {
    "kind": pl.String,
    "t0": pl.Float64,  # when the caller left
    "lr": pl.Int64,
    "ca": pl.Int64,
    "gr": pl.Int64,
    "ga": pl.Int64,
    "sr": pl.Int64,
    "outcome": pl.String,
    "why": pl.String,
    "after_s": pl.Float64,
    "match": pl.String,
}


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema=COLUMNS)


def claims(
    F: Frames, gr_lr: pl.DataFrame, ex: pl.DataFrame, res: dict[str, float], logs: dict[str, bool]
) -> pl.DataFrame:
    """One row per abandoned attempt (COLUMNS), with its execution and outcome. ``logs``: whether the input holds
    vLLM request lines (``server``) and gateway requests (``gateway``) at all."""
    timed_out = pl.col("timed_out").fill_null(False)
    client = F.client_attempts.filter(timed_out | pl.col("left_unfinished").is_not_null()).select(
        pl.when(timed_out).then(pl.lit("client_timeout")).otherwise(pl.lit("client_stopped")).alias("kind"),
        pl.min_horizontal(pl.when(timed_out).then(pl.col("t1")), "left_unfinished").alias("t0"),
        "lr",
        "ca",
    )
    link = (
        gr_lr.filter(pl.col("ca").is_in(client["ca"].implode())).select("ca", "gr").unique("ca", keep="first")
    )
    client = client.join(link, on="ca", how="left")
    gr = F.gateway_requests.filter(pl.col("inference"))

    def with_lr(df: pl.DataFrame, cols: tuple[str, ...]) -> pl.DataFrame:  # the few rows' logical requests
        own = (
            gr_lr.filter(pl.col("gr").is_in(df["gr"].implode()))
            .select("gr", *cols)
            .unique("gr", keep="first")
        )
        return df.join(own, on="gr", how="left")

    g499 = gr.filter(pl.col("status") == 499).select("gr", pl.col("t1").alias("t0"))
    g499 = with_lr(g499.join(client.select("gr").drop_nulls(), on="gr", how="anti"), ("lr", "ca"))
    g499 = g499.with_columns(pl.lit("gateway_499").alias("kind"))
    timeout = (pl.col("upstream_status") == 504) | pl.col("error").str.contains("(?i)timed? ?out").fill_null(
        False
    )
    gw = F.gateway_attempts.filter(~pl.col("pseudo") & timeout).select("ga", "gr", pl.col("a1").alias("t0"))
    gw = with_lr(gw.filter(pl.col("gr").is_in(gr["gr"].implode())), ("lr",))
    gw = gw.with_columns(pl.lit("gateway_upstream_timeout").alias("kind"))
    ab = pl.concat([client, g499, gw], how="diagonal_relaxed")
    if ab.height == 0:
        return _empty()
    ab = ab.with_row_index("_id").with_columns(pl.col("_id").cast(pl.Int64))
    return _outcomes(F, _live(ab, ex), ex, res, logs)


def _live(ab: pl.DataFrame, ex: pl.DataFrame) -> pl.DataFrame:
    """Each abandoned attempt with the execution running when its caller left (``sr``, null when none)."""
    cols = ex.select("sr", "ga", "gr", "ca", "start")
    by_ga = (
        ab.filter(pl.col("ga").is_not_null())
        .select("_id", "t0", "ga")
        .join(cols.select("sr", "ga", "start"), on="ga")
    )
    side = ab.filter(pl.col("ga").is_null())
    by_gr = side.select("_id", "t0", "gr").drop_nulls("gr").join(cols.select("sr", "gr", "start"), on="gr")
    direct = cols.filter(pl.col("ga").is_null() & pl.col("ca").is_not_null()).select("sr", "ca", "start")
    by_ca = side.select("_id", "t0", "ca").drop_nulls("ca").join(direct, on="ca")
    cand = pl.concat([x.select("_id", "t0", "sr", "start") for x in (by_ga, by_gr, by_ca)])
    started = (pl.col("start") <= pl.col("t0") + SLACK_S).fill_null(False)
    best = (
        cand.with_columns(started.alias("_by"))
        # the latest execution started by the time the caller left; else the first after
        .sort(
            "_id",
            "_by",
            pl.when(pl.col("_by")).then(-pl.col("start")).otherwise(pl.col("start")),
            "sr",
            descending=[False, True, False, False],
            nulls_last=True,
        )
        .unique("_id", keep="first")
        .select("_id", "sr")
    )
    ab = ab.join(best, on="_id", how="left")
    # one execution left by several (the client, then the gateway's read timeout): the first to leave has it
    order = pl.col("t0").fill_null(float("inf"))
    first = ab.filter(pl.col("sr").is_not_null()).sort(order, "_id").unique("sr", keep="first").select("_id")
    return ab.filter(pl.col("sr").is_null() | pl.col("_id").is_in(first["_id"].implode()))


def _outcomes(
    F: Frames, ab: pl.DataFrame, ex: pl.DataFrame, res: dict[str, float], logs: dict[str, bool]
) -> pl.DataFrame:
    # the window: CANCEL_RACE_S, plus the resolution of vLLM's stamps when the time compared is one of them (an
    # abort line; a V0 finish line), not when it is the gateway's millisecond end of the upstream attempt (a finish
    # 1.5 s after the caller left, timed by nginx, is no race)
    r = pl.col("source").replace_strict(res, default=0.0)
    stamped = pl.col("end_source").is_in(["finished", "abort"])
    e = ex.filter(pl.col("sr").is_in(ab["sr"].drop_nulls().implode())).select(
        "sr",
        "end",
        "aborted",
        "match",
        (r + CANCEL_RACE_S).alias("_race"),
        (pl.when(stamped).then(r).otherwise(0.0) + CANCEL_RACE_S).alias("_race_end"),
    )
    # the few rows of the abandoned attempts' keys (the frames hold every request)
    gr = F.gateway_requests.filter(pl.col("gr").is_in(ab["gr"].drop_nulls().implode())).select(
        "gr", (pl.col("n_reached") > 0).alias("_g_conn")
    )
    ga = F.gateway_attempts.filter(pl.col("ga").is_in(ab["ga"].drop_nulls().implode())).select(
        "ga", pl.col("reached").alias("_a_conn")
    )
    ab = ab.join(e, on="sr", how="left").join(gr, on="gr", how="left").join(ga, on="ga", how="left")
    left = pl.col("t0")
    late_abort = pl.col("aborted") - left > pl.col("_race")
    outcome = (
        pl.when(pl.col("sr").is_null())
        .then(pl.lit("unmatched"))
        .when(pl.col("aborted").is_not_null() & left.is_not_null())
        .then(pl.when(late_abort).then(pl.lit("ran_on")).otherwise(pl.lit("aborted")))
        .when(pl.col("aborted").is_not_null())
        .then(pl.lit("aborted"))
        .when(pl.col("end").is_not_null() & (pl.col("end") - left <= pl.col("_race_end")).fill_null(False))
        .then(pl.lit("finished_in_race"))
        .otherwise(pl.lit("ran_on"))
    )
    after = pl.coalesce(pl.when(pl.col("aborted").is_not_null()).then(pl.col("aborted")), "end") - left
    server = NO_SERVER_LINE if logs["server"] else NO_SERVER_LOG
    why = (
        pl.when(pl.col("sr").is_not_null())
        .then(None)
        .when(pl.col("ga").is_not_null())
        .then(
            pl.when(~pl.col("_a_conn").fill_null(True)).then(pl.lit(NEVER_REACHED)).otherwise(pl.lit(server))
        )
        .when(pl.col("gr").is_not_null())
        .then(
            pl.when(~pl.col("_g_conn").fill_null(True)).then(pl.lit(NEVER_REACHED)).otherwise(pl.lit(server))
        )
        .otherwise(pl.lit(NO_GATEWAY_LINE if logs["gateway"] else server))
    )
    ab = ab.with_columns(outcome.alias("outcome"), why.alias("why"))
    ab = ab.with_columns(
        pl.when(pl.col("outcome") == "ran_on").then(after.clip(0)).alias("after_s"),
        pl.when(pl.col("sr").is_not_null()).then(pl.col("match")).alias("match"),
    )
    return ab.sort("_id").select([pl.col(c).cast(t) for c, t in COLUMNS.items()])


def on_executions(ex: pl.DataFrame, ab: pl.DataFrame) -> pl.DataFrame:
    """The executions with their caller's leaving: ``left``, ``left_by`` (client | gateway), ``orphaned`` (it ran
    on; null when no caller left), ``orphan_s`` (seconds after the caller left)."""
    mine = ab.filter(pl.col("sr").is_not_null()).select(
        "sr",
        pl.col("t0").alias("left"),
        pl.when(pl.col("kind") == "gateway_upstream_timeout")
        .then(pl.lit("gateway"))
        .otherwise(pl.lit("client"))
        .alias("left_by"),
        (pl.col("outcome") == "ran_on").alias("orphaned"),
        "after_s",
    )
    return (
        ex.join(mine, on="sr", how="left")
        .with_columns(pl.when(pl.col("orphaned").fill_null(False)).then(pl.col("after_s")).alias("orphan_s"))
        .drop("after_s")
    )


def _counts(ab: pl.DataFrame) -> dict:
    ran = ab.filter(pl.col("outcome") == "ran_on")
    unm = ab.filter(pl.col("outcome") == "unmatched").group_by("why").len().sort("why")
    known = ran["after_s"].drop_nulls()
    return {
        "abandoned": ab.height,
        **{o: int((ab["outcome"] == o).sum()) for o in OUTCOMES},
        "ran_on_s": round(float(known.sum()), 3) if known.len() else (0.0 if not ran.height else None),
        "ran_on_median_s": round(float_value(known.median()), 3) if known.len() else None,
        "ran_on_end_unknown": ran.height - known.len(),
        "unmatched_why": {str(w): int(n) for w, n in unm.iter_rows()},
    }


def summary(ab: pl.DataFrame, ex: pl.DataFrame, has_server: bool) -> dict:
    """correlation.json's account of the abandoned attempts: totals, per class (``by_class``), and the vLLM abort
    lines in the input at all (``abort_lines``: null when the input holds no vLLM request line, so no abort could
    have been seen)."""
    matched = ab.filter(pl.col("sr").is_not_null())
    return {
        **_counts(ab),
        "by_class": {k: _counts(ab.filter(pl.col("kind") == k)) for k in CLASSES},
        "abort_lines": int(ex["aborted"].is_not_null().sum()) if has_server else None,
        "race_s": CANCEL_RACE_S,
        "matched": matched.height,
    }
