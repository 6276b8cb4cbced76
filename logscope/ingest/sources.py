"""Reading input files as chunks of lines, whatever state they are in (finding them: ``inputs``).

Compressed files (.gz, .zst, .bz2, .xz) are decompressed as streams; a rotated set
(``vllm.log``, ``vllm.log.1``, ``vllm.log.2.gz``) is grouped into one stream, oldest first.
Nothing here raises on bad input: problems become messages attached to the file.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial

import polars as pl

from . import linebytes as lb
from .inputs import (  # noqa: F401 - where the stage's modules and the tests find them
    COMPRESSED,
    HIDDEN_FOLDER,
    LINK_OUT,
    OUTPUT_MARKER,
    OWN_FILE,
    OWN_OUTPUT,
    InputFile,
    discover,
)
from .linebytes import MAX_LINE_CHARS

# 4 MiB: large enough that a parser's fixed per-chunk cost stays small (~4 % slower than 8 MiB on
# the 1 GB bench), small enough that the workers' intermediate columns (JSON decoding takes ~30x
# the chunk) keep a 5 GB folder under 1 GB of RSS; docs/performance.md has the measurements
CHUNK_BYTES = 4 * 1024 * 1024
HEAD_BYTES = 64 * 1024
HEAD_LINES = 200
MAX_RATIO = 200  # decompression stops past this ratio to the file's size (logs: 5-50x; a 1 MB -> 1 GiB bomb took 175 s)
MIN_CAP = 64 * 1024 * 1024  # ... never below this
# ... and past this many lines a byte of it (a log's line is longer than this: 80-300 bytes): a stream of newlines
# (1 MB of gzip -> 1 GiB) met the byte cap after 200 M empty lines, each a row: 51 s of CPU. Cut here: ~1 s
MIN_LINE_BYTES = 32
# a chunk holds at most this many lines, whatever its bytes: a chunk of 4 MiB of newlines was 4 M rows, and a
# parser's columns over it took ~3 GB (the bomb above with a vLLM log's head: 2.9 GB of RSS). A log's lines are
# longer than MIN_LINE_BYTES, so its chunks are cut by their bytes as before
CHUNK_LINES = CHUNK_BYTES // MIN_LINE_BYTES


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
    cap = max(MAX_RATIO * max(f.size, 0), MIN_CAP) if f.compression else None
    lines_cap = cap // MIN_LINE_BYTES if cap is not None else None
    total = lines = 0
    with fh:
        pending: list[bytes] = []
        size, started = 0, False
        while True:
            try:
                data = read(step)
            except EOFError:
                f.messages.append(f"{f.compression} stream is truncated: read what came before the cut")
                data = b""
            except Exception as e:  # corrupt archive (OSError, lzma/zstd errors): keep what came before
                f.messages.append(f"{f.compression or 'file'} stream is corrupt ({e}): read what came before")
                data = b""
            if data and not pending and not started:
                started, data = True, lb.no_bom(data)  # a UTF-8 BOM is no part of the first line
            total += len(data)
            if cap is not None and total > cap:  # a bomb: what a log does not compress to is not read on
                f.messages.append(
                    f"{f.compression} stream expands past {MAX_RATIO} times its size ({cap:,} bytes): "
                    "read up to there (decompress it by hand to read it all)"
                )
                yield b"".join([*pending, data[: len(data) - (total - cap)]])
                return
            if lines_cap is not None:
                lines += data.count(b"\n")
                if lines > lines_cap:  # a bomb of (nearly) empty lines: its bytes under the cap, its rows not
                    f.messages.append(
                        f"{f.compression} stream expands to more than {lines_cap:,} lines, more than a log "
                        f"{MAX_RATIO} times its size holds (lines of {MIN_LINE_BYTES} bytes): read up to there "
                        "(decompress it by hand to read it all)"
                    )
                    cut = _nth_newline(data, data.count(b"\n") - (lines - lines_cap)) + 1
                    yield b"".join([*pending, data[:cut]])
                    return
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


def _nth_newline(data: bytes, n: int) -> int:
    """The offset of the ``n``-th newline of ``data`` (from 1); -1 for n < 1. A binary search on counts (each a
    memchr pass): a block of a million newlines takes ~20 passes, not a million steps."""
    if n < 1:
        return -1
    lo, hi = 0, len(data)  # the smallest end whose prefix holds n newlines
    while lo < hi:
        mid = (lo + hi) // 2
        if data.count(b"\n", 0, mid + 1) >= n:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _decode(data: bytes | memoryview, f: InputFile) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        if not any("invalid UTF-8" in m for m in f.messages):
            f.messages.append("invalid UTF-8 bytes replaced by U+FFFD")
        return str(data, "utf-8", "replace")


_CONTROL = bytes(
    [*range(1, 9), 11, *range(14, 27), *range(28, 32), 127]
)  # bytes no text log holds, NUL aside
HEAD_NUL_LIMIT = 64 * 1024 * 1024  # a head of NULs is read past up to this far


def head(f: InputFile) -> tuple[list[str], bool]:
    """First lines of a file for detection (NULs left out), and whether the file looks binary: more than 5 %
    control bytes in its first 8 KiB of text. A text log with NULs in it (a block zero-filled after a crash) is
    text; its NULs are left out when it is read (``iter_line_chunks``)."""
    buf, seen = b"", 0
    for data in _read_blocks(f.quiet(), HEAD_BYTES):
        seen += len(data)
        buf += data.replace(b"\x00", b"") if b"\x00" in data else data
        if len(buf) >= HEAD_BYTES or seen >= HEAD_NUL_LIMIT:
            break
    sample = buf[:HEAD_BYTES]
    f.cr_ends = lb.cr_ends(sample)
    if f.cr_ends:
        sample = lb.LONE_CR_B.sub(b"\n", sample)
    probe = sample[:8192]
    binary = (len(probe) - len(probe.translate(None, _CONTROL))) > 0.05 * len(probe) or (
        not sample and seen > 0
    )
    text = sample.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(sample) >= HEAD_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the cut partial line
    return [ln[:5000] for ln in lines[:HEAD_LINES]], binary


def monster_bytes(chunk_bytes: int) -> int:
    """The bytes of a line without its end past which ``iter_line_chunks`` stops holding it and cuts it. Never below
    what a line of MAX_LINE_CHARS characters can take (4 bytes each): a line is then cut at MAX_LINE_CHARS whatever
    the chunks (at 4 x chunk_bytes alone, reading in 16 KiB chunks cut the lab's 65-79 KB OTLP export lines,
    unsaid, and lost their spans)."""
    return max(4 * chunk_bytes, 4 * MAX_LINE_CHARS)


def iter_line_chunks(
    f: InputFile,
    chunk_bytes: int = CHUNK_BYTES,
    span: Span | None = None,
    tally: Counter | None = None,
    meter: Callable[[int], None] | None = None,
) -> Iterator[pl.DataFrame]:
    """Yield DataFrames (line_no, line) covering every line of the file, in order.

    ``span`` reads one segment of an uncompressed file (``segments``): its chunks are the very chunks a
    whole read makes there, numbered from ``span.first_line``. ``tally`` then counts what a whole read says in
    a message at the end (lines cut to MAX_LINE_CHARS, pieces of lines joined: ``tally_messages``). ``meter``
    is told the bytes of each chunk (decompressed) before it is yielded. A wrapped log's lines are those inside
    its records (``logscope.ingest.envelopes``)."""
    if f.envelope is not None:
        yield from _unwrapped(f, iter_line_chunks(_bare(f), chunk_bytes, span, tally, meter), tally)
        return
    rest = b""
    body: bytes | memoryview  # a view of the block where whole lines end in it: no copy
    line_no = span.first_line if span else 0
    cut_total = 0
    blocks = (
        _read_blocks(f, chunk_bytes)
        if span is None or (span.start == 0 and span.stop is None)  # a compressed file is only read whole
        else _read_span(f, span, chunk_bytes)
    )
    skipping = False  # in the rest of a monster line, already emitted (cut)
    for data in blocks:
        if skipping:
            data, skipping = lb.past_line(data, f.cr_ends)
            if skipping or not data:
                continue
        if rest:
            data = rest + data
        nl = lb.line_end(data, f.cr_ends)
        if nl < 0:
            rest = data
            if len(rest) <= monster_bytes(chunk_bytes):
                continue
            # a monster line: emit its start (cut, said) rather than grow forever, and skip to its end, so that
            # it stays one line (wc -l) however long it is
            body, rest, skipping = lb.whole_chars(rest[: 4 * MAX_LINE_CHARS]), b"", True
        else:
            body, rest = memoryview(data)[:nl], data[nl + 1 :]  # a view: no copy of the block
        df, cut = lb.lines_frame(
            lb.no_nuls(body, f) if b"\x00" in data else body, line_no, f.cr_ends, partial(_decode, f=f)
        )
        cut_total += max(cut, int(nl < 0))  # a monster line is cut even where its start fits MAX_LINE_CHARS
        line_no += df.height
        if meter is not None:
            meter(len(body) + 1)
        yield from lb.slices(df, CHUNK_LINES)
    if rest:
        df, cut = lb.lines_frame(
            lb.no_nuls(rest, f) if b"\x00" in rest else rest, line_no, f.cr_ends, partial(_decode, f=f)
        )
        cut_total += cut
        if meter is not None:
            meter(len(rest))
        yield from lb.slices(df, CHUNK_LINES)
    if tally is not None:
        tally["cut"] += cut_total
    elif cut_total:
        f.messages.append(cut_message(cut_total))


def _bare(f: InputFile) -> InputFile:
    """The file read as it is, its messages going to ``f``'s list."""
    return replace(f, envelope=None, messages=f.messages)


