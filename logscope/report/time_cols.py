"""The timeline's time columns as polars expressions: an ISO 8601 UTC string as epoch milliseconds (``ms``), and
epoch milliseconds as the page's clock text (``hms``).
"""

from __future__ import annotations

import polars as pl

from .. import clock


def ms(col: str) -> pl.Expr:
    return pl.col(col).str.to_datetime(time_zone="UTC").dt.epoch("ms")


def hms(col: str) -> pl.Expr:
    return (
        pl.from_epoch(pl.col(col), time_unit="ms")
        .dt.replace_time_zone("UTC")
        .dt.strftime(clock.time_format())
    )
