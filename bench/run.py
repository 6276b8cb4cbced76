"""Benchmark: logscope ingest/analyze against the scan floor (rg -c), a naive Python line loop
and lnav answering the same counts, on a generated incident folder (bench/generate.py).

    python bench/run.py --size-mb 1000            # one command: generate, run, print the table
    python bench/run.py --dir /tmp/gen --repeat 3 # reuse a folder, best of 3 runs per tool
    python bench/run.py --size-mb 5 --quick       # smoke run (the test suite does this)
    python bench/run.py --dir /tmp/gen --repeat 3 --against HEAD~3  # this code against an older one
    python bench/run.py --dir /tmp/gen --per-core --against 231ee2c  # one core per tool, per format (percore.py)

Every tool runs as a child process; its wall time, CPU time (user + sys) and peak RSS come from
os.wait4 (ru_maxrss), so the figures are the tool's own, not this script's; the peak RSS is the larger of
ru_maxrss and the summed RSS of the tool's process tree, sampled every 50 ms (bench/treerss.py: an
ingest in a child process runs beside its parent). On a shared machine
the CPU column is the steadier one. --max-memory SIZE adds a run of ``logscope analyze --max-memory
SIZE`` and prints the range it chose (logscope/resources/budget.py); --one-file times one large access log alone, on
every core and on one thread. --against REV runs ``logscope ingest`` and ``analyze`` of another git
revision too (a worktree of it), alternating with this code run by run: on a machine whose speed
drifts by 5-10 % within an hour, only side-by-side runs tell a change from the drift. --quick skips
lnav, ``logscope analyze`` and the naive parse
loop; the naive count loop always runs: its counts are the check that logscope counted the same
lines. The stages of analyze are also timed one by one, once (``bench/phases.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import percore  # noqa: E402

from generate import generate  # noqa: E402
from treerss import TreeSampler  # noqa: E402

COUNT_PATTERN = r"Running: |Received request|Aborted request|status=|attempt_send"
# the counts logscope, the naive loop and (for the vLLM ones) lnav must agree on
COUNT_KEYS = ("stats_lines", "received", "aborted_ids", "gateway_requests", "client_attempts")
INGEST = "logscope ingest"
ANALYZE = "logscope analyze (report incl.)"
ANALYZE_AGAIN = "logscope analyze again (reused)"  # same files: the tables of the first run
ONE_FILE = "logscope ingest, one access log"
ONE_FILE_ONE_THREAD = "  the same on one thread"
ONE_VLLM = "logscope ingest, the largest vLLM log alone"
ONE_VLLM_WHOLE = "  the same read whole, on its stream"


TIME = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)


def measure(cmd: list[str], env: dict | None = None, stdout=subprocess.DEVNULL) -> dict:
    """Run ``cmd``: wall and CPU seconds, peak RSS (MB) of the child, its stdout when captured.

    A child forked from this Python process inherits its resident size as the floor of ru_maxrss
    (Linux keeps the high-water mark across exec), so, when GNU time is here, the peak RSS is the
    one it reports for the command it ran (its own fork starts small)."""
    wrapped = [TIME, "-f", "@@maxrss_kb=%M", *cmd] if TIME else cmd
    t0 = time.perf_counter()
    p = subprocess.Popen(wrapped, stdout=stdout, stderr=subprocess.PIPE, env=env, text=True)
    got: dict[str, str] = {}

    def drain(name: str, pipe) -> None:  # both pipes at once: a chatty child cannot block on a full one
        got[name] = pipe.read() if pipe else ""

    readers = [
        threading.Thread(target=drain, args=(n, pp)) for n, pp in (("out", p.stdout), ("err", p.stderr))
    ]
    for t in readers:
        t.start()
    with TreeSampler(p.pid) as tree:  # the tree's summed RSS: an ingest in a child runs beside its parent
        _, status, ru = os.wait4(
            p.pid, 0
        )  # the child's own rusage: CPU time (and ru_maxrss without GNU time)
    secs = time.perf_counter() - t0
    for t in readers:
        t.join()
    p.returncode = code = os.waitstatus_to_exitcode(status)
    lines = got.get("err", "").strip().splitlines()
    rss = ru.ru_maxrss / 1024
    if TIME and lines and lines[-1].startswith("@@maxrss_kb="):
        rss = int(lines.pop()[len("@@maxrss_kb=") :]) / 1024
    rss = max(rss, tree.peak_kb / 1024)
    lines = [
        x for x in lines if not x.startswith(("Command exited with", "Command terminated by"))
    ]  # GNU time
    ok = code in (0, 1)  # rg exits 1 when nothing matched
    return {
        "seconds": secs,
        "cpu": ru.ru_utime + ru.ru_stime,
        "rss": rss,
        "out": got.get("out", ""),
        "ok": ok,
        "error": "" if ok else _error_line(lines, code),
        "stderr": "\n".join(lines),
    }


def _error_line(lines: list[str], code: int) -> str:
    """The line of a failed run's stderr that names the error (the last one mentioning 'error')."""
    named = [x.strip() for x in lines if "error" in x.lower()]
    return (named or [x.strip() for x in lines] or [f"exit {code}"])[-1]


