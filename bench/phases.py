"""The stages of `logscope analyze`, timed one by one in one process (what docs/performance.md quotes as
"correlate / diagnose / render").

    python bench/phases.py FOLDER OUT    # prints one JSON list: stage, seconds, cpu_seconds, peak_rss_mb

The peak RSS of a stage is the process's high-water mark when the stage ends (it includes the stages
before it, as in `logscope analyze`)."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from logscope import api

STAGES = ("ingest", "correlate", "diagnose", "render")


def run(src: Path, out: Path) -> list[dict]:
    rows = []
    for stage in STAGES:
        t, c = time.perf_counter(), time.process_time()
        api.ingest(src, out) if stage == "ingest" else getattr(api, stage)(out)
        rows.append(
            {
                "stage": stage,
                "seconds": round(time.perf_counter() - t, 2),
                "cpu_seconds": round(time.process_time() - c, 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    return rows


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]), Path(sys.argv[2]))))
