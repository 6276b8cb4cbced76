"""Prometheus exposition text (``curl /metrics``, ``/federate``), one or several scrapes in one file.

    vllm:num_requests_running{engine="0",instance="127.0.0.1:19301",job="vllm",model_name="tiny"} 8 1795945886534

Upstream: https://prometheus.io/docs/instrumenting/exposition_formats/ (text format 0.0.4:
``# HELP`` / ``# TYPE`` comments, ``name{labels} value [timestamp_ms]``); OpenMetrics text
(``# EOF``, timestamps in seconds) is read too. A plain ``curl /metrics`` has no timestamps: the
samples are placed at the file's modification time. Several concatenated scrapes (a series seen
again) cannot be told apart in time then, which is said in the file's messages.

A scrape loop (``while true; do echo "# scrape_ts=$(date +%s.%3N) iso=$(date -Iseconds)"; curl /metrics; done``,
the lab's ``scrape_metrics.sh``) writes a comment before each scrape: ``# scrape_ts=<epoch s>`` (or
``# scrape_ts <epoch s | ISO 8601>``, or only ``iso=<ISO 8601>``) stamps the samples that follow it. A scrape
after another with no comment between (a series seen again since the comment: a curl appended by hand) has
no time: its samples are kept with a null ts, and the file's messages count them; ``# scrape_failed`` lines
(the loop's curl got nothing) are counted too.
"""

from __future__ import annotations

import polars as pl

from logscope.scalars import int_value

