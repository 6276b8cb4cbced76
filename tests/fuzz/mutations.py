"""Mutations of real files: what a collected incident folder looks like when things went wrong.

Every mutation is a function of the bytes and explicit parameters (``OPS``), and a case is a plain JSON
spec (``Case``): the sources it cuts from the real lab and public recordings, the operations with their
parameters, the file name. ``draw_case(seed, index)`` draws one from a seeded ``random.Random``, so that
``(seed, index)`` or the printed spec replays it exactly (``build``); a reproducer test writes the spec out.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import fixtures
import zstandard

SHARED = fixtures.root().parent  # as conftest: sources are named "fixtures/lab/..." under it
LAB = SHARED / "fixtures" / "lab"
PUBLIC = SHARED / "fixtures" / "vllm-public"
CUT_MAX = 150_000  # bytes of a source kept (at a line's end): a case runs in seconds
SECRET = "db_password=fuzz-secret-7c2d"  # the text of a file out of the folder that a link points to

# impossible or absurd values put where a log has a date, a time or a number
BAD_DATES = ("2026-02-30", "2026-13-45", "0000-00-00", "9999-12-31", "1900-01-01", "2026-00-10")
BAD_TIMES = ("99:99:99", "24:00:00", "23:59:60", "00:00:00", "-1:00:00")
BAD_NUMBERS = (
    "1e400",
    "99999999999999999999999999",
    "-1",
    "NaN",
    "inf",
    "",
    "0x1F",
    "1,5",
    "-0",
    "1e-400",
    "9223372036854775808",
)
# what a log line or a name may carry to a terminal or a page
CONTROLS = ("\x1b]0;pwned\x07", "\x1b[2J", "\u202e", "\x1b[31m", "\x9b2J", "\x00", "\r", "\x08\x08\x08")
ODD_NAMES = ("osc", "csi", "bidi", "markup", "newline", "dash", "long", "non-utf8", "space", "unicode", "tab")

_DATE = re.compile(rb"\d{4}-\d{2}-\d{2}|\d{4}/\d{2}/\d{2}|\d{2}/[A-Z][a-z]{2}/\d{4}")
_TIME = re.compile(rb"\d{2}:\d{2}:\d{2}")
_MONTH_DAY = re.compile(
    rb"(?<=\b[IWED])\d{4}(?= )|(?<= )\d{2}-\d{2}(?= \d{2}:)"
)  # vLLM's 'INFO 11-29 08:25:05'
_NUMBER = re.compile(rb"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


# -- operations on the bytes ------------------------------------------------------------------------------


def truncate(data: bytes, at: int) -> bytes:
    return data[:at]


def splice(data: bytes, source: str, start: int, length: int, at: int) -> bytes:
    """Bytes of another real file put in at a line's start (a log written to by two processes)."""
    other = (SHARED / source).read_bytes()[start : start + length]
    cut = _line_start(data, at)
    return data[:cut] + other + data[cut:]


def dup_lines(data: bytes, line: int, count: int, times: int) -> bytes:
    lines = data.split(b"\n")
    block = lines[line : line + count]
    return b"\n".join(lines[: line + count] + block * times + lines[line + count :])


def reverse_lines(data: bytes, line: int, count: int) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join(lines[:line] + lines[line : line + count][::-1] + lines[line + count :])


def glue_lines(data: bytes, line: int, count: int) -> bytes:
    """``count`` lines from ``line`` on written without their newlines (a lost flush)."""
    lines = data.split(b"\n")
    return b"\n".join(lines[:line] + [b"".join(lines[line : line + count])] + lines[line + count :])


