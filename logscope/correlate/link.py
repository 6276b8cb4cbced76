"""Links between layers: client attempt -> gateway request -> gateway upstream attempt -> vLLM execution.

The chain joins through the gateway: the client's X-Request-Id appears in the gateway log as
``client_request_id``, and the gateway's own id (nginx ``$request_id`` forwarded as X-Request-Id) is the
base of the vLLM request id. When the gateway passes the client's id through, the vLLM base id equals
the client id: both keys are tried. Ids are matched on base ids, never raw equality. Where ids are
missing, rows are paired by time (``join_asof``, nearest, with a tolerance), marked ``inferred`` and
scored by how close they were. Every join here is a polars join over whole columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from .exprs import group_first, index_in_group, size_of_group
from .frames import Frames

EXACT_TOL_S = 30.0  # attempts of one id are paired with the nearest gateway request within this
INFERRED_TOL_S = 1.0  # id-less rows are paired only when this close (after clock correction)
MATCH_ROUNDS = 20
END_CAP_S = 1.0  # an end gap counts at most this much in an inferred pair's cost
SLACK_S = 0.05  # gateway / vLLM stamps of one event may disagree by this much
RANK_WEIGHT = 0.001  # tie-break: the k-th Received line of a second goes with the k-th attempt
SEND_SLACK_S = 0.05  # a gateway may stamp a receipt this much before the client's send (clock noise)
LATE_TOL_S = 10.0  # sends and receipts left unpaired are paired when the receipt came this soon after


def nearest(
    left: pl.DataFrame,
    right: pl.DataFrame,
    lkey: str,
    rkey: str,
    tol: float,
    by: str | None = None,
    strategy: Literal["backward", "forward", "nearest"] = "nearest",
) -> pl.DataFrame:
    """One-to-one nearest pairs on column ``t`` (both sides), within ``tol`` seconds.

    Each left row takes its nearest right row (``strategy='forward'``: the first one at or after it);
    when several left rows take the same right row the closest keeps it. Returns ``lkey, rkey, dt``
    (right minus left).
    """
    cols_l = [lkey, "t"] + ([by] if by else [])
    cols_r = [rkey, "t"] + ([by] if by else [])
    lf = left.select(cols_l).filter(pl.col("t").is_not_null())
    rt = right.select(cols_r).rename({"t": "t_r"}).filter(pl.col("t_r").is_not_null())
    if by:
        lf, rt = lf.filter(pl.col(by).is_not_null()), rt.filter(pl.col(by).is_not_null())
    if lf.height == 0 or rt.height == 0:
        return pl.DataFrame(schema={lkey: pl.Int64, rkey: pl.Int64, "dt": pl.Float64})
    j = lf.sort("t").join_asof(
        rt.sort("t_r"),
        left_on="t",
        right_on="t_r",
        by=by,
        strategy=strategy,
        tolerance=tol,
        check_sortedness=False,
    )
    return (
        j.filter(pl.col(rkey).is_not_null())
        .with_columns((pl.col("t_r") - pl.col("t")).alias("dt"))
        .sort(pl.col("dt").abs())
        .unique(rkey, keep="first")
        .unique(lkey, keep="first")
        .select(lkey, rkey, "dt")
    )


def assign(cand: pl.DataFrame, lkey: str, rkey: str, rounds: int | None = None) -> pl.DataFrame:
    """One-to-one pairs from scored candidates (``lkey, rkey, cost``), cheapest first.

    Each round every left row takes its cheapest free candidate and a right row claimed twice goes to
    the cheaper claim; the losers try again next round. Greedy, vectorised, a few rounds.
    """
    cand = cand.with_columns(pl.len().over(lkey).alias("n_cand")).sort("cost", lkey, rkey)
    got: list[pl.DataFrame] = []
    for _ in range(rounds or MATCH_ROUNDS):
        if cand.height == 0:
            break
        best = cand.unique(lkey, keep="first", maintain_order=True).unique(
            rkey, keep="first", maintain_order=True
        )
        if best.height == 0:
            break
        got.append(best)
        cand = cand.join(best, on=lkey, how="anti").join(best, on=rkey, how="anti")
    return pl.concat(got) if got else cand


def rank_pairs(
    left: pl.DataFrame, right: pl.DataFrame, key_l: str, key_r: str, lkey: str, rkey: str
) -> pl.DataFrame:
    """Pair the k-th row of an id on the left with the k-th row of that id on the right (time order).

    Only ids with as many rows on both sides are paired. This does not depend on either clock, so it
    feeds the clock-offset estimate before any correction.
    """
    lf = left.filter(pl.col(key_l).is_not_null() & pl.col("t").is_not_null()).select(
        pl.col(key_l).alias("_k"), lkey, "t"
    )
    rt = right.filter(pl.col(key_r).is_not_null() & pl.col("t").is_not_null()).select(
        pl.col(key_r).alias("_k"), rkey, pl.col("t").alias("t_r")
    )
    lf = (
        lf.sort("_k", "t")
        .with_columns(group_first("_k").alias("_first"))
        .with_columns(index_in_group().alias("_i"), size_of_group().alias("_n"))
    )
    rt = (
        rt.sort("_k", "t_r")
        .with_columns(group_first("_k").alias("_first"))
        .with_columns(index_in_group().alias("_i"), size_of_group().alias("_n"))
    )
    return lf.join(rt, on=["_k", "_i", "_n"], how="inner").select(lkey, rkey)


@dataclass
class Links:
    # gateway request -> logical request (client id seen by the gateway, or time)
    gr_lr: pl.DataFrame  # gr, lr, ca (nullable), match, score
    # server execution -> gateway upstream attempt
    sr_ga: pl.DataFrame  # sr, ga, gr, match, score
    # server execution -> client attempt directly (no gateway in between)
    sr_ca: pl.DataFrame  # sr, ca, lr, match, score


def _attempt_rows(F: Frames) -> pl.DataFrame:
    """Gateway attempts that can carry a server execution, with their request's ids."""
    return F.gateway_attempts.filter(~pl.col("pseudo")).join(
        F.gateway_requests.select(
            "gr",
            pl.col("request_id").alias("g_rid"),
            pl.col("client_request_id").alias("g_crid"),
            "inference",
        ),
        on="gr",
    )


