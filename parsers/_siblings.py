"""Files a parser reads beside its log (nginx_access the nginx.conf's log_format, vllm_bench the stdout naming its
result file), and what diagnose reads again of them (the nginx.conf's directives). A collection compresses them as it
compresses the logs, and ingest detects them through that: so they are read through it too, by their first bytes as
ingest does, and named without the compression suffix (``nginx.conf.gz`` is ``nginx.conf``)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
from pathlib import Path
from typing import Any

_OPENERS = ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open), (b"\xfd7zXZ\x00", lzma.open))
_ZSTD = b"\x28\xb5\x2f\xfd"
_SUFFIX = re.compile(r"\.(gz|zst|zstd|bz2|xz)$", re.I)  # ingest.inputs.COMPRESSED's


def plain_name(name: str) -> str:
    """A file's name without its compression suffix."""
    return _SUFFIX.sub("", name)


def read_small(path: Path, limit: int) -> str | None:
    """The text of a small file, decompressed where it is compressed; None when it cannot be read (unreadable,
    truncated, corrupt) or holds more than ``limit`` bytes."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(6)
        reader: Any  # a file, or a decompressing stream over one
        if start.startswith(_ZSTD):
            import zstandard  # only for a .zst file

            reader = zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
        else:
            opener = next((o for magic, o in _OPENERS if start.startswith(magic)), open)
            reader = opener(path, "rb")
        with reader:
            data = reader.read(limit + 1)
    except (OSError, EOFError, lzma.LZMAError, ValueError):
        return None
    return None if len(data) > limit else data.decode("utf-8", errors="replace")
