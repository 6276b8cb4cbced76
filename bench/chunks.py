"""The ingest's CPU and peak RSS against its chunk size (issue #42, docs/performance.md item 42): each size's
``logscope ingest`` in a process of its own, the sizes alternating run by run, the fastest of ``--repeat``.

    python bench/chunks.py /tmp/gen150 --mib 4,8,16 --repeat 3 --one-core

``--one-core`` pins every run to one core (``taskset -c 1``, ``POLARS_MAX_THREADS=1``, as bench/percore.py). The CPU
is the ingest's own (user + system seconds from the call to its return, imports excluded); the peak RSS is the
process's (``ru_maxrss``). The tables of every size are compared with the first size's: a chunk size must not change
what is parsed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

ROOT = Path(__file__).resolve().parent.parent
# one ingest, run as ``python -c`` in a child: prints {"cpu", "wall", "rss_mb"}
ONE = """
import json, resource, sys, time
from logscope import api
src, mib, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
api.ingest(src, out, api.AnalyzeOptions(chunk_bytes=int(mib * 1024 * 1024)))
wall, r = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
cpu = r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime
print(json.dumps({"cpu": cpu, "wall": wall, "rss_mb": r.ru_maxrss / 1024}))
"""


def one(src: Path, mib: float, out: Path, one_core: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", ONE, str(src), str(mib), str(out)]
    if one_core:
        env["POLARS_MAX_THREADS"] = "1"
        cmd = ["taskset", "-c", "1", *cmd]
    got = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(got.strip().splitlines()[-1])


def same_tables(a: Path, b: Path) -> list[str]:
    """The tables of ``b`` that differ from ``a``'s: by name, with " (order)" when only their rows' order does (the
    client tables emit a request once its attempts are all in, which a chunk's end decides); a table missing on one
    side differs."""
    names = {p.name for p in a.glob("*.parquet")} | {p.name for p in b.glob("*.parquet")}
    bad = []
    for name in sorted(names):
        if not ((a / name).exists() and (b / name).exists()):
            bad.append(name)
            continue
        x, y = pl.read_parquet(a / name), pl.read_parquet(b / name)
        if x.equals(y):
            continue
        flat = [c for c, t in x.schema.items() if not t.is_nested()]
        try:
            assert_frame_equal(x.sort(flat), y.sort(flat))
            bad.append(f"{name} (order)")
        except AssertionError:
            bad.append(name)
    return bad


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument(
        "--mib", default="4,8,16", help="chunk sizes in MiB, comma-separated; the first is the reference"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one-core", action="store_true")
    a = ap.parse_args(argv)
    sizes = [float(m) for m in a.mib.split(",")]
    runs: dict[float, list[dict]] = {m: [] for m in sizes}
    with tempfile.TemporaryDirectory(prefix="chunks-") as tmp:
        outs = {m: Path(tmp) / f"out-{m}" for m in sizes}
        for _ in range(a.repeat):
            for m in sizes:  # alternating: a change of the machine's load falls on every size alike
                runs[m].append(one(a.src, m, outs[m], a.one_core))
        differ = {m: same_tables(outs[sizes[0]], outs[m]) for m in sizes[1:]}
    result = {
        str(m): {
            "cpu_s": min(r["cpu"] for r in rs),
            "cpu_range": [min(r["cpu"] for r in rs), max(r["cpu"] for r in rs)],
            "rss_mb": [min(r["rss_mb"] for r in rs), max(r["rss_mb"] for r in rs)],
            "tables_differ": differ.get(m, []),
        }
        for m, rs in runs.items()
    }
    base = result[str(sizes[0])]["cpu_s"]
    for size, r in result.items():
        print(
            f"{size:>6} MiB  ingest {r['cpu_range'][0]:.2f}-{r['cpu_range'][1]:.2f} CPU s ({base / r['cpu_s']:.2f}x)  "
            f"peak RSS {r['rss_mb'][0]:.0f}-{r['rss_mb'][1]:.0f} MB  tables differ: {r['tables_differ'] or 'none'}"
        )
    return result


if __name__ == "__main__":
    main()