def server_gateway_candidates(F: Frames) -> pl.DataFrame:
    """Id-matched (server execution, gateway attempt) pairs, independent of any clock: sr, ga."""
    gsr = _server_to_request(F)
    return _server_to_attempt(F, gsr.select("sr", "gr"))


def _server_to_request(F: Frames, res: dict[str, float] | None = None) -> pl.DataFrame:
    """sr -> gr by id: the gateway's id as the vLLM base id, else the client id passed through."""
    sr = F.server_requests.filter(pl.col("base_request_id").is_not_null())
    by_rid = sr.join(
        F.gateway_requests.filter(pl.col("request_id").is_not_null())
        .unique("request_id", keep="first")
        .select("gr", pl.col("request_id").alias("base_request_id")),
        on="base_request_id",
    ).select("sr", "gr")
    rest = sr.join(by_rid, on="sr", how="anti")
    gr = F.gateway_requests.filter(pl.col("client_request_id").is_not_null())
    if rest.height == 0 or gr.height == 0:
        return by_rid
    left = rest.select("sr", "base_request_id", "t0").rename({"t0": "t"})
    right = gr.select("gr", pl.col("client_request_id").alias("base_request_id"), "t0").rename({"t0": "t"})
    if res is None:  # before clock correction: pair by order within the id
        thru = rank_pairs(left, right, "base_request_id", "base_request_id", "sr", "gr")
    else:  # the receive second is [S, S+1): compare its middle with the gateway's start
        left = left.join(F.server_requests.select("sr", "source"), on="sr").with_columns(
            pl.col("t") + pl.col("source").replace_strict(res, default=0.0) / 2
        )
        thru = nearest(left, right, "sr", "gr", EXACT_TOL_S, by="base_request_id").select("sr", "gr")
    return pl.concat([by_rid, thru])


