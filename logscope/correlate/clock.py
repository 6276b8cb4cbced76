"""Clock skew between sources, estimated from requests matched by id.

The reference clock is the gateway's (it sees both sides of every request), else the server's.
Each id-matched pair bounds the offset: a vLLM ``Received request`` stamp S (whole seconds: the true
time lies in [S, S + 1)) is logged a network hop after the gateway opened the attempt at a0, so the
offset to add to S lies in ``[a0 - S - 1, a0 - S]``. The estimate is the point covered by the most
such intervals (interval voting): their sub-second phases differ, so a few hundred pairs pin it to
a few milliseconds, and a receipt logged late (a busy API server) only loses its vote. (The looser
bound "S falls anywhere inside the attempt" is too wide: LLM requests last seconds.)
A client's send must precede the gateway's receive by a network hop: the median of
``gateway start - client send`` is its offset.
"""

from __future__ import annotations

import polars as pl

from ..scalars import float_value, int_value

SLACK_S = 0.002  # millisecond rounding of the gateway's own stamps
NEAR_ZERO_S = 0.005  # offsets this small (clock noise, network hop) are reported but not applied


def interval_vote(pairs: pl.DataFrame) -> tuple[float, int] | None:
    """Centre of the region covered by the most [lo, hi] intervals, and how many intervals cover it."""
    iv = pairs.filter(
        pl.col("lo").is_not_null() & pl.col("hi").is_not_null() & (pl.col("lo") <= pl.col("hi"))
    )
    if iv.height == 0:
        return None
    ev = (
        pl.concat(
            [
                iv.select(pl.col("lo").alias("x"), pl.lit(1).alias("d")),
                iv.select(pl.col("hi").alias("x"), pl.lit(-1).alias("d")),
            ]
        )
        .sort(["x", "d"], descending=[False, True])  # an interval opening where another closes overlaps it
        .with_columns(pl.col("d").cum_sum().alias("cover"), pl.col("x").shift(-1).alias("next"))
    )
    top = int_value(ev["cover"].max())
    regions = ev.filter(pl.col("cover") == top).with_columns(
        ((pl.col("x") + pl.col("next")) / 2).alias("mid")
    )
    # several disjoint regions tie: take the one nearest the median of the interval centres
    centre = float_value(((iv["lo"] + iv["hi"]) / 2).median())
    best = regions.with_columns((pl.col("mid") - centre).abs().alias("dist")).sort("dist").row(0, named=True)
    return float(best["mid"]), top


def mad(s: pl.Series) -> float | None:
    s = s.drop_nulls()
    if s.len() == 0:
        return None
    med = float_value(s.median())
    return float_value((s - med).abs().median())


def receive_offset(pairs: pl.DataFrame, resolution: float) -> dict | None:
    """Offset of a receiver's clock from intervals: ``s`` its stamp, ``a0``/``a1`` the sender's open interval.

    Returns the seconds to ADD to the receiver's stamps to put them on the sender's clock.
    """
    if pairs.height == 0:
        return None
    # vLLM logs Received within milliseconds of the gateway opening the attempt: the stamp's own
    # resolution is the interval's width; a receipt logged late only loses its vote
    iv = pairs.select(
        (pl.col("a0") - pl.col("s") - resolution - SLACK_S).alias("lo"),
        (pl.col("a0") - pl.col("s") + SLACK_S).alias("hi"),
        (pl.col("a0") - pl.col("s") - resolution / 2).alias("point"),
        (pl.col("a1") - pl.col("s") + SLACK_S).alias("hi_end"),
    )
    vote = interval_vote(iv)
    if vote is None:
        return None
    off, cover = vote
    # pairs whose whole attempt window [start, end] holds the corrected stamp
    within = int(((iv["lo"] <= off) & (iv["hi_end"] >= off)).sum())
    return {
        "offset_s": off,
        "spread_s": mad(iv["point"]),
        "n_matches": pairs.height,
        "consistent": within,
        "method": (
            f"interval voting over {pairs.height} id-matched requests ({cover} agree): the receive stamp "
            + (f"(whole seconds: true time in [S, S+{resolution:g})) " if resolution else "")
            + "follows the sender's attempt start by a network hop"
        ),
    }


def send_offset(pairs: pl.DataFrame) -> dict | None:
    """Offset of a sender's clock: ``c0`` its send stamp, ``g0`` the receiver's (reference) receive stamp."""
    if pairs.height == 0:
        return None
    d = (pairs["g0"] - pairs["c0"]).drop_nulls()
    if d.len() == 0:
        return None
    return {
        "offset_s": float_value(d.median()),
        "spread_s": mad(d),
        "n_matches": int(d.len()),
        "consistent": int(((d - d.median()).abs() <= 1.0).sum()),
        "method": f"median of (gateway receive - client send) over {d.len()} id-matched attempts",
    }


def row(source: str, reference: str | None, est: dict | None, why: str = "") -> dict:
    if est is None:
        return {
            "source": source,
            "reference": reference,
            "offset_s": 0.0,
            "spread_s": None,
            "n_matches": 0,
            "method": why or "no request matched by id: left as logged",
            "verified": False,
        }
    return {
        "source": source,
        "reference": reference,
        "offset_s": est["offset_s"],
        "spread_s": est["spread_s"],
        "n_matches": est["n_matches"],
        "method": est["method"],
        "verified": True,
    }


def applied(off: dict, resolution: float) -> float:
    """The correction actually applied: below the source's resolution (or a network hop) it is noise."""
    if not off["verified"]:
        return 0.0
    o = off["offset_s"]
    return o if abs(o) > max(resolution / 2, NEAR_ZERO_S) else 0.0
