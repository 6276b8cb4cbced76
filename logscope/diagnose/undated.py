"""Files whose only time is their modification time (a Prometheus scrape pasted without timestamps: the copy's
time, not the incident's). Their rows are placed at that time so they can be drawn, but no claim may say it as a
time of the incident: the span, the verdict's range and its moment leave them out (a lone scrape once read "nothing
alarming in the one moment the logs cover (11:57:47)", the minute it was copied)."""

from __future__ import annotations

import polars as pl

# parsers/prometheus_text.py's assumption for samples placed at the file's modification time
MTIME_ANCHOR = "samples without timestamp placed at the file's modification time"


def mtime_anchored(files: pl.DataFrame) -> list[str]:
    """Files whose rows are timed only by their modification time."""
    if not files.height or "assumptions" not in files.columns:
        return []
    return sorted(
        str(p)
        for p, notes in files.select("path", "assumptions").iter_rows()
        if any(str(a).startswith(MTIME_ANCHOR) for a in notes or [])
    )


def named(paths: tuple[str, ...]) -> str:
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return ", ".join(paths[:3]) + more
