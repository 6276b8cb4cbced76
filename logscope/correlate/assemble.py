"""Logical requests and server executions, with retry multiplication and orphaned work.

A logical request is defined by the highest layer that logged it: the client's logical request,
else a gateway request (grouped by the client id the gateway saw, when any), else a vLLM request.
A gateway or vLLM row that a client (or gateway) log covers in time but that no id or time match
could place is reported as unmatched instead of becoming a logical request of its own, so a missing
id never doubles the count.

Server work ends when the gateway's upstream connection for that attempt ended (nginx logs the
upstream time even for a 499, and the full time when it keeps the upstream open), else at a V0
``Finished request`` line, else when the client got its answer, else at the ``Aborted request`` line:
vLLM V1 logs no end of a request. The caller left when its client attempt timed out, when the gateway
logged 499, or when the gateway's own upstream read timed out (504).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..scalars import int_or_none, int_value
from . import abandon, reach, stream_failures
from .broken import CUT, READ_TIMEOUT, broken_streams
from .exprs import group_first, prev_in_group
from .frames import Frames
from .link import Links

COVER_PAD_S = 2.0  # a row this close to another layer's span is "covered" by that layer's log
DUP_EPS_S = 0.001

END_SOURCES = {
    "gateway": "gateway upstream time",
    "finished": "Finished request line",
    "client": "client end",
    "abort": "Aborted request line",
}


@dataclass
class Assembled:
    requests: pl.DataFrame  # internal: lr, origin, ... (converted to the schema by the caller)
    execs: pl.DataFrame  # one row per server execution
    gr_lr: pl.DataFrame  # every gateway request with its logical request (null when unmatched)
    abandoned: pl.DataFrame  # one row per attempt whose caller left (abandon.COLUMNS)
    # the keys of the rows no other layer explains, by what they lack (a slice's own rows are counted of them)
    unmatched_keys: dict[str, pl.Series]

    @property
    def unmatched(self) -> dict[str, int]:
        return {k: v.len() for k, v in self.unmatched_keys.items()}


def _spans(df: pl.DataFrame) -> list[tuple[float, float]]:
    if df.height == 0:
        return []
    s = df.group_by("source").agg(pl.col("t0").min().alias("lo"), pl.coalesce("t1", "t0").max().alias("hi"))
    return [(r["lo"], r["hi"]) for r in s.iter_rows(named=True) if r["lo"] is not None]


def _outside(t: str, spans: list[tuple[float, float]]) -> pl.Expr:
    if not spans:
        return pl.lit(True)
    inside = [(pl.col(t) >= lo - COVER_PAD_S) & (pl.col(t) <= hi + COVER_PAD_S) for lo, hi in spans]
    return ~pl.any_horizontal(inside).fill_null(False)


def spans(F: Frames) -> dict[str, list[tuple[float, float]]]:
    """The span of each client log and of each gateway log (inference requests): rows outside them are
    not "covered" by that layer."""
    return {
        "client": _spans(F.client_attempts) or _spans(F.client_requests),
        "gateway": _spans(F.gateway_requests.filter(pl.col("inference"))),
    }


def build(
    F: Frames,
    L: Links,
    res: dict[str, float],
    errors: pl.DataFrame | None = None,
    covered: dict[str, list[tuple[float, float]]] | None = None,
    marks: pl.DataFrame | None = None,
) -> Assembled:
    """``covered``: the whole input's ``spans`` when ``F`` holds a time slice of it; ``marks``: the access lines
    a failed stream is tied to or may belong to (``stream_failures.marks``)."""
    covered = covered or spans(F)
    client_spans, gw_spans = covered["client"], covered["gateway"]
    next_lr = (int_or_none(F.client_requests["lr"].max()) or 0) + 1 if F.client_requests.height else 0

    # gateway requests no client row explains: those carrying an id the client never logged, or outside the
    # client's time span. The ids are looked up from the side of these few requests: a unique() of the client's
    # ids (ten million on a 25 GB folder) took 5 s.
    free_gr = F.gateway_requests.filter(pl.col("inference")).join(L.gr_lr, on="gr", how="anti")
    free_ids = free_gr["client_request_id"].drop_nulls().unique()
    logged = F.client_attempts.filter(pl.col("request_id").is_in(free_ids.implode()))["request_id"].unique()
    # a client id the client's log never names and no send was paired with (link pairs every send it can, up to
    # LATE_TOL_S before the receipt): a request that log does not hold, whether or not the log names ids (a
    # DEBUG log naming none left the gateway's requests sent after it was cut out of the count)
    own_gr = free_gr.filter(
        (pl.col("client_request_id").is_not_null() & ~pl.col("client_request_id").is_in(logged.implode()))
        | _outside("t0", client_spans)
    )
    gw_key = pl.concat_str(
        pl.col("source"),
        pl.lit("\x1f"),
        pl.coalesce("client_request_id", "request_id", pl.col("gr").cast(pl.String)),
    )
    own_gr = own_gr.with_columns(gw_key.alias("_key")).with_columns(
        (pl.col("_key").rank("dense").cast(pl.Int64) - 1 + next_lr).alias("lr")
    )
    next_lr = (int_value(own_gr["lr"].max()) + 1) if own_gr.height else next_lr
    gr_lr = pl.concat(
        [
            L.gr_lr.select("gr", "lr", "ca", "match", "score"),
            own_gr.select(
                "gr",
                "lr",
                pl.lit(None, pl.Int64).alias("ca"),
                pl.lit("none").alias("match"),
                pl.lit(None, pl.Float64).alias("score"),
            ),
        ]
    )

    # server executions
    ex = _executions(F, L, gr_lr)
    free_sr = ex.filter(pl.col("lr").is_null())
    own_sr = free_sr.filter(_outside("t0", client_spans + gw_spans)).with_columns(
        pl.concat_str(pl.col("source"), pl.lit("\x1f"), pl.coalesce("base_request_id", "request_id")).alias(
            "_key"
        )
    )
    own_sr = own_sr.with_columns((pl.col("_key").rank("dense").cast(pl.Int64) - 1 + next_lr).alias("lr_own"))
    ex = (
        ex.join(own_sr.select("sr", "lr_own"), on="sr", how="left")
        .with_columns(
            pl.coalesce("lr", "lr_own").alias("lr"),
            pl.when(pl.col("lr").is_null() & pl.col("lr_own").is_not_null())
            .then(pl.lit("none"))
            .otherwise(pl.col("match"))
            .alias("match"),
        )
        .drop("lr_own")
    )
    ex = _timing(ex, res)
    # whether the input holds vLLM request lines and gateway requests at all (a slice's own rows may hold none)
    logs = {"server": bool(res), "gateway": bool(gw_spans)}
    abandoned = abandon.claims(F, gr_lr, ex, res, logs)
    ex = abandon.on_executions(ex, abandoned)

    reqs = _requests(F, gr_lr, ex, own_gr, own_sr, broken_streams(F, errors, marks))
    unmatched = {
        "client_attempts_without_gateway_request": _unlinked_ca(F, gr_lr, L),
        "gateway_requests_without_logical_request": free_gr.select("gr").join(
            own_gr.select("gr"), on="gr", how="anti"
        )["gr"],
        "gateway_requests_without_server_execution": _gr_without_exec(F, ex),
        "server_executions_without_caller": ex.filter(pl.col("lr").is_null())["sr"],
    }
    reach.annotate(F, gr_lr, ex, logs)
    return Assembled(reqs, ex, gr_lr, abandoned, unmatched)


# the keys alone are joined (an anti-join of the whole frame copies every column of it)
def _unlinked_ca(F: Frames, gr_lr: pl.DataFrame, L: Links) -> pl.Series:
    ca = F.client_attempts.select("ca")
    if F.gateway_requests.height == 0:
        return (ca.join(L.sr_ca, on="ca", how="anti") if L.sr_ca.height else ca)["ca"]
    return ca.join(gr_lr.filter(pl.col("ca").is_not_null()), on="ca", how="anti")["ca"]


def _gr_without_exec(F: Frames, ex: pl.DataFrame) -> pl.Series:
    reached = F.gateway_requests.filter(pl.col("inference") & (pl.col("n_reached") > 0)).select("gr")
    return reached.join(ex.filter(pl.col("gr").is_not_null()).select("gr").unique(), on="gr", how="anti")[
        "gr"
    ]


def _executions(F: Frames, L: Links, gr_lr: pl.DataFrame) -> pl.DataFrame:
    via_gw = L.sr_ga.join(
        gr_lr.select("gr", "lr", "ca", pl.col("match").alias("m2"), pl.col("score").alias("s2")),
        on="gr",
        how="left",
    )
    via_gw = via_gw.with_columns(
        pl.when((pl.col("match") == "inferred") | (pl.col("m2") == "inferred"))
        .then(pl.lit("inferred"))
        .otherwise(pl.lit("exact"))
        .alias("match"),
        pl.min_horizontal("score", "s2").alias("score"),
    ).select("sr", "ga", "gr", "ca", "lr", "match", "score")
    direct = L.sr_ca.select(
        "sr",
        pl.lit(None, pl.Int64).alias("ga"),
        pl.lit(None, pl.Int64).alias("gr"),
        "ca",
        "lr",
        "match",
        "score",
    )
    links = pl.concat([via_gw, direct]).unique("sr", keep="first")
    ex = F.server_requests.select(
        "sr",
        "source",
        "replica",
        "request_id",
        "base_request_id",
        "t0",
        "received",
        "finished",
        "aborted",
        "failed",
        "preempted",
        "max_tokens",
        "prompt_tokens",
    ).join(links, on="sr", how="left")
    ex = ex.join(
        F.gateway_attempts.select(
            "ga", "a0", "a1", "duration_s", "upstream_status", pl.col("error").alias("ga_error")
        ),
        on="ga",
        how="left",
    )
    ex = ex.join(
        F.gateway_requests.select("gr", pl.col("status").alias("gr_status"), pl.col("t1").alias("gr_t1")),
        on="gr",
        how="left",
    )
    ex = ex.join(
        F.client_attempts.select(
            "ca",
            pl.col("t0").alias("ca_t0"),
            pl.col("t1").alias("ca_t1"),
            pl.col("timed_out").alias("ca_timed_out"),
            pl.col("left_unfinished").alias("ca_left"),
        ),
        on="ca",
        how="left",
    )
    return ex


def _timing(ex: pl.DataFrame, res: dict[str, float]) -> pl.DataFrame:
    """Start, end (with its source) and server time, per execution (who left it and when: ``abandon.py``)."""
    gw_end = pl.when(pl.col("ga").is_not_null() & pl.col("duration_s").is_not_null()).then(pl.col("a1"))
    client_end = pl.when(pl.col("ga").is_null() & ~pl.col("ca_timed_out").fill_null(False)).then(
        pl.col("ca_t1")
    )
    ex = ex.with_columns(
        pl.coalesce(pl.when(pl.col("ga").is_not_null()).then(pl.col("a0")), "received", "t0").alias("start"),
        pl.coalesce(gw_end, "finished", client_end, "aborted", "failed").alias("end"),
        pl.when(gw_end.is_not_null())
        .then(pl.lit("gateway"))
        .when(pl.col("finished").is_not_null())
        .then(pl.lit("finished"))
        .when(client_end.is_not_null())
        .then(pl.lit("client"))
        .when(pl.col("aborted").is_not_null())
        .then(pl.lit("abort"))
        .when(pl.col("failed").is_not_null())
        .then(pl.lit("failed"))
        .otherwise(None)
        .alias("end_source"),
    ).with_columns((pl.col("end") - pl.col("start")).clip(0).alias("gen_s"))
    # a retry sent while an earlier execution of the same logical request was still running
    ex = (
        ex.sort(["lr", "start"], nulls_last=True)
        .with_columns(group_first("lr").alias("_first"))
        .with_columns(
            prev_in_group(pl.col("end").fill_null(pl.col("start")).cum_max().over("lr")).alias("_prev_end")
        )
        .with_columns(
            (pl.col("lr").is_not_null() & (pl.col("start") < pl.col("_prev_end") - DUP_EPS_S))
            .fill_null(False)
            .alias("duplicate")
        )
        .drop("_prev_end", "_first")
    )
    return ex.sort("sr")


def _requests(
    F: Frames,
    gr_lr: pl.DataFrame,
    ex: pl.DataFrame,
    own_gr: pl.DataFrame,
    own_sr: pl.DataFrame,
    broken: pl.DataFrame,
) -> pl.DataFrame:
    per_ex = (
        ex.filter(pl.col("lr").is_not_null())
        .group_by("lr")
        .agg(
            pl.len().alias("server_requests"),
            pl.col("aborted").is_not_null().sum().alias("server_aborted"),
            pl.col("gen_s").sum().alias("server_gen_s"),
            pl.when(pl.col("preempted").any()).then(True).otherwise(None).alias("preempted"),
            pl.col("duplicate").any().alias("duplicate_concurrent"),
            pl.col("orphaned").fill_null(False).sum().alias("orphaned_executions"),
            pl.col("orphan_s").sum().alias("orphan_s"),
            (pl.col("match") == "inferred").any().alias("_inf_s"),
            (pl.col("match") == "exact").any().alias("_ex_s"),
            pl.col("score").min().alias("_score_s"),
            pl.col("max_tokens").drop_nulls().first().alias("_sr_max_tokens"),
            pl.col("prompt_tokens").drop_nulls().first().alias("_sr_prompt_tokens"),
        )
    )
    gws = (
        gr_lr.join(
            F.gateway_requests.select("gr", "n_attempts", pl.col("t0").alias("_g0"), "t1", "spanned"), on="gr"
        )
        .join(broken, on="gr", how="left")
        .group_by("lr")
        .agg(
            pl.len().alias("gateway_requests"),
            # the gateway's span of the request, on its clock: from its first receipt to its last answer
            pl.when(pl.col("spanned").fill_null(True).all())
            .then(pl.col("t1").max() - pl.col("_g0").min())
            .alias("gateway_e2e_s"),
            # what broke off the answer of its last gateway request (broken_streams)
            pl.col("mid_stream").sort_by("t1").last(),
            pl.col("_stream_error").sort_by("t1").last(),
            pl.col("upstream_status").sort_by("t1").last(),
            pl.col("_evidence").sort_by("t1").last().alias("mid_stream_evidence"),
            pl.col("n_attempts").sum().alias("gateway_attempts"),
            (pl.col("match") == "inferred").any().alias("_inf_g"),
            (pl.col("match") == "exact").any().alias("_ex_g"),
            pl.col("score").min().alias("_score_g"),
        )
    )
    cas = F.client_attempts.group_by("lr").agg(pl.len().alias("client_attempts"))
    client = F.client_requests.select(
        "lr",
        "logical_request_id",
        "client",
        pl.lit("client").alias("origin"),
        "t0",
        "t1",
        "status",
        "error",
        "timed_out",
        "ttft_s",
        "e2e_s",
        "prompt_tokens",
        "max_tokens",
        "output_tokens",
        "concurrency",
        "phase",
        "unfinished",
        pl.lit("client").alias("latency_clock"),
        "latency_source",
    )
    gw = (
        own_gr.join(F.gateway_requests.select("gr", "header_s", "spanned"), on="gr", how="left")
        .group_by("lr")
        .agg(
            pl.col("_key").first().str.split("\x1f").list.last().alias("logical_request_id"),
            pl.col("t0").min(),
            pl.col("t1").max(),
            pl.col("status").sort_by("t1").last(),
            pl.col("header_s").sort_by("t1").last().alias("ttft_s"),
            pl.col("spanned").fill_null(True).all().alias("_spanned"),
        )
        .with_columns(
            pl.lit(None, pl.String).alias("client"),
            pl.lit("gateway").alias("origin"),
            pl.when(pl.col("status") == 499).then(pl.lit("client closed request (499)")).alias("error"),
            pl.lit(None, pl.Boolean).alias("timed_out"),
            pl.when(pl.col("_spanned"))
            .then(pl.col("t1") - pl.col("t0"))
            .alias("e2e_s"),  # else unknown, not 0 s
            pl.lit("gateway").alias("latency_clock"),
            pl.lit("gateway_log").alias("latency_source"),
        )
    )
    srv = (
        ex.join(own_sr.select("sr", "_key"), on="sr")
        .group_by("lr")
        .agg(
            pl.col("_key").first().str.split("\x1f").list.last().alias("logical_request_id"),
            pl.col("t0").min(),
            pl.col("end").max().alias("t1"),
            pl.when(pl.col("aborted").is_not_null().all())
            .then(pl.lit("aborted by the server"))
            # vLLM's 'Request ... failed (engine dead)': the server failed it, at that line's time
            .when(pl.col("failed").is_not_null().all())
            .then(pl.lit("failed by the server"))
            .alias("error"),
        )
        .with_columns(
            pl.lit(None, pl.String).alias("client"),
            pl.lit("server").alias("origin"),
            pl.lit("engine").alias("latency_clock"),
            pl.lit("engine_log").alias("latency_source"),
        )
    )
    base = pl.concat([client, gw, srv], how="diagonal_relaxed")
    req = (
        base.join(cas, on="lr", how="left")
        .join(gws, on="lr", how="left")
        .join(per_ex, on="lr", how="left")
        .with_columns(
            pl.col("client_attempts").fill_null(0),
            pl.col("gateway_requests").fill_null(0),
            pl.col("gateway_attempts").fill_null(0),
            pl.col("server_requests").fill_null(0),
            pl.col("server_aborted").fill_null(0),
            pl.col("duplicate_concurrent").fill_null(False),
            pl.col("orphaned_executions").fill_null(0),
            pl.coalesce("prompt_tokens", "_sr_prompt_tokens").alias("prompt_tokens"),
            pl.coalesce("max_tokens", "_sr_max_tokens").alias("max_tokens"),
            # a stream that failed after its 200: the proxy's error line is the request's error
            pl.coalesce("error", "_stream_error").alias("error"),
            # unknown when no log gives a span, or the caller never saw its end (unfinished)
            pl.when(pl.col("_spanned").fill_null(True) & ~pl.col("unfinished").fill_null(False))
            .then(pl.coalesce("e2e_s", pl.col("t1") - pl.col("t0")))
            .alias("e2e_s"),
        )
    )
    # a row with no latency names no clock
    none = pl.col("ttft_s").is_null() & pl.col("e2e_s").is_null()
    req = req.with_columns(
        pl.when(none).then(None).otherwise(pl.col("latency_clock")).alias("latency_clock"),
        pl.when(none).then(None).otherwise(pl.col("latency_source")).alias("latency_source"),
    )
    inferred = pl.col("_inf_g").fill_null(False) | pl.col("_inf_s").fill_null(False)
    linked = pl.col("_ex_g").fill_null(False) | pl.col("_ex_s").fill_null(False) | inferred
    return req.with_columns(
        pl.when(inferred)
        .then(pl.lit("inferred"))
        .when(linked)
        .then(pl.lit("exact"))
        .otherwise(pl.lit("none"))
        .alias("match"),
        pl.min_horizontal("_score_g", "_score_s").alias("match_score"),
        _outcome().alias("outcome"),
    ).sort(["t0", "lr"], nulls_last=True)


def _outcome() -> pl.Expr:
    ok = pl.col("status").is_between(200, 299) & pl.col("error").is_null()
    return (
        pl.when(pl.col("unfinished").fill_null(False))
        .then(pl.lit("unfinished"))
        .when(pl.col("mid_stream").is_in([CUT, READ_TIMEOUT, stream_failures.FAILED]).fill_null(False))
        .then(pl.lit("truncated"))
        .when(pl.col("timed_out").fill_null(False))
        .then(pl.lit("timeout"))
        .when(ok)
        .then(pl.lit("ok"))
        .when(pl.col("error").is_not_null() | (pl.col("status") >= 400))
        .then(pl.lit("error"))
        .otherwise(pl.lit("unknown"))
    )
