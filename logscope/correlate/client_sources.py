"""Which client sources correlation uses: one view per client (``pick_client_sources``), a DEBUG log and the JSONL
records of the same program describing the same sends; ``kept_client_sources`` decides it over an output folder's
tables on the few columns it needs, before the client tables are read whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import polars as pl

from ..resources import time_range
from ..resources.time_range import Range
from . import dupes
from .exprs import secs

# a client source is another view of an already chosen one when this share of its sends
# lies within DUP_TOL_S of a send of the chosen one (openai DEBUG log vs the client's own JSONL)
DUP_SHARE, DUP_TOL_S = 0.8, 0.03
ID_SAMPLE = 5000  # logical ids (or sends) of a client source looked up in another: past that, its share is an estimate


def kept_client_sources(
    out: Path, rng: Range = time_range.ALL, sample: int | None = None
) -> tuple[list[str], dict[str, str]]:
    """``pick_client_sources`` over an output folder's tables, reading only the columns it needs; with
    ``sample``, only each source's first rows (an estimate's cheap answer: every row of a day of client
    logs is gigabytes)."""
    ca = time_range.scan(out, "client_attempts", rng).select(*_PICK_COLUMNS)
    cr = time_range.scan(out, "client_requests", rng).select("source", "ts_start", "logical_request_id")
    if sample is None:
        return pick_client_sources(ca.collect(), cr.collect())

    def heads(lf: pl.LazyFrame) -> pl.DataFrame:
        """Each source's first ``sample`` rows, the sources in order of name. The sources that have no more
        are read whole by one scan; only a larger one is read by a scan of its own, which stops after its
        first rows. A scan a source held every column's buffers of the file (a filtered frame's strings are
        views into them): 128 client sources of a 64-replica fleet took 1.4 GB for 1.7 M rows."""
        n = lf.group_by("source").len().collect(engine="streaming").drop_nulls("source").sort("source")
        small = n.filter(pl.col("len") <= sample)["source"]
        whole = lf.filter(pl.col("source").is_in(small.implode())).collect(engine="streaming")
        return pl.concat(
            [
                whole,
                *(
                    lf.filter(pl.col("source") == s).head(sample).collect(engine="streaming")
                    for s in n.filter(pl.col("len") > sample)["source"]
                ),
            ]
        ).sort("source", maintain_order=True)

    return pick_client_sources(heads(ca), heads(cr))


_PICK_COLUMNS = ("source", "ts_start", "request_id", "logical_request_id", "grouping")


def pick_client_sources(ca: pl.DataFrame, cr: pl.DataFrame) -> tuple[list[str], dict[str, str]]:
    """One view per client: a DEBUG log and the JSONL records of the same program describe the same sends.

    Sources are ranked by how joinable they are (ids, exact grouping, rows); a lower-ranked source whose
    sends coincide with a kept one (or whose logical ids are the same) is left out, said so in the notes.
    """
    # a source's sends are its attempts where it logs them, else its requests: a client killed with requests
    # in flight wrote their sends but no request record, so counting both would tell its two views apart
    # (lab client-killed: 576 attempts in each, 209 vs 576 requests)
    with_attempts = ca["source"].drop_nulls().unique().implode()
    starts = pl.concat(
        [
            ca.select("source", "ts_start", "request_id", "logical_request_id", "grouping"),
            cr.filter(~pl.col("source").is_in(with_attempts)).select(
                "source",
                "ts_start",
                pl.lit(None, pl.String).alias("request_id"),
                "logical_request_id",
                pl.lit(None, pl.String).alias("grouping"),
            ),
        ]
    ).filter(pl.col("ts_start").is_not_null())
    if starts.height == 0:
        return sorted(set(ca["source"].drop_nulls()) | set(cr["source"].drop_nulls())), {}
    rank = (
        starts.group_by("source")
        .agg(
            pl.col("request_id").is_not_null().mean().alias("ids"),
            (pl.col("grouping") == "exact").fill_null(False).mean().alias("exact"),
            pl.len().alias("n"),
        )
        .sort(["ids", "exact", "n", "source"], descending=[True, True, True, False])
    )
    # each source's rows, split once; its send times sorted when it is first compared by time
    by_source = starts.partition_by("source", as_dict=True, maintain_order=False)
    rows = {k[0]: v.height for k, v in by_source.items()}
    times: dict[str, pl.DataFrame] = {}

    def sends(src: str) -> pl.DataFrame:
        if src not in times:
            times[src] = by_source[(src,)].select(secs("ts_start").alias("t")).sort("t")
        return times[src]

    def id_share(src: str, other: str) -> float | None:
        """Share of ``src``'s logical ids that ``other`` holds too, over at most ID_SAMPLE of them taken
        evenly through the file (a day of client logs holds millions: comparing the unique() of each, pair
        by pair, took 1.2 s of the 5 GB folder's correlation, 4.3 s in the whole process)."""
        mine = by_source[(src,)]["logical_request_id"].drop_nulls()
        if not mine.len():
            return None
        pick = mine.gather_every(max(1, mine.len() // ID_SAMPLE)).unique()
        theirs = by_source[(other,)]["logical_request_id"]
        return theirs.filter(theirs.is_in(pick.implode())).n_unique() / pick.len()

    if len(rows) > dupes.MANY:  # a folder of many small client files: every pair at once
        return dupes.pick(
            starts.with_columns(secs("ts_start").alias("t")),
            rank["source"].to_list(),
            rows,
            DUP_SHARE,
            DUP_TOL_S,
            ID_SAMPLE,
        )

    def duplicate_of(src: str, other: str) -> str | None:
        if not 0.8 <= rows[src] / max(rows[other], 1) <= 1.25:
            return None
        if (id_share(src, other) or 0.0) >= DUP_SHARE:
            return f"same logical request ids as {other}"
        if rows[src] < dupes.MIN_SENDS:  # a few sends coincide by chance under load
            return None
        mine = sends(src)  # at most ID_SAMPLE of its sends, evenly through the file, as for the ids
        mine = mine.gather_every(max(1, mine.height // ID_SAMPLE))
        b = sends(other).with_columns(pl.lit(True).alias("hit"))
        joined = mine.join_asof(b, on="t", strategy="nearest", tolerance=DUP_TOL_S)
        hit = cast("float | None", joined["hit"].fill_null(False).mean())  # a share; None of no send
        if hit is not None and hit >= DUP_SHARE:
            return f"{hit:.0%} of its sends coincide (within {DUP_TOL_S * 1000:.0f} ms) with those of {other}"
        return None

    kept: list[str] = []
    dropped: dict[str, str] = {}
    for src in rank["source"]:  # a handful of client files: a loop over sources, not rows
        why = next((w for other in sorted(kept) if (w := duplicate_of(src, other))), None)
        if why:
            dropped[src] = why
        else:
            kept.append(src)
    return kept, dropped
