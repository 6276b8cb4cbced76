"""Write a realistic incident folder of a given size from the real lab recordings.

Every generated line is a real line of ../shared/fixtures/lab with only its values changed:
timestamps shifted by whole seconds (each copy follows the previous one in time) and ids
rewritten consistently across the layers of one copy (nginx $request_id -> vLLM cmpl-<id>-0,
client rid -> nginx client_rid). So the formats are byte-for-byte those real programs print,
and the request ids still join client -> gateway -> vLLM.

Layout: one folder per replica, each with its vLLM log, its nginx access/error logs and
nginx.conf, and its client JSONL and openai-python log. Replicas alternate between templates:
V1 retry-storm (vLLM 0.32: stats, lifecycle, aborts), V0 ladder (vLLM 0.9.2 V0: prompts in
Received lines, preemption warnings, otel noise) and crash (restart, 502 bursts).

    python bench/generate.py OUT --size-mb 1000 --replicas 3
    python bench/generate.py OUT --size-mb 2000 --replicas 64 --gateways 8   # a fleet (``generate_fleet``)
    python bench/generate.py OUT --replicas 800 --lines 150   # many small servers (``generate_replicas``)

A fleet has its replicas behind a few gateways: ``replica-NNN`` holds one replica's vLLM log and its
clients' logs, ``gateway-NN`` the nginx logs of the replicas behind it, their lines merged in time order.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from datetime import datetime
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fixtures  # noqa: E402  (the lab recordings the repository carries, or $LOGSCOPE_SHARED's)

LAB = fixtures.root() / "lab"
TEMPLATES = ("retry-storm", "v0-ladder", "crash")
YEAR = 2026

# (text before, the timestamp, its strftime format) per file kind; anchored at line start when 'before' is ''
_VLLM_TS = (r".*?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ", r"\d\d-\d\d \d\d:\d\d:\d\d", " ", "%m-%d %H:%M:%S")
_OTEL_TS = ("", r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r",\d{3} - ", "%Y-%m-%d %H:%M:%S")
_ACCESS_TS = ("", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", r"\+00:00 ", "%Y-%m-%dT%H:%M:%S")
_ERROR_TS = ("", r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d", r" \[", "%Y/%m/%d %H:%M:%S")
_CLIENT_TS = ("", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", r"\.\d{3} ", "%Y-%m-%dT%H:%M:%S")
_EPOCH_KEYS = ("t", "send", "end")


def _splice(df: pl.DataFrame, pattern: str, new_value) -> pl.DataFrame:
    """Replace group 1 of ``pattern`` (first match) by ``new_value(group1_expr)``; other lines untouched."""
    before, value, after = pattern
    g = pl.col("line").str.extract_groups(rf"(?s)^(?P<pre>{before})(?P<v>{value})(?P<post>{after}.*)$")
    df = df.with_columns(g.alias("_g")).unnest("_g")
    rebuilt = pl.concat_str([pl.col("pre"), new_value(pl.col("v")), pl.col("post")])
    return df.with_columns(
        pl.when(pl.col("v").is_not_null()).then(rebuilt).otherwise(pl.col("line")).alias("line")
    ).select("line")


def _shift_ts(df: pl.DataFrame, spec: tuple[str, str, str, str], seconds: int) -> pl.DataFrame:
    before, value, after, fmt = spec
    parse_fmt = fmt if fmt.startswith("%Y") else f"%Y-{fmt}"

    def shift(v: pl.Expr) -> pl.Expr:
        text = v if fmt.startswith("%Y") else pl.lit(f"{YEAR}-") + v
        return (text.str.strptime(pl.Datetime("us"), parse_fmt) + pl.duration(seconds=seconds)).dt.strftime(
            fmt
        )

    return _splice(df, (before, value, after), shift)


def _shift_epoch(df: pl.DataFrame, key: str, seconds: int) -> pl.DataFrame:
    before = rf".*?(?:\b{key}=|\"{key}\": )"
    return _splice(df, (before, r"\d{10}", r"\."), lambda v: (v.cast(pl.Int64) + seconds).cast(pl.String))


def _rewrite(lines: pl.DataFrame, kind: str, shift: int, copy: int, width: int = 4) -> pl.Series:
    df = lines
    if kind == "vllm":
        df = _shift_ts(_shift_ts(df, _VLLM_TS, shift), _OTEL_TS, shift)
    elif kind == "access":
        df = _shift_epoch(_shift_ts(df, _ACCESS_TS, shift), "msec", shift)
    elif kind == "error":
        df = _shift_ts(df, _ERROR_TS, shift)
    elif kind == "client":
        df = _shift_ts(df, _CLIENT_TS, shift)
    elif kind == "jsonl":
        for key in _EPOCH_KEYS:
            df = _shift_epoch(df, key, shift)
    # ids: the first ``width`` hex digits of every 32-hex id name the copy; client rids get a copy tag
    e = pl.col("line").str.replace_all(
        rf"\b[0-9a-f]{{{width}}}([0-9a-f]{{{32 - width}}})\b", f"{copy:0{width}x}${{1}}"
    )
    e = e.str.replace_all(r"\b(storm|crash|v0ladder)-(r|w\d\d)-", f"$1-c{copy}-$2-")
    return df.select(e).to_series()


def _kind(name: str) -> str | None:
    if name == "vllm-server.log":
        return "vllm"
    if name == "nginx-access.log":
        return "access"
    if name == "nginx-error.log":
        return "error"
    if name.startswith("client-") and name.endswith(".log"):
        return "client"
    if name.startswith("client-") and name.endswith(".jsonl"):
        return "jsonl"
    return None


def _span_seconds(run: Path) -> int:
    t = pl.read_csv(
        run / "nginx-access.log", has_header=False, separator="\x1f", quote_char=None, new_columns=["line"]
    ).select(pl.col("line").str.extract(r"msec=(\d+)", 1).cast(pl.Int64))
    lo, hi = t.to_series().min(), t.to_series().max()
    return int(hi - lo) + 120  # a gap between copies, as between two incidents


def generate(out: Path, size_mb: float, replicas: int = 3, lab: Path = LAB) -> dict:
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    per_replica = size_mb * 1e6 / replicas
    written, lines_total = 0, 0
    for r in range(replicas):
        run = lab / TEMPLATES[r % len(TEMPLATES)]
        rdir = out / f"replica-{r}"
        rdir.mkdir()
        shutil.copy(run / "nginx.conf", rdir / "nginx.conf")
        files = {p.name: p for p in sorted(run.iterdir()) if p.is_file() and _kind(p.name)}
        tmpl_bytes = sum(p.stat().st_size for p in files.values())
        copies = max(1, math.ceil(per_replica / tmpl_bytes))
        span = _span_seconds(run)
        frames = {
            name: pl.DataFrame({"line": p.read_text(encoding="utf-8").split("\n")[:-1]})
            for name, p in files.items()
        }
        handles = {name: open(rdir / name, "w", encoding="utf-8") for name in files}
        try:
            for k in range(copies):
                copy = r * 4096 + k
                for name, df in frames.items():
                    s = _rewrite(df, _kind(name), k * span, copy)
                    text = "\n".join(s.to_list()) + "\n"
                    handles[name].write(text)
                    written += len(text.encode())
                    lines_total += s.len()
        finally:
            for h in handles.values():
                h.close()
    return {
        "bytes": written,
        "lines": lines_total,
        "replicas": replicas,
        "created": datetime.now().isoformat(),
    }


def _sorted_by_time(df: pl.DataFrame, pattern: str, numeric: bool) -> pl.DataFrame:
    """A gateway's lines of several replicas in time order (stable); a line with no time stays after the one
    before it (a multi-line error)."""
    t = pl.col("line").str.extract(pattern, 1)
    key = (t.cast(pl.Float64) if numeric else t).forward_fill()
    return df.with_columns(key.alias("_t")).sort("_t", maintain_order=True, nulls_last=False).select("line")


def generate_fleet(out: Path, size_mb: float, replicas: int = 64, gateways: int = 8, lab: Path = LAB) -> dict:
    """A fleet of ``replicas`` behind ``gateways`` nginx gateways (replica r behind gateway r % gateways).

    Replica r runs the lab template r % 3 again and again, copy k starting at k * S + r % 60 seconds (S: the
    longest template's span and a gap), so that the replicas of one gateway overlap in time and every copy
    of every replica ends before the next copy starts: a gateway's lines are merged copy by copy. The first
    6 hex digits of every id name the replica and the copy (up to 256 replicas, 65536 copies each)."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    assert replicas <= 256, "ids name at most 256 replicas"
    runs = [lab / t for t in TEMPLATES]
    files = [{p.name: p for p in sorted(run.iterdir()) if p.is_file() and _kind(p.name)} for run in runs]
    frames = [
        {n: pl.DataFrame({"line": p.read_text(encoding="utf-8").split("\n")[:-1]}) for n, p in fs.items()}
        for fs in files
    ]
    step = max(_span_seconds(run) for run in runs) + 60
    per_replica = size_mb * 1e6 / replicas
    copies = [
        max(1, math.ceil(per_replica / sum(p.stat().st_size for p in files[r % len(runs)].values())))
        for r in range(replicas)
    ]
    gw_dirs = [out / f"gateway-{g:02d}" for g in range(gateways)]
    for g, d in enumerate(gw_dirs):
        d.mkdir()
        shutil.copy(runs[g % len(runs)] / "nginx.conf", d / "nginx.conf")
    handles = {}
    for r in range(replicas):
        d = out / f"replica-{r:03d}"
        d.mkdir()
        for name in files[r % len(runs)]:
            if _kind(name) in ("vllm", "client", "jsonl"):
                handles[r, name] = open(d / name, "w", encoding="utf-8")
    for g, d in enumerate(gw_dirs):
        for name in ("nginx-access.log", "nginx-error.log"):
            handles[g, name] = open(d / name, "w", encoding="utf-8")
    written = lines_total = 0
    try:
        for k in range(max(copies)):
            merged: dict[tuple[int, str], list[pl.Series]] = {}
            for r in range(replicas):
                if k >= copies[r]:
                    continue
                for name, df in frames[r % len(runs)].items():
                    s = _rewrite(df, _kind(name), k * step + r % 60, r * 65536 + k, width=6)
                    if name in ("nginx-access.log", "nginx-error.log"):
                        merged.setdefault((r % gateways, name), []).append(s)
                    else:
                        written += _write(handles[r, name], s)
                    lines_total += s.len()
            for (g, name), parts in sorted(merged.items()):
                df = pl.DataFrame({"line": pl.concat(parts)})
                df = (
                    _sorted_by_time(df, r"msec=(\d+\.\d+)", True)
                    if name == "nginx-access.log"
                    else _sorted_by_time(df, r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) ", False)
                )
                written += _write(handles[g, name], df["line"])
    finally:
        for h in handles.values():
            h.close()
    return {
        "bytes": written,
        "lines": lines_total,
        "replicas": replicas,
        "gateways": gateways,
        "created": datetime.now().isoformat(),
    }


ENVOY = Path(__file__).resolve().parents[1] / "tests" / "data" / "envoy"
_ENVOY_TS = (r"\[", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", r"\.\d{3}Z\] ", "%Y-%m-%dT%H:%M:%S")


def generate_envoy(out: Path, size_mb: float, replicas: int = 2) -> dict:
    """Envoy access logs of ``size_mb`` in all: the real ones of tests/data/envoy (Envoy 1.40's default text format and
    Istio's), again and again, each copy's times shifted past the one before and its request ids tagged with the copy
    (``client-ok-001`` -> ``e0003-client-ok-001``): values changed only, as ``generate`` does with the lab's lines."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sources = [ENVOY / "envoy-access.log", ENVOY / "envoy-istio-access.log"]
    written = lines_total = 0
    for r in range(replicas):
        src = sources[r % len(sources)]
        df = pl.DataFrame({"line": src.read_text(encoding="utf-8").split("\n")[:-1]})
        stamps = df.select(
            pl.col("line").str.extract(r"^\[([^.]+)").str.to_datetime("%Y-%m-%dT%H:%M:%S")
        ).to_series()
        span = int((stamps.max() - stamps.min()).total_seconds()) + 60
        copies = max(1, math.ceil(size_mb * 1e6 / replicas / src.stat().st_size))
        rdir = out / f"replica-{r}"
        rdir.mkdir(exist_ok=True)
        with open(rdir / "envoy-access.log", "w", encoding="utf-8") as h:
            for k in range(copies):
                shifted = _shift_ts(df, _ENVOY_TS, k * span)
                tagged = shifted.select(
                    pl.col("line").str.replace(r'"(client-[^"]*)"', f'"e{r * 65536 + k:05x}-$1"')
                )
                written += _write(h, tagged.to_series())
                lines_total += df.height
    return {"bytes": written, "lines": lines_total, "replicas": replicas}


def generate_replicas(
    out: Path,
    replicas: int,
    lines: int = 150,
    lab: Path = LAB,
    templates: tuple[str, ...] = TEMPLATES,
    spread_s: int = 60,
) -> dict:
    """``replicas`` folders of one vLLM log each: the first ``lines`` lines of the ``templates``' vLLM logs in turn
    (its start-up, then its first requests and stats), times shifted by ``r % spread_s`` seconds so that the
    servers run at once, as a fleet does, and the first 4 hex digits of every id naming the replica (up to
    65,536). The shape of a folder collected from hundreds of pods of a deployment (issue #44: 800 of them,
    26 MB); one template and ``spread_s`` 1, a deployment whose pods all started together."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    assert replicas <= 65536, "ids name at most 65,536 replicas"
    heads = [
        pl.DataFrame({"line": (lab / t / "vllm-server.log").read_text(encoding="utf-8").split("\n")[:lines]})
        for t in templates
    ]
    written = lines_total = 0
    width = len(str(replicas - 1))
    for r in range(replicas):
        d = out / f"replica-{r:0{width}d}"
        d.mkdir()
        s = _rewrite(heads[r % len(heads)], "vllm", r % spread_s, r, width=4)
        with open(d / "vllm-server.log", "w", encoding="utf-8") as h:
            written += _write(h, s)
        lines_total += s.len()
    return {
        "bytes": written,
        "lines": lines_total,
        "replicas": replicas,
        "created": datetime.now().isoformat(),
    }


def _write(handle, s: pl.Series) -> int:
    text = "\n".join(s.to_list()) + "\n"
    handle.write(text)
    return len(text.encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--size-mb", type=float, default=1000)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--gateways", type=int, default=0, help="a fleet: the replicas behind this many gateways")
    ap.add_argument(
        "--lines", type=int, default=0, help="replica folders of one vLLM log of this many lines each"
    )
    ap.add_argument("--lab", type=Path, default=LAB)
    a = ap.parse_args()
    if a.lines:
        info = generate_replicas(a.out, a.replicas, a.lines, a.lab)
    elif a.gateways:
        info = generate_fleet(a.out, a.size_mb, a.replicas, a.gateways, a.lab)
    else:
        info = generate(a.out, a.size_mb, a.replicas, a.lab)
    print(
        f"wrote {info['bytes'] / 1e6:.1f} MB, {info['lines']:,} lines in {a.replicas} replica folders to {a.out}"
    )


if __name__ == "__main__":
    main()
