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

from ..scalars import int_or_none
from .exprs import cumsum_before, group_first
from .frames import Frames

REACHED, NOT_REACHED, UNKNOWN = "reached", "not_reached", "unknown"
NO_SERVER_LOG = "no vLLM request line in the input"
NO_SERVER_LINE = "no vLLM request line matched"
NO_GATEWAY_LINE = "no gateway request matched"


def annotate(F: Frames, gr_lr: pl.DataFrame, ex: pl.DataFrame, logs: dict[str, bool]) -> Frames:
    """``F`` with ``reach`` on every gateway request (and its retried attempts' counts: ``retries_reached``,
    ``retries_not_reached``, ``retries_unknown``) and ``reach`` / ``reach_why`` on every client attempt. ``logs``
    says whether the input holds vLLM request lines (``server``) and gateway requests (``gateway``) at all."""
    has_server = logs["server"]
    # F.gateway_attempts is in gateway-request order, each request's attempts in order (frames._gateway): no sort, no join
    real = ~pl.col("pseudo")
    x = pl.col("ga").is_in(ex["ga"].drop_nulls().implode()).alias("_x")
    ga = F.gateway_attempts.select("gr", real.alias("_real"), pl.col("reached").fill_null(False), x)
    ga = ga.with_columns(group_first("gr").alias("_first"))
    # a retry: a real attempt after the request's first real one (nginx's 'no live upstreams' row is none)
    retry = pl.col("_real") & (cumsum_before(pl.col("_real").cast(pl.Int64)) > 0)
    conn, executed = pl.col("_real") & pl.col("reached"), pl.col("_real") & pl.col("_x")
    per_gr = (
        ga.with_columns(retry.alias("_retry"), pl.col("gr").set_sorted())
        .group_by("gr", maintain_order=True)
        .agg(
            executed.any().alias("_exec"),
            conn.any().alias("_conn"),
            (pl.col("_retry") & executed).sum().cast(pl.Int64).alias(f"retries_{REACHED}"),
            (pl.col("_retry") & ~executed & ~conn).sum().cast(pl.Int64).alias(f"retries_{NOT_REACHED}"),
            (pl.col("_retry") & ~executed & conn).sum().cast(pl.Int64).alias(f"retries_{UNKNOWN}"),
        )
    )
    # one row per gateway request in both, in the same order: side by side (a join of a million rows each, else)
    if per_gr["gr"].equals(F.gateway_requests["gr"]):
        gr = F.gateway_requests.hstack(per_gr.drop("gr"))
    else:
        gr = F.gateway_requests.join(per_gr, on="gr", how="left")
    gr = gr.with_columns(
        pl.when(pl.col("_exec").fill_null(False))
        .then(pl.lit(REACHED))
        .when(~pl.col("_conn").fill_null(False))  # no connection made, or only the gateway's own 502
        .then(pl.lit(NOT_REACHED))
        .otherwise(pl.lit(UNKNOWN))
        .alias("reach"),
        *(pl.col(f"retries_{s}").fill_null(0) for s in (REACHED, NOT_REACHED, UNKNOWN)),
    )
    F.gateway_requests = gr.drop("_exec", "_conn")

    # keys are small integers: look the gateway request's reach up by position, not by a join of every row
    via = gr_lr.filter(pl.col("ca").is_not_null()).select("ca", "gr")
    g = _lookup(
        F.client_attempts["ca"],
        via["ca"],
        _lookup(via["gr"], F.gateway_requests["gr"], F.gateway_requests["reach"]),
    )
    direct = ex.filter(pl.col("ga").is_null() & pl.col("ca").is_not_null())["ca"]
    no_gr = NO_GATEWAY_LINE if logs["gateway"] else (NO_SERVER_LINE if has_server else NO_SERVER_LOG)
    ca = F.client_attempts.with_columns(g.alias("_g"), pl.col("ca").is_in(direct.implode()).alias("_d"))
    reach = (
        pl.when(pl.col("_d"))
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
    F.client_attempts = ca.with_columns(reach.alias("reach"), why.alias("reach_why")).drop("_g", "_d")
    return F


def _lookup(keys: pl.Series, at: pl.Series, values: pl.Series) -> pl.Series:
    """``values[i]`` where ``at[i] == key``, for each of ``keys`` (null where none): keys are non-negative integers,
    so a table indexed by them is one scatter and one gather."""
    if keys.len() == 0 or at.len() == 0:
        return pl.repeat(None, keys.len(), dtype=values.dtype, eager=True)
    size = max(int_or_none(keys.max()) or 0, int_or_none(at.max()) or 0) + 1
    table = pl.repeat(None, size, dtype=values.dtype, eager=True).scatter(at, values)
    return table.gather(keys)


def retried(F: Frames) -> dict:
    """Retried attempts at each layer (client retries: attempts after a request's first; gateway retries: upstream
    attempts after a gateway request's first) that reached vLLM, did not, and are unknown (with why)."""
    out: dict = {}
    ca = (
        F.client_attempts.filter(pl.col("attempt").fill_null(1) > 1)
        if F.client_attempts.height
        else F.client_attempts
    )
    if F.client_attempts.height and "reach" in ca.columns:
        why = ca.filter(pl.col("reach") == UNKNOWN).group_by("reach_why").len().sort("reach_why")
        out["client"] = {
            "retries": ca.height,
            **{s: int((ca["reach"] == s).sum()) for s in (REACHED, NOT_REACHED, UNKNOWN)},
            "unknown_why": {str(w): int(n) for w, n in why.iter_rows()},
        }
    else:
        out["client"] = None
    gr = F.gateway_requests.filter(pl.col("inference")) if F.gateway_requests.height else F.gateway_requests
    if F.gateway_requests.height and "retries_reached" in gr.columns:
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
