"""Which client sources are another's view of the same sends, every pair at once
(``client_sources.pick_client_sources``).

The pair by pair comparison costs ~1 ms a pair: a folder of 1,430 one-request client files (bench/smallfiles.py)
has a million pairs, and its correlation did not end. Here the sampled logical ids and sends of every source are
looked up in every other source by one join each (ids by value, sends within the tolerance), with the same samples
and thresholds as the pair by pair test, so the same sources are kept.
"""

from __future__ import annotations

import polars as pl

MANY = 24  # sources past which the pairs are compared at once (fewer: pair by pair, as cheap)
# a source of fewer sends is never another's view by time alone: at the lab's concurrency of 48, one-request files'
# sends fell within 30 ms of another file's 1 time in 3, and were taken for copies of it
MIN_SENDS = 20
NEAR_ROWS = 5_000  # sampled sends looked up at a time (``shares``)


def _sampled(df: pl.DataFrame, sample: int) -> pl.DataFrame:
    """Every ``step``-th row of each source (``gather_every`` of at most ``sample`` rows, in the frame's order)."""
    k = pl.int_range(pl.len()).over("source")
    return df.filter(k % pl.max_horizontal(pl.lit(1), pl.len().over("source") // sample) == 0)


def shares(
    starts: pl.DataFrame, sample: int, tol: float
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """For every (source, other) pair that shares anything: the share of the source's sampled logical ids that
    the other holds, and the share of its sampled sends that lie within ``tol`` s of one of the other's.
    ``starts``: source, t (seconds, not null), logical_request_id, in each source's file order."""
    ids = starts.select("source", "logical_request_id").drop_nulls()
    picks = _sampled(ids, sample).unique()
    theirs = ids.unique().rename({"source": "other"})
    n_ids = picks.group_by("source").len("n")
    by_id = (
        picks.join(theirs, on="logical_request_id")
        .filter(pl.col("source") != pl.col("other"))
        .group_by("source", "other")
        .len("k")
        .join(n_ids, on="source")
        .select("source", "other", (pl.col("k") / pl.col("n")).alias("s"))
    )
    sends = starts.select("source", "t").sort("source", "t")
    mine = _sampled(sends, sample).with_row_index("_i")
    n_sends = mine.group_by("source").len("n")
    theirs_t = sends.rename({"source": "other", "t": "u"})
    # a slice of the sampled sends at a time: in a busy fleet every send has hundreds of others within ``tol``
    # (64 replicas' 120 client sources: 4.8 GB joined at once); each (source, other, send) is found in its slice
    near = (
        pl.concat(
            [
                part.join_where(
                    theirs_t,
                    pl.col("u") >= pl.col("t") - tol,
                    pl.col("u") <= pl.col("t") + tol,
                    pl.col("source") != pl.col("other"),
                )
                .select("source", "other", "_i")
                .unique()
                .group_by("source", "other")
                .len("k")  # a send is in one slice only: the slices' counts add up
                for part in mine.iter_slices(NEAR_ROWS)
            ]
            or [mine.select("source", pl.col("source").alias("other"), pl.len().alias("k")).clear()]
        )
        .group_by("source", "other")
        .agg(pl.col("k").sum())
        .join(n_sends, on="source")
        .select("source", "other", (pl.col("k") / pl.col("n")).alias("s"))
    )

    def as_dict(df: pl.DataFrame) -> dict[tuple[str, str], float]:
        return {(a, b): s for a, b, s in df.iter_rows()}

    return as_dict(by_id), as_dict(near)


def pick(
    starts: pl.DataFrame, ranked: list[str], rows: dict[str, int], share: float, tol: float, sample: int
) -> tuple[list[str], dict[str, str]]:
    """``pick_client_sources``' choice for many sources: each source in rank order is left out when a kept one
    (the first by name) has about as many rows and holds its logical ids, or coincides with its sends."""
    by_id, near = shares(starts, sample, tol)
    cands: dict[str, set[str]] = {}
    for (a, b), s in (*by_id.items(), *near.items()):
        if s >= share:
            cands.setdefault(a, set()).add(b)
    kept: list[str] = []
    kept_set: set[str] = set()
    dropped: dict[str, str] = {}
    for src in ranked:
        why = None
        for other in sorted(cands.get(src, set()) & kept_set):
            if not 0.8 <= rows[src] / max(rows[other], 1) <= 1.25:
                continue
            if by_id.get((src, other), 0.0) >= share:
                why = f"same logical request ids as {other}"
            elif rows[src] >= MIN_SENDS:
                why = f"{near[(src, other)]:.0%} of its sends coincide (within {tol * 1000:.0f} ms) with those of {other}"
            if why:
                break
        if why:
            dropped[src] = why
        else:
            kept.append(src)
            kept_set.add(src)
    return kept, dropped
