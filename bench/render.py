"""Where a small folder's `logscope analyze` spends its time, render's stages one by one, and this code side by
side with another revision (docs/performance.md, "Rendering a small folder").

    python bench/render.py samples/spike --against bd1f646 --repeat 3
    python bench/render.py ../shared/fixtures/lab/spike --json render.json

For each code (this worktree's, and REV's in a git worktree of it), alternating run by run:
* ``analyze``: the whole command in a child process (a new output folder each time, so the ingest runs too),
  wall and CPU seconds, the children's included (the old code drew timeline.png in a grandchild);
  ``analyze --png`` as well for the code that has the option;
* the stages of render in one child process (``STAGES`` below, run on that analyze's output): the import of
  logscope.report, reading the tables, summary.json, the timeline's spec, the other charts and the page's
  context, summary.md, report.html, and timeline.png drawn in the process (what the old code's child did).
The fastest of ``--repeat`` runs is kept. On a shared machine the CPU column is the steadier one. With
``--bytecode`` the children may write .pyc files (a shell with PYTHONDONTWRITEBYTECODE=1 otherwise compiles every
module of logscope from source at every run, ~0.4 s, which an installed package never does).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# run in a child with PYTHONPATH set to the code measured: names both the old and the new code have
STAGES = r"""
import json, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
rows = []
def lap(name):
    global t0, c0
    t, c = time.perf_counter(), time.process_time()
    rows.append({"stage": name, "seconds": round(t - t0, 3), "cpu": round(c - c0, 3)})
    t0, c0 = time.perf_counter(), time.process_time()
from contextlib import ExitStack
from pathlib import Path
import logscope.report as R
from logscope import clock
from logscope.api import AnalyzeOptions
lap("import logscope.report")
out = Path(sys.argv[1]); opts = AnalyzeOptions()
ld = R.load(out); opts = R.judged_by(ld, opts)
with clock.covering(*ld.rng.clip(*clock.files_span(out))):
    R.vega_bundle(); lap("load tables, Vega bundle")
    s = R.build(ld, opts); lap("summary.json")
    tl = R._timeline(ld, s, opts); lap("timeline spec")
    ctx = R.context(ld, s, opts, tl); lap("other charts, context")
    R.render_markdown(ctx); lap("summary.md")
    R.render_html(ctx); lap("report.html")
    import vl_convert
    vl_convert.vegalite_to_png(R._png_spec(*tl), scale=1.5); lap("timeline.png (in process)")
print(json.dumps(rows))
"""


def timed(cmd: list[str], env: dict | None, cwd: Path) -> dict:
    """Wall and CPU seconds of ``cmd`` and every process it waited for. ``cwd`` outside both codes: ``python -m``
    and ``-c`` put the working folder first on sys.path, before PYTHONPATH."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if res.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)}: exit {res.returncode}\n{res.stderr[-2000:]}")
    return {"seconds": round(wall, 3), "cpu": round(cpu, 3), "out": res.stdout}


def has_png_option(env: dict, cwd: Path) -> bool:
    res = subprocess.run(
        [sys.executable, "-m", "logscope", "analyze", "--help"],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    return "--png" in res.stdout


def run(folder: Path, against: str | None, repeat: int, work: Path, bytecode: bool = False) -> dict:
    base = dict(os.environ)
    if bytecode:  # as an installed package runs: its modules compiled once (pip writes the .pyc files)
        base.pop("PYTHONDONTWRITEBYTECODE", None)
    codes = {"this code": {**base, "PYTHONPATH": str(ROOT)}}
    best: dict[tuple[str, str], dict] = {}
    stages: dict[str, list[dict]] = {}
    with ExitStack() as stack:
        if against:
            from run import worktree  # noqa: PLC0415 - the benches' one way to check out REV beside this code

            tree = work / "against"
            sha = stack.enter_context(worktree(tree, against))
            codes[f"@{sha}"] = {**base, "PYTHONPATH": str(tree)}
        pngs = {
            name: has_png_option(env, work) for name, env in codes.items()
        }  # also a warm-up (.pyc written)
        for i in range(repeat):
            for name, env in codes.items():  # alternating: a drift of the machine's speed hits both alike
                kinds = [("analyze", [])] + ([("analyze --png", ["--png"])] if pngs[name] else [])
                for kind, extra in kinds:
                    out = work / f"out-{len(best)}-{i}-{kind.replace(' ', '')}-{name.strip('@ ')}"
                    r = timed(
                        [
                            sys.executable,
                            "-m",
                            "logscope",
                            "analyze",
                            str(folder),
                            "-o",
                            str(out),
                            "-q",
                            *extra,
                        ],
                        env,
                        work,
                    )
                    key = (name, kind)
                    if key not in best or r["cpu"] < best[key]["cpu"]:
                        best[key] = r
                    if kind == "analyze":
                        s = timed([sys.executable, "-c", STAGES, str(out)], env, work)
                        rows = json.loads(s["out"])
                        if name not in stages or sum(x["cpu"] for x in rows) < sum(
                            x["cpu"] for x in stages[name]
                        ):
                            stages[name] = rows
    return {
        "folder": str(folder),
        "repeat": repeat,
        "load_before": os.getloadavg(),
        "bytecode": "written (.pyc)"
        if "PYTHONDONTWRITEBYTECODE" not in base
        else "not written (PYTHONDONTWRITEBYTECODE)",
        "commands": [
            {"code": c, "command": k, "seconds": r["seconds"], "cpu": r["cpu"]} for (c, k), r in best.items()
        ],
        "stages": stages,
    }


def show(res: dict) -> None:
    print(
        f"{res['folder']}: fastest of {res['repeat']} (by CPU); 1-min load before: {res['load_before'][0]:.1f}; "
        f"bytecode {res['bytecode']}"
    )
    print(f"{'code':<14}{'command':<16}{'wall s':>8}{'CPU s':>8}")
    for r in res["commands"]:
        print(f"{r['code']:<14}{r['command']:<16}{r['seconds']:>8.2f}{r['cpu']:>8.2f}")
    names = list(res["stages"])
    print(f"\n{'render stage':<30}" + "".join(f"{n + ' wall':>16}{'CPU':>7}" for n in names))
    for i, row in enumerate(res["stages"][names[0]]):
        cells = ""
        for n in names:
            other = (
                res["stages"][n][i]
                if i < len(res["stages"][n])
                else {"seconds": float("nan"), "cpu": float("nan")}
            )
            cells += f"{other['seconds']:>16.3f}{other['cpu']:>7.3f}"
        print(f"{row['stage']:<30}{cells}")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument(
        "--against", metavar="REV", help="another revision to run side by side (a git worktree of it)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument(
        "--bytecode",
        action="store_true",
        help="let Python write .pyc files (as an installed package has them) even if PYTHONDONTWRITEBYTECODE",
    )
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="logscope-render-") as tmp:
        res = run(a.folder.resolve(), a.against, a.repeat, Path(tmp), a.bytecode)
    show(res)
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main()
