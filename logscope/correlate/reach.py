"""Did each attempt reach vLLM? The facts a retries finding needs before it may say "most retried attempts never
reached vLLM" (or that they all did).

A gateway's upstream attempt reached vLLM when a vLLM execution is linked to it; it did not when the gateway made no
connection (nginx logs '-' for the connect time: refused, or no live upstream); a connection with no execution
matched (no vLLM request log in the folder, another replica's, a line missing) is unknown. A gateway request reached
vLLM when one of its attempts did, and did not when none connected (the gateway answered it itself). A client
attempt reached vLLM when an execution is linked to it (through its gateway request, or directly); it did not when
its gateway request did not; else it is unknown, with why.
"""

from __future__ import annotations

import polars as pl

from .frames import Frames, group_first

REACHED, NOT_REACHED, UNKNOWN = "reached", "not_reached", "unknown"
NO_SERVER_LOG = "no vLLM request line in the input"
NO_SERVER_LINE = "no vLLM request line matched"
NO_GATEWAY_LINE = "no gateway request matched"


def annotate(F: Frames, gr_lr: pl.DataFrame, ex: pl.DataFrame, logs: dict[str, bool]) -> Frames:
    """``F`` with ``reach`` on every gateway request (and its retried attempts' counts: ``retries_reached``,
    ``retries_not_reached``, ``retries_unknown``) and ``reach`` / ``reach_why`` on every client attempt. ``logs``
    says whether the input holds vLLM request lines (``server``) and gateway requests (``gateway``) at all."""
    has_server = logs["server"]
    executed = (
        ex.filter(pl.col("ga").is_not_null()).select("ga").unique().with_columns(pl.lit(True).alias("_x"))
    )
    ga = (
        F.ga.filter(~pl.col("pseudo"))
        .select("ga", "gr", "attempt", "reached")
        .join(executed, on="ga", how="left")
        .sort("gr", "attempt", "ga")
        .with_columns(group_first("gr").alias("_first"))
    )
    state = (
        pl.when(pl.col("_x").fill_null(False))
        .then(pl.lit(REACHED))
        .when(~pl.col("reached").fill_null(False))
        .then(pl.lit(NOT_REACHED))
        .otherwise(pl.lit(UNKNOWN))
    )
    retry = ~pl.col("_first")
    per_gr = (
        ga.with_columns(state.alias("_s"))
        .group_by("gr")
        .agg(
            (pl.col("_s") == REACHED).any().alias("_exec"),
            pl.col("reached").fill_null(False).any().alias("_conn"),
            *(
                (retry & (pl.col("_s") == s)).sum().cast(pl.Int64).alias(f"retries_{s}")
                for s in (REACHED, NOT_REACHED, UNKNOWN)
            ),
        )
    )
    gr = F.gr.join(per_gr, on="gr", how="left").with_columns(
        # a request with no attempt but the gateway's own 'no live upstreams' made no connection
        pl.when(pl.col("_exec").fill_null(False))
        .then(pl.lit(REACHED))
        .when(~pl.col("_conn").fill_null(False))
        .then(pl.lit(NOT_REACHED))
        .otherwise(pl.lit(UNKNOWN))
        .alias("reach"),
        *(pl.col(f"retries_{s}").fill_null(0) for s in (REACHED, NOT_REACHED, UNKNOWN)),
    )
    F.gr = gr.drop("_exec", "_conn")

    via = gr_lr.filter(pl.col("ca").is_not_null()).select("ca", "gr").unique("ca", keep="first")
    via = via.join(F.gr.select("gr", pl.col("reach").alias("_g")), on="gr")
    direct = (
        ex.filter(pl.col("ga").is_null() & pl.col("ca").is_not_null())
        .select("ca")
        .unique()
        .with_columns(pl.lit(True).alias("_d"))
    )
    no_gr = NO_GATEWAY_LINE if logs["gateway"] else (NO_SERVER_LINE if has_server else NO_SERVER_LOG)
    ca = F.ca.join(via.select("ca", "_g"), on="ca", how="left").join(direct, on="ca", how="left")
    reach = (
        pl.when(pl.col("_d").fill_null(False))
        .then(pl.lit(REACHED))
        .when(pl.col("_g").is_not_null())
        .then(pl.col("_g"))
        .otherwise(pl.lit(UNKNOWN))
    )
    why = (
        pl.when(reach != UNKNOWN)
        .then(None)
        .when(pl.col("_g").is_not_null())
        .then(pl.lit(NO_SERVER_LINE if has_server else NO_SERVER_LOG))
        .otherwise(pl.lit(no_gr))
    )
    F.ca = ca.with_columns(reach.alias("reach"), why.alias("reach_why")).drop("_g", "_d")
    return F


def retried(F: Frames) -> dict:
    """Retried attempts at each layer (client retries: attempts after a request's first; gateway retries: upstream
    attempts after a gateway request's first) that reached vLLM, did not, and are unknown (with why)."""
    out: dict = {}
    ca = F.ca.filter(pl.col("attempt").fill_null(1) > 1) if F.ca.height else F.ca
    if F.ca.height and "reach" in ca.columns:
        why = ca.filter(pl.col("reach") == UNKNOWN).group_by("reach_why").len().sort("reach_why")
        out["client"] = {
            "retries": ca.height,
            **{s: int((ca["reach"] == s).sum()) for s in (REACHED, NOT_REACHED, UNKNOWN)},
            "unknown_why": {str(w): int(n) for w, n in why.iter_rows()},
        }
    else:
        out["client"] = None
    gr = F.gr.filter(pl.col("inference")) if F.gr.height else F.gr
    if F.gr.height and "retries_reached" in gr.columns:
        n = {s: int(gr[f"retries_{s}"].sum() or 0) for s in (REACHED, NOT_REACHED, UNKNOWN)}
        out["gateway"] = {"retries": sum(n.values()), **n}
    else:
        out["gateway"] = None
    out["definition"] = (
        "retried attempts that reached vLLM (an execution matched), did not (the gateway made no connection for "
        "them, or their gateway request made none), or are unknown (a connection and no vLLM line matched, or no "
        "vLLM log; a client retry no gateway request matched)"
    )
    return out
