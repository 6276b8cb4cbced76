"""The input files: finding them under the folder (rotated sets, compressed files, links out of the folder,
what is skipped and why) and what ingest knows of each before reading it (``InputFile``). Reading them is
``sources``'s."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import outdir
from . import linebytes as lb

OUTPUT_MARKER = outdir.MARKER  # written into every output folder; ingest skips logscope's outputs there
COMPRESSED = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bzip2", ".xz": "xz"}
_ROTATION = re.compile(r"^(?P<base>.+?)\.(?P<n>\d{1,3})$")
# kubelet's rotated container logs: 0.log.20261129-083000 (then .gz), named by the time of the rotation
_STAMPED = re.compile(r"^(?P<base>.+?)\.(?P<ts>\d{8}-\d{6})$")
# what a file's first bytes say it is when it is no log (whatever its name: a log named .png is read, an image
# named .log is not): (leading bytes, what it is); HTML also after white space, in any case
_NOT_LOGS = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PAR1", "a Parquet table"),
    (b"RIFF", "a RIFF file (a WebP image, a WAV sound)"),
)
_HTML = (b"<!doctype html", b"<html")
FIRST_BYTES = 64  # enough for the signatures above, after a little white space
# why a file or folder found under the input is not read (files.parquet's message of its 'skipped' row)
HIDDEN_FOLDER = (
    "a hidden folder (its name starts with '.'): not entered, as version control, caches and editors keep their "
    "files there; to read it, give it as the input folder (or copy its logs out)"
)
OWN_FILE = "a file logscope writes beside its outputs (a lock, marker or probe): not read"


@dataclass
class InputFile:
    path: Path
    rel: str
    size: int
    compression: str | None
    stream_key: str  # rotated and compressed files of one log share it: ``rel`` without those suffixes
    rotation: int  # 0 for the live file, N for file.N (older)
    messages: list[str] = field(default_factory=list)
    mtime_ns: int | None = None  # from the same stat as ``size`` (ingest's fingerprint)
    envelope: str | None = (
        None  # records around the lines: container runtime, syslog (``logscope.ingest.envelopes``)
    )
    envelope_time: bool = False  # keep the runtime's time in front of each line (the format reads it)
    cr_ends: bool = False  # lines end in a lone CR (CR-only or mixed endings; ``head`` decides), not only LF
    skipped: bool = (
        False  # a link out of the input folder, not followed: nothing of it is read (``discover``)
    )

    def quiet(self) -> InputFile:
        """The same file, with its own message list: a side read (detection, comparison) says nothing."""
        return InputFile(
            self.path,
            self.rel,
            self.size,
            self.compression,
            self.stream_key,
            self.rotation,
            envelope=self.envelope,
            envelope_time=self.envelope_time,
            cr_ends=self.cr_ends,
        )


LINK_OUT = "a link out of the input folder: not read (--follow-links reads it)"  # files.parquet's message


def not_a_log(first: bytes) -> str | None:
    """What a file is when its first bytes say it is no log (an image, a document, a table, a web page), as
    files.parquet's message of its 'skipped' row; None for anything else (read, its format detected)."""
    for magic, what in _NOT_LOGS:
        if first.startswith(magic):
            return f"{what} (its first bytes say so): not a log, not read"
    if first.lstrip().lower().startswith(_HTML):
        return "a web page (its first bytes say so): not a log, not read"
    return None


@functools.lru_cache(maxsize=4096)
def resolved(d: Path) -> Path:
    """A folder's real path, resolved once for all its files (10,000 files: 2 s of ``Path.resolve``); forgotten
    at each ``discover`` (a link may have changed between two ingests of one process)."""
    return d.resolve()


def discover(root: Path, follow_links: bool = False) -> list[InputFile]:
    """All candidate input files under ``root`` (or ``root`` itself); ``skipped`` says what was left out. A
    folder that cannot be listed (no permission, a path longer than PATH_MAX) and a file that cannot be
    stat'ed (a symlink loop) are entries too, of size -1 with the reason in their messages: nothing is
    skipped unsaid.

    A symbolic link whose target lies outside ``root`` is not read unless ``follow_links``: a link to a
    file holding a password would copy its text into the report, which is attached to tickets. Such a link
    is listed, as read of nothing (format 'skipped', message ``LINK_OUT``), so that the report says so."""
    root = Path(root)
    resolved.cache_clear()
    paths, left, problems, links_out = _walk(root, follow_links)
    base = root if root.is_dir() else root.parent
    out = [_link_out(p, base) if p in links_out else _input_file(p, base) for p in paths]
    for p, why in sorted(problems.items()):
        rel = _shown(p, base)
        rel += "/" if p != base else ""
        out.append(InputFile(p, rel, -1, None, rel, 0, messages=[why]))
    for p, why in left:  # every file and folder not read is a row, with why (issue #44)
        out.append(_left_out(p, base, why))
    return out