def _unwrapped(f: InputFile, chunks: Iterator[pl.DataFrame], tally: Counter | None) -> Iterator[pl.DataFrame]:
    from . import envelopes  # imports the parsers' helpers: loaded only for wrapped logs

    u = envelopes.Unwrapper(f.envelope or "", f.envelope_time)
    for chunk in chunks:
        yield u(chunk)
    last = u.flush()
    if last is not None:
        yield last
    if tally is not None:
        tally["joined"] += u.joined
    elif u.joined:
        f.messages.append(joined_message(u.joined))


def cut_message(n: int) -> str:
    return f"{n} line(s) longer than {MAX_LINE_CHARS:,} characters were cut to that length"


def joined_message(n: int) -> str:
    return f"{n:,} partial record(s) joined into the lines the runtime had cut"


def tally_messages(tally: Counter) -> list[str]:
    """The messages of a whole read for what the pieces of a file counted."""
    return [m(tally[k]) for k, m in (("cut", cut_message), ("joined", joined_message)) if tally[k]]


@dataclass(frozen=True)
class Span:
    """A segment of an uncompressed file that starts where a whole read starts a chunk: ``start`` is the
    byte after the last newline of block ``aligned / chunk_bytes - 1``, so the bytes up to ``aligned``
    are the remainder that a whole read carries into the next block. ``stop`` is the next segment's
    start (None: the end of the file)."""

    start: int
    aligned: int
    stop: int | None
    first_line: int = 0  # lines before ``start``


