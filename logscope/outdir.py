"""The output folder: never someone else's, one writer at a time, and never half-written.

A run writes into a staging folder inside OUT (``.logscope-staging-<pid>``) and renames each output into
place only when everything is written: a kill, a full disk or an error leaves OUT's previous complete
outputs (or none), never half of a new run's beside them. A lock file (``flock``) makes a second run
writing the same OUT wait for the first; the kernel drops the lock of a killed run, and the next run
clears what it left. The marker lists the files logscope wrote, so that an output another run no longer
writes is removed and nothing else in the folder is ever touched. Only the standard library here: the CLI
checks the folder before polars is loaded.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from . import jsontext
from .errors import ExitCode, LogscopeError

try:
    import fcntl
except ImportError:  # not POSIX: no lock (a second writer is then not held back)
    fcntl = None  # type: ignore[assignment]

MARKER = ".logscope-output"  # written into every output folder (logscope.ingest.sources.OUTPUT_MARKER)
LOCK = ".logscope-lock"
STAGING = ".logscope-staging-"
DEBUG_FILE = "logscope-debug.txt"  # --debug's traceback
# the files logscope writes beside its tables: an input folder that once was an output skips only these
OUTPUT_FILES = frozenset(
    {
        "ingest.json",
        "correlation.json",
        "diagnosis.json",
        "summary.json",
        "summary.md",
        "report.html",
        "timeline.png",
        "traces.otlp.jsonl",  # analyze --export-traces, logscope export-traces
        DEBUG_FILE,
        MARKER,
        LOCK,
    }
)
_OURS = {MARKER, LOCK, DEBUG_FILE}  # what a folder may hold and still be one logscope may write into
_PSEUDO = (Path("/proc"), Path("/sys"), Path("/dev"))  # kernel file systems: never an output


def is_output_name(name: str) -> bool:
    """A file name logscope writes into its output folder (its tables, pages, notes)."""
    return name in OUTPUT_FILES or name.endswith(".parquet") or name.startswith(STAGING)


def check(out: Path, force: bool = False) -> None:
    """Refuse an output folder logscope must not write: a kernel file system, a file, or a folder holding
    files logscope did not write (unless ``force``)."""
    p = Path(out).resolve()
    for fs in _PSEUDO:
        if p == fs or p.is_relative_to(fs):
            raise LogscopeError(
                f"output folder {out} is under {fs}, a kernel file system",
                hint="give -o a folder on a disk",
                code=ExitCode.OUTPUT,
            )
    if p.exists() and not p.is_dir():
        raise LogscopeError(
            f"output {out} is a file, not a folder",
            hint="give -o a new folder, or one logscope wrote",
            code=ExitCode.OUTPUT,
        )
    if not p.is_dir() or force:
        return
    try:
        names = sorted(os.listdir(p))
    except OSError as e:
        raise unusable(out, e) from None
    foreign = [n for n in names if n not in _OURS and not n.startswith(STAGING)]
    if foreign and MARKER not in names:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise LogscopeError(
            f"output folder {out} holds files logscope did not write ({shown})",
            hint="give -o a new or empty folder, or add --force to write there anyway (logscope's outputs then "
            "replace files of the same name; nothing else is touched)",
            code=ExitCode.OUTPUT,
        )


def unusable(out: Path, e: OSError) -> LogscopeError:
    why = {
        errno.EROFS: "its file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "not permitted",
        errno.ENOSPC: "no space left on its device",
        errno.ENOTDIR: "a part of its path is a file",
        errno.EEXIST: "a file of that name exists",
    }
    return LogscopeError(
        f"output folder {out} is not usable: {(e.errno is not None and why.get(e.errno)) or e.strerror or str(e)}",
        hint="give -o a folder you can write to",
        code=ExitCode.OUTPUT,
    )


def _say(msg: str) -> None:
    print(f"logscope: note: {msg}", file=sys.stderr, flush=True)


@contextmanager
def staged(out: str | Path, note: Callable[[str], None] | None = None) -> Iterator[Path]:
    """A staging folder inside ``out`` to write a run's outputs into, locked against other runs; published
    into ``out`` when the block ends without an error, removed when it raises. ``out`` is created if need be
    (and removed again when the run fails and leaves nothing in it)."""
    out = Path(out)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise unusable(out, e) from None
    try:
        with _locked(out, note or _say):
            for old in out.glob(f"{STAGING}*"):  # a killed run's: no run holds it (we hold the lock)
                shutil.rmtree(old, ignore_errors=True)
            work = out / f"{STAGING}{os.getpid()}"
            try:
                work.mkdir()
            except OSError as e:
                raise unusable(out, e) from None
            try:
                yield work
                publish(work, out)
            except LogscopeError:
                raise
            except Exception as e:
                if full(e, work):  # told before the staging folder is removed, which frees its space
                    raise full_disk(out, e) from e
                raise
            finally:
                shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        if created:
            _remove_if_empty(out)
        raise


@contextmanager
def _locked(out: Path, note: Callable[[str], None]) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    while True:
        try:
            fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise unusable(out, e) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                note(f"{out} is being written by another logscope (pid {holder}): waiting for it to finish")
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:  # the run before removed the folder it had created (it failed): start again
                if os.stat(out / LOCK).st_ino != os.fstat(fd).st_ino:
                    raise FileNotFoundError
            except FileNotFoundError:
                out.mkdir(parents=True, exist_ok=True)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            try:
                yield
            finally:
                # removed while still held: a run waiting on this inode finds it gone and takes a new one
                # (the check above), so the folder keeps no lock file once no run writes it
                with suppress(OSError):
                    (out / LOCK).unlink()
            return
        finally:
            os.close(fd)


def link_in(out: Path, work: Path, names: Iterable[str]) -> None:
    """Bring ``out``'s files ``names`` into the staging folder (hard links: no copy), for a run that reuses
    them. A linked file is only read: the stages that write it do not run."""
    for n in names:
        src = out / n
        if not src.is_file():
            continue
        try:
            os.link(src, work / n)
        except OSError:
            shutil.copy2(src, work / n)


def publish(work: Path, out: Path) -> list[str]:
    """Rename every file of ``work`` into ``out``; then remove the outputs an earlier run wrote that this one
    did not (the marker lists them), and list this run's in the marker."""
    names = sorted(p.name for p in work.iterdir() if p.is_file() and p.name not in (MARKER, LOCK))
    before = _written(out)
    _mark(out, sorted(set(before) | set(names)))  # a kill in the renames leaves every name accounted for
    for n in names:
        os.replace(work / n, out / n)
    for n in set(before) - set(names):
        if is_output_name(n):
            (out / n).unlink(missing_ok=True)
    _mark(out, names)
    return names


