"""Peak memory of ``logscope analyze`` against the number of server logs (issue #44: 800 replica folders of a
150-line vLLM log each peaked at 2.62 GB, ``--max-memory 1G`` or not).

Each folder is made by ``bench/generate.py``'s ``generate_replicas`` from the real lab recordings (the first
``--lines`` lines of their vLLM logs, times and ids shifted per replica). Every run is a child process; its peak
RSS is the larger of ru_maxrss and the summed RSS of its process tree, sampled every 50 ms (``bench/run.py``'s
``measure``: a tight analyze ingests in a child of its own).

    python bench/replicas.py /tmp/fleets --replicas 100,800,3000 --max-memory none,1G
    python bench/replicas.py /tmp/fleets --replicas 800 --against 231ee2c     # this code and REV, alternating
    python bench/replicas.py /tmp/fleets --dir /tmp/fleet64 --max-memory none,1G   # any folder (a real fleet)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import measure, worktree  # noqa: E402

from generate import generate_replicas  # noqa: E402


def run_one(code: Path, src: Path, max_memory: str, limit: float) -> dict:
    out = Path(tempfile.mkdtemp(prefix="replicas-out-"))
    try:
        cmd = ["timeout", str(limit), sys.executable, "-P", "-m", "logscope", "analyze", str(src), "-o"]
        cmd += [str(out / "o"), "-q", "--max-memory", max_memory]
        before = os.getloadavg()[0]
        m = measure(cmd, env={**os.environ, "PYTHONPATH": str(code)})
        m["stopped"] = m["seconds"] >= limit - 1
        m["load"] = (
            f"{before:.1f} / {os.getloadavg()[0]:.1f}"  # 1-minute load before / after: a shared machine
        )
        return m
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", type=Path, help="where the folders are made")
    ap.add_argument("--replicas", default="100,800,3000")
    ap.add_argument("--lines", type=int, default=150)
    ap.add_argument("--dir", type=Path, help="measure this folder instead of generated ones")
    ap.add_argument("--max-memory", default="none,1G", help="the --max-memory values to run, comma-separated")
    ap.add_argument(
        "--against", help="a git revision (or a folder holding a checkout) to run beside this code"
    )
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--limit", type=float, default=3600, help="seconds after which a run is stopped (said '>')"
    )
    a = ap.parse_args()
    folders = []
    if a.dir:
        folders.append(a.dir)
    else:
        for n in (int(x) for x in a.replicas.split(",")):
            d = a.work / f"replicas-{n}x{a.lines}"
            if not d.exists():
                info = generate_replicas(d, n, a.lines)
                print(
                    f"{n:,} replicas: {info['bytes'] / 1e6:.1f} MB, {info['lines']:,} lines in {d}",
                    flush=True,
                )
            folders.append(d)
    codes = {"this code": HERE.parent}
    print(
        "| folder | code | --max-memory | s | CPU s | peak RSS MB | load before / after |\n"
        "|---|---|---|---:|---:|---:|---|",
        flush=True,
    )
    with ExitStack() as stack:
        if a.against and Path(a.against).is_dir():  # a checkout already there (``git archive REV | tar x``)
            codes[f"@{Path(a.against).name}"] = Path(a.against)
        elif a.against:
            tree = Path(tempfile.mkdtemp(prefix="replicas-rev-")) / "tree"
            codes[f"@{stack.enter_context(worktree(tree, a.against))}"] = tree
        for src in folders:
            for mm in a.max_memory.split(","):
                for _ in range(a.repeat):
                    for label, code in codes.items():
                        m = run_one(code, src, mm, a.limit)
                        more = ">" if m["stopped"] else ""
                        state = "" if m["ok"] or m["stopped"] else f" (exit: {m.get('error', '')[:80]})"
                        print(
                            f"| {src.name} | {label} | {mm} | {more}{m['seconds']:.1f} | {m['cpu']:.1f} | "
                            f"{m['rss']:.0f}{state} | {m['load']} |",
                            flush=True,
                        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