def segments(f: InputFile, n: int, chunk_bytes: int = CHUNK_BYTES) -> list[Span]:
    """Up to ``n`` spans of about equal size covering the file, each starting at a chunk boundary of a
    whole read (so that a parser sees the same chunks either way). One span when the file is compressed
    (no seeking) or too small, or where a block holds no newline to cut after."""
    if (
        f.compression or f.size <= 0 or n < 2 or f.cr_ends
    ):  # CR endings: read whole (segments cut after an LF)
        return [Span(0, 0, None)]
    starts: list[tuple[int, int]] = []
    with open(f.path, "rb") as fh:
        for j in range(1, n):
            # cut after block m - 1, the first from the even cut on that holds a newline (a few blocks on)
            first = max(
                1, round(j * f.size / n / chunk_bytes), starts[-1][1] // chunk_bytes + 1 if starts else 1
            )
            for m in range(first, first + 16):
                if (m + 1) * chunk_bytes >= f.size:
                    break
                fh.seek((m - 1) * chunk_bytes)
                block = fh.read(chunk_bytes)
                nl = block.rfind(b"\n")
                if nl >= 0 and _line_ends(f, block, nl):
                    starts.append(((m - 1) * chunk_bytes + nl + 1, m * chunk_bytes))
                    break
    if not starts:
        return [Span(0, 0, None)]
    bounds = [(0, 0), *starts]
    return [
        Span(a, al, bounds[i + 1][0] if i + 1 < len(bounds) else None) for i, (a, al) in enumerate(bounds)
    ]


def _line_ends(f: InputFile, block: bytes, nl: int) -> bool:
    """Whether a cut after the newline at ``nl`` leaves no line in pieces (a wrapped log's record must end its
    line)."""
    if f.envelope is None:
        return True
    from . import envelopes

    return envelopes.ends_line(f.envelope, block[block.rfind(b"\n", 0, nl) + 1 : nl])


