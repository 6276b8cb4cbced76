"""What a kill cost the callers: the requests in flight at the moment of the kill, and how those and the ones after
it ended, per layer, each on its own clock.

A kill's time is the kernel's (or Kubernetes'); the callers' records and the gateway's access log have their own
clocks, and no request ties any of them to the kernel's (vLLM's whole-second stamps bound it to a second at best).
So each layer's records are read as they were written, not shifted by correlation's offsets, and every figure says
whose clock it was counted on. With streaming, the gateway logs the 200 it sent before the stream was cut: its
statuses and the callers' outcomes differ, and both are given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from .. import schemas
from .tables import read


@dataclass
class Layer:
    """One layer's count: in flight at the kill (started at or before it, ended at or after it) and the outcomes of
    every record that ended at or after it."""

    layer: str  # callers | gateway
    sources: list[str]
    in_flight: int
    after: dict[str, int] = field(default_factory=dict)  # '200', '502', 'APIError', 'timeout' -> records

    def words(self) -> str:
        src = ", ".join(self.sources)
        n = sum(self.after.values())
        ended = ", ".join(f"{k:,} × {o}" for o, k in self.after.items())
        what = "of the callers' requests" if self.layer == "callers" else "requests open at the gateway"
        return (
            f"{self.in_flight:,} {what} in flight at the kill and {n:,} ending from it on"
            + (f": {ended}" if n else "")
            + f" ({src}, its own clock)"
        )


def _kept(out: Path) -> dict[str, list[str]]:
    """correlation.json's sources per layer: one client source per program (a DEBUG log and the JSONL records of
    the same client describe the same requests; counting both would count each twice)."""
    p = out / "correlation.json"
    try:
        doc = json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
    except (OSError, ValueError):
        doc = {}
    src = doc.get("sources") if isinstance(doc, dict) else None
    return src if isinstance(src, dict) else {}


def _outcome(status: pl.Expr, error: pl.Expr, timed_out: pl.Expr | None = None) -> pl.Expr:
    timed = timed_out.fill_null(False) if timed_out is not None else pl.lit(False)
    return (
        pl.when(status.is_not_null())
        .then(status.cast(pl.String))
        .when(timed)
        .then(pl.lit("timeout"))
        .when(error.is_not_null())
        .then(error.str.extract(r"^(\w+)", 1))
        .otherwise(pl.lit("no answer"))
    )


def _count(df: pl.DataFrame, t: datetime) -> tuple[int, dict[str, int]]:
    inflight = df.filter((pl.col("ts_start") <= t) & (pl.col("ts_end") >= t)).height
    after = (
        df.filter(pl.col("ts_end") >= t)
        .group_by("outcome")
        .len()
        .sort(["len", "outcome"], descending=[True, False])
    )
    return inflight, {r["outcome"]: int(r["len"]) for r in after.iter_rows(named=True)}


def at(out: Path, t: datetime) -> list[Layer]:
    """The callers' and the gateway's counts around a kill at ``t`` (the layers the folder holds)."""
    kept = _kept(out)
    layers = []
    cr = read(out, "client_requests", ("source", "ts_start", "ts_end", "status", "error", "timed_out"))
    if kept.get("client"):
        cr = cr.filter(pl.col("source").is_in(kept["client"]))
    cr = cr.drop_nulls(["ts_start", "ts_end"])
    if cr.height:
        df = cr.with_columns(
            _outcome(pl.col("status"), pl.col("error"), pl.col("timed_out")).alias("outcome")
        )
        n, after = _count(df, t)
        layers.append(Layer("callers", sorted(set(cr["source"])), n, after))
    cols = ("source", "line_no", "ts_start", "ts_end", "attempt", "attempts_total", "status", "error")
    # one row a request, whatever the gateway (HAProxy's retried line is its last attempt)
    ga = (
        read(out, "gateway_attempts", cols)
        .filter(schemas.gateway_request_row())
        .drop_nulls(["ts_start", "ts_end"])
    )
    if kept.get("gateway"):
        ga = ga.filter(pl.col("source").is_in(kept["gateway"]))
    if ga.height:
        n, after = _count(ga.with_columns(_outcome(pl.col("status"), pl.col("error")).alias("outcome")), t)
        layers.append(Layer("gateway", sorted(set(ga["source"])), n, after))
    return layers
