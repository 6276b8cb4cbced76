"""Benchmark: logscope's derived tables at a scale the disk cannot hold as logs (docs/performance.md item 28).

    python bench/derive_scale.py OUT --times 20    # OUT: a `logscope ingest` output (of bench/generate.py)

``derive`` reads only the request events (server_requests) and the stats rows (their intervals), so a folder
``--times`` as large is simulated by those two tables ``--times`` over, each copy its own sources and replicas
(``name#k``) and its ``seq`` numbered after the copy before. The 5 GB folder's tables twenty times over are
what a ~100 GB folder gives (59 M request events, 2.8 M stats rows). Each step runs in a child process of its
own (wall, CPU seconds and peak RSS as bench/run.py measures them); prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import measure  # noqa: E402

STEPS = {
    "server_requests": "from logscope.ingest import derive; derive._server_requests(Path(sys.argv[1]))",
    "stats_intervals": "from logscope.ingest import derive; derive._stats_intervals(Path(sys.argv[1]))",
}


def scaled(src: Path, dest: Path, times: int) -> dict:
    """The request events and stats rows of ``src``, ``times`` over, into ``dest``; their row counts."""
    counts = {}
    for table in ("server_request_events", "server_stats"):
        scan = pl.scan_parquet(src / f"{table}.parquet")
        step = (scan.select(pl.col("seq").max()).collect().item() or 0) + 1
        copies = [
            scan.with_columns(
                pl.col("source") + f"#{k:03d}", pl.col("replica") + f"#{k:03d}", pl.col("seq") + k * step
            )
            for k in range(times)
        ]
        pl.concat(copies).sink_parquet(dest / f"{table}.parquet", row_group_size=64_000)
        counts[table] = pl.scan_parquet(dest / f"{table}.parquet").select(pl.len()).collect().item()
    return counts


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="a logscope ingest output folder")
    ap.add_argument("--times", type=int, default=20)
    ap.add_argument("--work", type=Path, help="where the scaled tables go (default: a temporary folder)")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="logscope-derive-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = {"times": a.times, "rows": scaled(a.out, work, a.times), "steps": {}}
        for name, code in STEPS.items():
            m = measure([sys.executable, "-c", f"import sys; from pathlib import Path; {code}", str(work)])
            result["steps"][name] = {
                "seconds": round(m["seconds"], 1),
                "cpu": round(m["cpu"], 1),
                "peak_rss_mb": round(m["rss"]),
                "ok": m["ok"],
                "error": m["error"],
            }
        made = work / "server_requests.parquet"
        if made.exists():
            result["rows"]["server_requests"] = pl.scan_parquet(made).select(pl.len()).collect().item()
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