def _written(out: Path) -> list[str]:
    try:
        doc = json.loads((out / MARKER).read_text(encoding="utf-8"))
        return [str(n) for n in doc.get("files") or []] if isinstance(doc, dict) else []
    except (OSError, ValueError):
        return []


def _mark(out: Path, names: list[str]) -> None:
    tmp = out / f"{MARKER}.tmp"
    doc = {
        "what": "a logscope output folder: the files logscope wrote here (it leaves any other alone)",
        "files": names,
    }
    jsontext.write(tmp, doc, jsontext.RECORD)
    os.replace(tmp, out / MARKER)


def _remove_if_empty(out: Path) -> None:
    """Remove a folder this run created when it holds nothing but logscope's lock and staging."""
    try:
        if all(n == LOCK or n.startswith(STAGING) for n in os.listdir(out)):
            shutil.rmtree(out, ignore_errors=True)
    except OSError:
        pass


def moved(paths: dict[str, Path], work: Path, out: Path) -> dict[str, Path]:
    """The published paths of files written in ``work``."""
    return {k: Path(out) / Path(p).relative_to(work) for k, p in paths.items()}


def write_debug(out: Path | None, text: str) -> tuple[Path | None, str | None]:
    """--debug's traceback file: in ``out`` when it can be written there whole, else in the temporary folder
    (``out``'s disk may be the full one); the path, or None, and why ``out`` could not hold it. A folder
    created for it and left empty by a failed write is removed again."""
    why = None
    if out is not None:
        out = Path(out)
        created = not out.exists()
        try:
            out.mkdir(parents=True, exist_ok=True)
            return _whole(out / DEBUG_FILE, text), None
        except OSError as e:
            why = e.strerror or str(e)
            if created:
                shutil.rmtree(out, ignore_errors=True)
            elif out.is_dir():  # a file cut short helps nobody
                (out / DEBUG_FILE).unlink(missing_ok=True)
    try:
        import tempfile

        return _whole(Path(tempfile.gettempdir()) / f"logscope-debug-{os.getpid()}.txt", text), why
    except OSError:
        return None, why


