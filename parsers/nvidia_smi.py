"""``nvidia-smi``'s table, pasted once or printed in a loop (``nvidia-smi -l``, ``watch``) -> ``server_metrics``: per GPU
and per printout, the memory in use and its total, utilisation, power, temperature.

    Thu May  7 01:38:35 2026
    +-----------------------------------------------------------------------------------------+
    | NVIDIA-SMI 580.142                Driver Version: 580.142        CUDA Version: 13.0     |
    |   0  NVIDIA GeForce RTX 3090        Off |   00000000:01:00.0 Off |                  N/A |
    | 46%   46C    P8             20W /  230W |   22188MiB /  24576MiB |      0%      Default |

Layout: each GPU is two rows (index, name, bus id; then fan, temperature, perf state, power, memory, utilisation),
the same in the older 80-column table. The date nvidia-smi prints above the table is the host's local time, read
in --tz; a table pasted without it keeps a null time. Series: ``nvidia_smi_memory_used_mib``,
``nvidia_smi_memory_total_mib``, ``nvidia_smi_gpu_util_percent``, ``nvidia_smi_power_w``,
``nvidia_smi_temperature_c``, labelled ``gpu=<index>,bus_id=<id>,model=<name>``.
"""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS, conform

from ._common import ascii_classes
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "nvidia_smi"
KIND = "metrics"
DESCRIPTION = (
    "nvidia-smi's table (once or in a loop): GPU memory used / total, utilisation, power, temperature"
)
MODE = "lines"
SAMPLES = [
    "| NVIDIA-SMI 580.142                Driver Version: 580.142        CUDA Version: 13.0     |",
    "|   0  NVIDIA GeForce RTX 3090        Off |   00000000:01:00.0 Off |                  N/A |",
    "| 46%   46C    P8             20W /  230W |   22188MiB /  24576MiB |      0%      Default |",
]

_HEAD = r"^\|\s*NVIDIA-SMI \d+\.\d+"
_GPU = ascii_classes(
    r"^\|\s+(?P<gpu>\d+)\s+(?P<model>\S.*?)\s+(?:On|Off)\s+\|\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)"
)
_USE = ascii_classes(
    r"^\|\s+(?:\d+%|N/A)\s+(?P<temp>\d+|N/A)C?\s+(?P<perf>P\d+|N/A)\s+(?P<pw>\d+|N/A)W?\s*/\s*(?:\d+|N/A)W?\s+\|"
    r"\s+(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s+\|\s+(?P<util>\d+|N/A)%?\s"
)
_DATE = r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$"
_TABLE = r"^[|+]"  # every line of the table starts with a rule's '+' or a cell's '|'
_SERIES = {
    "used": "nvidia_smi_memory_used_mib",
    "total": "nvidia_smi_memory_total_mib",
    "util": "nvidia_smi_gpu_util_percent",
    "pw": "nvidia_smi_power_w",
    "temp": "nvidia_smi_temperature_c",
}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    strong = s.str.contains(_HEAD) | s.str.contains(_USE)
    ok = s.str.contains(_TABLE) | s.str.contains(_DATE)
    g = per_head(nonblank(frame), n, strong=strong.any(), m=ok.mean())
    return g.select(pl.when(pl.col("strong")).then(0.9 * pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    line = pl.col("line").str.strip_suffix("\r")
    d = lines.select("line_no", line.alias("line"))
    date = (
        pl.when(pl.col("line").str.contains(_DATE))
        .then(
            pl.col("line")
            .str.strip_chars()
            .str.replace_all(" +", " ")
            .str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False, time_unit="us")
        )
        .dt.replace_time_zone(ctx.tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
        .cast(TS)
    )
    d = d.with_columns(
        date.fill_null(pl.lit(state.get("date"), dtype=TS)).forward_fill().alias("ts"),
        pl.col("line").str.extract_groups(_GPU).alias("g"),
        pl.col("line").str.extract_groups(_USE).alias("u"),
    ).unnest("g", "u")
    if d["ts"].drop_nulls().len():
        state["date"] = d["ts"].drop_nulls()[-1]
    # a GPU's second row follows its first: the index, bus and name carry down to it
    for c in ("gpu", "model", "bus"):
        d = d.with_columns(pl.col(c).fill_null(pl.lit(state.get(c))).forward_fill())
        if d[c].drop_nulls().len():
            state[c] = d[c].drop_nulls()[-1]
    recognized = d["line"].str.contains(_TABLE) | d["line"].str.contains(_DATE)
    rows = d.filter(pl.col("used").is_not_null() & pl.col("gpu").is_not_null())
    res = ChunkResult(recognized=recognized)
    if rows.height:
        labels = pl.concat_str(
            pl.lit("bus_id="),
            pl.col("bus"),
            pl.lit(",gpu="),
            pl.col("gpu"),
            pl.lit(",model="),
            pl.col("model"),
        )
        long = rows.unpivot(
            index=["ts", "bus", "gpu", "model"], on=list(_SERIES), variable_name="k", value_name="v"
        )
        long = long.filter(pl.col("v").str.contains(r"^\d+$"))
        res.tables["server_metrics"] = conform(
            long.with_columns(labels.alias("labels")).select(
                "ts",
                pl.lit(ctx.source).alias("source"),
                pl.lit(ctx.replica).alias("replica"),
                pl.col("k").replace_strict(_SERIES).alias("name"),
                "labels",
                pl.col("v").cast(pl.Float64).alias("value"),
            ),
            "server_metrics",
        )
        if rows["ts"].null_count():
            state["untimed"] = state.get("untimed", 0) + rows["ts"].null_count()
        if rows["ts"].drop_nulls().len():
            res.assumptions.append(
                f"nvidia-smi's date line is the host's local time: read as {ctx.tz} (--tz)"
            )
    return res


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    n = state.get("untimed", 0)
    if not n:
        return None
    return ChunkResult(
        messages=[
            f"{n} GPU row(s) of a table printed without nvidia-smi's date line above it: kept with a null time"
        ]
    )
