"""Which server log a Prometheus target is: the logs that claim its address, told apart by time, then by series.

A target is named by its ``instance`` label (``127.0.0.1:8001``), a log by its file. The server's "Starting vLLM
server on http://HOST:PORT" line claims the address. Several logs may claim one address: the same port used by
another run at another time (a calm run's rotated log before the incident), or replicas in containers all on
0.0.0.0:8000. Only the logs that claim the address are weighed (a log that never listened there is no candidate):

* by time: the claimants' spans (their first "Starting" line to their last stats line) that overlap form one
  group; a group holds the address from its first start until the next group's. Each of the target's scrapes goes
  to the group of its time, so a target scraped across two runs is split between their logs;
* by series, within a group of several claimants running at once: the log whose running requests and KV usage
  move with the target's gauges over those scrapes (``by_series``), clearly above the other claimants;
* else those scrapes stay untied, and the note says why (``scores``).

The same correlation, over every log running at the time, ties a target no log claims (``by_series``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

LISTEN = r"https?://\[?([0-9A-Za-z.:\-]+?)\]?:(\d+)"
ANY_HOST = ("0.0.0.0", "::", "localhost")

SERIES_MATCH_MIN = (
    0.3  # correlation of an instance's running/KV gauges with a log's stats lines that names it
)
SERIES_MATCH_MARGIN = 0.3  # ... when above every other log running at the time by this much
SERIES_MATCH_TOL_S = 2.5  # a scrape and a stats line this close are one moment
SERIES_MATCH_SAMPLES = 10  # fewer paired samples say nothing


@dataclass(frozen=True)
class Piece:
    """A target's scrapes from ``lo`` up to (not including) ``hi`` (None: unbounded) and the log they are tied to
    (``replica``, None: untied). ``how``: 'address', 'time' (the address, and the one claimant running then) or
    'series' (the address, and the gauges of the claimants running then); ``scores``: each claimant's correlation
    when the series were weighed, best first."""

    inst: str
    lo: datetime | None
    hi: datetime | None
    replica: str | None
    how: str
    scores: list[tuple[str, float]] = field(default_factory=list)
    claimants: tuple[str, ...] = ()  # the logs claiming the address that ran then


def listeners(ev_path: Path) -> pl.DataFrame:
    """replica, host, port, ts of every "Starting vLLM server" line (a scan: only those lines are read whole)."""
    if not ev_path.exists():
        return pl.DataFrame(
            schema={"replica": pl.String, "host": pl.String, "port": pl.String, "ts": pl.Datetime}
        )
    return (
        pl.scan_parquet(ev_path)
        .select("replica", "ts", "message")
        .filter(pl.col("message").str.contains("Starting vLLM"))
        .collect()
        .with_columns(
            pl.col("message").str.extract(LISTEN, 2).alias("port"),
            pl.col("message").str.extract(LISTEN, 1).alias("host"),
        )
        .drop_nulls("port")
        .select("replica", "host", "port", "ts")
    )


def claimants(listen: pl.DataFrame, inst: str) -> pl.DataFrame:
    """replica, start (its first claim) of the logs that say they listen at the target's address."""
    host, _, port = inst.rpartition(":")
    hits = listen.filter((pl.col("port") == port) & pl.col("host").is_in([host, *ANY_HOST]))
    return hits.group_by("replica").agg(pl.col("ts").min().alias("start")).sort("replica")


def by_address(
    rows: pl.DataFrame,
    inst: str,
    claims: pl.DataFrame,
    log_spans: pl.DataFrame,
    log_stats: pl.LazyFrame | None,
) -> list[Piece]:
    """The target's scrapes (``rows`` where replica == inst) in pieces, each tied to the claimant of its time (see
    the module's doc); one claimant: the whole target is its."""
    reps = claims["replica"].to_list()
    if len(reps) == 1:
        return [Piece(inst, None, None, reps[0], "address")]
    groups = _groups(claims, log_spans)
    mine = rows.filter(pl.col("replica") == inst)
    out: list[Piece] = []
    for k, (lo, members) in enumerate(groups):
        hi = groups[k + 1][0] if k + 1 < len(groups) else None
        lo_ = (
            None if k == 0 else lo
        )  # scrapes before every claimant's start: the first one's (no other claims)
        part = mine.filter(
            (pl.col("ts") >= lo_ if lo_ is not None else pl.lit(True))
            & (pl.col("ts") < hi if hi is not None else pl.lit(True))
        )
        if part.height == 0:
            continue
        if len(members) == 1:
            out.append(Piece(inst, lo_, hi, members[0], "time", claimants=tuple(members)))
            continue
        scores = _scores(part, members, log_stats)
        won = _decided(scores)
        out.append(Piece(inst, lo_, hi, won, "series" if won else "untied", scores, tuple(members)))
    return out