def _walk(
    root: Path, follow_links: bool
) -> tuple[list[Path], list[tuple[Path, str]], dict[Path, str], set[Path]]:
    """The files to read, those left out with why, the folders that could not be listed, and the links out of
    ``root`` (listed, not read). A folder logscope once wrote its outputs into (its marker) is read like any
    other but for logscope's own outputs: logs copied there later are data. A hidden file is read like any other
    (``.vllm-server.log`` is a log); a hidden folder is not entered (``.git``, caches, editors' copies). Links to
    folders are entered only with ``follow_links``, each real folder once (a link to a parent is no loop)."""
    if root.is_file():
        return [root], [], {}, set()
    real_root = root.resolve()
    paths: list[Path] = []
    left: list[tuple[Path, str]] = []
    problems: dict[Path, str] = {}
    links_out: set[Path] = set()
    seen: set[tuple[int, int]] = set()

    def unlisted(e: OSError) -> None:  # os.walk's errors: a folder it could not list
        problems[Path(e.filename) if e.filename else root] = f"folder not read: {e.strerror or e}"

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted, followlinks=follow_links):
        here = Path(dirpath)
        if follow_links:
            try:
                st = os.stat(dirpath)
            except OSError:
                dirnames[:] = []
                continue
            if (st.st_dev, st.st_ino) in seen:
                dirnames[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
        for d in sorted(d for d in dirnames if d.startswith(".")):
            left.append((here / d, HIDDEN_FOLDER))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in dirnames:  # a link to a folder out of ``root``: listed (os.walk does not enter it)
            link = here / name
            if not follow_links and _outside(link, real_root):
                links_out.add(link)
                paths.append(link)
        marked = OUTPUT_MARKER in filenames
        for fn in sorted(filenames):
            if marked and outdir.is_output_name(fn):
                left.append((here / fn, OWN_OUTPUT))
            elif fn.startswith(".logscope-"):  # its lock, marker or a cluster's probe, in a folder of logs
                left.append((here / fn, OWN_FILE))
            else:
                paths.append(here / fn)
                if not follow_links and _outside(here / fn, real_root):
                    links_out.add(here / fn)
    return paths, left, problems, links_out


def _outside(p: Path, real_root: Path) -> bool:
    """A link whose target lies out of the folder. A loop of links leads nowhere: it is read (and found
    unreadable, said so), not reported as leaving the folder."""
    try:
        if not p.is_symlink():
            return False
        p.resolve(strict=False).relative_to(real_root)
        return False
    except ValueError:
        return True
    except (OSError, RuntimeError):  # a loop of links (RuntimeError before Python 3.13), a name too long
        return False


OWN_OUTPUT = f"an output logscope wrote (the folder holds its marker, {OUTPUT_MARKER}): not read"


def _left_out(p: Path, base: Path, why: str) -> InputFile:
    """A file or folder not read for its name: listed, as read of nothing, with why."""
    try:
        mtime = p.lstat().st_mtime_ns
    except OSError:
        mtime = None
    rel = _shown(p, base) + ("/" if why == HIDDEN_FOLDER else "")
    f = InputFile(p, rel, 0, None, rel, 0, mtime_ns=mtime, messages=[why])
    f.skipped = True
    return f


def _link_out(p: Path, base: Path) -> InputFile:
    """A link out of the folder: listed, nothing of its target read (not even its size)."""
    try:
        mtime = p.lstat().st_mtime_ns
    except OSError:
        mtime = None
    rel = _shown(p, base)
    f = InputFile(p, rel, 0, None, rel, 0, mtime_ns=mtime)
    f.skipped = True
    f.messages.append(LINK_OUT)
    return f


def _input_file(p: Path, base: Path) -> InputFile:
    messages = []
    try:
        st = p.stat()
        size, mtime = st.st_size, st.st_mtime_ns
    except OSError as e:  # a symlink loop, a dangling link, no permission, a path too long
        size, mtime = -1, None
        messages.append(f"unreadable: {e.strerror or e}")
    suffix = p.suffix.lower()
    comp = COMPRESSED.get(suffix)
    name = p.name[: -len(suffix)] if comp else p.name
    m = _ROTATION.match(name) or _STAMPED.match(name)
    stem = m.group("base") if m else name
    if comp is not None and size > 0 and not lb.magic(p, comp):
        messages.append(
            f"named {suffix} but not {comp}-compressed (its first bytes say so): read as plain text"
        )
        comp = None
    rel = _shown(p, base)
    if rel != str(p.relative_to(base) if p != base else p.name):
        messages.append("its name is not valid UTF-8: shown with the bad bytes as \\x escapes")
    # the stream: the path without rotation and compression suffixes, relative to the input folder as ``rel``
    # (the tables do not depend on where the folder is mounted: a cluster's workers see it resolved)
    return InputFile(
        p, rel, size, comp, _shown(p.parent / stem, base), _rotation(m), messages=messages, mtime_ns=mtime
    )


def _shown(p: Path, base: Path) -> str:
    """``p`` relative to ``base`` as text (tables and pages hold only text): a name's bytes that are not UTF-8
    written as ``\\xff``."""
    return path_text(str(p.relative_to(base)) if p != base else p.name)


def path_text(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def rotation_of(rel: str) -> int:
    """How old a file of a rotated set is by its path (0: the live file), as ``InputFile.rotation`` says."""
    name = Path(rel).name
    suffix = Path(name).suffix.lower()
    name = name[: -len(suffix)] if suffix in COMPRESSED else name
    return _rotation(_ROTATION.match(name) or _STAMPED.match(name))


def _rotation(m: re.Match | None) -> int:
    """How old a rotated file is (0: the live file; larger: older): N of ``file.N``, or for kubelet's
    ``file.YYYYMMDD-HHMMSS`` the time of the rotation counted back from the year 9999."""
    if m is None:
        return 0
    if "ts" in m.groupdict():
        return 99991231235959 - int(m.group("ts").replace("-", ""))
    return int(m.group("n"))