def folder_stats(d: Path) -> tuple[int, int]:
    size = lines = 0
    for p in d.rglob("*"):
        if p.is_file():
            size += p.stat().st_size
            with open(p, "rb") as fh:
                lines += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    return size, lines


def vllm_files(d: Path) -> list[Path]:
    return sorted(d.rglob("vllm-server.log*"))


def lnav_command(d: Path) -> tuple[list[str], dict] | None:
    """lnav (headless) counting the vLLM stats, Received and Aborted lines with its SQL interface."""
    if not shutil.which("lnav"):
        return None
    home = Path(tempfile.mkdtemp(prefix="lnav-home-"))
    env = dict(os.environ, HOME=str(home))
    subprocess.run(
        ["lnav", "-i", str(HERE / "lnav" / "vllm_log.json")], env=env, capture_output=True, check=True
    )
    q = (
        ";SELECT sum(log_body LIKE '%Running: %') AS stats, sum(log_body LIKE 'Received request%') AS received, "
        "sum(log_body LIKE 'Aborted request%') AS aborted FROM vllm_log"
    )
    return ["lnav", "-n", "-c", q, "-c", ":write-csv-to -", *map(str, vllm_files(d))], env


def logscope_counts(out: Path) -> dict:
    st = pl.read_parquet(out / "server_stats.parquet")
    ev = pl.read_parquet(out / "server_request_events.parquet")
    ga = pl.read_parquet(out / "gateway_attempts.parquet")
    ca = pl.read_parquet(out / "client_attempts.parquet")
    return {
        "stats_lines": st.filter(pl.col("origin") == "log").height,
        "received": ev.filter(pl.col("event") == "received").height,
        # vLLM 0.32 names an aborted request twice ('Aborted request(s) X.', 'Request X aborted.'): count ids
        "aborted_ids": ev.filter(pl.col("event") == "aborted")
        .select("source", "base_request_id")
        .unique()
        .height,
        "gateway_requests": ga.filter(pl.col("attempt") == 1).height,
        "client_attempts": ca.filter(pl.col("source").str.ends_with(".jsonl")).height,
    }


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    except OSError:
        mem = 0
    return {
        "cpu": model or platform.processor(),
        "cores": os.cpu_count(),
        "ram_mb": mem,
        "python": platform.python_version(),
        "polars": pl.__version__,
        "load_before": os.getloadavg()[0],
    }