def _whole(p: Path, text: str) -> Path:
    """``p`` written with ``text`` and flushed to its disk (a full disk says so here, not after)."""
    data = text.encode("utf-8")
    with open(p, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    if p.stat().st_size != len(data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return p


_DISK_FULL = (
    os.strerror(errno.ENOSPC),
    os.strerror(errno.EDQUOT),
)  # 'No space left on device', 'Disk quota exceeded'


# free bytes under which a write that failed is taken for one that met a full disk: the largest write a run makes
# at once (a part of the ingest store's 64 MiB of rows), so that any failed write near the end of the disk counts.
# polars says a full disk in its own words, or none: a part cut short by ENOSPC came back as 'Invalid thrift'
FULL_MARGIN = 64 * 2**20
FULL_HINT = (
    "free space there or give another --out: the tables take ~2 % of the logs' size, and up to ~10 % while "
    "ingest runs (1 GB of logs: 23 MB, 92 MB at the peak)"
)


def room(path: Path) -> int | None:
    """Bytes free to this user on ``path``'s file system; None when it cannot be told."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


def full(e: BaseException, where: Path) -> bool:
    """Did ``e``, raised while writing under ``where``, meet a full disk? It says so, or the disk is (nearly)
    full now, before the run's files are removed."""
    if disk_full(e):
        return True
    free = room(where)
    return free is not None and free < FULL_MARGIN


def full_disk(where: Path, e: BaseException) -> LogscopeError:
    free = room(where)
    said = f"{free / 2**20:.1f} MiB free" if free is not None else "its free space unknown"
    return LogscopeError(
        f"no space left on the output folder's device ({_output_of(Path(where))}: {said}; the write that failed: "
        f"{type(e).__name__}: {e})",
        hint=FULL_HINT,
        code=ExitCode.OUTPUT,
    )


def _output_of(p: Path) -> Path:
    """The output folder a path under its staging folder belongs to (what the user named with -o)."""
    return next((q.parent for q in (p, *p.parents) if q.name.startswith(STAGING)), p)


def write_failed(out: Path, e: BaseException) -> LogscopeError:
    """A write into the output folder that failed: its disk full, or the folder not usable (exit 5 either way,
    never a parser's failure nor an internal error)."""
    if full(e, out):
        return full_disk(out, e)
    return LogscopeError(
        f"output folder {_output_of(Path(out))} is not usable: a write failed ({type(e).__name__}: {e})",
        hint="give -o a folder on a disk that works",
        code=ExitCode.OUTPUT,
    )


def disk_full(e: BaseException | None) -> bool:
    """Was ``e`` (or what caused it) a write to a full disk or an exhausted quota? polars reports its own
    writes' OS errors as text ('No space left on device (os error 28)')."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(e) for text in _DISK_FULL):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False
