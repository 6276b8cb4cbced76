"""The input files: finding them under the folder (rotated sets, compressed files, links out of the folder,
what is skipped and why) and what ingest knows of each before reading it (``InputFile``). Reading them is
``sources``'s."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import outdir
from . import linebytes as lb

OUTPUT_MARKER = outdir.MARKER  # written into every output folder; ingest skips logscope's outputs there
_COMPRESSED = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bzip2", ".xz": "xz"}
_ROTATION = re.compile(r"^(?P<base>.+?)\.(?P<n>\d{1,3})$")
# kubelet's rotated container logs: 0.log.20261129-083000 (then .gz), named by the time of the rotation
_STAMPED = re.compile(r"^(?P<base>.+?)\.(?P<ts>\d{8}-\d{6})$")
_SKIP_SUFFIXES = {
    ".parquet": "a table",
    ".png": "an image",
    ".jpg": "an image",
    ".jpeg": "an image",
    ".gif": "an image",
    ".pdf": "a document",
    ".html": "a web page",
    ".pyc": "compiled Python",
}


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


def discover(root: Path, follow_links: bool = False) -> list[InputFile]:
    """All candidate input files under ``root`` (or ``root`` itself); ``skipped`` says what was left out. A
    folder that cannot be listed (no permission, a path longer than PATH_MAX) and a file that cannot be
    stat'ed (a symlink loop) are entries too, of size -1 with the reason in their messages: nothing is
    skipped unsaid.

    A symbolic link whose target lies outside ``root`` is not read unless ``follow_links``: a link to a
    file holding a password would copy its text into the report, which is attached to tickets. Such a link
    is listed, as read of nothing (format 'skipped', message ``LINK_OUT``), so that the report says so."""
    root = Path(root)
    paths, _, problems, links_out = _walk(root, follow_links)
    base = root if root.is_dir() else root.parent
    out = [_link_out(p, base) if p in links_out else _input_file(p, base) for p in paths]
    for p, why in sorted(problems.items()):
        rel = _shown(p, base)
        rel += "/" if p != base else ""
        out.append(InputFile(p, rel, -1, None, rel, 0, messages=[why]))
    return out


def skipped(root: Path, follow_links: bool = False) -> list[tuple[str, str]]:
    """The files under ``root`` that are not read, each with why (path relative to ``root``)."""
    return _walk(Path(root), follow_links)[1]


def _walk(
    root: Path, follow_links: bool
) -> tuple[list[Path], list[tuple[str, str]], dict[Path, str], set[Path]]:
    """The files to read, those left out with why, the folders that could not be listed, and the links out of
    ``root`` (listed, not read). A folder logscope once wrote its outputs into (its marker) is read like any
    other but for logscope's own outputs: logs copied there later are data. Links to folders are entered only
    with ``follow_links``, each real folder once (a link to a parent is no loop)."""
    if root.is_file():
        return [root], [], {}, set()
    real_root = root.resolve()
    paths: list[Path] = []
    left: list[tuple[str, str]] = []
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
            left.append((_shown(here / d, root) + "/", "a hidden folder (its name starts with '.')"))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in dirnames:  # a link to a folder out of ``root``: listed (os.walk does not enter it)
            link = here / name
            if not follow_links and _outside(link, real_root):
                links_out.add(link)
                paths.append(link)
        marked = OUTPUT_MARKER in filenames
        for fn in sorted(filenames):
            rel = _shown(here / fn, root)
            suffix = Path(fn).suffix.lower()
            if marked and outdir.is_output_name(fn):
                left.append(
                    (rel, "an output logscope wrote (the folder holds its marker, " + OUTPUT_MARKER + ")")
                )
            elif fn.startswith("."):
                left.append((rel, "a hidden file (its name starts with '.')"))
            elif suffix in _SKIP_SUFFIXES:
                left.append((rel, f"a {suffix} file: {_SKIP_SUFFIXES[suffix]}, not a log"))
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
    comp = _COMPRESSED.get(suffix)
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
    return _text(str(p.relative_to(base)) if p != base else p.name)


def _text(path: str) -> str:
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _rotation(m: re.Match | None) -> int:
    """How old a rotated file is (0: the live file; larger: older): N of ``file.N``, or for kubelet's
    ``file.YYYYMMDD-HHMMSS`` the time of the rotation counted back from the year 9999."""
    if m is None:
        return 0
    if "ts" in m.groupdict():
        return 99991231235959 - int(m.group("ts").replace("-", ""))
    return int(m.group("n"))