def span_lines(f: InputFile, span: Span, chunk_bytes: int = CHUNK_BYTES) -> int:
    """The lines ``iter_line_chunks`` yields for ``span``, counted without decoding (~2.5 GB/s): its
    newlines, plus one wherever a whole read emits a line longer than ``monster_bytes`` in two."""
    n, rest, skipping = 0, 0, False
    for data in _read_span(f, span, chunk_bytes):
        if skipping:  # the rest of a monster line, counted already
            data, skipping = lb.past_line(data, f.cr_ends)
            if skipping:
                continue
        nl = lb.line_end(data, f.cr_ends)
        if nl < 0:
            rest += len(data)
            if rest > monster_bytes(
                chunk_bytes
            ):  # iter_line_chunks' monster line: one line, skipped to its end
                n, rest, skipping = n + 1, 0, True
            continue
        n += lb.ends(
            data[: nl + 1], f.cr_ends
        )  # the lines of the remainder and this block up to its last line end
        rest = len(data) - nl - 1
    return n + (1 if rest else 0)


def lines_before(f: InputFile, pos: int, size: int, last_line: int) -> pl.DataFrame:
    """The whole lines of the up to ``size`` bytes before byte ``pos`` (which follows a newline) of an
    uncompressed file, numbered so that the last is ``last_line``: the context a segment's parser is warmed
    with."""
    lo = max(0, pos - size - 1)
    with open(f.path, "rb") as fh:
        fh.seek(lo)
        data = fh.read(pos - lo)
    if lo == 0:
        data = lb.no_bom(data)
    return _whole_lines(data, lo == 0, last_line, f)


def tail_lines(f: InputFile, size: int) -> pl.DataFrame:
    """The whole lines of the file's last ``size`` bytes, numbered as in the file: the context the piece after
    it is warmed with (one read through the file, which counts its lines on the way)."""
    last_line, tail = _count(f, size + 1)
    return _whole_lines(tail, len(tail) <= size, last_line, f)


def _whole_lines(data: bytes, at_start: bool, last_line: int, f: InputFile) -> pl.DataFrame:
    """The whole lines of ``data`` but its first byte (read only to tell whether the first line is whole),
    or of all of it when ``at_start`` (it begins the file), numbered to end at ``last_line``."""
    if not at_start:
        whole, data = data[:1] == b"\n", data[1:]
        if not whole:
            first = data.find(b"\n")
            data = data[first + 1 :] if first >= 0 else b""
    if data.endswith(b"\n"):
        data = data[:-1]
    elif not data:
        return pl.DataFrame(schema={"line_no": pl.Int64, "line": pl.String})
    df, _ = lb.lines_frame(data, 0, f.cr_ends, partial(_decode, f=f.quiet()))
    df = df.with_columns(pl.col("line_no") + (last_line - df.height))
    if f.envelope is not None:  # a container log's lines, as a read of the file gives them
        from . import envelopes

        df = envelopes.Unwrapper(f.envelope, f.envelope_time).whole(df)
    return df


def _read_span(f: InputFile, span: Span, block: int) -> Iterator[bytes]:
    """The blocks of a whole read from ``span.start`` on: first the remainder up to ``span.aligned``, then
    aligned blocks, the last one cut at ``span.stop``."""
    try:
        fh = open(f.path, "rb")
    except OSError as e:
        f.messages.append(f"cannot open: {e.strerror or e}")
        return
    with fh:
        fh.seek(span.start)
        first = span.start == 0  # the file's start: its BOM left out, as a whole read does
        if span.aligned > span.start:
            yield (
                lb.no_bom(fh.read(span.aligned - span.start)) if first else fh.read(span.aligned - span.start)
            )
            first = False
        pos = span.aligned
        while span.stop is None or pos < span.stop:
            data = fh.read(block if span.stop is None else min(block, span.stop - pos))
            if not data:
                return
            pos += len(data)
            yield lb.no_bom(data) if first else data
            first = False


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
    return _count(f)[0]


def _count(f: InputFile, tail: int = 0) -> tuple[int, bytes]:
    """The file's lines (a last one without a newline counts), and its last ``tail`` bytes."""
    n, last, kept = 0, b"\n", b""
    for data in _read_blocks(f, CHUNK_BYTES):
        n += lb.ends(data, f.cr_ends)
        last = data[-1:]
        if tail:
            kept = (kept + data)[-tail:]
    return n + (0 if last == b"\n" or (f.cr_ends and last == b"\r") else 1), kept


def io_bytes(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode())


def head_size(f: InputFile) -> int:
    """The bytes of ``f`` that detection reads (its head): what a batch of heads holds."""
    return HEAD_BYTES if f.compression else min(max(f.size, 0), HEAD_BYTES)