def _server_to_attempt(F: Frames, sgr: pl.DataFrame) -> pl.DataFrame:
    """Within a gateway request, the k-th execution (by receive time) went with the k-th attempt that
    reached a server; extra executions stay on the last attempt."""
    att = (
        _attempt_rows(F)
        .sort("gr", "attempt")
        .with_columns(group_first("gr").alias("_first"))
        .with_columns(
            (
                pl.col("reached").cast(pl.Int64).cum_sum()
                - pl.when(pl.col("_first"))
                .then(pl.col("reached").cast(pl.Int64).cum_sum() - pl.col("reached").cast(pl.Int64))
                .otherwise(None)
                .forward_fill()
            ).alias("_k"),
        )
        .with_columns(pl.when(pl.col("reached")).then(pl.col("_k")).otherwise(None).alias("_k"))
    )
    last = att.group_by("gr").agg(
        pl.col("ga").filter(pl.col("reached")).last().alias("ga_last_reached"),
        pl.col("ga").last().alias("ga_last"),
    )
    s = (
        sgr.join(F.server_requests.select("sr", "t0"), on="sr")
        .sort("gr", "t0", "sr")
        .with_columns(group_first("gr").alias("_first"))
        .with_columns(index_in_group().alias("_k"))
    )
    s = s.join(att.filter(pl.col("_k").is_not_null()).select("gr", "_k", "ga"), on=["gr", "_k"], how="left")
    s = s.join(last, on="gr", how="left").with_columns(
        pl.coalesce("ga", "ga_last_reached", "ga_last").alias("ga")
    )
    return s.select("sr", "ga", "gr")


def client_gateway_candidates(F: Frames) -> pl.DataFrame:
    """Id-matched (client attempt, gateway request) pairs by order within the client id: ca, gr."""
    if F.client_attempts.height == 0 or F.gateway_requests.height == 0:
        return pl.DataFrame(schema={"ca": pl.Int64, "gr": pl.Int64})
    left = F.client_attempts.select("ca", "request_id", pl.col("t0").alias("t"))
    right = F.gateway_requests.filter(pl.col("inference")).select(
        "gr", pl.col("client_request_id").alias("request_id"), pl.col("t0").alias("t")
    )
    return rank_pairs(left, right, "request_id", "request_id", "ca", "gr")


def client_server_candidates(F: Frames, linked_sr: pl.Series) -> pl.DataFrame:
    """Id-matched (client attempt, server execution) pairs when the client reached vLLM directly: ca, sr."""
    sr = F.server_requests.filter(~pl.col("sr").is_in(linked_sr.implode()))
    if F.client_attempts.height == 0 or sr.height == 0:
        return pl.DataFrame(schema={"ca": pl.Int64, "sr": pl.Int64})
    left = F.client_attempts.select("ca", "request_id", pl.col("t0").alias("t"))
    right = sr.select("sr", pl.col("base_request_id").alias("request_id"), pl.col("t0").alias("t"))
    return rank_pairs(left, right, "request_id", "request_id", "ca", "sr")


def final(F: Frames, res: dict[str, float]) -> Links:
    """All links, on clock-corrected frames."""
    gr_lr = _gateway_to_logical(F)
    sgr = _server_to_request(F, res)
    sr_ga = _server_to_attempt(F, sgr).with_columns(
        pl.lit("exact").alias("match"), pl.lit(1.0).alias("score")
    )
    sr_ga = pl.concat([sr_ga, _server_gateway_inferred(F, sr_ga, res)])
    sr_ca = _server_client(F, sr_ga, gr_lr, res)
    return Links(gr_lr, sr_ga, sr_ca)