from . import _kinds, _prom
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "prometheus_text"
KIND = "metrics"
DESCRIPTION = (
    "Prometheus / OpenMetrics exposition text (curl /metrics, /federate), with or without timestamps, "
    "scrape loops with '# scrape_ts' comments"
)
MODE = "lines"
SAMPLES = [
    "# HELP vllm:num_requests_running Number of requests in model execution batches.",
    "# TYPE vllm:num_requests_running gauge",
    'vllm:num_requests_running{engine="0",model_name="tiny"} 3.0',
    "# TYPE vllm:num_preemptions_total untyped",
    'vllm:num_preemptions_total{engine="0",instance="127.0.0.1:19301",job="vllm",model_name="tiny"} 91 1795945886534',
]

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABELS = r'(?:[^"}]|"(?:[^"\\]|\\.)*")*'
# detection only (head lines); the chunks' lines are read by their kinds in prometheus_text.toml
_SAMPLE = (
    r"^(?P<name>"
    + _NAME
    + r")[ \t]*(?:\{(?P<labels>"
    + _LABELS
    + r")\})?[ \t]+(?P<value>"
    + _prom.VALUE
    + r")"
    r"(?:[ \t]+(?P<ts>-?[0-9]+(?:\.[0-9]+)?))?(?:[ \t]+#[ \t]+\{.*)?[ \t]*$"
)
_COMMENT = r"^#"  # HELP, TYPE, UNIT, EOF and free comments all belong to the format
_META = r"^#[ \t]+(?:HELP|TYPE)[ \t]+" + _NAME + r"(?:[ \t]|$)"
_BRACED = r"^" + _NAME + r"\{"
_MS_FLOOR = 1e11  # a timestamp above this is in milliseconds (text 0.0.4), below in seconds (OpenMetrics)
# a scrape loop's comment before each scrape: '# scrape_ts=1796213200.892 iso=2026-12-02T12:06:40+00:00'
_ISO = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})"
_STAMP = (
    r"^#[ \t]*scrape_ts(?:[ \t]*[=:][ \t]*|[ \t]+)(?:(?P<epoch>[0-9]+(?:\.[0-9]+)?)(?:[ \t]|$)|(?P<iso1>"
    + _ISO
    + r"))?"
)
_STAMP_ISO = r"\biso=(" + _ISO + r")"
_FAILED = r"^#[ \t]*scrape_failed\b"


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line").str.strip_suffix("\r")
    sample = s.str.contains(_SAMPLE)
    g = per_head(
        nonblank(frame),
        n,
        ok=s.str.contains(_META).any() | (sample & s.str.contains(_BRACED)).any(),
        m=(sample | s.str.contains(_COMMENT)).mean(),
    )
    return g.select(pl.when(pl.col("ok")).then(pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    got = _kinds.scan(__file__, lines)  # each line's kind and a sample's fields, by the compiled scanner
    kind = got.get_column("kind")
    is_sample = (kind == _kinds.index(__file__, "sample")).fill_null(False)
    comment = (kind == _kinds.index(__file__, "comment")).fill_null(False)
    # a scrape loop's comments (a few lines of the chunk): their time, read here
    rows = comment.arg_true()
    notes = lines.get_column("line").gather(rows).str.strip_suffix("\r").to_frame("line")
    notes = notes.select(
        _stamp_expr(pl.col("line")).alias("_stamp"),
        pl.col("line").str.contains(_STAMP).alias("_is_stamp"),
        pl.col("line").str.contains(_FAILED).alias("_failed"),
    )
    n = lines.height
    parts = got.select("name", "labels", "labels_kept", "labels_instance", "value", "ts").with_columns(
        pl.repeat(None, n, dtype=_prom.TS, eager=True)
        .scatter(rows, notes.get_column("_stamp"))
        .alias("_stamp"),
        pl.repeat(False, n, dtype=pl.Boolean, eager=True)
        .scatter(rows, notes.get_column("_is_stamp"))
        .alias("_is_stamp"),
    )
    state["failed"] = state.get("failed", 0) + int(notes.get_column("_failed").sum())
    parts = _segments(parts, state)
    df = parts.filter(is_sample).with_columns(
        (pl.col("name") + "{" + pl.col("labels").fill_null("") + "}").alias("_key")
    )
    df = _unstamped(df, state)
    df = pl.concat(
        [
            _scrape_index(df.filter(pl.col("_seg") == 0), state),
            df.filter(pl.col("_seg") > 0).with_columns(pl.lit(0, dtype=pl.Int64).alias("_scrape")),
        ],
        how="diagonal",
    ).sort("_row")
    ts, res = _timestamps(df, ctx, state)
    out = df.select(
        ts.alias("ts"),
        "name",
        pl.col("labels_instance").alias("instance"),
        pl.col("labels_kept").fill_null("").alias("labels"),
        _prom.value_expr(pl.col("value")).alias("value"),
    )
    res.recognized = kind.is_not_null()
    res.tables["server_metrics"] = _prom.metrics_frame(out, ctx)
    res.messages += _prom.nan_messages(out)
    return res


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    """What a scrape loop's file counted: scrapes with no time of their own, failed scrapes."""
    msgs = []
    if state.get("unstamped"):
        msgs.append(
            f"{state['unstamped']} scrape(s) without a '# scrape_ts' comment of their own (a series seen "
            "again after the last comment): their samples are kept with a null ts"
        )
    if state.get("failed"):
        msgs.append(f"{state['failed']} scrape(s) failed ('# scrape_failed': the loop's curl got no answer)")
    return ChunkResult(messages=msgs) if msgs else None


def _stamp_expr(line: pl.Expr) -> pl.Expr:
    """The time a '# scrape_ts' comment gives: its epoch seconds (milliseconds past 1e11), else its ISO time."""
    g = line.str.extract_groups(_STAMP)
    epoch = g.struct.field("epoch").cast(pl.Float64, strict=False)
    iso = pl.coalesce(g.struct.field("iso1"), line.str.extract(_STAMP_ISO))
    iso_ts = (
        iso.str.replace("Z$", "+00:00")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
    )
    by_epoch = (
        pl.when(epoch >= _MS_FLOOR)
        .then(_prom.epoch_s_to_ts(epoch / 1000))
        .otherwise(_prom.epoch_s_to_ts(epoch))
    )
    return pl.when(line.str.contains(_STAMP)).then(pl.coalesce(by_epoch, iso_ts.cast(_prom.TS)))


def _segments(parts: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Each line's scrape-loop segment (0: before the stream's first '# scrape_ts' comment; k: after the k-th)
    and the time of that comment (null when it gives none it can read), carried across chunks."""
    seg0, last = state.get("seg", 0), state.get("stamp")
    parts = parts.with_columns(
        (pl.col("_is_stamp").cum_sum().cast(pl.Int64) + seg0).alias("_seg"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
    )
    parts = (
        parts.with_columns(  # a segment's first line is its comment, but the one going on from the last chunk
            pl.when(pl.col("_seg") == seg0)
            .then(pl.lit(last, dtype=_prom.TS))
            .otherwise(pl.col("_stamp").first().over("_seg"))
            .alias("_stamp")
        )
    )
    if parts.height:
        state["seg"], state["stamp"] = int(parts["_seg"][-1]), parts["_stamp"][-1]
    return parts


def _unstamped(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """``_bare``: the sample belongs to a scrape with no comment of its own, i.e. at or after the first series seen
    twice in its segment (a scrape prints its series in one order: the next one starts with the first again)."""
    seen: pl.DataFrame = state.get("seg_seen", pl.DataFrame(schema={"_seg": pl.Int64, "_key": pl.String}))
    carried = int(seen["_seg"][0]) if seen.height else -1  # the segment going on from the last chunk
    broken = state.get("seg_broken") == carried  # it is already past its first scrape
    again = pl.col("_key").is_in(seen["_key"].implode()) & (pl.col("_seg") == carried)
    occ = pl.int_range(pl.len(), dtype=pl.Int64).over("_seg", "_key") + again.cast(pl.Int64)
    first_key = (
        pl.when(pl.col("_seg") == carried)
        .then(pl.lit(state.get("seg_first")))
        .otherwise(pl.col("_key").first().over("_seg"))
    )
    df = df.with_columns(occ.alias("_occ"), first_key.alias("_first_key"))
    first_dup = pl.col("_row").filter(pl.col("_occ") > 0).min().over("_seg")
    bare = (pl.col("_seg") > 0) & (
        (pl.col("_row") >= first_dup).fill_null(False) | ((pl.col("_seg") == carried) & broken)
    )
    df = df.with_columns(bare.alias("_bare"))
    # each scrape with no comment starts again with its segment's first series
    state["unstamped"] = (
        state.get("unstamped", 0)
        + df.filter(pl.col("_bare") & (pl.col("_key") == pl.col("_first_key"))).height
    )
    if df.height:
        last = int(df["_seg"][-1])
        mine = df.filter(pl.col("_seg") == last)
        state["seg_broken"] = last if bool(mine["_bare"].any()) or (last == carried and broken) else None
        state["seg_first"] = mine["_first_key"][0]
        keep = mine.select("_seg", "_key")
        state["seg_seen"] = pl.concat([seen, keep]).unique() if last == carried else keep.unique()
    return df.drop("_occ", "_first_key")


def _scrape_index(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """0-based scrape number of each sample: how many times its series was seen before in the file."""
    seen: pl.DataFrame = state.get("seen", pl.DataFrame(schema={"_key": pl.String, "_n": pl.Int64}))
    df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("_key").alias("_occ"))
    df = df.join(seen, on="_key", how="left", maintain_order="left").with_columns(
        (pl.col("_occ") + pl.col("_n").fill_null(0)).alias("_scrape")
    )
    counts = df.group_by("_key").agg(pl.len().cast(pl.Int64).alias("_n"))
    state["seen"] = pl.concat([seen, counts]).group_by("_key").agg(pl.col("_n").sum())
    return df.drop("_occ", "_n")


def _timestamps(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.Expr, ChunkResult]:
    res = ChunkResult()
    raw = pl.col("ts").cast(pl.Float64)
    stamped = (
        pl.when(raw.abs() >= _MS_FLOOR)
        .then(_prom.epoch_s_to_ts(raw / 1000))
        .otherwise(_prom.epoch_s_to_ts(raw))
    )
    if bool(
        (df["_seg"] > 0).any()
    ):  # a scrape loop's file: a sample's own time, else its comment's, else none
        res.assumptions.append(
            "samples without timestamp placed at the time of the '# scrape_ts' comment before them"
        )
        stamped = (
            pl.when(pl.col("ts").is_not_null())
            .then(stamped)
            .when(pl.col("_seg") > 0)
            .then(pl.when(~pl.col("_bare")).then(pl.col("_stamp")))
        )
        df = df.filter(pl.col("_seg") == 0)
    n_bare = df.filter(pl.col("ts").is_null()).height
    if df.height and n_bare < df.height:
        res.assumptions.append(
            "sample timestamps above 1e11 read as epoch milliseconds (text format), below as seconds (OpenMetrics)"
        )
    if not n_bare:
        return stamped, res
    scrapes = int_value(df.filter(pl.col("ts").is_null())["_scrape"].max()) + 1
    state["bare_scrapes"] = max(state.get("bare_scrapes", 0), scrapes)
    if ctx.file_mtime is None:
        res.messages.append(
            f"{n_bare} samples have no timestamp and the file has no modification time: ts left null"
        )
        return stamped, res
    at = ctx.file_mtime.isoformat(timespec="seconds")
    res.assumptions.append(f"samples without timestamp placed at the file's modification time ({at})")
    if state["bare_scrapes"] > 1:
        res.messages.append(
            f"{state['bare_scrapes']} scrapes without timestamps are concatenated in this file: they cannot be "
            f"placed in time; every sample is kept at the file's modification time ({at}), the derived stats "
            "keep the last scrape"
        )
    mtime = pl.lit(ctx.file_mtime).cast(_prom.TS)
    return pl.when(pl.col("ts").is_null() & (pl.col("_seg") == 0)).then(mtime).otherwise(stamped), res
