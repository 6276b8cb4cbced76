"""The bytes of a log as lines: line ends (LF, and lone CRs in a file of CR endings), a BOM, NUL bytes, a line
too long to keep whole. Pure helpers of ``sources``' readers: whatever the bytes, every line is counted once, as
``wc -l`` would (a lone CR counts in a file of CR endings). The split itself is the compiled scanner's
(``logscope._scan``, scan/src/lines.rs)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl

from .. import _scan
from ..parsers.base import MAX_LINE_CHARS  # the reader cuts at the parsers' contract

LONE_CR_B = re.compile(rb"\r(?!\n)")


def no_bom(data: bytes) -> bytes:
    return data[3:] if data.startswith(b"\xef\xbb\xbf") else data


def no_nuls(data: bytes | memoryview, f) -> bytes:
    """``data`` without its NUL bytes (a zero-filled block in a log), said once per file; called only where the
    block holds one (``in`` on bytes is a memchr: no cost on a clean log)."""
    if not any(m.startswith("NUL bytes") for m in f.messages):
        f.messages.append(
            "NUL bytes (a block the file system zero-filled, e.g. after a crash) were left out; "
            "the text around them was read"
        )
    return bytes(data).replace(b"\x00", b"")


def line_end(data: bytes, cr: bool) -> int:
    """Where the last line of ``data`` ends: its last LF, or, in a file of CR endings, a later lone CR that is
    not the last byte (which may be the first half of a CRLF split between two blocks); -1 if none."""
    nl = data.rfind(b"\n")
    if not cr:
        return nl
    at = data.rfind(b"\r", nl + 1, len(data) - 1)
    return at if at > nl else nl


def ends(data: bytes, cr: bool) -> int:
    """The line ends of ``data``: LFs, and in a file of CR endings CRs not followed by an LF."""
    n = data.count(b"\n")
    return n + data.count(b"\r") - data.count(b"\r\n") if cr and b"\r" in data else n


def cr_ends(sample: bytes) -> bool:
    """Whether a file's lines end in lone CRs (CR-only or mixed endings): at least half as many as LFs (CR LF
    included). A few CRs inside lines of LF or CR LF endings (a progress bar redrawn) are not line ends (``wc -l``
    does not count them)."""
    lone = sample.count(b"\r") - sample.count(b"\r\n")
    return lone > 0 and 2 * lone >= sample.count(b"\n")


def past_line(data: bytes, cr: bool) -> tuple[bytes, bool]:
    """What follows the end of the line ``data`` starts inside, and whether the line goes on past ``data``."""
    ends = [i for i in (data.find(b"\n"), data.find(b"\r") if cr else -1) if i >= 0]
    if not ends:
        return b"", True
    end = min(ends)
    if data[end : end + 2] == b"\r\n":
        end += 1
    return data[end + 1 :], False


def whole_chars(data: bytes) -> bytes:
    """``data`` without a UTF-8 character cut at its end (a cut line must not read as invalid UTF-8)."""
    end = len(data)
    while end > 0 and end > len(data) - 4 and (data[end - 1] & 0xC0) == 0x80:
        end -= 1
    return data[: end - 1] if end > 0 and data[end - 1] >= 0xC0 else data[:end]


def lines_frame(
    data: bytes | memoryview, offset: int, cr: bool, decode: Callable[[bytes | memoryview], str]
) -> tuple[pl.DataFrame, int]:
    """The lines of ``data`` (``line_no`` from ``offset + 1``, ``line``) and how many were cut to MAX_LINE_CHARS. In a
    file of CR endings (``cr``) a lone CR ends a line too, but the block's last byte (half of a CR LF cut between two
    blocks). Bytes that are not UTF-8 are replaced as ``decode`` replaces them (it says so in the file's messages)."""
    got = _scan.split_lines(data, offset, cr, MAX_LINE_CHARS)
    if got is None:
        got = _scan.split_lines(decode(data).encode(), offset, cr, MAX_LINE_CHARS)
    batch, cut = got
    return pl.DataFrame(batch), cut


def slices(df: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
    """``df`` in slices of at most ``rows`` rows (views: no copy)."""
    for start in range(0, max(df.height, 1), rows):
        yield df.slice(start, rows)


MAGIC = {"gzip": (b"\x1f\x8b",), "zstd": (b"\x28\xb5\x2f\xfd",), "bzip2": (b"BZh",), "xz": (b"\xfd7zXZ\x00",)}


def magic(p: Path, comp: str) -> bool:
    """Whether the file starts as a ``comp`` stream does (an unreadable one is left to say so when opened)."""
    try:
        with open(p, "rb") as fh:
            start = fh.read(6)
    except OSError:
        return True
    return start.startswith(MAGIC[comp])