def _gateway_to_logical(F: Frames) -> pl.DataFrame:
    empty = pl.DataFrame(
        schema={"gr": pl.Int64, "lr": pl.Int64, "ca": pl.Int64, "match": pl.String, "score": pl.Float64}
    )
    if F.gateway_requests.height == 0 or F.client_attempts.height == 0:
        return empty
    ids = (
        F.client_attempts.filter(pl.col("request_id").is_not_null())
        .unique("request_id", keep="first")
        .select(pl.col("request_id").alias("client_request_id"), "lr")
    )
    gr = F.gateway_requests.filter(pl.col("inference"))
    by_id = gr.join(ids, on="client_request_id").select("gr", "lr", pl.col("t0").alias("t"))
    # attempt level: the nearest attempt of the same logical request
    att = nearest(
        by_id, F.client_attempts.select("ca", "lr", pl.col("t0").alias("t")), "gr", "ca", EXACT_TOL_S, by="lr"
    )
    exact = by_id.join(att.select("gr", "ca"), on="gr", how="left").select(
        "gr", "lr", "ca", pl.lit("exact").alias("match"), pl.lit(1.0).alias("score")
    )
    # no id match: nearest in time, among rows the ids could not place, whatever the client's log kind: a gateway
    # request carrying an id no client attempt names is a candidate too (an openai DEBUG log names the requests it
    # saw finish; those in flight when a killed client's log ended carry no id, and were counted a second time
    # from the gateway's 499 lines)
    free_gr = gr.join(exact, on="gr", how="anti")
    free_ca = F.client_attempts.join(exact.filter(pl.col("ca").is_not_null()), on="ca", how="anti")
    if (
        free_ca.height
    ):  # (the gateway's ids are millions on a day's folder, where every attempt usually matched)
        gw_ids = F.gateway_requests["client_request_id"].drop_nulls()
        free_ca = free_ca.filter(
            pl.col("request_id").is_null() | ~pl.col("request_id").is_in(gw_ids.implode())
        )
    inf = _by_time(free_ca.select("ca", "lr", "attempt", "t0", "t1"), free_gr)
    return pl.concat([exact, inf]) if inf.height else exact


def _by_time(ca: pl.DataFrame, gr: pl.DataFrame) -> pl.DataFrame:
    """Client attempts no id placed -> the gateway requests no id placed, by time: ``gr, lr, ca, match, score``.

    Gateway requests that carry a client id (one no client attempt names) are paired first with the logical
    requests' first attempts; the id a first attempt was paired with is then that logical request's, and the
    other gateway requests carrying it go with its other attempts (nearest in time), or with it alone when its log
    holds no attempt for them (retries after a killed client's log ended). Two retries sent a few milliseconds
    apart were swapped when every attempt was paired by time alone. The rest are paired by time."""
    out = []

    def rows(pairs: pl.DataFrame, score: pl.Expr) -> pl.DataFrame:
        return pairs.join(ca.select("ca", "lr"), on="ca", how="left").select(
            "gr", "lr", "ca", pl.lit("inferred").alias("match"), score.alias("score")
        )

    closeness = (1 - pl.col("dt").abs() / INFERRED_TOL_S).clip(0, 1)
    with_id = gr.filter(pl.col("client_request_id").is_not_null())
    if with_id.height:
        first = _sends_to_receipts(ca.filter(pl.col("attempt").fill_null(1) == 1), with_id)
        learned = (
            first.join(ca.select("ca", "lr"), on="ca")
            .join(with_id.select("gr", "client_request_id"), on="gr")
            .with_columns(closeness.alias("score"))
            .group_by("client_request_id")
            .agg(pl.col("lr").unique().alias("_lrs"), pl.col("score").min())
            .filter(pl.col("_lrs").list.len() == 1)  # an id paired with two requests is no evidence
            .select("client_request_id", pl.col("_lrs").list.first().alias("lr"), "score")
        )
        out.append(rows(first, closeness))
        ca, gr = ca.join(first, on="ca", how="anti"), gr.join(first, on="gr", how="anti")
        same = gr.join(learned, on="client_request_id").select("gr", "lr", "score", pl.col("t0").alias("t"))
        own = ca.filter(pl.col("lr").is_in(learned["lr"].implode())).select(
            "ca", "lr", pl.col("t0").alias("t")
        )
        near = nearest(same, own, "gr", "ca", EXACT_TOL_S, by="lr")
        out.append(
            same.join(near.select("gr", "ca"), on="gr", how="left").select(
                "gr", "lr", "ca", pl.lit("inferred").alias("match"), "score"
            )
        )
        ca, gr = ca.join(near, on="ca", how="anti"), gr.join(same, on="gr", how="anti")
    near = _sends_to_receipts(ca, gr)
    out.append(rows(near, closeness))
    # what is left on both sides: a send whose request reached the gateway seconds after the client logged it (an
    # openai client on a starved host waits for its connection pool after 'Sending HTTP Request')
    ca, gr = ca.join(near, on="ca", how="anti"), gr.join(near, on="gr", how="anti")
    if ca.height and gr.height:
        late = _sends_to_receipts(ca, gr, LATE_TOL_S)
        out.append(rows(late, (1 - pl.col("dt").abs() / LATE_TOL_S).clip(0, 1)))
    return pl.concat(out)


