"""Golden digests of every ingest table of every fixture: what the parsers gave before the compiled scanner
(issue #42), so that a format moved into the core is held to the very same rows.

Each fixture folder (a lab run, a public-excerpt folder, a tests/data folder, a bundled sample) is copied with every
file's modification time set to one fixed instant (a Prometheus scrape without a timestamp sits at its file's time,
and a git checkout's times are the checkout's), ingested, and each table (the parsed ones, the derived ones,
files and unrecognized) is reduced to a digest of its values: its schema, then its rows as JSON lines, floats by
their shortest exact spelling (JSON has no NaN or infinity; -0.0 is not 0.0; a NaN is any NaN). A digest of the values, not of the
Parquet file's bytes: the bytes also hold how the rows were cut into chunks, which says nothing of the rows.

    python tests/golden.py write          # (re)compute tests/data/golden-tables.json with this code
    python tests/golden.py check [NAME]   # compare this code's tables with it
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import fixtures
import polars as pl

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
GOLDEN = DATA / "golden-tables.json"
MTIME = 1_795_900_000  # 2026-11-28T19:06:40Z: every copied file's modification time
_NOT_FOLDERS = {"fixtures", "pairs"}  # the bundle (its folders are listed below) and the pairs' parent


# a folder of the bench's generator (real lab lines, values shifted), read in small chunks and in forced pieces too:
# state carried across chunks and pieces of every hot format (the fixtures' files fit in one 4 MiB chunk)
GENERATED = "generated/16mb"
SMALL_CHUNKS = {"chunk_bytes": 256 * 1024, "segments": 3}


def folders() -> dict[str, Path]:
    """Every fixture folder, by a stable name (the generated ones are made in ``table_digests``)."""
    fx = fixtures.root()
    out: dict[str, Path] = {}
    for run in sorted((fx / "lab").iterdir()):
        if run.is_dir():
            out[f"lab/{run.name}"] = run
    out["public-2"] = fx / "public-2"
    out["vllm-public"] = fx / "vllm-public"
    for d in sorted(DATA.iterdir()):
        if d.is_dir() and d.name not in _NOT_FOLDERS:
            out[f"data/{d.name}"] = d
    for pair in sorted((DATA / "pairs").iterdir()):
        for run in sorted(pair.iterdir()) if pair.is_dir() else ():
            out[f"pairs/{pair.name}/{run.name}"] = run
    for s in sorted((ROOT / "samples").iterdir()):
        out[f"samples/{s.name}"] = s
    out[GENERATED] = out[GENERATED + "-small-chunks"] = Path(GENERATED)
    return out


def _canonical(df: pl.DataFrame) -> pl.DataFrame:
    """Floats as their shortest exact spelling (nested in lists too): JSON has no NaN or infinity."""
    cols = []
    for name, dtype in df.schema.items():
        c = pl.col(name)
        if dtype == pl.Float64:
            c = c.cast(pl.String)
        elif dtype == pl.List(pl.Float64):
            c = c.cast(pl.List(pl.String))
        cols.append(c)
    return df.select(cols)


def digest(df: pl.DataFrame) -> str:
    h = hashlib.sha256(repr(list(df.schema.items())).encode())
    h.update(_canonical(df).write_ndjson().encode())
    return h.hexdigest()[:32]


def table_digests(name: str, folder: Path, work: Path) -> dict[str, list]:
    """Ingest a copy of ``folder`` (times fixed) in ``work``: {table: [rows, digest]}."""
    from logscope.ingest import IngestOptions, ingest

    src, out = work / "in", work / "out"
    shutil.rmtree(work, ignore_errors=True)
    if name.startswith(GENERATED):
        sys.path.insert(0, str(ROOT / "bench"))
        from generate import generate

        generate(src, 16, 3)
    else:
        shutil.copytree(folder, src, symlinks=True)
    for p in sorted(src.rglob("*"), reverse=True):
        if not p.is_symlink():
            os.utime(p, (MTIME, MTIME))
    ingest(src, out, IngestOptions(**(SMALL_CHUNKS if name.endswith("-small-chunks") else {})))
    got = {}
    for p in sorted(out.glob("*.parquet")):
        df = pl.read_parquet(p)
        got[p.stem] = [df.height, digest(df)]
    return got


def compute(names: list[str] | None, work: Path) -> dict[str, dict[str, list]]:
    out = {}
    for name, path in folders().items():
        if names and name not in names:
            continue
        out[name] = table_digests(name, path, work / "golden")
    return out


def main(argv: list[str]) -> int:
    import tempfile

    cmd, names = (argv[0] if argv else "check"), argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        got = compute(names or None, Path(tmp))
    if cmd == "write":
        old = json.loads(GOLDEN.read_text()) if GOLDEN.exists() and names else {}
        GOLDEN.write_text(json.dumps(old | got, indent=1, sort_keys=True) + "\n")
        print(f"{len(got)} folders written to {GOLDEN}")
        return 0
    want = json.loads(GOLDEN.read_text())
    bad = 0
    for name, tables in got.items():
        for t, (rows, d) in tables.items():
            w = want.get(name, {}).get(t)
            if w != [rows, d]:
                bad += 1
                print(f"{name} {t}: {rows} rows {d}, golden {w}")
    print("all equal" if not bad else f"{bad} tables differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
