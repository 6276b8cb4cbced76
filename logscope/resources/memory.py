"""The memory this process may take, read without polars (the CLI reads it before polars is loaded, so that
it can still choose how polars' allocator returns memory: ``tune_allocator``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

AVAILABLE_SHARE = 0.8  # of the memory free when ingest ends: the default budget
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
# polars allocates with jemalloc, which keeps the pages a stage frees for later reuse, so a stage that
# follows a large one starts from the first one's peak (5 GB bench folder correlated in slices: diagnose
# peaked at 1.53 GB after correlate, 0.93 GB alone). With a background thread purging freed pages after
# 0.2 s the whole analyze peaks at 0.94-1.03 GiB, for ~7 % more time (1 GB folder: 17.9 against 16.7 s), so it is
# asked for only when memory is tight (``tight``); a value the user set is kept. 20 ms, not 200: a 32-replica fleet
# under --max-memory 250M peaked at 225-237 MiB with 200 ms at a load of 4-6, 203-217 with 20 ms, for +3 % CPU
# (0 ms: 192-197, but +30 % CPU in the kernel handing each page back; docs/performance.md item 46)
ALLOCATOR_ENV = "_RJEM_MALLOC_CONF"
RETURN_FREED = "background_thread:true,dirty_decay_ms:20,muzzy_decay_ms:0"
# The compiled scanner (logscope._scan) and Python allocate with glibc's malloc, not polars' jemalloc. glibc raises
# its mmap threshold each time it frees a large mapped block (up to 32 MiB), after which the scanner's chunk-sized
# buffers come from its heaps and their freed pages stay there: 49 MiB held after a fleet's ingest, that
# malloc_trim handed back. A fixed threshold keeps every buffer of 128 KiB or more mapped and unmapped whole (the
# same fleet's ingest: 187-196 -> 163-165 MiB peak, 155 -> 118 MiB at its end). Set only when memory is tight:
# it costs page faults (Dask's nanny sets the like for its workers: docs/performance.md item 39).
GLIBC_ENV = "MALLOC_MMAP_THRESHOLD_"
GLIBC_MMAP = 128 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
# analysing a folder needs about NEED_BASE + NEED_PER_BYTE x its bytes (5 GB bench folder, whole: 3.6 GB;
# logscope.resources.budget estimates it from the tables once they exist); a compressed file counts COMPRESSED times
NEED_BASE, NEED_PER_BYTE, COMPRESSED = 512 * 2**20, 0.75, 8
COMPRESSED_SUFFIXES = (".gz", ".zst", ".bz2", ".xz")


def gib(n: int) -> str:
    """A size as people read it; under 1 MiB in KiB (a 256 KiB batch read "0 MiB" in the budget's note)."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def parse_size(text: str) -> int | None:
    """'4G', '512M', '1.5GiB', '0' -> bytes; 'none' / 'off' -> None (no limit). ValueError otherwise."""
    if text.strip().lower() in ("none", "off", "unlimited"):
        return None
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size: give e.g. 4G, 512M or none")
    return int(float(m[1]) * 1024 ** " kmgt".index((m[2] or " ").lower()))


def available_bytes() -> int | None:
    """Memory this process may still take: MemAvailable, capped by the memory limits of its cgroup and
    of the cgroups above it (containers, systemd slices)."""
    free = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for cap in _cgroup_room():
        free = cap if free is None else min(free, cap)
    return free


# (mount, limit file, usage file, memory.stat key of the reclaimable page cache) for cgroup v2 and v1
_CGROUP_FILES = {
    "v2": [
        ("/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"),
        ("/sys/fs/cgroup/unified", "memory.max", "memory.current", "inactive_file"),
    ],
    "v1": [
        ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
    ],
}


def _cgroup_room(proc_cgroup: str = "/proc/self/cgroup", files: dict | None = None) -> list[int]:
    """Room left under each memory limit that applies to this process: limit - (usage - the inactive page
    cache, which the kernel reclaims before it kills: reading a 5 GB folder fills the cache)."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return []
    rooms = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        kind = (
            "v2" if parts[0] == "0" and parts[1] == "" else "v1" if "memory" in parts[1].split(",") else None
        )
        if kind is None:
            continue
        for mount, limit_f, usage_f, cache_key in (files or _CGROUP_FILES)[kind]:
            d = Path(mount + parts[2].rstrip("/"))
            while True:  # the group and every group above it: the tightest limit wins
                room = _room(d, limit_f, usage_f, cache_key)
                if room is not None:
                    rooms.append(room)
                if d == Path(mount) or d == d.parent:
                    break
                d = d.parent
    return rooms


def _room(d: Path, limit_f: str, usage_f: str, cache_key: str) -> int | None:
    try:
        limit_text = (d / limit_f).read_text().strip()
        if limit_text == "max":
            return None
        limit, usage = int(limit_text), int((d / usage_f).read_text().strip())
    except (OSError, ValueError):
        return None
    if limit >= 2**60:  # "no limit" in cgroup v1
        return None
    cache = 0
    try:
        for line in (d / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == cache_key:
                cache = int(v)
    except (OSError, ValueError):
        pass
    return max(0, limit - max(0, usage - cache))


def default_budget() -> int | None:
    free = available_bytes()
    return None if free is None else int(free * AVAILABLE_SHARE)


def limit_of(max_memory: int | str | None) -> int | None:
    """A limit given in bytes, or as the text ``--max-memory`` takes ('4G', '512M', 'none': ``parse_size``, whose
    ValueError it raises); None for 'auto' (none given) and None (no limit)."""
    if max_memory == "auto" or max_memory is None:
        return None
    return parse_size(max_memory) if isinstance(max_memory, str) else max_memory


def budget_of(max_memory: int | str | None) -> int | None:
    """``--max-memory`` / ``AnalyzeOptions.max_memory`` in bytes: 'auto' is ``default_budget()``, None no limit,
    a size's text what ``parse_size`` reads (a notebook's ``AnalyzeOptions(max_memory="2G")`` as on the command
    line)."""
    return default_budget() if max_memory == "auto" else limit_of(max_memory)


def input_bytes(root: Path) -> int:
    """The bytes of the logs under ``root``, a compressed file counted as its likely expanded size."""
    total = 0
    for p in input_paths(root):
        try:
            n = p.stat().st_size
        except OSError:
            continue
        total += n * COMPRESSED if p.suffix in COMPRESSED_SUFFIXES else n
    return total


def input_paths(root: Path) -> Iterator[Path]:
    """The files under ``root`` (or ``root`` itself) that can be reached; a folder that cannot be listed
    (no permission, a path past PATH_MAX) or a link that loops is passed over here (ingest names them)."""
    try:
        if root.is_file():
            yield root
            return
    except OSError:
        return
    for dirpath, _dirs, files in os.walk(root):  # os.walk: errors ignored, links to folders not followed
        for fn in files:
            p = Path(dirpath) / fn
            try:
                if p.is_file():
                    yield p
            except OSError:
                continue


def tight(root: Path, budget: int | None) -> bool:
    """True when analysing ``root`` may come near the budget (its likely whole need above half of it)."""
    return budget is not None and NEED_BASE + NEED_PER_BYTE * input_bytes(root) > budget / 2


# what polars itself writes into the variable when it loads (polars/__init__.py), which a process started by
# one that loaded polars (a notebook, a test runner, the bench) inherits: no choice of the user's
POLARS_OWN = frozenset({"dirty_decay_ms:500", "muzzy_decay_ms:1000", "thp:always", "metadata_thp:always"})


def user_setting() -> str | None:
    """The allocator setting the user made, if any (polars' own defaults, inherited, are none)."""
    conf = os.environ.get(ALLOCATOR_ENV, "")
    return conf if any(o and o not in POLARS_OWN for o in conf.split(",")) else None


def tune_allocator(root: Path, budget: int | None) -> bool:
    """Ask polars' allocator to return freed memory promptly when memory is tight; only possible before
    polars is loaded, and never over a setting the user made. True when it was set."""
    if user_setting() is not None or "polars" in sys.modules or not tight(root, budget):
        return False
    os.environ[ALLOCATOR_ENV] = RETURN_FREED
    return True


def tune_glibc(root: Path, budget: int | None) -> bool:
    """When memory is tight, fix glibc's mmap threshold in this process (``mallopt``: it can be set at any time)
    and in the processes it starts (the ingest's own: ``GLIBC_ENV``), unless the variable was set already (the
    user's choice, or this process started with it). True when it was set; False off glibc."""
    if GLIBC_ENV in os.environ or not tight(root, budget):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        if libc.mallopt(_M_MMAP_THRESHOLD, GLIBC_MMAP) != 1:
            return False
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator is left as it is
        return False
    os.environ[GLIBC_ENV] = str(GLIBC_MMAP)
    return True


def returns_freed() -> bool:
    """True when polars' allocator was started handing freed pages back (``tune_allocator``'s setting). Polars
    puts its own defaults before it when it loads; jemalloc takes the last value of each option."""
    return os.environ.get(ALLOCATOR_ENV, "").endswith(RETURN_FREED)
