"""AIPerf's console summary (the rich box table ``aiperf profile`` prints at the end) -> ``load_tests`` rows.

Sample (NVIDIA/TensorRT-LLM#11708, 2026; tests/data/load-tests/aiperf)::

                                                   NVIDIA AIPerf | LLM Metrics
    ┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━┳ ... ┓
    ┃                               Metric ┃       avg ┃       min ┃       max ┃       p99 ┃       p90 ┃       p50 ┃    std ┃
    ┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━╇ ... ┩
    │             Time to First Token (ms) │  1,655.27 │    339.27 │  3,694.30 │  3,487.93 │  2,258.40 │  1,773.55 │ 659.40 │
    │             Request Count (requests) │    100.00 │       N/A │       N/A │       N/A │       N/A │       N/A │    N/A │
    └──────────────────────────────────────┴───────────┴ ... ┘

    CLI Command: aiperf profile --model '...' --url '...' --endpoint-type 'chat' --concurrency 10 --request-count 100
    Benchmark Duration: 144.56 sec

Line kinds: the title (``NVIDIA AIPerf | <table>``); rules (box-drawing characters only); the header row (``┃``
cells: ``Metric`` then the statistics in the order printed, ``avg min max p99 p90 p50 std`` by default); a
metric row (``│`` cells: the metric's name with its unit, then one value per statistic, thousands with commas,
``N/A`` when none); a name's continuation row (``│ (tokens/sec/user) │ │ …``); the trailer (``CLI Command:``,
``Benchmark Duration: N sec``, ``… Export: <path>``, ``Log File: <path>``). A paste may hold rows without their
header (ai-dynamo/aiperf#535): the default statistics then name the cells. Each header (or the rows before any)
opens a run. Metrics kept: Time to First Token -> ttft, Request Latency -> e2e, Inter Token Latency -> itl (ms,
avg -> mean, p50 -> median, p99), Output Token Throughput (tokens/sec) -> output_tps, Request Throughput ->
throughput_rps, Request Count -> successful (AIPerf counts valid requests), Error Request Count -> failed; the
CLI's ``--concurrency``, ``--request-rate`` and ``--request-count`` (requests sent when no error count says).
"""

from __future__ import annotations

import polars as pl

from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "aiperf_console"
KIND = "client"
DESCRIPTION = "AIPerf's console summary table (NVIDIA AIPerf | LLM Metrics), each table a load_tests row"
MODE = "document"
SAMPLES = [  # NVIDIA/TensorRT-LLM#11708 and ai-dynamo/aiperf#535
    "┃                               Metric ┃       avg ┃       min ┃       max ┃       p99 ┃       p90 ┃       p50 ┃"
    "    std ┃",
    "│             Time to First Token (ms) │  1,655.27 │    339.27 │  3,694.30 │  3,487.93 │  2,258.40 │  1,773.55 │"
    " 659.40 │",
    "│             Request Count (requests) │    100.00 │       N/A │       N/A │       N/A │       N/A │       N/A │"
    "    N/A │",
]

