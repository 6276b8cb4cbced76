"""Run one fuzz case through ``python -m logscope analyze`` and check what must always hold.

The command runs in a process of its own, bounded in time (``timeout``) and memory (RLIMIT_DATA: its heap
and every writable private mapping; RLIMIT_AS cannot be used, as vl-convert's V8 reserves a sandbox of address
space and aborts with SIGTRAP under any RLIMIT_AS up to 64 GB, measured), its output captured from pipes while rich is told
they are an interactive terminal (so that the progress line, which names the files, is drawn).
The properties, each a failure of its own kind:

- ``exit``: the exit code is one the README documents for input (0 done, 3 no input, 4 nothing
  parsed); 70 (internal error), another code or a signal is a failure;
- ``timeout`` / ``memory``: the run ended within ``timeout`` seconds, within the memory limit;
- ``lines``: files.parquet accounts for every line: parsed + unrecognised = total, and total = the lines
  of the file where they can be counted independently (an uncompressed file read as it is);
- ``input``: every input file has the same bytes and modification time after the run;
- ``escape``: stdout and stderr hold no ESC, BEL, C1 or bidi character but rich's own colours and cursor
  moves (the input's are shown escaped);
- ``secret``: no output holds the text of the file a link out of the folder points to;
- ``outputs``: after exit 0, report.html and a summary.json that is JSON are there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from mutations import SECRET, Case, build

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = {0, 3, 4}  # README's exit codes for what an input folder can be
MEMORY_LIMIT = 3 * 1024**3  # RLIMIT_DATA: a case's inputs are < 1 MB; polars and V8 start within 2 GB
TIMEOUT = 120.0
_UNSHOWN = re.compile("[\x07\x1b\x80-\x9f\u202a-\u202e\u2066-\u2069]")
_CR_ALONE = re.compile(rb"\r(?!\n)")
_RICH = re.compile(r"\x1b\[(?:[0-9;]*m|\?25[lh]|2K|[0-9]*A)")  # colours, cursor hidden/shown, line erased, up
_ALLOC = re.compile(r"memory allocation of \d+ bytes failed")
_FRAME = re.compile(r'File "[^"]*?/((?:logscope|parsers)/[^"]+)", line (\d+) in (\w+)')


@dataclass
class Outcome:
    exit: int | None  # None: killed at the timeout
    seconds: float
    failures: list[tuple[str, str]] = field(default_factory=list)  # (property, detail)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.failures


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))


def _state(paths: list[Path]) -> dict[str, tuple[str, int]]:
    out = {}
    for p in paths:
        st = p.stat()
        out[str(p)] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns)
    return out


def run_case(
    case: Case, work: Path | None = None, timeout: float = TIMEOUT, cache: Path | None = None
) -> Outcome:
    """Build ``case`` in a temporary folder, analyze it, check the properties; the folder is removed."""
    tmp = Path(tempfile.mkdtemp(prefix="logscope-fuzz-", dir=work))
    try:
        return _run(case, tmp, timeout, cache or tmp / "cache")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(case: Case, tmp: Path, timeout: float, cache: Path) -> Outcome:
    root, out = tmp / "in", tmp / "out"
    root.mkdir()
    written = build(case, root, tmp / "outside")
    before = _state(written)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "XDG_CACHE_HOME": str(cache),
        "COLUMNS": "120",
        "TTY_INTERACTIVE": "1",
        "TTY_COMPATIBLE": "1",
    }
    env.pop("NO_COLOR", None)
    t0 = time.monotonic()
    # faulthandler: a native abort (a failed allocation) still says which Python line it was at; a run past
    # the timeout is sent SIGABRT for the same dump, then its whole process group (the PNG painter) is killed
    cmd = [sys.executable, "-X", "faulthandler", "-m", "logscope", "analyze", str(root), "-o", str(out)]
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_limit,
        cwd=tmp,
        start_new_session=True,
    )
    try:
        stdout, stderr = p.communicate(timeout=timeout)
        code: int | None = p.returncode
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)
        try:
            stdout, stderr = p.communicate(timeout=10)
        finally:
            _kill_group(p.pid)
            p.wait()
        code = None
    err = _RICH.sub("", stderr.decode(errors="replace"))
    o = Outcome(code, time.monotonic() - t0, stderr_tail=err[-1500:])
    if code is None:
        o.failures.append(("timeout", f"no exit after {timeout:.0f} s{_where(err)}"))
    elif (m := _ALLOC.search(err)) or "MemoryError" in err or code in (-6, -9, 134, 137):
        where = _where(err)
        o.failures.append(("memory", f"{m.group(0) if m else _last_error(err) or f'exit {code}'}{where}"))
    elif code not in DOCUMENTED:
        o.failures.append(("exit", f"exit {code}: {_last_error(err)}"))
    text = _RICH.sub("", (stdout + stderr).decode("utf-8", "replace"))
    if (m := _UNSHOWN.search(text)) is not None:
        o.failures.append(
            ("escape", f"{m.group(0)!r} printed: ...{text[max(m.start() - 60, 0) : m.end() + 20]!r}")
        )
    if _state(written) != before:
        o.failures.append(("input", "an input file changed"))
    if code == 0:
        o.failures += _check_outputs(out, root, written, case)
    return o


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _where(err: str) -> str:
    """' at FILE:LINE in FUNCTION': the innermost logscope or parsers frame of the thread that aborted
    (faulthandler's dump), or nothing."""
    cur = err.find("Current thread")
    for m in _FRAME.finditer(err, cur if cur >= 0 else len(err)):
        return f" at {m.group(1)}:{m.group(2)} in {m.group(3)}"
    return ""


def _last_error(err: str) -> str:
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    hits = [ln for ln in lines if "error" in ln.lower()]
    return (hits or lines or [""])[0][:300]


def _check_outputs(out: Path, root: Path, written: list[Path], case: Case) -> list[tuple[str, str]]:
    fails: list[tuple[str, str]] = []
    if not (out / "report.html").is_file():
        fails.append(("outputs", "no report.html"))
    try:
        json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        fails.append(("outputs", f"summary.json: {e}"))
    if case.link:
        for p in out.iterdir():
            if p.is_file() and SECRET.encode() in p.read_bytes():
                fails.append(("secret", f"{p.name} holds the text of a link out of the folder"))
    files = pl.read_parquet(out / "files.parquet")
    for r in files.iter_rows(named=True):
        if r["lines_parsed"] + r["lines_unrecognized"] != r["lines_total"]:
            fails.append(
                (
                    "lines",
                    f"{r['path']!r}: {r['lines_parsed']} + {r['lines_unrecognized']} != {r['lines_total']}",
                )
            )
        expected = _lines_of(root / r["path"], r)
        if expected is not None and expected != r["lines_total"]:
            fails.append(
                ("lines", f"{r['path']!r}: {r['lines_total']} lines counted, the file has {expected}")
            )
    return fails


def _lines_of(p: Path, row: dict) -> int | None:
    """The file's lines as an independent count gives them: newlines, plus a last line without one; None
    where ingest reads something else than the bytes as they are (compressed, a container's records, lone
    CRs: their line ends are another branch's decision) or the file is not read."""
    if row["format"] in ("skipped", "unreadable") or not p.is_file() or p.is_symlink():
        return None
    if re.search(r"\.(gz|zst|zstd|bz2|xz)$", p.name, re.IGNORECASE):
        return None
    if any("records were read" in m for m in row["messages"] or []):
        return None
    data = p.read_bytes()
    if _CR_ALONE.search(data):
        return None
    return data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
