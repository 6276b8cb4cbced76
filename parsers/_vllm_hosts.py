"""The machine a vLLM server ran on, from NCCL's lines in its log: NCCL prefixes each of its debug lines with
``host:pid:tid [device]`` (``ncclDebugLog``), and under Kubernetes the host is the pod's name
(``lax-ai-vllm-model-78d9c658c8-qlw8z:271:402 [1] NCCL INFO ...``, vllm#9193). Each NCCL line is recognised; the
first naming a host in a file is a ``server_events`` row of kind ``host`` (its pid is NCCL's), what the platform's
records (a pod's name) are joined to."""

from __future__ import annotations

import polars as pl

from ._common import ascii_classes
from .base import ParseContext

# RFC 1123 host names (a pod's name); NCCL's levels are INFO, WARN and TRACE
NCCL = ascii_classes(
    r"^(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252}):(?P<npid>\d+):\d+ \[\d+\] NCCL (?:INFO|WARN|TRACE) "
)


def hosts(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.Series | None]:
    """(the ``host`` rows of hosts not seen before in this file, the seq of every NCCL line)."""
    lines = df.filter(pl.col("msg").str.contains(NCCL).fill_null(False))
    if not lines.height:
        return pl.DataFrame(), None
    got = lines.with_columns(pl.col("msg").str.extract_groups(NCCL).alias("_g")).unnest("_g")
    seen = state.setdefault("hosts", set())
    first = got.unique("host", keep="first", maintain_order=True).filter(~pl.col("host").is_in(list(seen)))
    seen.update(first["host"].to_list())
    rows = first.select(
        "ts",
        "ts_inferred",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("host").alias("kind"),
        pl.lit("NCCL").alias("process"),
        pl.col("npid").cast(pl.Int64).alias("pid"),
        pl.col("msg").str.slice(0, 500).alias("message"),
        "line_no",
        pl.lit(1, dtype=pl.Int64).alias("line_count"),
        "seq",
    )
    return rows, lines["seq"]
