"""How much memory the analysis of a folder needs, and the range that fits when the whole does not.

Ingest is bounded whatever the input (chunks, spilled rows). Correlation, diagnosis and the report
then hold the request-level records of what they analyse: the peak is about ``BASE_BYTES`` plus
``PER_RECORD_FACTOR`` times the in-memory size of those records (measured on the bench folders,
docs/performance.md). When the whole input would need more than the budget (by default a share of
the memory free to this process, within its cgroup's limit), ``logscope analyze`` analyses a range instead of being killed
half-way: the stretch around the minute with the most trouble signs (failures, server warnings, stats
lines showing a queue, preemptions or a nearly full KV cache; the busiest minute when there is none),
grown evenly in time on both sides while it fits. The range is named in
every output with why it was chosen; ``logscope report OUT --since/--until`` looks at the others
without re-parsing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import polars as pl

from .. import schemas
from ..diagnose.thresholds import Thresholds
from . import shape, time_range
from .memory import gib, returns_freed

_TH = Thresholds()  # the diagnosis' own levels of a queue, of preemptions and of a nearly full KV cache

# peak = BASE_BYTES + PER_RECORD_FACTOR x the size of the records correlation holds (the client sources it
# keeps): fitted on the bench folders (docs/performance.md, item 17) and rounded up, so that it errs high
BASE_BYTES = 512 * 2**20
PER_RECORD_FACTOR = 2.5
# correlated in time slices (logscope.correlate.slices), the peak is that of one stage over the narrow columns of
# every request, plus what the stage before it left (docs/performance.md, item 33): 5 GB bench folder 1.53 GB
# (0.75 x the records); with the allocator handing freed pages back (logscope.resources.memory, set by the CLI when memory is
# tight) 0.94-1.03 GiB (0.40 x), and 1 GB folder 0.58 GiB (0.3 x, ingest's peak). Both rounded up, to err high
# BASE_BYTES is what the bench folders' fit says at no records; a folder of small logs was measured to take far less
# (resources.shape: LATER_FLOOR and PER_REPLICA), and reaches BASE_BYTES as its records grow, at RAMP times them:
# the straight line from the fleets measured (0.4-19 MiB of records) to the 1 GB bench folder (270 MiB: the whole
# BASE_BYTES, its estimate unchanged). At every fleet measured the estimate is above the peak (docs/performance.md,
# item 44: 400 replicas 244 against 219 MiB, 800 replicas 311 against 246)
RAMP = 1.25
SLICED_FACTOR = 0.9
SLICED_FACTOR_RETURNING = 0.5
SLICE_ROWS = (
    500_000  # request-level rows a slice holds (5 GB bench folder: 15 slices, 0.6-0.9 GB while slicing)
)
SAMPLE_ROWS = 65_536  # rows read of each table to measure its bytes per row
# rows of each client source that decide which views correlation keeps, for the estimate (deciding on every
# row, as correlation does, held 1.6 GB on the 5 GB bench folder: more than the budget it serves)
PICK_SAMPLE = 20_000
BUCKET = timedelta(minutes=1)
OTHERS = 3  # further ranges named, around the worst minutes the chosen one leaves out
# the overview of the whole input (trouble per bin, for the report): the first bin width giving at most
# OVERVIEW_BINS bins over the span
OVERVIEW_BINS = 200
OVERVIEW_STEPS_S = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)

# the tables the later stages hold, with the rows that are trouble signs (a failure, a server warning, a
# stats line showing a queue, preemptions or a nearly full KV cache). Of the client tables, correlation
# holds the sources it keeps (one view per client: a DEBUG log and the JSON lines of the same sends)
HELD = {
    "server_stats": (pl.col("waiting") >= _TH.waiting_min)
    | (pl.col("preemptions") >= _TH.preemptions_min)
    | (pl.max_horizontal("kv_usage", "gpu_kv_usage", "cpu_kv_usage") >= _TH.kv_full),
    "server_events": pl.col("level").is_in(["WARNING", "ERROR", "CRITICAL"]),
    "server_requests": None,
    "gateway_attempts": (pl.col("status") >= 500)
    | (pl.col("upstream_status") >= 500)
    | pl.col("error").is_not_null(),
    "gateway_errors": None,
    "client_attempts": None,
    "client_requests": pl.col("error").is_not_null() | (pl.col("status") >= 500),
}


@dataclass(frozen=True)
class Choice:
    """A range chosen to fit the budget, and the figures that made it."""

    range: time_range.Range
    budget_bytes: int
    whole_bytes: int  # estimated need of the whole input
    range_bytes: int  # estimated need of the range
    anchor: datetime  # start of the minute the range is grown around
    anchor_trouble: int  # trouble signs in that minute (0: none anywhere, the busiest minute was taken)
    trouble_in: int  # trouble signs in the range
    trouble_total: int  # ... in the whole input
    others: list[
        dict
    ]  # further ranges that fit, around the worst minutes outside this one: since, until, trouble
    overview: (
        dict  # trouble over the whole input: bin_s and bins [{t, trouble}] (bins without any are left out)
    )

    def doc(self) -> dict:
        why = (
            f"the whole input would need about {gib(self.whole_bytes)} of memory to analyse, more than the "
            f"{gib(self.budget_bytes)} budget (--max-memory): this range, around the minute "
            + (
                f"with the most trouble signs ({self.anchor_trouble:,}: failures, server warnings, stats lines "
                "showing a queue, preemptions or a KV cache near full)"
                if self.anchor_trouble
                else "with the most records (no trouble sign anywhere)"
            )
            + f" at {time_range.iso(self.anchor)}, "
            + (
                f"fits in about {gib(self.range_bytes)}"
                if self.range_bytes <= self.budget_bytes
                else f"is that minute alone and still needs about {gib(self.range_bytes)}"
            )
            + (
                f"; it holds {self.trouble_in:,} of the {self.trouble_total:,} trouble signs"
                if self.trouble_total
                else ""
            )
        )
        return {
            "reason": why,
            "budget_bytes": self.budget_bytes,
            "whole_bytes": self.whole_bytes,
            "range_bytes": self.range_bytes,
            "anchor": time_range.iso(self.anchor),
            "trouble_in": self.trouble_in,
            "trouble_total": self.trouble_total,
            "others": self.others,
            "overview": self.overview,
        }


def _held(out: Path, table: str, kept: list[str] | None) -> tuple[pl.LazyFrame, int, float] | None:
    """A table the later stages hold, of the kept client sources (all with ``kept`` None), with its rows and
    its in-memory bytes per row in the columns correlation reads, measured on its first rows; None when
    absent or empty."""
    from ..correlate import ingest_tables

    p = Path(out) / f"{table}.parquet"
    # the row count from the footer (polars reads only the metadata for it): pyarrow, imported for this alone,
    # cost a small folder's analyze ~0.25 s
    rows = pl.scan_parquet(p).select(pl.len()).collect().item() if p.exists() else 0
    if not rows:
        return None
    lf = time_range.scan(out, table)
    if kept is not None and table in ingest_tables.CLIENT_TABLES:
        lf = lf.filter(pl.col("source").is_in(kept))
        rows = lf.select(pl.len()).collect().item()
    sample = lf.select(ingest_tables.columns_read(table)).head(SAMPLE_ROWS).collect()
    return lf, rows, sample.estimated_size() / max(sample.height, 1)


def need(records_bytes: float, sliced: bool = False, replicas: int = 0) -> int:
    factor = (SLICED_FACTOR_RETURNING if returns_freed() else SLICED_FACTOR) if sliced else PER_RECORD_FACTOR
    base = shape.later_need(replicas) + min(BASE_BYTES - shape.LATER_FLOOR, RAMP * records_bytes)
    return int(base + factor * records_bytes)


def replicas(out: Path) -> int:
    """The replicas the server tables name (each costs the later stages ``shape.PER_REPLICA``)."""
    names = [
        pl.scan_parquet(p).select(pl.col("replica").unique())
        for t in ("server_stats", "server_events", "server_requests")
        if (p := Path(out) / f"{t}.parquet").exists() and "replica" in pl.scan_parquet(p).collect_schema()
    ]
    return pl.concat(names).unique().select(pl.len()).collect().item() if names else 0


def records_bytes(out: Path, kept: list[str] | None = None) -> float:
    return sum(rows * per for _, rows, per in filter(None, (_held(out, table, kept) for table in HELD)))


def whole_need(out: Path, kept: list[str] | None = None) -> int:
    """Estimated peak memory of analysing the whole input: row counts times bytes per row of a sample. With
    ``kept`` None, every client source counts (an upper bound that reads no whole column)."""
    return max(need(records_bytes(out, kept), replicas=replicas(out)), shape.pick_need(client_rows(out)))


def client_rows(out: Path) -> int:
    """The client rows correlation reads to pick one view per client: each source's first PICK_SAMPLE rows of
    client_attempts and client_requests (``correlate.client_sources.kept_client_sources``)."""
    n = 0
    for t in ("client_attempts", "client_requests"):
        if (p := Path(out) / f"{t}.parquet").exists():
            per = pl.scan_parquet(p).group_by("source").len().collect(engine="streaming")["len"]
            n += int(per.clip(upper_bound=PICK_SAMPLE).sum())
    return n


def slices_fit(out: Path, budget: int | None) -> bool:
    """True when the whole input does not fit ``budget`` correlated at once, but does in time slices."""
    if budget is None or whole_need(out) <= budget:
        return False
    from ..correlate.client_sources import kept_client_sources

    kept, _ = kept_client_sources(out, sample=PICK_SAMPLE)
    rec, n = records_bytes(out, kept), replicas(out)
    sliced = max(need(rec, sliced=True, replicas=n), shape.pick_need(client_rows(out)))
    return need(rec, replicas=n) > budget and sliced <= budget


def profile(out: Path, kept: list[str] | None = None) -> tuple[pl.DataFrame, float]:
    """Per minute: the records' bytes and trouble signs; plus the bytes of records without a time (they
    are read whatever the range)."""
    parts, untimed = [], 0.0
    for table, trouble in HELD.items():
        held = _held(out, table, kept)
        if held is None:
            continue
        lf, _, per = held
        g = (
            lf.select(
                time_range.first_time(table).dt.truncate("1m").alias("minute"),
                (trouble if trouble is not None else pl.lit(False)).fill_null(False).alias("bad"),
            )
            .group_by("minute")
            .agg(pl.len().alias("n"), pl.col("bad").sum().alias("trouble"))
            .collect(engine="streaming")
        )
        untimed += per * float(g.filter(pl.col("minute").is_null())["n"].sum())
        parts.append(
            g.filter(pl.col("minute").is_not_null()).select(
                "minute", (pl.col("n") * per).alias("bytes"), pl.col("trouble").cast(pl.Int64)
            )
        )
    if not parts:
        return pl.DataFrame(schema={"minute": schemas.TS, "bytes": pl.Float64, "trouble": pl.Int64}), untimed
    prof = (
        pl.concat(parts).group_by("minute").agg(pl.col("bytes").sum(), pl.col("trouble").sum()).sort("minute")
    )
    return prof, untimed


def choose(out: Path, budget: int | None) -> Choice | None:
    """The range to analyse when the whole input does not fit ``budget`` bytes (None: it fits, or no limit),
    with up to OTHERS further ranges that fit, around the worst minutes left outside it."""
    if budget is None:
        return None
    if whole_need(out) <= budget:  # every client view counted: when even that fits, nothing more is read
        return None
    from ..correlate.client_sources import kept_client_sources

    kept, _ = kept_client_sources(out, sample=PICK_SAMPLE)
    whole = whole_need(out, kept)
    if whole <= budget:
        return None
    prof, untimed = profile(out, kept)
    if not prof.height:
        return None
    minutes = prof["minute"].to_list()
    size = prof["bytes"].to_list()
    bad = prof["trouble"].to_list()
    free = [True] * len(minutes)

    def worst(among) -> int:  # the most trouble signs, then the most records, then the earliest
        return max(among, key=lambda i: (bad[i], size[i], -i))

    a = worst(range(len(minutes)))
    n = replicas(out)  # every replica counted in any range: errs high
    lo, hi, used = _grow(minutes, size, free, a, untimed, budget, n)
    others: list[dict] = []  # the next worst ranges: since, until, trouble
    while len(others) < OTHERS:
        rest = [i for i in range(len(bad)) if free[i] and bad[i] > 0]
        if not rest:
            break
        lo2, hi2, _ = _grow(minutes, size, free, worst(rest), untimed, budget, n)
        others.append(
            {
                "since": time_range.iso(minutes[lo2]),
                "until": time_range.iso(_end(minutes[hi2])),
                "trouble": int(sum(bad[lo2 : hi2 + 1])),
            }
        )
    rng = time_range.Range(minutes[lo].astimezone(UTC), _end(minutes[hi]).astimezone(UTC))
    choice = Choice(
        rng,
        budget,
        whole,
        need(used, replicas=n),
        minutes[a].astimezone(UTC),
        int(bad[a]),
        int(sum(bad[lo : hi + 1])),
        int(sum(bad)),
        others,
        overview(prof),
    )
    return replace(choice, range=replace(rng, chosen=choice.doc()))


def overview(prof: pl.DataFrame) -> dict:
    """Trouble per bin over the whole input, the bin as narrow as OVERVIEW_BINS bins allow."""
    span = (cast(datetime, prof["minute"].max()) - cast(datetime, prof["minute"].min())).total_seconds()
    span += BUCKET.total_seconds()
    bin_s = next((b for b in OVERVIEW_STEPS_S if span / b <= OVERVIEW_BINS), OVERVIEW_STEPS_S[-1])
    bins = (
        prof.filter(pl.col("trouble") > 0)
        .group_by(pl.col("minute").dt.truncate(f"{bin_s}s").alias("t"))
        .agg(pl.col("trouble").sum())
        .sort("t")
    )
    return {
        "bin_s": bin_s,
        "bins": [{"t": time_range.iso(t), "trouble": int(n)} for t, n in bins.iter_rows()],
    }


def _end(minute: datetime) -> datetime:
    return minute + BUCKET - timedelta(microseconds=1)


def _grow(
    minutes: list, size: list, free: list[bool], a: int, untimed: float, budget: int, replicas: int = 0
) -> tuple[int, int, float]:
    """Minutes lo..hi around ``a`` that fit the budget, grown evenly in time (the nearer neighbour first; a
    side stops at the first minute that does not fit or is already taken); they are marked taken."""
    lo = hi = a
    used = untimed + size[a]
    open_lo, open_hi = lo > 0 and free[lo - 1], hi < len(minutes) - 1 and free[hi + 1]
    while open_lo or open_hi:
        left = (minutes[a] - minutes[lo - 1]) if open_lo else None
        right = (minutes[hi + 1] - minutes[a]) if open_hi else None
        go_left = right is None or (left is not None and left <= right)
        i = lo - 1 if go_left else hi + 1
        if need(used + size[i], replicas=replicas) > budget:
            open_lo, open_hi = (False, open_hi) if go_left else (open_lo, False)
            continue
        used += size[i]
        lo, hi = (i, hi) if go_left else (lo, i)
        open_lo = open_lo and lo > 0 and free[lo - 1]
        open_hi = open_hi and hi < len(minutes) - 1 and free[hi + 1]
    for i in range(lo, hi + 1):
        free[i] = False
    return lo, hi, used
