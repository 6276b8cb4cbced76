"""The real recordings and public excerpts the tests read, carried in the repository.

``tests/data/fixtures/`` holds the same tree as ``../shared/fixtures`` (where new recordings arrive):
each lab run as one ``lab/<run>.tar.zst`` (52 MB of logs in ~3 MB), the public excerpts as plain files
beside their ``INDEX.md`` (each excerpt's source URL). ``root()`` gives a folder laid out as
``../shared/fixtures``: the bundle unpacked once into ``tests/.fixtures/<digest>/fixtures/`` (file times kept: a
Prometheus scrape without a timestamp sits at its file's time), or ``$LOGSCOPE_SHARED/fixtures`` when that
variable names a shared folder (a recording not bundled yet).

    python tests/fixtures.py bundle ../shared/fixtures [RUN ...]   # (re)bundle runs from the shared folder
    python tests/fixtures.py add /work/lab-runs/RUN [NAME]         # bundle one recorded run (as NAME)
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent
BUNDLE = HERE / "data" / "fixtures"
CACHE = HERE / ".fixtures"
PLAIN = ("public-2", "vllm-public")  # small text folders, kept readable in the repository
LEVEL = 19


def _digest() -> str:
    h = hashlib.sha256()
    for p in sorted(BUNDLE.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(BUNDLE)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def root() -> Path:
    """A folder laid out as ../shared/fixtures (lab/<run>/, public-2/, vllm-public/)."""
    env = os.environ.get("LOGSCOPE_SHARED")
    if env:
        return Path(env) / "fixtures"
    dst = CACHE / _digest()
    if (dst / ".complete").exists():
        return dst / "fixtures"
    tmp = CACHE / f".unpacking-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "fixtures" / "lab").mkdir(parents=True)
    for tz in sorted((BUNDLE / "lab").glob("*.tar.zst")):
        with zstandard.open(tz, "rb") as fh, tarfile.open(fileobj=io.BytesIO(fh.read())) as tar:
            tar.extractall(tmp / "fixtures" / "lab", filter="data")
    for f in (BUNDLE / "lab").glob("*.md"):
        shutil.copy2(f, tmp / "fixtures" / "lab" / f.name)
    for name in PLAIN:
        shutil.copytree(BUNDLE / name, tmp / "fixtures" / name)
    (tmp / ".complete").touch()
    for old in CACHE.iterdir():  # an earlier bundle's copy
        if old.name != dst.name and not old.name.startswith(".unpacking-"):
            shutil.rmtree(old, ignore_errors=True)
    try:
        tmp.rename(dst)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return dst / "fixtures"


def add(run: Path, name: str | None = None) -> Path:
    """Bundle one lab run folder as ``lab/<name>.tar.zst`` (its files' times kept)."""
    name = name or run.name
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for p in sorted(run.rglob("*")):
            tar.add(p, arcname=str(Path(name) / p.relative_to(run)), recursive=False)
    dst = BUNDLE / "lab" / f"{name}.tar.zst"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(zstandard.ZstdCompressor(level=LEVEL).compress(buf.getvalue()))
    return dst


def bundle(src: Path, runs: list[str]) -> None:
    """Copy ``src`` (a ../shared/fixtures) into the bundle: the named lab runs (all when none) and the
    public folders."""
    for run in runs or sorted(p.name for p in (src / "lab").iterdir() if p.is_dir()):
        add(src / "lab" / run)
    for f in (src / "lab").glob("*.md"):
        shutil.copy2(f, BUNDLE / "lab" / f.name)
    if not runs:
        for name in PLAIN:
            shutil.rmtree(BUNDLE / name, ignore_errors=True)
            shutil.copytree(src / name, BUNDLE / name)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "bundle":
        bundle(Path(sys.argv[2]), sys.argv[3:])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "add":
        print(add(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else None))
    else:
        sys.exit(__doc__)