def _groups(claims: pl.DataFrame, log_spans: pl.DataFrame) -> list[tuple[datetime, list[str]]]:
    """The claimants in groups of overlapping spans (first start .. last stats line), by time: (start, members)."""
    spans = claims.join(log_spans, on="replica", how="left").with_columns(
        pl.min_horizontal("start", "lo").alias("lo"), pl.max_horizontal("start", "hi").alias("hi")
    )
    groups: list[tuple[datetime, datetime, list[str]]] = []
    for rep, lo, hi in spans.sort("lo", "replica").select("replica", "lo", "hi").iter_rows():
        if groups and lo <= groups[-1][1]:
            g = groups[-1]
            groups[-1] = (g[0], max(g[1], hi), [*g[2], rep])
        else:
            groups.append((lo, hi, [rep]))
    return [(lo, members) for lo, _, members in groups]


def _decided(scores: list[tuple[str, float]]) -> str | None:
    if len(scores) < 2:
        return None
    (a, x), (_, y) = scores[:2]
    return a if x >= SERIES_MATCH_MIN and x - y >= SERIES_MATCH_MARGIN else None


_KV = pl.coalesce("kv_usage", pl.max_horizontal("gpu_kv_usage", "cpu_kv_usage")).alias("kv")  # V0 CPU: cpu_


def _scores(part: pl.DataFrame, cands: list[str], log_stats: pl.LazyFrame | None) -> list[tuple[str, float]]:
    """Each candidate log's correlation with the target's gauges over ``part``, best first ([] when not told)."""
    if log_stats is None or part.height < SERIES_MATCH_SAMPLES or len(cands) < 2:
        return []
    mine = part.select("ts", pl.col("running").alias("_m_running"), _KV.alias("_m_kv")).sort("ts")
    logs = log_stats.filter(pl.col("replica").is_in(cands)).select("replica", "ts", "running", _KV).collect()
    by_log = {
        rep: _corr(mine, logs.filter(pl.col("replica") == rep).sort("ts"), ("running", "kv")) for rep in cands
    }
    return sorted(by_log.items(), key=lambda kv: (-kv[1], kv[0]))


def by_series(
    rows: pl.DataFrame,
    instances: list[str],
    log_stats: pl.LazyFrame,
    log_spans: pl.DataFrame,
    scores: dict[str, list[tuple[str, float]]] | None = None,
) -> dict[str, tuple[str, float]]:
    """Instances named after the one log whose running requests and KV usage move with their gauges: the
    mean Pearson correlation over paired samples (nearest stats line within SERIES_MATCH_TOL_S), clearly
    above every other log's. Counts alone do not tell (lab ladder beside a calm replica: running within one
    of the right log's on 63 % of scrapes, of the calm log's on 43 %); the correlations do (0.82 vs 0.02;
    the V0 ladder, stats every 5 s: 0.43 vs -0.02)."""
    out: dict[str, tuple[str, float]] = {}
    for inst in instances:
        best = _scores(
            rows.filter(pl.col("replica") == inst), running_during(rows, inst, log_spans), log_stats
        )
        if not best:
            continue
        if scores is not None:
            scores[inst] = best
        if _decided(best):
            out[inst] = best[0]
    return out


def _corr(mine: pl.DataFrame, log: pl.DataFrame, cols: tuple[str, ...]) -> float:
    """Mean correlation of the instance's gauges with one log's columns (0 where it cannot be told)."""
    j = mine.join_asof(log, on="ts", strategy="nearest", tolerance=f"{int(SERIES_MATCH_TOL_S * 1000)}ms")
    got = []
    for c in cols:
        pair = j.select(c, f"_m_{c}").drop_nulls()
        r = pair.select(pl.corr(c, f"_m_{c}")).item() if pair.height >= SERIES_MATCH_SAMPLES else None
        got.append(r if r is not None and r == r else 0.0)  # NaN: a flat series
    return sum(got) / len(got)


def running_during(rows: pl.DataFrame, inst: str, log_spans: pl.DataFrame) -> list[str]:
    """Log replicas whose stats lines overlap the time this metrics instance was scraped."""
    mine = rows.filter(pl.col("replica") == inst)["ts"].drop_nulls()
    if mine.len() == 0 or log_spans.height == 0:
        return []
    lo, hi = mine.min(), mine.max()
    return log_spans.filter((pl.col("lo") <= hi) & (pl.col("hi") >= lo))["replica"].to_list()


def relabel(rows: pl.DataFrame, pieces: list[Piece]) -> pl.DataFrame:
    """``rows`` with each tied piece's scrapes named after its log (the target's name stays on untied ones)."""
    name = pl.col("replica")
    for p in pieces:
        if p.replica is None:
            continue
        inside = pl.col("replica") == p.inst
        if p.lo is not None:
            inside = inside & (pl.col("ts") >= p.lo)
        if p.hi is not None:
            inside = inside & (pl.col("ts") < p.hi)
        name = pl.when(inside).then(pl.lit(p.replica)).otherwise(name)
    return rows.with_columns(name.alias("replica"))