class Bench:
    """Runs tools over one folder and keeps their best run (of ``repeat``) and the counts they print."""

    def __init__(self, data: Path, repeat: int) -> None:
        self.data, self.repeat = data, max(1, repeat)
        self.size, self.lines = folder_stats(data)
        self.mb = self.size / 1e6
        self.results: dict[str, dict] = {}
        self.counts: dict[str, dict] = {}
        self.phases: list[dict] = []
        self.budget: dict | None = None  # the range analyze --max-memory chose

    def run(
        self,
        name: str,
        cmd: list[str],
        scanned_mb: float | None = None,
        env: dict | None = None,
        capture: bool = False,
    ) -> dict:
        mb = self.mb if scanned_mb is None else scanned_mb
        best, slowest = None, 0.0
        for _ in range(self.repeat):
            r = measure(cmd, env=env, stdout=subprocess.PIPE if capture else subprocess.DEVNULL)
            if not r["ok"]:
                best = r
                break
            slowest = max(slowest, r["seconds"])
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        self._keep(name, best, mb, slowest)
        return best

    def _keep(self, name: str, best: dict, mb: float, slowest: float | None = None) -> None:
        row = {"ok": best["ok"], "error": best["error"], "mb": round(mb, 1)}
        if best["ok"]:
            row |= {
                "seconds": round(best["seconds"], 2),
                "slowest": round(max(slowest or 0.0, best["seconds"]), 2),
                "cpu_seconds": round(best["cpu"], 2),
                "mb_s": round(mb / best["seconds"], 1),
                "lines_s": round(self.lines * mb / self.mb / best["seconds"]),
                "peak_rss_mb": round(best["rss"]),
            }
        self.results[name] = row

    def run_side_by_side(self, runs: list[tuple[str, list[str], dict | None, Path]]) -> list[dict]:
        """(name, cmd, env, output folder) of each code, run in turn ``repeat`` times; the best of each kept.
        The output folder is emptied before every run, so that each parses (any revision)."""
        best: list[dict | None] = [None] * len(runs)
        slowest = [0.0] * len(runs)
        for _ in range(self.repeat):
            for i, (_name, cmd, env, out) in enumerate(runs):
                if best[i] is not None and not best[i]["ok"]:
                    continue
                shutil.rmtree(out, ignore_errors=True)
                r = measure(cmd, env=env)
                slowest[i] = max(slowest[i], r["seconds"])
                if best[i] is None or not r["ok"] or r["seconds"] < best[i]["seconds"]:
                    best[i] = r
        for (name, *_), r, slow in zip(runs, best, slowest, strict=True):
            self._keep(name, r, self.mb, slow)
        return best  # type: ignore[return-value]

    def run_json(self, name: str, key: str, cmd: list[str]) -> None:
        r = self.run(name, cmd, capture=True)
        if r["ok"]:
            self.counts[key] = json.loads(r["out"])


