"""How attempts fell over requests, from the counts that hold them, not a mean that reads as if every request
tried that often (public-2 c02's "2 attempts per request" was 3 attempts of one request and 1 of the other).

* ``of_requests``: the logical requests (requests.parquet), each with its attempts at the client or the gateway,
  whichever layer tried more: how many were retried and the most attempts one took.
* ``stated``: the retries a gateway log states beyond the attempts it shows as lines. LiteLLM's router ends a
  failure with "LiteLLM Retried: 10 times" on one line (public-2 g01); HAProxy (%rc), Traefik (RetryAttempts) and
  Envoy (attempt count) log one line per request with its attempt count. Those retries are evidence, counted with
  their source named; no attempt the log does not show is made a row.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import polars as pl

from .. import schemas
from ..scalars import int_or_none

# the statement each gateway's count is read from (parsers' attempts_total)
STATED_BY = {
    "litellm": "LiteLLM's own 'LiteLLM Retried: N times'",
    "haproxy": "HAProxy's retries field (%rc)",
    "traefik": "Traefik's RetryAttempts",
    "envoy": "Envoy's attempt count",
    "aws_alb": "an AWS ALB's one attempt per request (it does not retry)",
}


@dataclass(frozen=True)
class Spread:
    """``retried`` of ``requests`` took more than one attempt, ``max_attempts`` at most, ``attempts`` in all
    (``retries``: beyond the first of each), as ``source`` counts them; ``max_client`` / ``max_gateway``: the most
    one request took at each layer (None where the layer has no count), so that a maximum is said with its layer."""

    requests: int
    retried: int
    max_attempts: int
    attempts: int
    retries: int
    source: str
    max_client: int | None = None
    max_gateway: int | None = None


def attempts_per_request(cols: list[str]) -> pl.Expr:
    """A logical request's attempts: at the layer that tried it most (a gateway's failovers under one client
    attempt, or a client's retries through a gateway that tried each once)."""
    return pl.max_horizontal([pl.col(c).fill_null(1).clip(1) for c in cols])


def of_requests(req: pl.DataFrame | None) -> Spread | None:
    if req is None or not req.height:
        return None
    cols: list[str] = [c for c in ("client_attempts", "gateway_attempts") if c in req.columns]
    if not cols or all(req[c].null_count() == req.height for c in cols):
        return None
    att = attempts_per_request(cols)
    r = req.select(
        pl.len().alias("n"),
        (att > 1).sum().alias("retried"),
        att.max().alias("max"),
        att.sum().alias("sum"),
        *(pl.col(c).max().alias(c) for c in cols),
    ).row(0, named=True)
    return Spread(
        int(r["n"]),
        int(r["retried"]),
        int(r["max"]),
        int(r["sum"]),
        int(r["sum"]) - int(r["n"]),
        "requests: each logical request's attempts at its client or gateway",
        _layer_max(r.get("client_attempts")),
        _layer_max(r.get("gateway_attempts")),
    )


def _layer_max(v: object) -> int | None:
    """A layer's most attempts for one request; 0 (a table with no record of that layer) is no count."""
    n = int_or_none(v)
    return n if n else None


def stated(ga: pl.DataFrame | None) -> Spread | None:
    """The gateway requests whose log states more attempts than it shows lines of (one access line = one request:
    its rows share source and line_no), with those retries; None when no log states any."""
    need = {"attempts_total", "source", "line_no", "status", "flags"}
    if ga is None or not ga.height or not need <= set(ga.columns):
        return None
    gw = pl.col("gateway") if "gateway" in ga.columns else pl.lit(None, pl.String)
    per = (
        # a proxy's line apart from its access lines is no request: LiteLLM's failure line beside uvicorn's access
        # lines states retries its repeated 'Exception' lines show (tests/data/litellm)
        ga.filter(pl.col("line_no").is_not_null() & ~schemas.gateway_apart())
        .group_by("source", "line_no")
        .agg(pl.len().alias("shown"), pl.col("attempts_total").max().alias("total"), gw.first().alias("gw"))
    )
    n = per.height
    per = per.filter(pl.col("total") > pl.col("shown"))
    if not per.height:
        return None
    kinds = sorted(per["gw"].drop_nulls().unique().to_list())
    src = (
        "; ".join(STATED_BY.get(k, f"the {k} log's attempt count") for k in kinds)
        or "the gateway log's count"
    )
    return Spread(
        n,
        per.height,
        int_or_none(per["total"].max()) or 0,
        int_or_none(per["total"].sum()) or 0,
        int_or_none((per["total"] - per["shown"]).sum()) or 0,
        src,
    )


