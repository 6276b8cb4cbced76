"""MB/s per core: every tool pinned to one core (``taskset -c 1``, ``POLARS_MAX_THREADS=1``) beside its figure on every
core, per format (vLLM, nginx, Envoy, client) and for the whole folder, on the same bytes, in one run (issue #42).

    python bench/run.py --dir /tmp/gen300 --per-core --repeat 3 --against 231ee2c

The formats' folders hold hard links to the generated folder's files of that format (the same bytes, nothing copied;
nginx's folder keeps its nginx.conf, which gives the access log's layout); Envoy's is written beside them from the real
Envoy logs of tests/data/envoy (``generate.generate_envoy``), as large as the folder's nginx access logs. Each is read
by ``logscope ingest``, by ``rg -c`` (the scan floor) and by lnav with the format files of bench/lnav (counting its
rows in SQL). The whole folder is also analysed. Each figure is the fastest of ``--repeat`` runs, with the range;
``MB/CPU s`` (the bytes over the user + system seconds) is the steadier one on a shared machine, the wall time under
``taskset`` the one a reader of "MB/s per core" means. ``--against REV`` runs REV's ingest and analyze of the whole
folder pinned to one core too, alternating with this code's run by run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from generate import generate_envoy  # noqa: E402

CORE = "1"  # the core every pinned tool runs on
# the files of each format, by glob within the generated folder
FORMATS = {
    "vLLM": ("*/vllm-server.log",),
    "nginx": ("*/nginx-access.log", "*/nginx-error.log", "*/nginx.conf"),
    "Envoy": (),  # written by generate_envoy
    "client": ("*/client-*.log", "*/client-*.jsonl"),
}
# lnav: the tables its formats (bench/lnav/*.json) fill with each format's lines
LNAV_TABLES = {
    "vLLM": ("vllm_log",),
    "nginx": ("nginx_kv_log", "nginx_error_log"),
    "Envoy": ("envoy_log",),
    "client": ("openai_log", "client_jsonl"),
    "whole folder": ("vllm_log", "nginx_kv_log", "nginx_error_log", "openai_log", "client_jsonl"),
}
RG_PATTERN = r'Running: |Received request|Aborted request|status=|attempt_send|" [1-5][0-9][0-9] '
WHOLE = "whole folder"


def pinned(cmd: list[str]) -> list[str]:
    return ["taskset", "-c", CORE, *cmd]


def one_core_env(env: dict | None = None) -> dict:
    return {**(env or os.environ), "POLARS_MAX_THREADS": "1"}


def format_folders(data: Path, work: Path) -> dict[str, Path]:
    """A folder per format of hard links to the generated folder's files (Envoy's written), and the whole folder."""
    out = {}
    for name, globs in FORMATS.items():
        d = work / "formats" / name
        if name == "Envoy":
            access = sum(p.stat().st_size for p in data.glob("*/nginx-access.log"))
            generate_envoy(d, max(access / 1e6, 1.0))
        else:
            for g in globs:
                for p in sorted(data.glob(g)):
                    dst = d / p.relative_to(data)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(p, dst)
                    except OSError:  # another file system: a copy
                        shutil.copy2(p, dst)
        out[name] = d
    out[WHOLE] = data
    return out


def folder_mb(d: Path) -> float:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6


def lnav_setup() -> dict | None:
    """A HOME for lnav with the bench's formats installed (None without lnav)."""
    if not shutil.which("lnav"):
        return None
    home = Path(tempfile.mkdtemp(prefix="lnav-home-"))
    env = dict(os.environ, HOME=str(home))
    for f in sorted((HERE / "lnav").glob("*.json")):
        subprocess.run(["lnav", "-i", str(f)], env=env, capture_output=True, check=True)
    return env


def lnav_cmd(folder: Path, tables: tuple[str, ...]) -> list[str]:
    files = sorted(str(p) for p in folder.rglob("*") if p.is_file() and p.suffix != ".conf")
    q = ";SELECT " + " + ".join(f"(SELECT count(*) FROM {t})" for t in tables) + " AS rows"
    return ["lnav", "-n", "-c", q, "-c", ":write-csv-to -", *files]


def run(bench, work: Path, against: str | None = None) -> dict:
    """Every tool on every format's folder, pinned to one core and on every core; the rows kept in ``bench.results``
    (name 'FORMAT | TOOL | 1 core' / '... | all cores'), and the layout of the table to print."""
    folders = format_folders(bench.data, work)
    lnav_env = lnav_setup()
    logscope = [
        sys.executable,
        "-P",
        "-m",
        "logscope",
    ]  # -P: with --against, REV's code on PYTHONPATH (run.py)
    rows: list[tuple[str, str, float]] = []  # (format, tool, MB)
    for name, folder in folders.items():
        mb = folder_mb(folder)
        tag = name.replace(" ", "-")
        tools: list[tuple[str, list[str], dict | None]] = [
            (
                "logscope ingest",
                [*logscope, "ingest", str(folder), "-o", str(work / f"pc-{tag}"), "-q"],
                None,
            ),
        ]
        if name == WHOLE:
            out = str(work / "pc-analyze")
            tools.append(
                ("logscope analyze", [*logscope, "analyze", str(folder), "-o", out, "-q", "--reparse"], None)
            )
        if shutil.which("rg"):
            tools.append(("rg -c", ["rg", "-c", RG_PATTERN, str(folder)], None))
        if lnav_env is not None:
            tools.append(("lnav", lnav_cmd(folder, LNAV_TABLES[name]), lnav_env))
        for tool, cmd, env in tools:
            bench.run(f"{name} | {tool} | 1 core", pinned(cmd), scanned_mb=mb, env=one_core_env(env))
            bench.run(f"{name} | {tool} | all cores", cmd, scanned_mb=mb, env=env)
            rows.append((name, tool, mb))
    layout = {"rows": rows, "against": None}
    if against:
        layout["against"] = against_pinned(bench, work, against, logscope)
    return layout


