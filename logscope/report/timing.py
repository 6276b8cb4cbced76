"""What the report's span may honestly say: files whose only time is their modification time (a Prometheus scrape
without timestamps: the copy's time, not the incident's) do not bound it, and files far apart in time are named
rather than read as one incident's duration (a folder mixing years once read as a span of 55,244.7 h)."""

from __future__ import annotations

import polars as pl

from ..diagnose.undated import MTIME_ANCHOR, mtime_anchored

__all__ = ["MTIME_ANCHOR", "anchored_words", "far_apart", "mtime_anchored"]

FAR_APART_S = 24 * 3600.0  # files further apart than this are no one incident's logs read together
NAMED = 3


def _named(paths: list[str]) -> str:
    more = f" and {len(paths) - NAMED} more" if len(paths) > NAMED else ""
    return ", ".join(paths[:NAMED]) + more


def anchored_words(paths: list[str], alone: bool) -> str:
    """The sentence beside the span: which files state no time, and what their rows were placed at."""
    one = len(paths) == 1
    what = (
        f"{_named(paths)} state{'s' if one else ''} no time: {'its' if one else 'their'} samples sit at the "
        "file's modification time (when it was copied), not a time of the incident"
    )
    return f"; {what}" if alone else f"{what}, so they do not bound the span"


def far_apart(files: pl.DataFrame) -> str | None:
    """'the files are far apart: …' when the timed files fall into groups more than FAR_APART_S apart (a year
    mixed in, another day's log): each group named with its dates, the longest gap given."""
    df = files.filter(pl.col("first_ts").is_not_null() & pl.col("last_ts").is_not_null())
    if df.height < 2:
        return None
    df = df.sort("first_ts")
    groups: list[list[dict]] = []
    end = None
    for r in df.select("path", "first_ts", "last_ts").iter_rows(named=True):
        if end is None or (r["first_ts"] - end).total_seconds() > FAR_APART_S:
            groups.append([])
        groups[-1].append(r)
        end = r["last_ts"] if end is None else max(end, r["last_ts"])
    if len(groups) < 2:
        return None
    parts = []
    for g in groups:
        lo, hi = min(r["first_ts"] for r in g), max(r["last_ts"] for r in g)
        when = lo.strftime("%Y-%m-%d") + ("" if hi.date() == lo.date() else " → " + hi.strftime("%Y-%m-%d"))
        parts.append(f"{_named([r['path'] for r in g])} ({when})")
    return (
        f"the files are far apart in time ({len(groups)} groups more than {FAR_APART_S / 3600:.0f} h apart: "
        + "; ".join(parts)
        + "): the span is not one incident's duration"
    )