def _sends_to_receipts(ca: pl.DataFrame, gr: pl.DataFrame, tol: float = INFERRED_TOL_S) -> pl.DataFrame:
    """Id-less client attempts -> gateway requests received a network hop after the send.

    Candidates are the gateway requests received within [send - slack, send + tolerance] with the same
    retry number when both logs carry it (x-stainless-retry-count). Each pair costs the start gap plus
    the end gap (capped: with proxy_ignore_client_abort a gateway legitimately ends long after a client
    that gave up). Pairs are taken cheapest first, one-to-one, in a few vectorised rounds.
    """
    left = ca.select(
        "ca", pl.col("t0").alias("c0"), pl.col("t1").alias("c1"), (pl.col("attempt") - 1).alias("c_r")
    )
    right = gr.select(
        "gr", pl.col("t0").alias("g0"), pl.col("t1").alias("g1"), pl.col("client_retry").alias("g_r")
    )
    empty = pl.DataFrame(schema={"ca": pl.Int64, "gr": pl.Int64, "dt": pl.Float64})
    left, right = left.filter(pl.col("c0").is_not_null()), right.filter(pl.col("g0").is_not_null())
    if left.height == 0 or right.height == 0:
        return empty
    cand = left.join_where(
        right, pl.col("g0") >= pl.col("c0") - SEND_SLACK_S, pl.col("g0") <= pl.col("c0") + tol
    )
    cand = cand.filter(pl.col("c_r").is_null() | pl.col("g_r").is_null() | (pl.col("c_r") == pl.col("g_r")))
    cand = cand.select(
        "ca",
        "gr",
        (pl.col("g0") - pl.col("c0")).alias("dt"),
        (
            (pl.col("g0") - pl.col("c0")).abs()
            + pl.min_horizontal((pl.col("g1") - pl.col("c1")).abs(), pl.lit(END_CAP_S)).fill_null(
                END_CAP_S / 2
            )
        ).alias("cost"),
    )
    return assign(cand, "ca", "gr").select("ca", "gr", "dt")


def _server_gateway_inferred(F: Frames, exact: pl.DataFrame, res: dict[str, float]) -> pl.DataFrame:
    """Executions with no id match, paired with a free gateway attempt opened in their receive second."""
    empty = exact.head(0)
    free_sr = F.server_requests.join(exact, on="sr", how="anti")
    att = _attempt_rows(F).filter(pl.col("reached") & pl.col("inference")).join(exact, on="ga", how="anti")
    # gateway requests whose ids vLLM did log are not candidates: their executions are known
    att = att.filter(~pl.col("gr").is_in(exact["gr"].implode()))
    pairs = receipts_by_time(free_sr, att.select("ga", "a0", "a1"), "ga", res)
    if pairs.height == 0:
        return empty
    return pairs.join(att.select("ga", "gr"), on="ga").select(
        "sr", "ga", "gr", pl.lit("inferred").alias("match"), (1.0 / pl.col("n_cand")).alias("score")
    )


