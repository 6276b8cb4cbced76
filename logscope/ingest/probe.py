"""A file's first look, before its format is detected: what it is when it holds no text to detect (a link out of the
folder, an empty or unreadable file, an image or document by its first bytes, a binary file), else its head lines."""

from __future__ import annotations

from . import inputs, sources
from .streams import FileState


def first_look(f: sources.InputFile) -> FileState | list[str]:
    """A file's head lines; a FileState already for a file that holds no text to detect."""
    if (
        f.skipped
    ):  # a link out of the input folder, a hidden folder (``sources.discover``): its message says why
        return FileState(f, "skipped", "other", 0.0, "")
    if f.size == 0:
        st = FileState(f, "empty", "other", 0.0, "")
        f.messages.append("empty file")
        return st
    if f.size < 0:
        if not f.messages:
            f.messages.append("unreadable: cannot stat the file")
        return FileState(f, "unreadable", "other", 0.0, "")
    try:  # a file that cannot be opened (no permission) is unreadable, not an empty file of no format
        with open(f.path, "rb") as fh:
            first = fh.read(inputs.FIRST_BYTES)
    except OSError as e:
        f.messages.append(f"unreadable: {e.strerror or e}")
        return FileState(f, "unreadable", "other", 0.0, "")
    what = None if f.compression else inputs.not_a_log(first)
    if what:  # an image, a document: known by its bytes, whatever its name (a log named .png is read)
        f.messages.append(what)
        f.skipped = True
        return FileState(f, "skipped", "other", 0.0, "")
    lines, binary = sources.head(f)
    if binary:
        f.messages.append(
            "binary file (control bytes in the first 8 KiB of text): not parsed, lines counted as "
            "unrecognized"
        )
        return FileState(f, "binary", "other", 0.0, "", binary=True)
    return lines
