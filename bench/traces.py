"""Benchmark: how fast the trace formats are read, beside the vLLM server log, in one run.

    python bench/traces.py --size-mb 100            # generate, then time
    python bench/traces.py --size-mb 20 --quick     # no child-process ingest

The span files are the lab's real vLLM 0.32 and httpx-client OTLP lines (tests/data/fixtures: traced-2r-kill's
otlp-*.jsonl, the Collector file exporter's shape) copied until the size is reached, each copy's ids rewritten
(the first 4 hex digits of every trace and span id: the copy's number) and its times shifted past the previous
copy's: byte for byte the lines the receiver wrote, only values changed. The vLLM log beside it is the same run's
vllm-server-a.log repeated to the same size (its parser does not care about repeated ids).

Times, best of --repeat, side by side:
- in this process, on one chunk of the spans (CPU seconds: polars runs threads; MB per CPU second): the
  vectorised OTLP path (parsers/_otlp_columns.py), the per-value path (json.loads + Span records), and the
  vLLM server log parser on the same number of bytes;
- ``logscope ingest`` of the span folder and of the vLLM log folder as child processes (wall, CPU, peak RSS).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))
import fixtures  # noqa: E402
from run import measure  # noqa: E402

RUN = "traced-2r-kill"
_ID = re.compile(r'("(?:traceId|spanId|parentSpanId)":")[0-9a-f]{4}')
_NS = re.compile(r'("(?:start|end)TimeUnixNano":")(\d+)(")')


def generate(dest: Path, size_mb: float) -> dict:
    """Span files (one per service) and a vLLM log folder of about ``size_mb`` each."""
    lab = fixtures.root() / "lab" / RUN
    files = sorted(lab.glob("otlp-*.jsonl"))
    lines = {f.name: f.read_text().splitlines() for f in files}
    per_copy = sum(len(x) + 1 for ls in lines.values() for x in ls)
    copies = max(1, round(size_mb * 1e6 / per_copy))
    shift = 1_000 * 1_000_000_000  # 1,000 s: past the run's span (16 min of start-up and load)
    spans = dest / "spans"
    spans.mkdir(parents=True)
    for name, ls in lines.items():
        with open(spans / name, "w") as fh:
            for k in range(copies):
                ns = k * shift
                for line in ls:
                    line = _ID.sub(lambda m, k=k: m[1] + f"{k:04x}", line)
                    line = _NS.sub(lambda m, ns=ns: f"{m[1]}{int(m[2]) + ns}{m[3]}", line)
                    fh.write(line + "\n")
    vllm = dest / "vllm"
    vllm.mkdir()
    src = (lab / "vllm-server-a.log").read_bytes()
    with open(vllm / "vllm-server.log", "wb") as fh:
        for _ in range(max(1, round(size_mb * 1e6 / len(src)))):
            fh.write(src)
    return {"copies": copies, "span_mb": _mb(spans), "vllm_mb": _mb(vllm)}


def _mb(d: Path) -> float:
    return sum(p.stat().st_size for p in d.iterdir()) / 1e6


def _chunk(path: Path, max_mb: float) -> pl.DataFrame:
    got, n = [], 0
    with open(path) as fh:
        for line in fh:
            got.append(line.rstrip("\n"))
            n += len(line)
            if n > max_mb * 1e6:
                break
    return pl.DataFrame(
        {"line_no": range(1, len(got) + 1), "line": got}, schema={"line_no": pl.Int64, "line": pl.String}
    )


def _cpu(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        c = time.process_time()
        fn()
        best = min(best, time.process_time() - c)
    return best


def in_process(dest: Path, chunk_mb: float, repeat: int) -> list[dict]:
    from logscope.parsers import _tracefile, otlp_json, vllm_server
    from logscope.parsers.base import ParseContext

    ctx = ParseContext(source="x", replica="x", year=2026)
    spans = _chunk(dest / "spans" / "otlp-vllm-a.jsonl", chunk_mb)
    logs = _chunk(dest / "vllm" / "vllm-server.log", chunk_mb)
    mb_s = spans["line"].str.len_bytes().sum() / 1e6
    mb_v = logs["line"].str.len_bytes().sum() / 1e6
    rows = []
    for what, mb, fn in (
        ("OTLP JSON, vectorised (otlp_json)", mb_s, lambda: otlp_json.parse_chunk(spans, ctx, {})),
        (
            "OTLP JSON, per value (json.loads)",
            mb_s,
            lambda: _tracefile.parse_chunk(spans, ctx, {}, otlp_json.convert),
        ),
        ("vLLM server log (vllm_server)", mb_v, lambda: vllm_server.parse_chunk(logs, ctx, {})),
    ):
        cpu = _cpu(fn, repeat)
        rows.append(
            {"what": what, "mb": round(mb, 1), "cpu_s": round(cpu, 2), "mb_per_cpu_s": round(mb / cpu, 1)}
        )
    return rows


def children(dest: Path, repeat: int) -> list[dict]:
    rows = []
    for what, folder in (("logscope ingest, span files", "spans"), ("logscope ingest, vLLM log", "vllm")):
        best = None
        for _ in range(repeat):
            out = Path(tempfile.mkdtemp(prefix="bench-traces-"))
            m = measure(
                [sys.executable, "-m", "logscope", "ingest", str(dest / folder), "-o", str(out / "o"), "-q"]
            )
            shutil.rmtree(out, ignore_errors=True)
            if not m["ok"]:
                raise SystemExit(f"{what}: {m['error']}")
            best = m if best is None or m["seconds"] < best["seconds"] else best
        mb = _mb(dest / folder)
        rows.append(
            {
                "what": what,
                "mb": round(mb, 1),
                "wall_s": round(best["seconds"], 2),
                "cpu_s": round(best["cpu"], 2),
                "rss_mb": round(best["rss"]),
                "mb_per_s": round(mb / best["seconds"], 1),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--dir", type=Path, help="reuse a folder generate() wrote")
    ap.add_argument(
        "--chunk-mb", type=float, default=4.0, help="bytes of one in-process chunk (ingest's 4 MiB)"
    )
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="no child-process ingest")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    dest = a.dir or Path(tempfile.mkdtemp(prefix="bench-traces-"))
    gen = None if a.dir else generate(dest, a.size_mb)
    res = {"generated": gen, "in_process": in_process(dest, a.chunk_mb, a.repeat)}
    if not a.quick:
        res["ingest"] = children(dest, a.repeat)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text)


if __name__ == "__main__":
    main()