def receipts_by_time(
    sr: pl.DataFrame, senders: pl.DataFrame, key: str, res: dict[str, float]
) -> pl.DataFrame:
    """vLLM executions -> the sends (``key``, open ``a0``, end ``a1``) that carried them, by time alone.

    vLLM stamps whole seconds, so every send opened in the receive second is a candidate; an aborted
    execution prefers the send that ended in its abort second, and within a second the k-th Received
    line prefers the k-th send. Returns ``sr, key, n_cand``: under load these pairs are right in count
    and timing, not necessarily in identity, hence a score of 1 / candidates.
    """
    sr = sr.filter(pl.col("t0").is_not_null())
    senders = senders.filter(pl.col("a0").is_not_null())
    if sr.height == 0 or senders.height == 0:
        return pl.DataFrame(schema={"sr": pl.Int64, key: pl.Int64, "n_cand": pl.UInt32})
    r = pl.col("source").replace_strict(res, default=0.0)
    left = sr.select(
        "sr",
        pl.col("t0").alias("s"),
        (pl.col("t0") + r).alias("s_hi"),
        "aborted",
        (pl.col("aborted") + r).alias("ab_hi"),
    ).sort("s", "sr")
    left = left.with_columns(group_first("s").alias("_first")).with_columns(index_in_group().alias("k_s"))
    right = senders.select(key, "a0", "a1").sort("a0").with_columns(pl.col("a0").floor().alias("_sec"))
    right = right.with_columns(group_first("_sec").alias("_first")).with_columns(
        index_in_group().alias("k_a")
    )
    cand = left.drop("_first").join_where(
        right.drop("_first"),
        pl.col("a0") >= pl.col("s") - INFERRED_TOL_S,
        pl.col("a0") <= pl.col("s_hi") + SLACK_S,
    )
    outside = (pl.col("s") - pl.col("a0")).clip(0) + (pl.col("a0") - pl.col("s_hi")).clip(0)
    abort_gap = (
        pl.when(pl.col("aborted").is_null())
        .then(pl.lit(END_CAP_S / 2))
        .otherwise(
            pl.min_horizontal(
                (pl.col("aborted") - SLACK_S - pl.col("a1")).clip(0)
                + (pl.col("a1") - pl.col("ab_hi") - SLACK_S).clip(0),
                pl.lit(END_CAP_S),
            ).fill_null(END_CAP_S)
        )
    )
    cand = cand.with_columns(
        (outside + abort_gap + RANK_WEIGHT * (pl.col("k_s") - pl.col("k_a")).abs()).alias("cost")
    )
    return assign(cand.select("sr", key, "cost"), "sr", key).select("sr", key, "n_cand")


def _server_client(
    F: Frames, sr_ga: pl.DataFrame, gr_lr: pl.DataFrame, res: dict[str, float]
) -> pl.DataFrame:
    """Executions no gateway line explains, tied straight to a client attempt (client -> vLLM)."""
    empty = pl.DataFrame(
        schema={"sr": pl.Int64, "ca": pl.Int64, "lr": pl.Int64, "match": pl.String, "score": pl.Float64}
    )
    free_sr = F.server_requests.join(sr_ga, on="sr", how="anti")
    free_ca = F.client_attempts.join(gr_lr.filter(pl.col("ca").is_not_null()), on="ca", how="anti")
    if free_sr.height == 0 or free_ca.height == 0:
        return empty
    half = pl.col("source").replace_strict(res, default=0.0) / 2
    left = free_sr.select("sr", pl.col("base_request_id").alias("k"), (pl.col("t0") + half).alias("t"))
    right = free_ca.select("ca", pl.col("request_id").alias("k"), pl.col("t0").alias("t"))
    ex = nearest(left, right, "sr", "ca", EXACT_TOL_S, by="k").select(
        "sr", "ca", pl.lit("exact").alias("match"), pl.lit(1.0).alias("score")
    )
    out = [ex]
    if (
        F.gateway_requests.height == 0
    ):  # only without a gateway can an id-less client send be the vLLM request
        inf = receipts_by_time(
            free_sr.join(ex, on="sr", how="anti"),
            free_ca.join(ex, on="ca", how="anti").select(
                "ca", pl.col("t0").alias("a0"), pl.col("t1").alias("a1")
            ),
            "ca",
            res,
        )
        out.append(
            inf.select("sr", "ca", pl.lit("inferred").alias("match"), (1.0 / pl.col("n_cand")).alias("score"))
        )
    return (
        pl.concat(out)
        .join(F.client_attempts.select("ca", "lr"), on="ca")
        .select("sr", "ca", "lr", "match", "score")
    )