def giant_line(data: bytes, line: int, size: int) -> bytes:
    """A line of ``size`` bytes (its own text repeated) in place of line ``line``."""
    lines = data.split(b"\n")
    if not lines:
        return data
    i = min(line, len(lines) - 1)
    seed = lines[i] or b"x"
    lines[i] = (seed * (size // len(seed) + 1))[:size]
    return b"\n".join(lines)


def nuls(data: bytes, at: int, count: int) -> bytes:
    return data[:at] + b"\x00" * count + data[at:]


def bad_dates(data: bytes, what: str, value: str, every: int) -> bytes:
    """Every ``every``-th date ('date'), time ('time') or vLLM month-day ('month_day') replaced by ``value``."""
    pattern = {"date": _DATE, "time": _TIME, "month_day": _MONTH_DAY}[what]
    return _every(pattern, data, value.encode(), every)


def bad_numbers(data: bytes, value: str, every: int) -> bytes:
    return _every(_NUMBER, data, value.encode(), every)


def controls(data: bytes, seq: str, every: int) -> bytes:
    """``seq`` put in the middle of every ``every``-th line (log text that reaches a terminal or a page)."""
    lines = data.split(b"\n")
    s = seq.encode("utf-8")
    for i in range(0, len(lines), max(every, 1)):
        mid = len(lines[i]) // 2
        lines[i] = lines[i][:mid] + s + lines[i][mid:]
    return b"\n".join(lines)


def encode(data: bytes, encoding: str) -> bytes:
    """The text in another encoding: 'latin-1' (an accented word added to every tenth line), 'utf-16'
    (with its BOM), 'utf-8-bom'."""
    text = data.decode("utf-8", "replace")
    if encoding == "latin-1":
        lines = text.split("\n")
        lines[::10] = [ln + " café" for ln in lines[::10]]
        return "\n".join(lines).encode("latin-1", "replace")
    if encoding == "utf-16":
        return text.encode("utf-16")
    return b"\xef\xbb\xbf" + data


def line_ends(data: bytes, style: str) -> bytes:
    return data.replace(b"\n", b"\r\n" if style == "crlf" else b"\r")


def compress(data: bytes, kind: str, keep: float) -> bytes:
    """``kind`` compression of the bytes, cut to the share ``keep`` of it (1.0: whole); 'plain' leaves them
    as they are (a .gz name on plain text)."""
    if kind == "plain":
        return data
    packed = {
        "gz": gzip.compress,
        "bz2": bz2.compress,
        "xz": lzma.compress,
        "zst": lambda d: zstandard.ZstdCompressor().compress(d),
    }[kind](data)
    return packed[: max(1, int(len(packed) * keep))] if keep < 1 else packed


def empty(data: bytes, whitespace: bool) -> bytes:
    return b"  \n\t\n\n" if whitespace else b""


# numbers no field of a log can hold (issue #44): past int64 both ways, the largest double, NaN, infinity, and
# 2**64 in digits (what the many fields read by a digits-only pattern take in)
SWEEP_VALUES = ("1e19", "-1e19", "1e308", "nan", "inf", "18446744073709551616")
# within JSON, out of a string: the spelling Python's json module writes (real clients print it so)
_JSON_SPELLING = {"nan": "NaN", "inf": "Infinity"}
# a number, with its fraction and exponent (the digits of an exponent are not a number of their own)
_SWEPT = re.compile(rb"(?<![\w.-])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def _swept(line: bytes, m: re.Match, value: str) -> bytes:
    in_json = line.lstrip()[:1] in (b"{", b"[") and line[m.start() - 1 : m.start()] != b'"'
    v = _JSON_SPELLING.get(value, value) if in_json else value
    return line[: m.start()] + v.encode() + line[m.end() :]


def sweep_numbers(data: bytes, lines: int = 60, tokens: int = 40) -> bytes:
    """The file as it is, then every number of up to ``lines`` of its lines (one of each shape, digits aside;
    up to ``tokens`` numbers a line) replaced by each of SWEEP_VALUES in turn, one number a copy of the line:
    every numeric field of every kind of line gets every absurd value, the lines around it real. The file's
    own lines come first, so that it is still recognised by its head."""
    shapes: set[bytes] = set()
    out = [data.rstrip(b"\n")]
    for line in data.split(b"\n"):
        shape = _SWEPT.sub(b"0", line)[:60]
        if not line.strip() or shape in shapes:
            continue
        shapes.add(shape)
        for m in list(_SWEPT.finditer(line))[:tokens]:
            out += [_swept(line, m, v) for v in SWEEP_VALUES]
        if len(shapes) >= lines:
            break
    return b"\n".join(out) + b"\n"


def sweep_document(data: bytes, every: int, offset: int, spelled: bool = True) -> bytes:
    """A document (one JSON answer, a report) with every ``every``-th of its numbers from ``offset`` on replaced
    by SWEEP_VALUES in turn: ``every`` such copies give every number of it every value. Out of a string, NaN
    and infinity are spelled as Python's json writes them (``spelled``) or, where the writer cannot write them
    (Prometheus), left out of the turn."""
    n = -1
    bare = SWEEP_VALUES if spelled else tuple(v for v in SWEEP_VALUES if v not in _JSON_SPELLING)

    def sub(m: re.Match) -> bytes:
        nonlocal n
        n += 1
        if n % every != offset % every:
            return m.group(0)
        inside = data[m.start() - 1 : m.start()] == b'"'
        turn = SWEEP_VALUES if inside else bare
        v = turn[(n // every) % len(turn)]
        return (v if inside else _JSON_SPELLING.get(v, v)).encode()

    return _SWEPT.sub(sub, data)


OPS = {
    f.__name__: f
    for f in (
        truncate,
        splice,
        dup_lines,
        reverse_lines,
        glue_lines,
        giant_line,
        nuls,
        bad_dates,
        bad_numbers,
        controls,
        encode,
        line_ends,
        empty,
        sweep_numbers,
        sweep_document,
    )
}


def _line_start(data: bytes, at: int) -> int:
    return data.rfind(b"\n", 0, max(at, 0)) + 1


def _every(pattern: re.Pattern, data: bytes, value: bytes, every: int) -> bytes:
    n = 0

    def sub(m: re.Match) -> bytes:
        nonlocal n
        n += 1
        return value if n % max(every, 1) == 0 else m.group(0)

    return pattern.sub(sub, data)


# -- names ---------------------------------------------------------------------------------------------------


def odd_name(name: str, kind: str) -> str:
    """``name`` made odd the way a collection script or an attacker names files."""
    stem, dot, ext = name.partition(".")
    odd = {
        "osc": f"{stem}\x1b]0;pwned\x07",
        "csi": f"{stem}\x1b[2J",
        "bidi": f"{stem}\u202e",
        "markup": f"[bold red]{stem}[/]",
        "newline": f"{stem}\nfake",
        "dash": f"-{stem}",
        "long": stem + "x" * (200 - len(name)),
        "non-utf8": stem + os.fsdecode(b"\xff\xfe"),
        "space": f" {stem} ",
        "unicode": f"{stem}-日本語",
        "tab": f"{stem}\t",
        # issue #44's names, outside ODD_NAMES (so the seeded draws stay as they were): a hidden file, a log
        # named as an image
        "hidden": f".{stem}",
        "image": f"{stem}",
    }[kind]
    if kind == "image":
        return odd + ".png"
    return odd + dot + ext


# -- cases ---------------------------------------------------------------------------------------------------


@dataclass
class FileSpec:
    source: str  # path under SHARED of the real file cut from
    keep: int  # bytes of it kept (cut back to a line's end)
    ops: list[tuple[str, dict]] = field(default_factory=list)
    compression: str | None = None  # gz, bz2, xz, zst, or plain (the name says gz, the bytes are plain)
    compression_keep: float = 1.0
    name_kind: str | None = None  # ODD_NAMES
    folder: str | None = None  # a sub-folder it is put in (its name made odd too, by name_kind)


@dataclass
class Case:
    files: list[FileSpec]
    link: bool = False  # a link to a file out of the folder holding SECRET

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> Case:
        return Case(
            [FileSpec(**{**f, "ops": [tuple(o) for o in f["ops"]]}) for f in d["files"]], d.get("link", False)
        )


def corpus() -> list[str]:
    """The real files mutations start from (paths under SHARED), sorted: the same seed draws the same."""
    files = [p for p in LAB.rglob("*") if p.is_file() and p.name != "README.md"]
    files += [p for p in PUBLIC.glob("*.log")]
    return sorted(str(p.relative_to(SHARED)) for p in files)


def file_bytes(spec: FileSpec) -> tuple[str, bytes]:
    """The name and bytes of one mutated file."""
    data = (SHARED / spec.source).read_bytes()
    if spec.keep < len(data):
        data = data[: data.rfind(b"\n", 0, spec.keep) + 1]
    for op, params in spec.ops:
        data = OPS[op](data, **params)
    name = Path(spec.source).name
    if spec.compression:
        data = compress(data, spec.compression, spec.compression_keep)
        name += {"plain": ".gz"}.get(spec.compression, f".{spec.compression}")
    if spec.name_kind:
        name = odd_name(name, spec.name_kind)
    if spec.folder:
        name = f"{odd_name(spec.folder, spec.name_kind) if spec.name_kind else spec.folder}/{name}"
    return name, data


def build(case: Case, root: Path, outside: Path) -> list[Path]:
    """Write the case's files under ``root`` (and the secret a link points to under ``outside``)."""
    written = []
    for i, spec in enumerate(case.files):
        name, data = file_bytes(spec)
        p = root / name
        if p.exists():  # two specs drew the same file: keep both
            p = p.with_name(f"{i}-{p.name}")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        written.append(p)
    if case.link:
        outside.mkdir(parents=True, exist_ok=True)
        (outside / "secret.txt").write_text(SECRET + "\n")
        (root / "credentials.log").symlink_to(outside / "secret.txt")
    return written


def draw_case(seed: int, index: int, sources: list[str] | None = None) -> Case:
    rng = random.Random(f"{seed}:{index}")
    sources = sources or corpus()
    files = [_draw_file(rng, sources) for _ in range(rng.choice((1, 1, 2, 2, 3, 4)))]
    return Case(files, link=rng.random() < 0.15)


def _draw_file(rng: random.Random, sources: list[str]) -> FileSpec:
    src = rng.choice(sources)
    size = (SHARED / src).stat().st_size
    keep = size if size <= CUT_MAX else rng.randrange(CUT_MAX // 4, CUT_MAX)
    n_lines = max(1, min(size, keep) // 120)  # about; an op past the end does nothing
    spec = FileSpec(src, keep)
    for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
        spec.ops.append(_draw_op(rng, sources, keep, n_lines))
    r = rng.random()
    if r < 0.15:
        spec.compression = rng.choice(("gz", "gz", "zst", "bz2", "xz", "plain"))
        spec.compression_keep = rng.choice((1.0, 1.0, 0.5, 0.97))
    if rng.random() < 0.2:
        spec.name_kind = rng.choice(ODD_NAMES)
        if rng.random() < 0.4:
            spec.folder = rng.choice(("v0", "replica-1", "clients"))
    return spec


def _draw_op(rng: random.Random, sources: list[str], keep: int, n_lines: int) -> tuple[str, dict]:
    line = rng.randrange(n_lines)
    op = rng.choice(
        (
            "truncate",
            "splice",
            "dup_lines",
            "reverse_lines",
            "glue_lines",
            "giant_line",
            "nuls",
            "bad_dates",
            "bad_dates",
            "bad_numbers",
            "bad_numbers",
            "controls",
            "encode",
            "line_ends",
            "empty",
        )
    )
    p: dict
    if op == "truncate":
        p = {"at": rng.randrange(keep + 1)}
    elif op == "splice":
        other = rng.choice(sources)
        p = {
            "source": other,
            "start": rng.randrange(max((SHARED / other).stat().st_size - 1, 1)),
            "length": rng.choice((40, 500, 5000)),
            "at": rng.randrange(keep + 1),
        }
    elif op == "dup_lines":
        p = {"line": line, "count": rng.choice((1, 5, 50)), "times": rng.choice((1, 2, 10))}
    elif op in ("reverse_lines", "glue_lines"):
        p = {"line": line, "count": rng.choice((2, 10, 100))}
    elif op == "giant_line":
        p = {"line": line, "size": rng.choice((70_000, 1_100_000, 2_500_000))}
    elif op == "nuls":
        p = {"at": rng.randrange(keep + 1), "count": rng.choice((1, 16))}
    elif op == "bad_dates":
        what = rng.choice(("date", "time", "month_day"))
        values = {"date": BAD_DATES, "time": BAD_TIMES, "month_day": ("13-45", "02-30", "00-00", "99-99")}[
            what
        ]
        p = {"what": what, "value": rng.choice(values), "every": rng.choice((1, 3, 50))}
    elif op == "bad_numbers":
        p = {"value": rng.choice(BAD_NUMBERS), "every": rng.choice((1, 7, 101))}
    elif op == "controls":
        p = {"seq": rng.choice(CONTROLS), "every": rng.choice((1, 10, 200))}
    elif op == "encode":
        p = {"encoding": rng.choice(("latin-1", "utf-16", "utf-8-bom"))}
    elif op == "line_ends":
        p = {"style": rng.choice(("crlf", "cr"))}
    else:
        p = {"whitespace": rng.random() < 0.5}
    return op, p