def against_pinned(bench, work: Path, rev: str, logscope: list[str]) -> dict:
    """REV's ingest and analyze of the whole folder on one core, alternating with this code's."""
    from run import revision_env, worktree

    tree = work / "against-pinned"
    out = {"rev": rev, "rows": []}
    with worktree(tree, rev) as sha:
        env = revision_env(tree)
        out["sha"] = sha
        data = str(bench.data)
        for cmd in ("ingest", "analyze"):
            new, old = f"{cmd}, 1 core: this code", f"{cmd}, 1 core: @{sha}"
            extra = ["--reparse"] if cmd == "analyze" else []
            bench.run_side_by_side(
                [
                    (
                        new,
                        pinned([*logscope, cmd, data, "-o", str(work / f"pin-{cmd}-new"), "-q", *extra]),
                        one_core_env(),
                        work / f"pin-{cmd}-new",
                    ),
                    (
                        old,
                        pinned([*logscope, cmd, data, "-o", str(work / f"pin-{cmd}-old"), "-q", *extra]),
                        one_core_env(env),
                        work / f"pin-{cmd}-old",
                    ),
                ]
            )
            out["rows"].append((new, old))
    return out


def print_table(results: dict, layout: dict) -> None:
    print(
        f"\nPer core (taskset -c {CORE}, POLARS_MAX_THREADS=1) beside every core, per format, the same bytes; "
        "fastest of the runs (range):"
    )
    print(
        f"{'format':13} {'tool':17} {'MB':>6} {'1 core s':>15} {'MB/s':>6} {'MB/CPU s':>8} "
        f"{'all cores s':>15} {'MB/s':>6} {'×1 core':>7} {'RSS MB':>6}"
    )
    for name, tool, mb in layout["rows"]:
        one, every = (
            results.get(f"{name} | {tool} | 1 core", {}),
            results.get(f"{name} | {tool} | all cores", {}),
        )
        if not one.get("ok") or not every.get("ok"):
            err = one.get("error") or every.get("error") or "not run"
            print(f"{name:13} {tool:17} {mb:6.0f}  failed: {err[:80]}")
            continue
        print(
            f"{name:13} {tool:17} {mb:6.0f} {_range(one):>15} {one['mb_s']:6.1f} {mb / one['cpu_seconds']:8.1f} "
            f"{_range(every):>15} {every['mb_s']:6.1f} {one['seconds'] / every['seconds']:7.2f} "
            f"{max(one['peak_rss_mb'], every['peak_rss_mb']):6,}"
        )
    for name in dict.fromkeys(n for n, _, _ in layout["rows"]):
        ls, ln = (
            results.get(f"{name} | logscope ingest | 1 core", {}),
            results.get(f"{name} | lnav | 1 core", {}),
        )
        if ls.get("ok") and ln.get("ok"):
            print(
                f"{name}: logscope ingest on one core {ls['mb_s'] / ln['mb_s']:.2f}x lnav's MB/s "
                f"({ls['mb_s']:.1f} against {ln['mb_s']:.1f}; per CPU second "
                f"{(ls['mb'] / ls['cpu_seconds']) / (ln['mb'] / ln['cpu_seconds']):.2f}x)"
            )
    if ag := layout.get("against"):
        for new, a, b in both_ran(results, ag):
            print(
                f"{new}: {b['seconds'] / a['seconds']:.2f}x faster than {ag['rev']} ({ag['sha']}) "
                f"({a['seconds']:.2f} s against {b['seconds']:.2f} s; CPU {b['cpu_seconds'] / a['cpu_seconds']:.2f}x)"
            )


def both_ran(results: dict, against: dict) -> Iterator[tuple[str, dict, dict]]:
    """--against's pairs (``against["rows"]``: this code's run, REV's run) where both ran: this code's name, its
    result, REV's result."""
    for new, old in against["rows"]:
        a, b = results.get(new, {}), results.get(old, {})
        if a.get("ok") and b.get("ok"):
            yield new, a, b


def _range(r: dict) -> str:
    lo, hi = r.get("seconds"), r.get("slowest", r.get("seconds"))
    return f"{lo:.2f}" if hi is None or hi - lo < 0.005 else f"{lo:.2f}-{hi:.2f}"