def most_words(sp: Spread) -> str:
    """'up to 4 attempts': the most one request took, with each layer's own most where they differ (retry-storm: 4
    client attempts, 5 upstream attempts at the gateway, which re-sent one of them), so that no layer's count is read
    as another's."""
    c, g = sp.max_client, sp.max_gateway
    if c is not None and g is not None and c != g:
        at_client = "one attempt at the client" if c == 1 else f"up to {c:,} attempts at the client"
        return f"{at_client}, {'one' if g == 1 else f'up to {g:,}'} at the gateway"
    return f"up to {sp.max_attempts:,} attempts"


def as_dict(sp: Spread | None) -> dict | None:
    """The spread as summary.json carries it, with ``most`` (most_words) for every output to render alike."""
    return asdict(sp) | {"most": most_words(sp)} if sp is not None else None


def retried_for(att: pl.DataFrame | None) -> dict | None:
    """What the client attempts that were retried (another attempt of their request followed) ended in: how many,
    how many answered 429 (a rate limit or quota), how many timed out, how many failed otherwise (public-2 c01, c02:
    every retry followed a 429, yet the advice was to raise the client's timeout). None without client attempts."""
    need = {"logical_request_id", "attempt", "status", "timed_out"}
    if att is None or not att.height or not need <= set(att.columns):
        return None
    last = pl.col("attempt").max().over("logical_request_id")
    r = att.filter(pl.col("logical_request_id").is_not_null() & (pl.col("attempt") < last)).select(
        pl.len().alias("attempts"),
        (pl.col("status") == 429).sum().alias("rate_limited"),
        pl.col("timed_out").fill_null(False).sum().alias("timed_out"),
        (pl.col("status").is_not_null() & (pl.col("status") != 429)).sum().alias("other_status"),
    )
    row = {k: int(v or 0) for k, v in r.row(0, named=True).items()}
    return row if row["attempts"] else None


# what a gateway's retried line names as its end: a timeout (LiteLLM's Timeout, HAProxy's 'server timeout', a
# 504/408), a limit (429, LiteLLM's RateLimitError), else another failure (a status >= 400 or a named error)
_TIMEOUT = r"(?i)timeout|timed out"
_LIMIT = r"RateLimitError"
GATEWAY_COLS = (
    "source",
    "line_no",
    "gateway",
    "attempt",
    "attempts_total",
    "status",
    "upstream_status",
    "error",
)


def gateway_retried_for(ga: pl.DataFrame | None) -> dict | None:
    """What the gateway requests its log says were retried ended in, as ``retried_for`` counts a client's, from the
    error or status the retried line names (public-2 g01: 'RateLimitError ... LiteLLM Retried: 10 times'), with
    ``source`` naming the statement; ``unknown``: lines that name no failure (HAProxy's 200 after a redispatch says
    nothing of what was retried). nginx's tries before the last of a line are its retried attempts. None when no
    gateway line states a retry."""
    need = set(GATEWAY_COLS) - {"gateway"}
    if ga is None or not ga.height or not need <= set(ga.columns):
        return None
    one_line = pl.len().over("source", "line_no") == 1
    rows = ga.filter(
        (pl.col("attempts_total") > 1)
        & (one_line | (pl.col("attempt").fill_null(0) < pl.col("attempts_total")))
    )
    if not rows.height:
        return None
    st = pl.coalesce("upstream_status", "status")
    err = pl.col("error").fill_null("")
    timed = st.is_in([408, 504]).fill_null(False) | err.str.contains(_TIMEOUT)
    limit = ~timed & ((st == 429).fill_null(False) | err.str.contains(_LIMIT))
    other = ~timed & ~limit & ((st >= 400).fill_null(False) | (st.is_null() & (err != "")))
    r = rows.select(
        pl.len().alias("attempts"),
        limit.sum().alias("rate_limited"),
        timed.sum().alias("timed_out"),
        other.sum().alias("other_status"),
    ).row(0, named=True)
    row = {k: int(v or 0) for k, v in r.items()}
    row["unknown"] = row["attempts"] - row["rate_limited"] - row["timed_out"] - row["other_status"]
    kinds = sorted(rows["gateway"].drop_nulls().unique().to_list()) if "gateway" in rows.columns else []
    said = (
        "; ".join(STATED_BY.get(k, f"the {k} log's attempt count") for k in kinds)
        or "the gateway log's count"
    )
    return row | {"source": f"the error or status named on each line with {said}"}


def rate_limited(rf: dict | None) -> bool:
    """The retried attempts whose end is known were answered 429, none timed out: the retries followed a limit. A
    gateway's lines may name another error beside the 429s (g01: 2 RateLimitError, 1 APIError): a limit still, when
    the 429s are most of the known ends."""
    if not rf or not rf["rate_limited"] or rf["timed_out"]:
        return False
    return not rf["other_status"] if "source" not in rf else rf["rate_limited"] > rf["other_status"]


def said_nothing(rf: dict | None) -> bool:
    """Nothing in the folder says what the retries followed: no client attempt, no gateway line naming an end."""
    return not rf or not (rf["rate_limited"] or rf["timed_out"] or rf["other_status"])
