"""Two scrapes of one server: an address-less metrics target tied to its log by the counters it reads.

A /metrics file saved without an ``instance`` label (the lab's ``metrics-a.prom.log``, a curl loop's output) is
named after its file, and nothing in it names its server. Its gauges follow the load, and when two replicas share
one load they follow both logs (traced-2r-kill: correlation 0.92 with its own log, 0.72 with the other: no tie by
``metric_stats._by_series``), so it stayed a "replica" of its own and every episode on it was told twice.

A stronger fact ties it where one exists: a cumulative counter is one process's own count. When another target
(tied to a log replica, or at least named by its address) reads the same totals at the same moments (each of this target's
samples lies between that target's samples just before and just after it, for the generation and prompt token
counters and the preemptions, on at least ``TWIN_SHARE`` of its samples, with the counters moving), the two are
one server's /metrics scraped twice, and the address-less one is that log replica's (or that address's, when
no log was tied to it: one target with no log, not two). Two servers that share a load
never read the same token totals (their counts drift apart with every request), so the rule does not tie the
other replica; where no target with an address reads the same totals, nothing is tied here.
"""

from __future__ import annotations

import re

import polars as pl

TWIN_SHARE = 0.95  # share of a target's samples its twin's counters must bracket
TWIN_SAMPLES = 10  # paired samples (and distinct counter values) fewer than this say nothing
TWIN_TOL = "30s"  # a sample and its twin's neighbours at most this far apart
_ADDRESS = re.compile(r":\d+$")  # an instance label's host:port


def match(
    samples: pl.DataFrame, named: dict[str, str], bare: list[str], counters: tuple[str, ...]
) -> tuple[dict[str, str], list[str]]:
    """The address-less targets (``bare``) whose counters are another target's (``named``: target -> the name it
    goes by, its log replica or else its address), each -> that name, with a note saying why. ``samples``: the
    metric samples (``replica`` = the target). One server with no log stays one target, not two
    (``metric_stats._one_instance`` keeps one of the two)."""
    if not named or not bare:
        return {}, []
    cum = (
        samples.filter(pl.col("name").is_in(counters) & pl.col("replica").is_in([*named, *bare]))
        .group_by("replica", "name", "ts")
        .agg(pl.col("value").sum())
        .sort("ts")
    )
    mapping, notes = {}, []
    for t in sorted(bare):
        hits = {}
        for other in sorted(named):
            got = _agree(cum, t, other)
            if got is not None and got[0] >= TWIN_SHARE * got[1]:
                hits[other] = got
        if len({named[o] for o in hits}) != 1:
            continue
        other, (ok, n) = next(iter(hits.items()))
        mapping[t] = named[other]
        what = f"the server of log replica {named[other]}" if named[other] != other else f"target {other}"
        notes.append(
            f"metrics scrapes {t} (no instance label) taken to be {what}: its counters (tokens and preemptions) "
            f"read the same totals as {other}'s at the same moments ({ok} of {n} samples), one server's /metrics "
            "scraped twice"
        )
    return mapping, notes


def _agree(cum: pl.DataFrame, mine: str, other: str) -> tuple[int, int] | None:
    """(samples of ``mine`` bracketed by ``other``'s counters, paired samples) over the counters both export,
    or None when too few pairs or the counters barely moved (flat counters agree with anything flat)."""
    ok = n = 0
    for name in cum.filter(pl.col("replica") == mine)["name"].unique().to_list():
        m = cum.filter((pl.col("replica") == mine) & (pl.col("name") == name)).select("ts", "value")
        o = cum.filter((pl.col("replica") == other) & (pl.col("name") == name)).select("ts", "value")
        if not o.height or m["value"].n_unique() < TWIN_SAMPLES:
            continue
        j = (
            m.join_asof(o.rename({"value": "_lo"}), on="ts", strategy="backward", tolerance=TWIN_TOL)
            .join_asof(o.rename({"value": "_hi"}), on="ts", strategy="forward", tolerance=TWIN_TOL)
            .drop_nulls(["_lo", "_hi"])
        )
        n += j.height
        ok += j.filter(pl.col("value").is_between(pl.col("_lo"), pl.col("_hi"))).height
    return (ok, n) if n >= TWIN_SAMPLES else None
