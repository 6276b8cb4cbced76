"""Benchmark: the ingest of a fleet folder in-process against ``--cluster local:1`` and ``local:2``, in one run.

    python bench/cluster.py --size-mb 500 --replicas 64 --gateways 8 --json /tmp/cluster.json --report /tmp/perf.html
    python bench/cluster.py --dir /tmp/fleet --repeat 2

Each run is a child process (``--child``) measured as bench/run.py measures a tool (wall, CPU of the process
tree, peak RSS of the tree sampled); the child reports its own phases: the ingest (on a cluster from the moment
the session starts opening, as ``analyze --cluster`` opens it while the files are detected), the time it waited
for the cluster's start and checks, every task's compute time from the scheduler's task stream, each process's
peak RSS (VmHWM: the client and every worker), and, for local:2, Dask's ``performance_report`` of one more
ingest after the timed one. From the measured tasks, the wall time on 8, 32 and 128 workers is projected for a
100 GB folder of the same shape: a projection, not a measurement (``project``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import measure  # noqa: E402

from generate import generate_fleet  # noqa: E402

RUNS = (
    ("in-process (default threads)", "here", None),
    ("in-process, one stream at a time", "here1", None),
    ("--cluster local:1", "cluster", "local:1"),
    ("--cluster local:2", "cluster", "local:2"),
)
PROJECT_GB = 100
PROJECT_WORKERS = (8, 32, 128)


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _wrap(owner, name: str, label: str, spent: dict[str, float]) -> None:
    """``owner.name`` replaced by itself timed: its seconds added to ``spent[label]``."""
    real = getattr(owner, name)

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent[label] += time.perf_counter() - t0

    setattr(owner, name, timed)


def _timed() -> dict[str, float]:
    """The client's own steps of an ingest, timed: detection (the files' heads), and the assembly of the tables
    (writing them from memory or the parts, and the derived tables)."""
    import logscope.ingest as ing
    from logscope.ingest import derive
    from logscope.ingest.store import Store

    spent: dict[str, float] = defaultdict(float)

    def wrap(owner, name: str, label: str) -> None:
        _wrap(owner, name, label, spent)

    wrap(ing, "_detect", "detect")
    wrap(Store, "write", "assemble")
    try:  # on a cluster: the tables written by tasks, this process waiting
        from logscope.cluster import ingest as on_cluster

        wrap(on_cluster, "_write", "assemble")
    except ImportError:
        pass
    wrap(derive, "finalize", "derive")
    return spent


def child(data: Path, out: Path, mode: str, address: str | None, report: Path | None) -> dict:
    """One run, in this process: its phases and, on a cluster, its tasks."""
    from logscope.ingest import IngestOptions, ingest

    spent = _timed()
    if mode != "cluster":
        t0 = time.perf_counter()
        ingest(data, out, IngestOptions(**({"workers": 1} if mode == "here1" else {})))
        return {
            "ingest_s": time.perf_counter() - t0,
            "rss_mb": {"client": round(_hwm_mb())},
            "client_steps": spent,
        }
    from logscope import cluster
    from logscope.cluster import ingest as on_cluster

    # as `analyze --cluster` opens it: started while the files are detected; the time the ingest then waited
    # for it is the start's cost not hidden (``session_s``)
    _wrap(cluster.Opening, "result", "session", spent)

    def ready(s) -> None:  # the scheduler's task stream recorded from the first task on
        s.client.get_task_stream(start=0, stop=0)

    t0, since = time.perf_counter(), time.time()
    with cluster.opening(address, data, out, ready):
        sizes: list = []
        on_cluster.ingest(data, out, IngestOptions(), None, sizes)
        wall = time.perf_counter() - t0
        s = cluster.current()
        stream = s.client.get_task_stream(start=since)
        workers = s.client.run(_hwm_mb)
        threads = s.threads
        if report:  # one more ingest (this child's times are not kept): the report needs a session open first
            from distributed import performance_report

            with performance_report(filename=str(report)):
                on_cluster.ingest(data, out.with_name(out.name + "-report"), IngestOptions(), None)
    started = spent.pop("session", 0.0)
    tasks = [
        {
            "key": t["key"],
            "kind": str(t["key"]).split("-")[0],
            "worker": t["worker"],
            "thread": t.get("thread"),
            "compute": [(a["start"], a["stop"]) for a in t["startstops"] if a["action"] == "compute"],
        }
        for t in stream
    ]
    return {
        "session_s": started,
        "ingest_s": wall,
        "threads": threads,
        "tasks": tasks,
        "sizes": sizes,
        "client_steps": spent,
        "rss_mb": {"client": round(_hwm_mb()), **{w: round(v) for w, v in workers.items()}},
    }


def derive_steps(out: Path, passes: int = 4) -> dict:
    """server_requests made again from ``out``'s events, in this process: in one pass, then in ``passes`` passes,
    its steps timed (the split and the merge stay on the client; the passes are tasks on a cluster): what the
    projection grows. A folder of 100 GB has ~60 M events, 300 passes."""
    import polars as pl

    from logscope.ingest import derive

    events = pl.scan_parquet(out / "server_request_events.parquet").select(pl.len()).collect().item()
    t0 = time.perf_counter()
    derive._server_requests(out, {})
    one = time.perf_counter() - t0
    spent: dict[str, float] = defaultdict(float)
    real = {
        k: getattr(derive, k)
        for k in ("_split", "_merge_sorted", "request_pass", "ONE_PASS_MAX", "ROWS_PER_PASS")
    }

    for name, label in (("_split", "split"), ("_merge_sorted", "merge"), ("request_pass", "passes")):
        _wrap(derive, name, label, spent)
    derive.ONE_PASS_MAX, derive.ROWS_PER_PASS = 0, -(-events // passes)
    try:
        derive._server_requests(out, {})
    finally:
        for k, v in real.items():
            setattr(derive, k, v)
    return {"events": events, "one_pass_s": one, "rows_per_pass": -(-events // passes), **spent}


def task_stats(r: dict) -> dict:
    """Task count, sizes and compute times by kind; the scheduler's overhead per task: the mean gap between
    one worker thread's consecutive parsing tasks (dispatch, result hand-back, deserialisation)."""
    tasks = r["tasks"]
    by_kind: dict[str, list[float]] = defaultdict(list)
    lanes: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for t in tasks:
        for a, b in t["compute"]:
            by_kind[t["kind"]].append(b - a)
            if t["kind"] not in ("table", "derive"):  # those wait for the client's steps between them
                lanes[t["worker"], t["thread"]].append((a, b))
    gaps = []
    for spans in lanes.values():
        spans.sort()
        gaps += [max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:], strict=False)]
    units = [u["bytes"] for u in r["sizes"] if u["kind"] in ("whole", "piece")]
    busy = [t for t in tasks if t["compute"]]
    first = min(a for t in busy for a, _ in t["compute"])
    last = max(b for t in busy for _, b in t["compute"])
    return {
        "tasks": len(tasks),
        "units": len(units),
        "unit_mb": {"max": max(units) / 1e6, "mean": sum(units) / len(units) / 1e6},
        "largest_unit_share": max(units) / sum(units),
        "compute_s": {k: {"n": len(v), "sum": sum(v), "max": max(v)} for k, v in sorted(by_kind.items())},
        "overhead_per_task_ms": 1000 * sum(gaps) / max(len(gaps), 1),
        "tasks_span_s": last - first,
        "client_s": r["ingest_s"] - (last - first),
    }


