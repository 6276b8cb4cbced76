"""A folder of many small real logs (issue #30: 10,000 small files took 159 s), and the time logscope takes on it.

Every file holds real lines of ../shared/fixtures/lab, unchanged: each lab run's nginx access and error logs cut
into one-record files (the shape of a folder collected from many pods, or of logs rotated every request), its
client JSONL cut into one file per request (its records without a request id in a file of their own), and each
run's nginx.conf beside its access logs. The runs are taken in turn until ``--files`` files are written.

    python bench/smallfiles.py /tmp/small --files 10000                   # make the folder
    python bench/smallfiles.py /tmp/small --files 10000 --run             # and time ingest and analyze on it
    python bench/smallfiles.py /tmp/small --files 10000 --run --against REV   # this code and REV, alternating

``concatenated`` writes the same records as one file per run and kind (the test compares the tables).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fixtures  # noqa: E402  (the lab recordings the repository carries, or $LOGSCOPE_SHARED's)

LAB = fixtures.root() / "lab"
RUNS = ("calm", "crash", "ladder", "orphan", "retry-storm", "spike", "v0-ladder")


def _records(run: Path) -> dict[str, list[list[str]]]:
    """A run's records by kind: each access and error line alone, the client's JSONL lines grouped by request."""
    out: dict[str, list[list[str]]] = {}
    for kind, name in (("access", "nginx-access.log"), ("error", "nginx-error.log")):
        p = run / name
        if p.is_file():
            out[kind] = [[ln] for ln in p.read_text().splitlines() if ln.strip()]
    for p in sorted(run.glob("client-*.jsonl")):
        by_rid: dict[str, list[str]] = {}
        other: list[str] = []
        for ln in p.read_text().splitlines():
            try:
                rid = json.loads(ln).get("rid")
            except ValueError:
                rid = None
            (by_rid.setdefault(rid, []) if isinstance(rid, str) else other).append(ln)
        out["client"] = ([other] if other else []) + list(by_rid.values())
    return out


def plan(files: int, lab: Path = LAB) -> list[tuple[str, str, list[str]]]:
    """(run, kind, lines) of each small file, the runs and kinds taken in turn so that any ``files`` is a mix."""
    queues = [(r, k, recs) for r in RUNS if (lab / r).is_dir() for k, recs in _records(lab / r).items()]
    out: list[tuple[str, str, list[str]]] = []
    i = 0
    while len(out) < files and any(i < len(q[2]) for q in queues):
        for run, kind, recs in queues:
            if i < len(recs) and len(out) < files:
                out.append((run, kind, recs[i]))
        i += 1
    return out


_EXT = {"access": "access-{:05d}.log", "error": "error-{:05d}.log", "client": "requests-{:05d}.jsonl"}
_DIR = {"access": "gw-{}", "error": "gw-{}", "client": "client-{}"}
_WHOLE = {"access": "access.log", "error": "error.log", "client": "requests.jsonl"}


def _conf(root: Path, run: str, lab: Path) -> None:
    conf = lab / run / "nginx.conf"
    d = root / _DIR["access"].format(run)
    if conf.is_file() and not (d / "nginx.conf").exists():
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(conf, d / "nginx.conf")


def write(root: Path, files: int, lab: Path = LAB) -> int:
    """The small files under ``root`` (replaced); the number written (fewer when the lab holds fewer records)."""
    shutil.rmtree(root, ignore_errors=True)
    n: dict[tuple[str, str], int] = {}
    items = plan(files, lab)
    for run, kind, lines in items:
        d = root / _DIR[kind].format(run)
        d.mkdir(parents=True, exist_ok=True)
        k = n[(run, kind)] = n.get((run, kind), 0) + 1
        (d / _EXT[kind].format(k)).write_text("\n".join(lines) + "\n")
        if kind == "access":
            _conf(root, run, lab)
    return len(items)


def concatenated(root: Path, files: int, lab: Path = LAB) -> None:
    """The same records as ``write`` makes, in the same order, as one file per run and kind."""
    shutil.rmtree(root, ignore_errors=True)
    whole: dict[tuple[str, str], list[str]] = {}
    for run, kind, lines in plan(files, lab):
        whole.setdefault((run, kind), []).extend(lines)
    for (run, kind), lines in whole.items():
        d = root / _DIR[kind].format(run)
        d.mkdir(parents=True, exist_ok=True)
        (d / _WHOLE[kind]).write_text("\n".join(lines) + "\n")
        if kind == "access":
            _conf(root, run, lab)


def _timed(code: Path, src: Path, cmd: str, limit: float, env: dict | None = None) -> dict:
    sys.path.insert(0, str(HERE))
    from run import measure  # noqa: PLC0415 - the bench's own child-process timer

    out = Path(tempfile.mkdtemp(prefix="smallfiles-out-"))
    try:
        env = env or {**os.environ, "PYTHONPATH": str(code)}
        # -P: the code on PYTHONPATH, not the one in the current folder
        args = [
            "timeout",
            str(limit),
            sys.executable,
            "-P",
            "-m",
            "logscope",
            cmd,
            str(src),
            "-o",
            str(out),
            "-q",
        ]
        if cmd == "analyze":
            args.append("--reparse")
        m = measure(args, env=env)
        m["load"] = os.getloadavg()[0]  # the 1-minute load as the run ends: the machine is shared
        m["stopped"] = m["seconds"] >= limit - 1  # killed by timeout: the figure is a lower bound
        if not m["ok"] and not m["stopped"]:
            raise SystemExit(f"{cmd} failed: {m['error']}")
        return m
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--run", action="store_true", help="time logscope ingest and analyze on the folder")
    ap.add_argument("--against", help="a git revision to time beside this code, alternating")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--limit", type=float, default=900, help="seconds after which a run is stopped (said '>')"
    )
    a = ap.parse_args()
    n = write(a.dir, a.files)
    print(f"{n:,} files in {a.dir}")
    if not a.run:
        return 0
    codes = {"this code": HERE.parent}
    envs: dict[str, dict] = {}
    with ExitStack() as stack:
        if a.against:
            sys.path.insert(0, str(HERE))
            # the benches' one way to check out REV beside this code, its compiled scanner built into it
            from run import revision_env, worktree  # noqa: PLC0415

            tree = Path(tempfile.mkdtemp(prefix="smallfiles-rev-")) / "tree"
            sha = stack.enter_context(worktree(tree, a.against))
            envs[f"@{sha}"] = revision_env(tree)
            codes[f"@{sha}"] = tree
        best: dict[tuple[str, str], dict] = {}
        for _ in range(a.repeat):
            for cmd in ("ingest", "analyze"):
                for label, code in codes.items():
                    m = _timed(code, a.dir, cmd, a.limit, envs.get(label))
                    k = (label, cmd)
                    if k not in best or m["seconds"] < best[k]["seconds"]:
                        best[k] = m
        print(
            "| code | command | s | ms per file | CPU s | CPU ms per file | peak RSS MB | load |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|"
        )
        for (label, cmd), m in best.items():
            more = ">" if m["stopped"] else ""
            print(
                f"| {label} | {cmd} | {more}{m['seconds']:.1f} | {more}{1000 * m['seconds'] / n:.1f} | {m['cpu']:.1f} | "
                f"{more}{1000 * m['cpu'] / n:.2f} | {m['rss']:.0f} | {m['load']:.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
