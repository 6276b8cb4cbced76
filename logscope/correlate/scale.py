"""Scale a real run's tables up for the correlation benchmark (``bench/``), without inventing lines.

``scale_tables`` tiles the ingest tables of a real recording: copy k gets ``-k<k>`` appended to
every id and its timestamps moved k spans later, so the copies never overlap and every join has
exactly the real run's shape, repeated. ``time_correlation`` runs the stage on such tables.
"""

from __future__ import annotations

import math
import time
from datetime import datetime
from pathlib import Path
from typing import cast

import polars as pl

from .. import schemas
from . import correlate_tables
from .ingest_tables import CLIENT_PICK, INPUTS, read_tables

ID_COLS = ("request_id", "client_request_id", "logical_request_id", "base_request_id")


def _span_us(tabs: dict[str, pl.DataFrame]) -> int:
    lo: list[datetime] = []
    hi: list[datetime] = []
    for df in tabs.values():
        for c, t in df.schema.items():
            if t == schemas.TS and df.height:  # a UTC datetime column: its min and max are datetimes, or None
                a, b = cast("datetime | None", df[c].min()), cast("datetime | None", df[c].max())
                lo += [a] if a is not None else []
                hi += [b] if b is not None else []
    if not lo:
        return 0
    return int((max(hi) - min(lo)).total_seconds() * 1e6) + 60_000_000


def scale_tables(tabs: dict[str, pl.DataFrame], copies: int) -> dict[str, pl.DataFrame]:
    """``copies`` back-to-back repetitions of every table (a polars cross join, not a loop over rows)."""
    span = _span_us(tabs)
    k = pl.DataFrame({"_k": pl.int_range(0, copies, eager=True).cast(pl.Int64)})
    out = {}
    for name, df in tabs.items():
        if df.height == 0 or name in ("files", CLIENT_PICK):  # the pick names sources, not rows
            out[name] = df
            continue
        big = df.join(k, how="cross")
        sfx = pl.lit("-k") + pl.col("_k").cast(pl.String)
        exprs = [
            pl.col(c) + pl.duration(microseconds=pl.col("_k") * span)
            for c, t in df.schema.items()
            if t == schemas.TS
        ]
        exprs += [pl.col(c) + sfx for c in ID_COLS if c in df.columns]
        if "line_no" in df.columns:  # keeps gateway requests (source, line) distinct across copies
            exprs.append(pl.col("line_no") + pl.col("_k") * (df["line_no"].max() or 0))
        out[name] = big.with_columns(exprs).drop("_k")
    return out


def time_correlation(
    out_dir: str | Path, target_requests: int = 1_000_000, window: str | None = None
) -> dict:
    """Correlate ``out_dir``'s tables tiled up to about ``target_requests`` logical requests; report the time."""
    tabs = read_tables(Path(out_dir))
    base = correlate_tables(tabs, window).summary["retry_multiplication"]["logical_requests"] or 1
    copies = max(1, math.ceil(target_requests / base))
    t0 = time.perf_counter()
    big = scale_tables(tabs, copies)
    t1 = time.perf_counter()
    res = correlate_tables({n: big[n] for n in INPUTS}, window)
    t2 = time.perf_counter()
    rm = res.summary["retry_multiplication"]
    return {
        "copies": copies,
        "logical_requests": rm["logical_requests"],
        "client_attempts": rm["client_attempts"],
        "gateway_requests": rm["gateway_requests"],
        "server_requests": rm["server_requests"],
        "scale_seconds": round(t1 - t0, 3),
        "correlate_seconds": round(t2 - t1, 3),
    }