def project(r: dict, bytes_in: int) -> dict:
    """The wall time of a folder ``PROJECT_GB`` GB of the same shape (each stream that many times longer) on
    8, 32 and 128 workers: each unit's measured compute time grown with its bytes; a vLLM log longer than its
    share cut into pieces as ``pieces.plan`` would for ``SLOTS`` workers (vLLM logs and gateways' access logs;
    the client logs stay whole), each piece
    charged the replayed MiB and the first chunk its guessed state costs; the units spread longest first over
    the workers, each with the measured gap between tasks; plus the client's own time (detection, assembling
    the tables) grown with the bytes. A projection: nothing of it was run at that size."""
    import logscope.parsers as parsers
    from logscope.cluster.ingest import SLOTS
    from logscope.ingest.derive import ROWS_PER_PASS
    from logscope.ingest.options import IngestOptions
    from logscope.ingest.pieces import SEGMENT_WINDOW, cuttable, independent
    from logscope.ingest.sources import CHUNK_BYTES

    factor = PROJECT_GB * 1e9 / bytes_in
    seg = IngestOptions().segment_bytes
    st = task_stats(r)
    info = {u["key"]: u for u in r["sizes"]}
    units = []  # (seconds on one worker at the projected size, bytes, format)
    for t in r["tasks"]:
        u = info.get(t["key"])
        if u is None or u["kind"] not in ("whole", "piece") or not t["compute"]:
            continue
        units.append((sum(b - a for a, b in t["compute"]) * factor, u["bytes"] * factor, u["format"]))
    total = sum(x for x, _, _ in units)
    share = total / max(SLOTS, max(PROJECT_WORKERS))
    cut, cut_bytes = [], []
    for secs, size, fmt in units:
        mod = parsers.BY_NAME.get(fmt)
        n = 1
        if cuttable(mod, SLOTS):
            n = max(1, min(SLOTS, math.ceil(secs / share), int(size // seg)))
        # a piece's guessed state: the stream's first chunk, and the MiB before it unless chunks are independent
        extra = secs / size * ((0 if independent(mod) else SEGMENT_WINDOW) + CHUNK_BYTES) if n > 1 else 0.0
        cut += [secs / n + extra] * n
        cut_bytes += [size / n] * n
    # detection reads each file's head (as many files: the same time); the tables, each written by a task of its
    # own once the parsing is done, grow with the rows (the largest bounds them), as does derive, here; the rest
    # of the client's time (submitting, gathering) grows with the tasks
    steps, dv = r["client_steps"], r["derive_steps"]
    tables = st["compute_s"].get("table", {}).get("max")
    assemble = tables * factor if tables is not None else steps.get("assemble", 0) * factor
    rest = max(
        0.0, st["client_s"] - steps.get("assemble", 0) - steps.get("derive", 0) - steps.get("detect", 0)
    )
    # derive: server_requests' split and merge, and the other derived tables, here; its passes (ROWS_PER_PASS
    # events each) are tasks, after the tables
    n_passes = math.ceil(dv["events"] * factor / ROWS_PER_PASS)
    pass_s = dv.get("passes", 0) * factor / n_passes
    derive_here = (
        max(0.0, steps.get("derive", 0) - dv["one_pass_s"]) + dv.get("split", 0) + dv.get("merge", 0)
    ) * factor
    client = steps.get("detect", 0) + assemble + derive_here + rest * len(cut) / max(st["units"], 1)
    out = {
        "factor": round(factor, 1),
        "units": len(cut),
        "largest_unit_share": max(cut) / sum(cut),
        "largest_unit_bytes_share": max(cut_bytes) / sum(cut_bytes),
        "derive_passes": n_passes,
        "derive_pass_s": pass_s,
        "derive_here_s": derive_here,
        "client_s": client,
        "by_workers": {},
    }
    for w in PROJECT_WORKERS:
        load = [0.0] * w
        for secs in sorted(cut, reverse=True):
            i = load.index(min(load))
            load[i] += secs + st["overhead_per_task_ms"] / 1000
        passes = math.ceil(n_passes / w) * (pass_s + st["overhead_per_task_ms"] / 1000)
        out["by_workers"][w] = {
            "tasks_s": max(load),
            "passes_s": passes,
            "wall_s": max(load) + passes + client,
            "ideal_tasks_s": sum(cut) / w,
        }
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description="logscope on a Dask cluster: in-process vs local:1 vs local:2")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--size-mb", type=float, default=500)
    ap.add_argument("--replicas", type=int, default=64)
    ap.add_argument("--gateways", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--report", type=Path, default=None, help="Dask's performance_report of the local:2 run")
    ap.add_argument("--child", nargs=4, metavar=("DIR", "OUT", "MODE", "ADDRESS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        data, out, mode, address = a.child
        rep = Path(os.environ["BENCH_REPORT"]) if os.environ.get("BENCH_REPORT") else None
        print(json.dumps(child(Path(data), Path(out), mode, None if address == "-" else address, rep)))
        return {}
    if a.report and importlib.util.find_spec("bokeh") is None:  # say so before minutes of runs, not after
        ap.error("--report needs bokeh (pip install 'logscope[dask]')")
    work = Path(tempfile.mkdtemp(prefix="logscope-cluster-bench-"))
    data = a.dir or work / "fleet"
    if not data.exists():
        info = generate_fleet(data, a.size_mb, a.replicas, a.gateways)
        print(
            f"generated {info['bytes'] / 1e6:.0f} MB: {a.replicas} replicas behind {a.gateways} gateways -> {data}"
        )
    bytes_in = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    results = {}
    for _ in range(a.repeat):  # in turn, so that a drift of the machine's speed touches every row alike
        for name, mode, address in RUNS:
            r, m = _child(data, work / "out", mode, address, name)
            row = {"wall_s": m["seconds"], "cpu_s": m["cpu"], "tree_rss_mb": m["rss"], **r}
            if name not in results or row["wall_s"] < results[name]["wall_s"]:
                results[name] = row
    if a.report:  # Dask's performance report of local:2, from a run of its own (not timed)
        _child(data, work / "out", "cluster", "local:2", "report", {"BENCH_REPORT": str(a.report)})
        print(f"Dask's performance report: {a.report}")
    summary = {"bytes": bytes_in, "cores": os.cpu_count(), "load_before": os.getloadavg()[0], "runs": {}}
    for name, r in results.items():
        row = {
            k: r[k]
            for k in ("wall_s", "cpu_s", "tree_rss_mb", "ingest_s", "rss_mb", "client_steps")
            if k in r
        }
        if "tasks" in r:
            row |= {"session_s": r["session_s"], "threads": r["threads"], **task_stats(r)}
        summary["runs"][name] = row
    # derive's steps timed on the last run's output (local:2's: RUNS ends with it), after the runs: not in a wall
    results["--cluster local:2"]["derive_steps"] = derive_steps(work / "out")
    # from the workers of one thread each (a core each, as the projection's workers), both busy, as on a full node
    summary["projection"] = project(results["--cluster local:2"], bytes_in)
    print_table(summary)
    if a.json:
        a.json.write_text(json.dumps(summary, indent=1, default=str))
    subprocess.run(["rm", "-rf", str(work / "out")], check=False)
    return summary


def _child(data: Path, out: Path, mode: str, address: str | None, name: str, env: dict | None = None):
    """One measured child run into ``out`` (emptied first): what it reported, and its measure."""
    subprocess.run(["rm", "-rf", str(out), str(out) + "-report"], check=True)
    m = measure(
        [sys.executable, str(HERE / "cluster.py"), "--child", str(data), str(out), mode, address or "-"],
        env=dict(os.environ, **(env or {})),
        stdout=subprocess.PIPE,
    )
    if not m["ok"] or not m["out"].strip():
        raise SystemExit(f"{name}: {m['error'] or 'no result'}\n{m['stderr'][-3000:]}")
    return json.loads(m["out"]), m


def print_table(s: dict) -> None:
    print(
        f"\n{s['bytes'] / 1e6:,.0f} MB fleet folder; {s['cores']} cores, load {s['load_before']:.1f} before\n"
    )
    print(
        f"{'run':34} {'wall s':>7} {'ingest s':>8} {'waited':>7} {'CPU s':>7} {'tree RSS':>8}  per process MB"
    )
    for name, r in s["runs"].items():
        print(
            f"{name:34} {r['wall_s']:7.2f} {r['ingest_s']:8.2f} {r.get('session_s', 0):7.2f} {r['cpu_s']:7.2f} "
            f"{r['tree_rss_mb']:8.0f}  {json.dumps(r['rss_mb'])}"
        )
    for name, r in s["runs"].items():
        if "tasks" in r:
            print(
                f"{name}: {r['tasks']} tasks ({r['units']} units, largest {r['unit_mb']['max']:.1f} MB = "
                f"{100 * r['largest_unit_share']:.2f} % of the bytes, mean {r['unit_mb']['mean']:.1f} MB), "
                f"{r['overhead_per_task_ms']:.1f} ms between a worker's tasks, tasks span {r['tasks_span_s']:.2f} s, "
                f"client alone {r['client_s']:.2f} s"
            )
    p = s["projection"]
    print(
        f"\nPROJECTION (not measured) for {PROJECT_GB} GB of the same shape (x{p['factor']}), {p['units']} units, the "
        f"largest {100 * p['largest_unit_share']:.2f} % of the compute time, "
        f"{100 * p['largest_unit_bytes_share']:.2f} % of the bytes; client alone {p['client_s']:.0f} s (derive's "
        f"split and merge {p['derive_here_s']:.0f} s); {p['derive_passes']} derive passes of {p['derive_pass_s']:.1f} s:"
    )
    for w, v in p["by_workers"].items():
        print(
            f"  {w:4} workers: tasks {v['tasks_s']:7.0f} s (ideal {v['ideal_tasks_s']:6.0f} s), derive passes "
            f"{v['passes_s']:5.0f} s, wall {v['wall_s']:7.0f} s"
        )


if __name__ == "__main__":
    main()
