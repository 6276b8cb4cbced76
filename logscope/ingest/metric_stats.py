"""Per-interval running / waiting / KV usage / preemptions derived from server_metrics.

vLLM 0.32 never logs a preemption: ``vllm:num_preemptions_total`` is the only record. This turns
the Prometheus samples into ``server_stats`` rows (origin = era = 'prometheus'), one per replica
and sample timestamp, appended after the rows read from logs (which are left as they are).

* gauges summed over label sets (two engines = two series): running, waiting, swapped; KV usage is
  the max over series (``vllm:kv_cache_usage_perc``, else V0's ``vllm:gpu_cache_usage_perc``).
  A V0 CPU backend keeps the GPU gauge at 0 while requests run: that gauge then says nothing about
  the KV cache, so kv_usage is ``vllm:cpu_cache_usage_perc`` when exported, else null
  (gpu_kv_usage keeps the 0s).
* counters: per series delta between consecutive samples; a drop is a restart, the delta is then
  the new value. The first sample of a series has no delta (null). prompt_tps / gen_tps are the
  token counters' deltas / seconds since the previous sample, summed over series.
* NaN samples (staleness markers) are ignored; scrape gaps stay gaps (no row is invented).

Overlapping inputs (a promtool dump and query_range answers of the same run, as in the lab) are
not double counted. Per series (replica, name, labels), sources are ranked: the one holding the
most metric names first (a dump or a scrape holds every metric of the target; a query_range answer
one metric, resampled on the query step), then the one with most samples. A lower-ranked source's
samples are dropped where a better one covers the series (its first..last sample, widened by two
of its median sample intervals: a query_range step just past the last scrape repeats that scrape); what is left is deduplicated on (replica, name, labels, ts rounded to the
second), keeping the better-ranked source, and within one source the later line (several
untimestamped scrapes of one file all sit at its mtime: the last is kept).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .. import schemas
from ..numbers import to_int
from . import metric_claims, metric_twins
from .metric_claims import SERIES_MATCH_MARGIN

RUNNING, WAITING, SWAPPED = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_swapped",
)
KV, GPU_KV, CPU_KV = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc"
PREEMPT, PROMPT, GEN = (
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
)
GAUGES = (RUNNING, WAITING, SWAPPED, KV, GPU_KV, CPU_KV)
COUNTERS = (PREEMPT, PROMPT, GEN)
SERIES = ["replica", "name", "labels"]


def append_derived_stats(out: Path) -> list[str]:
    out = Path(out)
    mp, sp = out / "server_metrics.parquet", out / "server_stats.parquet"
    if not mp.exists() or not sp.exists():
        return []
    samples = _load(pl.scan_parquet(mp))
    if samples.height == 0:
        return []
    samples = _dedupe(samples)
    rows = _derive(samples)
    old = pl.scan_parquet(sp).filter(pl.col("origin").ne_missing("prometheus"))  # re-runs replace, logs stay
    spans = (
        old.group_by("replica").agg(pl.col("ts").min().alias("lo"), pl.col("ts").max().alias("hi")).collect()
    )
    rows, notes = map_replicas(rows.with_columns(pl.col("replica").alias("_inst")), out, spans, old, samples)
    rows = _one_instance(rows)
    # streamed through a file beside the table: the log stats are never all in memory (millions of rows a day)
    tmp = sp.with_name("_server_stats.parquet")
    pl.concat(
        [schemas.conform(old, "server_stats"), schemas.conform(rows, "server_stats").lazy()]
    ).sink_parquet(tmp)
    tmp.replace(sp)
    return notes


def _one_instance(rows: pl.DataFrame) -> pl.DataFrame:
    """One metrics target per server: when two targets were named after one log replica (its query_range export
    and an address-less scrape file of the same server), their derived stats are one server counted twice (the
    lab's metrics.prom.log beside its tsdb dump doubled every preemption): the target with most samples is kept."""
    if not rows.height:
        return rows.drop("_inst")
    n = rows.group_by("replica", "_inst").len().sort(["len", "_inst"], descending=[True, False])
    keep = n.unique("replica", keep="first", maintain_order=True).select("replica", "_inst")
    return rows.join(keep, on=["replica", "_inst"], how="semi", nulls_equal=True).drop("_inst")


def map_replicas(
    rows: pl.DataFrame,
    out: Path,
    log_spans: pl.DataFrame,
    log_stats: pl.LazyFrame | None = None,
    samples: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Name metrics rows after the server log they describe (``log_spans``: each log replica's first and last
    stats time, ``lo`` and ``hi``; ``log_stats``: the logs' stats rows).

    Prometheus names a target by its ``instance`` label (``127.0.0.1:8001``), the logs by file or
    folder. The server's own "Starting vLLM server on http://HOST:PORT" line ties the two; with one
    log replica and one metrics instance and no such line, they are taken to be the same server. When
    the address is claimed by several logs, only those are weighed: by when each ran, then by whose running
    counts follow the instance's gauge (``metric_claims``). A target no log claims is the log whose gauges
    follow it among all running then (``by_series``). A scrape file with no address whose counters (``samples``)
    read another target's totals is that target's server (``metric_twins``), before any guess.
    """
    instances = sorted(rows["replica"].drop_nulls().unique().to_list())
    log_replicas = sorted(log_spans["replica"].drop_nulls().unique().to_list())
    listen = metric_claims.listeners(out / "server_events.parquet")
    mapping: dict[str, str] = {}
    split: dict[str, list[metric_claims.Piece]] = {}  # targets whose scrapes are told apart by time or series
    told: dict[str, metric_claims.Piece] = {}  # targets tied whole by their address (and time or series)
    for inst in instances:
        claims = metric_claims.claimants(listen, inst)
        if claims.height == 0:
            continue
        pieces = metric_claims.by_address(rows, inst, claims, log_spans, log_stats)
        if len(pieces) == 1 and pieces[0].replica is not None:  # every scrape the one log's
            mapping[inst] = pieces[0].replica
            told[inst] = pieces[0]
        elif pieces:
            split[inst] = pieces
    notes: list[str] = []
    twins: dict[str, str] = {}
    scores: dict[str, list[tuple[str, float]]] = {}  # each instance's correlation with each log (_by_series)
    by_series = (
        {}
        if log_stats is None or len(log_replicas) < 2
        else metric_claims.by_series(
            rows, [i for i in instances if i not in mapping and i not in split], log_stats, log_spans, scores
        )
    )
    mapping.update({i: r for i, (r, _) in by_series.items()})
    if samples is not None:  # an address-less scrape of another target's server: its counters say so
        one = {i: ps[0].replica for i, ps in split.items() if {p.replica for p in ps} == {ps[0].replica}}
        named = {
            i: mapping.get(i) or one.get(i) or i
            for i in instances
            if i in mapping or i in split or _ADDRESS.search(i)
        }
        twins, notes = metric_twins.match(samples, named, [i for i in instances if i not in named], COUNTERS)
        mapping.update(twins)
    # scrapes that name no address (a /metrics file without an instance label, named after its file) beside a
    # folder of one server log: that server's, as its query_range export of the same series is (the lab's
    # metrics.prom.log made every episode twice, once per 'replica')
    bare = [i for i in instances if i not in mapping and i not in split and not _ADDRESS.search(i)]
    if mapping and bare and len(log_replicas) == 1:
        for i in bare:
            mapping[i] = log_replicas[0]
            notes.append(
                f"metrics scrapes {i} (no instance label) taken to be the server of log replica "
                f"{log_replicas[0]}, the folder's one server log"
            )
    if not mapping and not split and len(instances) == 1 and len(log_replicas) == 1:
        mapping = {instances[0]: log_replicas[0]}
        notes.append(
            f"metrics instance {instances[0]} taken to be the server of log replica {log_replicas[0]} "
            "(one of each, no listen address in the log to confirm)"
        )
    else:
        notes += [
            f"metrics instance {i} is log replica {r} ("
            + (
                f"its running and KV gauges follow the log's, correlation {by_series[i][1]:.2f})"
                if i in by_series
                else "its 'Starting vLLM server' address" + _how(told.get(i)) + ")"
            )
            for i, r in mapping.items()
            if i not in bare and i not in twins
        ]
    notes += [_piece_note(p) for ps in split.values() for p in ps]
    notes += [untied_note(i, scores.get(i)) for i in instances if i not in mapping and i not in split]
    rows = metric_claims.relabel(
        rows.with_columns(pl.col("replica").replace(mapping)), [p for ps in split.values() for p in ps]
    )
    return rows, notes


def _how(p: metric_claims.Piece | None) -> str:
    """How a target claimed by several logs was told to be one's, after 'its address'."""
    if p is None or p.how == "address":
        return ""
    if p.how == "time":
        return ", and the log running when it was scraped"
    return ", and " + _series_words(p)


def _series_words(p: metric_claims.Piece) -> str:
    (_, x), (b, y) = p.scores[:2]
    return (
        f"of the logs claiming it that ran then, the one its running and KV gauges follow (correlation "
        f"{x:.2f}, next {b} {y:.2f})"
    )


def _piece_note(p: metric_claims.Piece) -> str:
    """What a piece of a target claimed by several logs was tied to, and by what."""
    when = (
        "scraped "
        + (f"from {p.lo:%Y-%m-%d %H:%M:%S %Z}" if p.lo else "")
        + (" " if p.lo and p.hi else "")
        + (f"before {p.hi:%Y-%m-%d %H:%M:%S %Z}" if p.hi else "")
    )
    if p.replica is None:
        why = (
            ""
            if p.scores
            else f"{' and '.join(p.claimants)} all say they listen at its address and ran then, and their "
            "running and KV gauges could not be weighed against its (too few paired samples)"
        )
        return untied_note(p.inst, p.scores, f"its scrapes {when.removeprefix('scraped ')}: ") + why
    why = "the one log claiming its address that ran then" if p.how == "time" else _series_words(p)
    return f"metrics instance {p.inst} {when} is log replica {p.replica} ({why})"


UNTIED = (
    "metrics target {} tied to no server log: "  # the note's head (diagnose.untied reads the reason after it)
)


def untied_note(inst: str, scores: list[tuple[str, float]] | None, when: str = "") -> str:
    """Why a metrics target (its scrapes ``when``) was tied to no server log, in the note ingest.json keeps."""
    if when and not scores:
        return UNTIED.format(inst) + when  # the caller says why
    if scores and len(scores) > 1:
        (a, x), (b, y) = scores[:2]
        why = (
            f"its running and KV gauges follow {a}'s (correlation {x:.2f}) and {b}'s ({y:.2f}), a margin under "
            f"the {SERIES_MATCH_MARGIN:g} that would tell one log from the other (the logs ran under one load)"
        )
    elif _ADDRESS.search(inst):
        why = f"no server log in the folder says it listens at {inst}"
    else:
        why = "it has no instance label, and no target with an address reads the same counters"
    return UNTIED.format(inst) + when + why


_ADDRESS = re.compile(r":\d+$")  # an instance label's host:port


def scrape_replicas(
    metrics: pl.LazyFrame, out: Path, spans: pl.DataFrame, log_stats: pl.LazyFrame
) -> pl.DataFrame:
    """(``_inst``, ``ts``, ``replica``): the log replica each target's scrape is named after, as the derived stats
    name it (by address, by time, then by whose gauges follow it: ``map_replicas``), for the histograms of
    the same scrapes (diagnose/histograms.py), which hold no gauge to weigh."""
    samples = _dedupe(_load(metrics))
    if samples.height == 0:
        return pl.DataFrame(schema={"_inst": pl.String, "ts": samples.schema["ts"], "replica": pl.String})
    rows, _ = map_replicas(
        _derive(samples).with_columns(pl.col("replica").alias("_inst")), out, spans, log_stats, samples
    )
    return rows.select("_inst", "ts", "replica").unique()


def _load(lf: pl.LazyFrame) -> pl.DataFrame:
    richness = lf.group_by("source").agg(pl.col("name").n_unique().alias("_rich"))
    return (
        lf.with_row_index("_row")
        # a NaN is a staleness marker; an infinity no gauge or counter of these can hold (a damaged line)
        .filter(
            pl.col("name").is_in(GAUGES + COUNTERS) & pl.col("ts").is_not_null() & pl.col("value").is_finite()
        )
        .join(richness, on="source", how="left")
        .with_columns(pl.col("labels").fill_null(""))
        .collect()
    )


def _dedupe(m: pl.DataFrame) -> pl.DataFrame:
    spans = (
        m.group_by([*SERIES, "source", "_rich"])
        .agg(
            pl.col("ts").min().alias("_lo"),
            pl.col("ts").max().alias("_hi"),
            pl.len().alias("_n"),
            pl.col("ts").sort().diff().median().fill_null(pl.duration(seconds=0)).alias("_step"),
        )
        .sort(["_rich", "_n", "source"], descending=[True, True, False])
        .with_columns(pl.int_range(pl.len()).over(SERIES).alias("_rank"))
    )
    m = m.join(spans.select([*SERIES, "source", "_rank"]), on=[*SERIES, "source"])
    better = spans.select(*SERIES, "_lo", "_hi", "_step", pl.col("_rank").alias("_brank"))
    covered = (
        m.select("_row", *SERIES, "ts", "_rank")
        .join(better, on=SERIES)
        .filter(
            (pl.col("_brank") < pl.col("_rank"))
            & (pl.col("ts") >= pl.col("_lo") - 2 * pl.col("_step"))
            & (pl.col("ts") <= pl.col("_hi") + 2 * pl.col("_step"))
        )
        .select("_row")
    )
    return (
        m.join(covered, on="_row", how="anti")
        .sort(["_rank", "_row"], descending=[False, True])
        .unique([*SERIES, pl.col("ts").dt.round("1s").alias("_sec")], keep="first", maintain_order=True)
        .sort([*SERIES, "ts"])
    )


def _counter_deltas(m: pl.DataFrame) -> pl.DataFrame:
    prev = pl.col("value").shift(1).over(SERIES)
    dt = pl.col("ts").diff().over(SERIES).dt.total_microseconds() / 1e6
    delta = pl.when(prev.is_null()).then(None).when(pl.col("value") >= prev).then(pl.col("value") - prev)
    return m.with_columns(
        delta.otherwise(pl.col("value")).alias("_delta"),  # a drop = restart: counted from 0 again
        dt.alias("_dt"),
    ).with_columns((pl.col("_delta") / pl.col("_dt")).alias("_rate"))


def _agg(name: str, col: str, how: str) -> pl.Expr:
    vals = pl.col(col).filter((pl.col("name") == name) & pl.col(col).is_not_null())
    agg = vals.sum() if how == "sum" else vals.max()
    return pl.when(vals.len() > 0).then(agg).otherwise(None)


def _derive(m: pl.DataFrame) -> pl.DataFrame:
    m = _counter_deltas(m)
    # sums of gauges and counter deltas as counts: a sum no count can be is null (``numbers.to_int``), never a
    # strict cast's error (one sample of 1e19 stopped the run, exit 70)
    rows = (
        m.group_by(["replica", "ts"])
        .agg(
            pl.col("source").sort_by("_rank").first(),
            to_int(_agg(RUNNING, "value", "sum").round(0)).alias("running"),
            to_int(_agg(WAITING, "value", "sum").round(0)).alias("waiting"),
            to_int(_agg(SWAPPED, "value", "sum").round(0)).alias("swapped"),
            _agg(KV, "value", "max").alias("_kv"),
            _agg(GPU_KV, "value", "max").alias("gpu_kv_usage"),
            _agg(CPU_KV, "value", "max").alias("cpu_kv_usage"),
            to_int(_agg(PREEMPT, "_delta", "sum").round(0)).alias("preemptions"),
            _agg(PROMPT, "_rate", "sum").alias("prompt_tps"),
            _agg(GEN, "_rate", "sum").alias("gen_tps"),
        )
        .sort(["replica", "ts"])
    )
    # V0 CPU backend: GPU gauge stuck at 0 while requests run -> it does not describe the KV cache
    gpu_blind = (pl.col("gpu_kv_usage").max().over("replica") == 0) & (
        pl.col("running").max().over("replica") > 0
    )
    return rows.with_columns(
        pl.when(pl.col("_kv").is_not_null())
        .then(pl.col("_kv"))
        .when(gpu_blind)
        .then(pl.col("cpu_kv_usage"))
        .otherwise(pl.col("gpu_kv_usage"))
        .alias("kv_usage"),
        pl.when(pl.col("_kv").is_not_null())
        .then(None)
        .when(gpu_blind)
        .then(pl.when(pl.col("cpu_kv_usage").is_not_null()).then(pl.lit("CPU")))
        .when(pl.col("gpu_kv_usage").is_not_null())
        .then(pl.lit("GPU"))
        .alias("kv_device"),
        pl.lit("prometheus").alias("origin"),
        pl.lit("prometheus").alias("era"),
        pl.int_range(pl.len(), dtype=pl.Int64).over("source", order_by="ts").alias("seq"),
    ).drop("_kv")
