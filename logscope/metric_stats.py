"""Per-interval running / waiting / KV usage / preemptions derived from server_metrics.

Placeholder until the Prometheus work lands: appends nothing.
"""

from __future__ import annotations

from pathlib import Path


def append_derived_stats(out: Path) -> None:
    return None