TOOL = "aiperf"
_TITLE = r"^\s*NVIDIA AIPerf \| .+$"
_RULE = r"^[\s┏┓┗┛┡┩┢┪┣┫┳┻╇╈╋━─┃│┬┴┼├┤└┘┌┐╭╮╰╯═╔╗╚╝╞╡╤╧╪]+$"
_HEADER = r"^┃\s*Metric\s*┃(?:\s*[a-z]\w*\s*┃)+\s*$"
_ROW = r"^│\s*[A-Za-z][^│]*│(?:\s*(?:N/A|-?[\d,]*\.?\d+)\s*│)+\s*$"
_CONT = r"^│\s*\([^│]*\)\s*│(?:\s*│)+\s*$"
_TRAILER = r"^(?:CLI Command: |Benchmark Duration: |(?:[A-Z][\w ]*)?Export: |Log File: )"
_DURATION = r"^Benchmark Duration: ([\d.]+) sec"
_FLAG = r"\s--{flag}[ =]'?([\d.]+)"
DEFAULT_STATS = ["avg", "min", "max", "p99", "p90", "p50", "std"]
# metric name as printed -> (column prefix or column, factor); statistics avg/p50/p99 -> mean/median/p99
_LATENCIES = {
    "Time to First Token (ms)": "ttft",
    "Request Latency (ms)": "e2e",
    "Inter Token Latency (ms)": "itl",
}
_STATS = {"avg": "mean", "p50": "median", "p99": "p99"}
_SCALARS = {
    "Output Token Throughput (tokens/sec)": "output_tps",
    "Request Throughput (requests/sec)": "throughput_rps",
    "Request Count (requests)": "successful",
    "Error Request Count (requests)": "failed",
}
_WANT = {
    **{(m, s): (f"{p}_{n}_s", 1e-3) for m, p in _LATENCIES.items() for s, n in _STATS.items()},
    **{(m, "avg"): (c, 1.0) for m, c in _SCALARS.items()},
}
COLUMNS = list(dict.fromkeys(c for c, _ in _WANT.values()))


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    g = per_head(
        nonblank(frame),
        n,
        named=(s.str.contains(_TITLE) | s.str.contains(_HEADER)).any(),
        rows=share(_ROW),
        table=(s.str.contains(_ROW) | s.str.contains(_RULE) | s.str.contains(_CONT)).mean(),
    )
    return g.select(
        pl.when(pl.col("named") & (pl.col("table") >= 0.3))
        .then(0.95)
        .when(pl.col("rows") >= 0.5)
        .then(0.75)
        .otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _cells(line: pl.Expr) -> pl.Expr:
    return line.str.strip_chars().str.replace_all("┃", "│").str.strip_chars("│").str.split("│")


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    s = pl.Series("line", text.split("\n"), dtype=pl.String)
    if text.endswith("\n"):
        s = s.head(s.len() - 1)
    df = pl.DataFrame({"line": s}).with_row_index("i", 1).with_columns(pl.col("i").cast(pl.Int64))
    line = pl.col("line").str.strip_chars_end()
    header, row = line.str.contains(_HEADER), line.str.contains(_ROW)
    known = (
        header
        | row
        | line.str.contains(_TITLE)
        | line.str.contains(_RULE)
        | line.str.contains(_CONT)
        | line.str.contains(_TRAILER)
        | (line == "")
    )
    df = df.with_columns(
        header.alias("header"),
        row.alias("row"),
        header.cast(pl.Int64).cum_sum().alias("run"),
        _cells(line).alias("cells"),
    )
    n_parsed = int(df.select(known.sum()).item())
    rows = _rows(df)
    return ChunkResult(
        tables={"load_tests": _frame(df, rows, ctx.source)} if rows.height else {},
        lines_parsed=n_parsed,
        assumptions=[
            "AIPerf's console table: its own aggregates on the client clock; Request Count counts the valid "
            "(successful) requests"
        ]
        if rows.height
        else [],
    )


def _rows(df: pl.DataFrame) -> pl.DataFrame:
    """One row per (run, metric, statistic) kept, its value in the table's unit times its factor."""
    names = df.filter("header").select(
        "run", pl.col("cells").list.slice(1).alias("stats")
    )  # a run without a header (rows pasted alone): AIPerf's default order
    cells = (
        df.filter("row")
        .join(names, on="run", how="left")
        .with_columns(pl.col("stats").fill_null(pl.lit(DEFAULT_STATS, dtype=pl.List(pl.String))))
        .select(
            "run",
            "i",
            pl.col("cells").list.first().str.strip_chars().alias("metric"),
            pl.col("cells").list.slice(1).alias("v"),
            "stats",
        )
        .with_columns(pl.int_ranges(0, pl.col("v").list.len()).alias("k"))
        .explode("v", "k")
        .with_columns(pl.col("stats").list.get(pl.col("k"), null_on_oob=True).str.strip_chars())
    )
    want = pl.DataFrame(
        {
            "metric": [m for m, _ in _WANT],
            "stats": [st for _, st in _WANT],
            "col": [c for c, _ in _WANT.values()],
            "f": [f for _, f in _WANT.values()],
        }
    )
    return cells.join(want, on=["metric", "stats"]).with_columns(
        (
            pl.col("v").str.strip_chars().str.replace_all(",", "").cast(pl.Float64, strict=False)
            * pl.col("f")
        ).alias("v")
    )


def _frame(df: pl.DataFrame, rows: pl.DataFrame, source: str) -> pl.DataFrame:
    wide = rows.group_by("run", "col").agg(pl.col("v").last()).pivot(on="col", index="run", values="v")
    wide = wide.with_columns(
        pl.lit(None, dtype=pl.Float64).alias(c) for c in COLUMNS if c not in wide.columns
    )
    line = pl.col("line")
    first = (
        df.filter(pl.col("header") | pl.col("row")).group_by("run").agg(pl.col("i").min().alias("line_no"))
    )
    # the trailer after the table: its duration and the CLI's settings (one table per trailer)
    trailer = (
        df.select(
            "run",
            line.str.extract(_DURATION).cast(pl.Float64).alias("duration_s"),
            *[
                line.str.extract(_FLAG.format(flag=f)).cast(pl.Float64).alias(c)
                for f, c in (
                    ("concurrency", "concurrency"),
                    ("request-rate", "request_rate"),
                    ("request-count", "count"),
                )
            ],
        )
        .group_by("run")
        .agg(pl.all().drop_nulls().first())
    )
    ok, failed = pl.col("successful"), pl.col("failed")
    out = wide.join(first, on="run").join(trailer, on="run", how="left").sort("run")
    return out.select(
        pl.lit(source).alias("source"),
        pl.lit(TOOL).alias("tool"),
        (pl.int_range(pl.len()) + 1).cast(pl.Int64).alias("run"),
        pl.coalesce(ok + failed, pl.col("count")).cast(pl.Int64).alias("requests"),
        ok.cast(pl.Int64).alias("successful"),
        failed.cast(pl.Int64).alias("failed"),
        "duration_s",
        "request_rate",
        "concurrency",
        *[pl.col(c) for c in COLUMNS if c not in ("successful", "failed")],
        pl.lit("client").alias("clock"),
        pl.lit("load_test").alias("latency_source"),
        "line_no",
    )
