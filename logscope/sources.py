"""Finding input files and reading them as chunks of lines, whatever state they are in.

Compressed files (.gz, .zst, .bz2, .xz) are decompressed as streams; a rotated set
(``vllm.log``, ``vllm.log.1``, ``vllm.log.2.gz``) is grouped into one stream, oldest first.
Nothing here raises on bad input: problems become messages attached to the file.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

# 4 MiB: large enough that a parser's fixed per-chunk cost stays small (~4 % slower than 8 MiB on
# the 1 GB bench), small enough that the workers' intermediate columns (JSON decoding takes ~30x
# the chunk) keep a 5 GB folder under 1 GB of RSS; docs/performance.md has the measurements
CHUNK_BYTES = 4 * 1024 * 1024
HEAD_BYTES = 64 * 1024
HEAD_LINES = 200
MAX_LINE_CHARS = 1_000_000  # longer lines are cut (and said so): a regex over 10 MB buys nothing
OUTPUT_MARKER = ".logscope-output"  # written into every output folder; ingest skips such folders

_COMPRESSED = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bzip2", ".xz": "xz"}
_ROTATION = re.compile(r"^(?P<base>.+?)\.(?P<n>\d{1,3})$")
_SKIP_SUFFIXES = {".parquet", ".png", ".jpg", ".jpeg", ".gif", ".pdf", ".html", ".pyc"}


@dataclass
class InputFile:
    path: Path
    rel: str
    size: int
    compression: str | None
    stream_key: str
    rotation: int  # 0 for the live file, N for file.N (older)
    messages: list[str] = field(default_factory=list)
    mtime_ns: int | None = None  # from the same stat as ``size`` (ingest's fingerprint)

    def quiet(self) -> InputFile:
        """The same file, with its own message list: a side read (detection, comparison) says nothing."""
        return InputFile(self.path, self.rel, self.size, self.compression, self.stream_key, self.rotation)


def discover(root: Path) -> list[InputFile]:
    """All candidate input files under ``root`` (or ``root`` itself), skipping logscope outputs."""
    root = Path(root)
    if root.is_file():
        paths = [root]
        base = root.parent
    else:
        base = root
        paths = []
        for dirpath, dirnames, filenames in os.walk(root):
            if OUTPUT_MARKER in filenames:
                dirnames[:] = []
                continue
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in sorted(filenames):
                if fn.startswith(".") or Path(fn).suffix.lower() in _SKIP_SUFFIXES:
                    continue
                paths.append(Path(dirpath) / fn)
    out = []
    for p in paths:
        try:
            st = p.stat()
            size, mtime = st.st_size, st.st_mtime_ns
        except OSError:
            size, mtime = -1, None
        suffix = p.suffix.lower()
        comp = _COMPRESSED.get(suffix)
        name = p.name[: -len(suffix)] if comp else p.name
        m = _ROTATION.match(name)
        rotation = int(m.group("n")) if m else 0
        stem = m.group("base") if m else name
        rel = str(p.relative_to(base)) if p != base else p.name
        out.append(InputFile(p, rel, size, comp, str(p.parent / stem), rotation, mtime_ns=mtime))
    return out


def _open_raw(f: InputFile):
    if f.compression == "gzip":
        return gzip.open(f.path, "rb")
    if f.compression == "zstd":
        import zstandard  # only needed for .zst inputs

        return zstandard.ZstdDecompressor().stream_reader(open(f.path, "rb"), closefd=True)
    if f.compression == "bzip2":
        return bz2.open(f.path, "rb")
    if f.compression == "xz":
        return lzma.open(f.path, "rb")
    return open(f.path, "rb")


def _read_blocks(f: InputFile, block: int) -> Iterator[bytes]:
    """Decompressed byte blocks; a truncated or corrupt archive ends the stream with a message."""
    try:
        fh = _open_raw(f)
    except OSError as e:
        f.messages.append(f"cannot open: {e.strerror or e}")
        return
    # read1 hands out what has been decompressed so far, so a truncated archive still yields
    # everything before the cut (read(n) would raise and lose the partial block)
    read = getattr(fh, "read1", fh.read) if f.compression else fh.read
    step = min(block, 1 << 20) if f.compression else block
    with fh:
        pending: list[bytes] = []
        size = 0
        while True:
            try:
                data = read(step)
            except EOFError:
                f.messages.append(f"{f.compression} stream is truncated: read what came before the cut")
                data = b""
            except Exception as e:  # corrupt archive (OSError, lzma/zstd errors): keep what came before
                f.messages.append(f"{f.compression or 'file'} stream is corrupt ({e}): read what came before")
                data = b""
            if data:
                pending.append(data)
                size += len(data)
                if size < block:
                    continue
            if pending:
                yield b"".join(pending)
                pending, size = [], 0
            if not data:
                return


def _decode(data: bytes | memoryview, f: InputFile) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        if not any("invalid UTF-8" in m for m in f.messages):
            f.messages.append("invalid UTF-8 bytes replaced by U+FFFD")
        return str(data, "utf-8", "replace")


def head(f: InputFile) -> tuple[list[str], bool]:
    """First lines of a file for detection, and whether the file looks binary."""
    buf = b""
    for data in _read_blocks(f.quiet(), HEAD_BYTES):
        buf += data
        if len(buf) >= HEAD_BYTES:
            break
    sample = buf[:HEAD_BYTES]
    binary = b"\x00" in sample[:8192]
    text = sample.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(sample) >= HEAD_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the cut partial line
    return [ln[:5000] for ln in lines[:HEAD_LINES]], binary


def iter_line_chunks(f: InputFile, chunk_bytes: int = CHUNK_BYTES) -> Iterator[pl.DataFrame]:
    """Yield DataFrames (line_no, line) covering every line of the file, in order."""
    rest = b""
    line_no = 0
    cut_lines = 0
    for data in _read_blocks(f, chunk_bytes):
        if rest:
            data = rest + data
        nl = data.rfind(b"\n")
        if nl < 0:
            rest = data
            if len(rest) <= 4 * chunk_bytes:
                continue
            body, rest = rest, b""  # a monster line: emit it rather than grow forever
        else:
            body, rest = memoryview(data)[:nl], data[nl + 1 :]  # a view: no copy of the block
        df, cut = _lines_frame(_decode(body, f), line_no)
        cut_lines += cut
        line_no += df.height
        yield df
    if rest:
        df, cut = _lines_frame(_decode(rest, f), line_no)
        cut_lines += cut
        yield df
    if cut_lines:
        f.messages.append(f"{cut_lines} line(s) longer than {MAX_LINE_CHARS:,} characters were cut to that length")


def _lines_frame(text: str, offset: int) -> tuple[pl.DataFrame, int]:
    s = pl.Series("line", [text], dtype=pl.String).str.split("\n").explode()
    cut = 0
    if (s.str.len_bytes().max() or 0) > MAX_LINE_CHARS:  # bytes >= characters: count characters only then
        cut = int((s.str.len_chars() > MAX_LINE_CHARS).sum())
        if cut:
            s = s.str.slice(0, MAX_LINE_CHARS)
    line_no = pl.int_range(offset + 1, offset + 1 + s.len(), dtype=pl.Int64, eager=True).alias("line_no")
    return pl.DataFrame([line_no, s]), cut


def read_text(f: InputFile, limit: int = 512 * 1024 * 1024) -> str:
    """Whole decoded text (documents such as JSON); cut at ``limit`` bytes with a message."""
    parts, total = [], 0
    for data in _read_blocks(f, CHUNK_BYTES):
        parts.append(data)
        total += len(data)
        if total > limit:
            f.messages.append(f"document larger than {limit} bytes: only the first part was read")
            break
    return _decode(b"".join(parts), f)


def prefix_relation(a: InputFile, b: InputFile, block: int = 64 * 1024) -> str | None:
    """How two files' decompressed bytes relate: 'same', 'a' (a's bytes are where b's begin), 'b' (the
    other way), or None. Read side by side in small blocks, so unrelated files part at their first block."""
    ra, rb = _read_blocks(a.quiet(), block), _read_blocks(b.quiet(), block)
    xa = xb = b""
    while True:
        xa = xa or next(ra, b"")
        xb = xb or next(rb, b"")
        if not xa or not xb:
            return "same" if not xa and not xb else ("a" if not xa else "b")
        n = min(len(xa), len(xb))
        if xa[:n] != xb[:n]:
            return None
        xa, xb = xa[n:], xb[n:]


def count_lines(f: InputFile) -> int:
    n, last = 0, b"\n"
    for data in _read_blocks(f, CHUNK_BYTES):
        n += data.count(b"\n")
        last = data[-1:]
    return n + (0 if last == b"\n" else 1)


def io_bytes(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode())
