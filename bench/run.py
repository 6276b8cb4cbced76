"""Benchmark: logscope ingest/analyze against the scan floor (rg -c), a naive Python line loop
and lnav answering the same counts, on a generated incident folder (bench/generate.py).

    python bench/run.py --size-mb 1000            # one command: generate, run, print the table
    python bench/run.py --size-mb 20 --quick      # smoke run (the test suite does this)

Peak RSS is measured per child process with os.wait4 (ru_maxrss), so the figure is the
tool's own, not this script's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from generate import generate  # noqa: E402

COUNT_PATTERN = r"Running: |Received request|Aborted request|status=|attempt_send"


def measure(cmd: list[str], env: dict | None = None, stdout=subprocess.DEVNULL) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the child, and its stdout when captured."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env, text=True)
    out = p.stdout.read() if p.stdout else ""
    err = p.stderr.read() if p.stderr else ""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    secs = time.perf_counter() - t0
    if p.returncode not in (0, 1):  # rg exits 1 when nothing matched
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {err[-2000:]}")
    return secs, ru.ru_maxrss / 1024, out


def folder_stats(d: Path) -> tuple[int, int]:
    size = lines = 0
    for p in d.rglob("*"):
        if p.is_file():
            size += p.stat().st_size
            with open(p, "rb") as fh:
                lines += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    return size, lines


def lnav_counts(d: Path) -> list[str] | None:
    if not shutil.which("lnav"):
        return None
    home = Path(tempfile.mkdtemp(prefix="lnav-home-"))
    env = dict(os.environ, HOME=str(home))
    subprocess.run(["lnav", "-i", str(HERE / "lnav" / "vllm_log.json")], env=env, capture_output=True, check=True)
    files = [str(p) for p in sorted(d.rglob("vllm-server.log*"))]
    q = (";SELECT sum(log_body LIKE '%Running: %') AS stats, sum(log_body LIKE 'Received request%') AS received, "
         "sum(log_body LIKE 'Aborted request%') AS aborted FROM vllm_log")
    return ["lnav", "-n", "-c", q, "-c", ":write-csv-to -", *files], env


def logscope_counts(out: Path) -> dict:
    st = pl.read_parquet(out / "server_stats.parquet")
    ev = pl.read_parquet(out / "server_request_events.parquet")
    ga = pl.read_parquet(out / "gateway_attempts.parquet")
    ca = pl.read_parquet(out / "client_attempts.parquet")
    return {
        "stats_lines": st.filter(pl.col("origin") == "log").height,
        "received": ev.filter(pl.col("event") == "received").height,
        "aborted_ids": ev.filter(pl.col("event") == "aborted").height,
        "gateway_requests": ga.filter(pl.col("attempt") == 1).height,
        "client_attempts": ca.filter(pl.col("source").str.ends_with(".jsonl")).height,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description="logscope benchmark")
    ap.add_argument("--size-mb", type=float, default=1000)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="reuse/generate the folder here")
    ap.add_argument("--quick", action="store_true", help="skip lnav and the naive loop")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="logscope-bench-"))
    data = a.dir or work / "incident"
    if not data.exists():
        t0 = time.perf_counter()
        info = generate(data, a.size_mb, a.replicas)
        print(f"generated {info['bytes'] / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s -> {data}")
    size, lines = folder_stats(data)
    mb = size / 1e6
    results: dict[str, dict] = {}

    def record(name: str, secs: float, rss: float, scanned_mb: float = mb) -> None:
        results[name] = {"seconds": round(secs, 2), "mb_s": round(scanned_mb / secs, 1),
                         "lines_s": round(lines * scanned_mb / mb / secs), "peak_rss_mb": round(rss)}

    if shutil.which("rg"):
        s, r, _ = measure(["rg", "-c", COUNT_PATTERN, str(data)])
        record("rg -c (scan floor)", s, r)
    logscope = [sys.executable, "-m", "logscope"]
    s, r, _ = measure([*logscope, "ingest", str(data), "-o", str(work / "ingest"), "-q"])
    record("logscope ingest", s, r)
    s, r, _ = measure([*logscope, "analyze", str(data), "-o", str(work / "analyze"), "-q"])
    record("logscope analyze (report incl.)", s, r)
    counts = {"logscope": logscope_counts(work / "ingest")}
    if not a.quick:
        s, r, out = measure([sys.executable, str(HERE / "naive.py"), str(data)], stdout=subprocess.PIPE)
        record("naive Python line loop", s, r)
        counts["naive"] = json.loads(out)
        ln = lnav_counts(data)
        if ln:
            cmd, env = ln
            vllm_mb = sum(p.stat().st_size for p in data.rglob("vllm-server.log*")) / 1e6
            s, r, out = measure(cmd, env=env, stdout=subprocess.PIPE)
            record("lnav (vLLM files only)", s, r, vllm_mb)
            counts["lnav"] = out.strip().splitlines()
    base = results["logscope ingest"]["mb_s"]
    print(f"\n{mb:,.0f} MB, {lines:,} lines, {os.cpu_count()} cores\n")
    print(f"{'tool':34} {'s':>8} {'MB/s':>8} {'lines/s':>12} {'peak RSS MB':>12} {'ingest speed ×':>15}")
    for name, rr in results.items():
        ratio = base / rr["mb_s"] if rr["mb_s"] else float("nan")
        print(f"{name:34} {rr['seconds']:8.2f} {rr['mb_s']:8.1f} {rr['lines_s']:12,} {rr['peak_rss_mb']:12,} {ratio:15.2f}")
    print("\ncounts:", json.dumps(counts, indent=1))
    summary = {"bytes": size, "lines": lines, "results": results, "counts": counts}
    if a.json:
        a.json.write_text(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return summary


if __name__ == "__main__":
    main()