def one_file_runs(b: Bench, work: Path) -> None:
    """One large file alone: the folder's nginx access logs, one after the other, in one file (its chunks
    are parsed on every core, ``INDEPENDENT_CHUNKS``), against the same ingest on one thread; and the
    folder's largest vLLM log, read in segments on every core, against a whole read."""
    folder = work / "one-file"
    folder.mkdir()
    with (folder / "nginx-access.log").open("wb") as out:
        for p in sorted(b.data.rglob("nginx-access.log")):
            with p.open("rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    mb = (folder / "nginx-access.log").stat().st_size / 1e6
    _ingest_against(b, folder, mb, work / "one-out", (ONE_FILE, ONE_FILE_ONE_THREAD), "workers=1")
    # the largest vLLM log alone: read in segments on every core (SEGMENT_COUNTERS), against a whole read
    vllm = max(b.data.rglob("vllm-server.log"), key=lambda p: p.stat().st_size)
    folder = work / "one-vllm"
    folder.mkdir()
    shutil.copy(vllm, folder / vllm.name)
    _ingest_against(
        b, folder, vllm.stat().st_size / 1e6, work / "vllm-out", (ONE_VLLM, ONE_VLLM_WHOLE), "segments=1"
    )


def _ingest_against(
    b: Bench, folder: Path, mb: float, out: Path, names: tuple[str, str], options: str
) -> None:
    """``logscope ingest`` of ``folder`` into ``out`` as it runs (named ``names[0]``), then the library's ingest with
    ``IngestOptions(options)`` into ``out`` + '1' (``names[1]``): the same input read both ways."""
    b.run(
        names[0],
        [sys.executable, "-m", "logscope", "ingest", str(folder), "-o", str(out), "-q"],
        scanned_mb=mb,
    )
    code = (
        "from logscope.ingest import IngestOptions, ingest; "
        f"ingest({str(folder)!r}, {str(out.with_name(out.name + '1'))!r}, IngestOptions({options}))"
    )
    b.run(names[1], [sys.executable, "-c", code], scanned_mb=mb)


@contextmanager
def worktree(tree: Path, rev: str) -> Iterator[str]:
    """A detached git worktree of ``rev`` at ``tree`` (the code the benches run beside this one), removed after;
    yields its short sha. The benches' one way to check out REV beside this code."""
    made = subprocess.run(
        ["git", "-C", str(HERE.parent), "worktree", "add", "--detach", "--quiet", str(tree), rev],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        raise SystemExit(f"--against {rev}: {made.stderr.strip() or 'git worktree add failed'}")
    try:
        yield subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    finally:
        subprocess.run(
            ["git", "-C", str(HERE.parent), "worktree", "remove", "--force", str(tree)], capture_output=True
        )


def revision_env(tree: Path) -> dict:
    """The environment that runs the logscope of a worktree: PYTHONPATH first (before an editable install's finder),
    and its compiled scanner built in release mode into it when the revision has one (scan/, a few minutes)."""
    crate = tree / "scan" / "Cargo.toml"
    if crate.exists():
        target = HERE.parent / "scan" / "target"  # this checkout's: only the revision's crate compiles again
        env = {**os.environ, "PYO3_BUILD_EXTENSION_MODULE": "1", "CARGO_TARGET_DIR": str(target / "against")}
        subprocess.run(
            ["cargo", "build", "--release", "-q", "--manifest-path", str(crate)], env=env, check=True
        )
        shutil.copy(target / "against" / "release" / "lib_scan.so", tree / "logscope" / "_scan.abi3.so")
    return {**os.environ, "PYTHONPATH": str(tree)}


def against_runs(b: Bench, work: Path, rev: str, quick: bool) -> dict:
    """``logscope ingest`` (and ``analyze`` unless quick) of this code and of ``rev``'s, alternating."""
    tree = work / "against"
    with worktree(tree, rev) as sha:
        env = revision_env(tree)
        # -P: REV's code on PYTHONPATH, not the checkout in the current folder, which `-m` puts first (run from
        # the repository's root, both sides of the pair ran this code)
        data, logscope = str(b.data), [sys.executable, "-P", "-m", "logscope"]
        cmds = ["ingest"] + ([] if quick else ["analyze"])
        rows = [(f"{cmd}: this code, alternating", f"{cmd}: @{sha}, alternating") for cmd in cmds]
        for cmd, (new, old) in zip(cmds, rows, strict=True):
            b.run_side_by_side(
                [
                    (
                        new,
                        [*logscope, cmd, data, "-o", str(work / f"{cmd}-new"), "-q"],
                        None,
                        work / f"{cmd}-new",
                    ),
                    (
                        old,
                        [*logscope, cmd, data, "-o", str(work / f"{cmd}-old"), "-q"],
                        env,
                        work / f"{cmd}-old",
                    ),
                ]
            )
    return {"rev": rev, "sha": sha, "rows": rows}


def run_tools(
    b: Bench, work: Path, quick: bool, max_memory: str | None = None, one_file: bool = False
) -> None:
    data = str(b.data)
    if shutil.which("rg"):
        b.run("rg -c (scan floor)", ["rg", "-c", COUNT_PATTERN, data])
    logscope = [sys.executable, "-m", "logscope"]
    if b.run(INGEST, [*logscope, "ingest", data, "-o", str(work / "ingest"), "-q"])["ok"]:
        b.counts["logscope"] = logscope_counts(work / "ingest")
    if not quick:
        # --reparse: every repeat parses (a second analyze of the same files reuses the tables: next row)
        cmd = [*logscope, "analyze", data, "-o", str(work / "analyze"), "-q"]
        if b.run(ANALYZE, [*cmd, "--reparse"])["ok"]:
            b.run(ANALYZE_AGAIN, cmd)
    if max_memory:  # the analysis bounded by a memory budget: which range it chose, at what peak
        name = f"logscope analyze --max-memory {max_memory}"
        out = work / "analyze-budget"
        if b.run(
            name, [*logscope, "analyze", data, "-o", str(out), "-q", "--max-memory", max_memory, "--reparse"]
        )["ok"]:
            span = json.loads((out / "summary.json").read_text())["span"]
            b.budget = {
                "since": span.get("range", {}).get("since"),
                "until": span.get("range", {}).get("until"),
                "inputs_start": span.get("inputs_start"),
                "inputs_end": span.get("inputs_end"),
                "chosen": span.get("range", {}).get("chosen"),
            }
    # the stages of analyze one by one (once: the figures docs/performance.md gives per stage)
    r = measure([sys.executable, str(HERE / "phases.py"), data, str(work / "phases")], stdout=subprocess.PIPE)
    if r["ok"]:
        b.phases = json.loads(r["out"])
    b.run_json("naive Python line loop", "naive", [sys.executable, str(HERE / "naive.py"), data])
    if one_file:
        one_file_runs(b, work)
    if quick:
        return
    # the loop that extracts fields, not just counts
    b.run_json("naive Python parse loop", "naive_parse", [sys.executable, str(HERE / "naive_parse.py"), data])
    if ln := lnav_command(b.data):
        cmd, env = ln
        vllm_mb = sum(p.stat().st_size for p in vllm_files(b.data)) / 1e6
        r = b.run("lnav (vLLM files only)", cmd, scanned_mb=vllm_mb, env=env, capture=True)
        if r["ok"]:
            head, values = r["out"].strip().splitlines()[-2:]
            b.counts["lnav"] = dict(zip(head.split(","), map(int, values.split(",")), strict=True))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description="logscope benchmark")
    ap.add_argument("--size-mb", type=float, default=1000)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="reuse the folder here (generated when absent)")
    ap.add_argument(
        "--quick", action="store_true", help="skip lnav, logscope analyze and the naive parse loop"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool; the fastest is kept")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument(
        "--max-memory", default=None, help="also run logscope analyze --max-memory SIZE (e.g. 1G)"
    )
    ap.add_argument(
        "--one-file",
        action="store_true",
        help="also ingest the folder's nginx access logs as one file, on every core and on one thread, "
        "and its largest vLLM log alone, in segments and whole",
    )
    ap.add_argument(
        "--against",
        default=None,
        metavar="REV",
        help="also run ingest and analyze of this git revision, alternating with this code",
    )
    ap.add_argument(
        "--per-core",
        action="store_true",
        help="also every tool pinned to one core beside every core, per format (vLLM, nginx, Envoy, client) and "
        "whole folder (bench/percore.py); with --against, REV's ingest and analyze on one core too",
    )
    a = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="logscope-bench-"))
    data = a.dir or work / "incident"
    if not data.exists():
        t0 = time.perf_counter()
        info = generate(data, a.size_mb, a.replicas)
        print(f"generated {info['bytes'] / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s -> {data}")
    m = machine()
    b = Bench(data, a.repeat)
    run_tools(b, work, a.quick, a.max_memory, a.one_file)
    against = against_runs(b, work, a.against, a.quick) if a.against else None
    per_core = percore.run(b, work, a.against) if a.per_core else None
    same = all(b.counts.get("logscope", {}).get(k) == b.counts.get("naive", {}).get(k) for k in COUNT_KEYS)
    summary = {
        "machine": m,
        "bytes": b.size,
        "lines": b.lines,
        "results": b.results,
        "counts": b.counts,
        "counts_agree": same,
        "analyze_stages": b.phases,
        "budget_range": b.budget,
        "against": against,
        "per_core": per_core,
    }
    print_table(summary)
    if per_core:
        percore.print_table(b.results, per_core)
    if a.json:
        a.json.write_text(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return summary


def print_table(summary: dict) -> None:
    m, results = summary["machine"], summary["results"]
    print(
        f"\n{summary['bytes'] / 1e6:,.0f} MB, {summary['lines']:,} lines; {m['cores']} cores ({m['cpu']}), "
        f"load {m['load_before']:.1f} before the run\n"
    )
    base = results.get(INGEST, {}).get("mb_s")
    print(
        f"{'tool':34} {'MB':>7} {'s':>7} {'CPU s':>7} {'MB/s':>7} {'lines/s':>11} {'RSS MB':>7} "
        f"{'ingest ×':>8}"
    )
    for name, r in results.items():
        if " | " in name:  # the per-core table's rows (bench/percore.py), printed there
            continue
        if not r["ok"]:
            print(f"{name:34} {r['mb']:7.0f}  failed: {r['error'][:90]}")
            continue
        ratio = f"{base / r['mb_s']:8.2f}" if base else f"{'-':>8}"
        print(
            f"{name:34} {r['mb']:7.0f} {r['seconds']:7.2f} {r['cpu_seconds']:7.2f} {r['mb_s']:7.1f} "
            f"{r['lines_s']:11,} {r['peak_rss_mb']:7,} {ratio}"
        )
    print("\n'ingest ×' = logscope ingest MB/s / the tool's MB/s (lnav: over the vLLM files it read)")
    if summary.get("analyze_stages"):
        print(
            "analyze stage by stage (bench/phases.py, one run): "
            + ", ".join(f"{p['stage']} {p['seconds']:.2f} s" for p in summary["analyze_stages"])
        )
    if br := summary.get("budget_range"):
        print(
            f"--max-memory analysed {br['since']} -> {br['until']} of {br['inputs_start']} -> {br['inputs_end']}"
            if br["chosen"]
            else "--max-memory: the whole folder fits"
        )
    if ag := summary.get("against"):
        for new, a, b in percore.both_ran(results, ag):
            print(
                f"{new}: {a['seconds'] / b['seconds']:.3f}x the wall time, "
                f"{a['cpu_seconds'] / b['cpu_seconds']:.3f}x the CPU of {ag['rev']} ({ag['sha']}), runs alternating"
            )
    print("counts:", json.dumps(summary["counts"]))
    print("logscope and the naive loop count the same:", summary["counts_agree"])


if __name__ == "__main__":
    main()
