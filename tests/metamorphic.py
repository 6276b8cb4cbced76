"""Transforms of a real recorded folder that must not change a verdict: every clock shifted by one offset,
the same server's calm logs of an earlier hour laid beside as the rotated file before, a calm replica added
beside it. Each copies the folder (the fixtures are read-only) and rewrites only the times the lab's real
programs printed, in the shapes they printed them (tests/test_metamorphic.py). And the layouts a collection gives
the same bytes (tests/test_metamorphic_layout.py): gzipped, rotated at line boundaries, renamed, deeper, CRLF."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

# the time shapes of the lab's files: ISO 8601 (nginx $time_iso8601, the client's logging), nginx error.log,
# vLLM's 'MM-DD HH:MM:SS' after its level, vllm bench's result date, epoch seconds, milliseconds and nanoseconds
_ISO = re.compile(r"\b(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)")
_NGX_ERR = re.compile(r"^(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)", re.M)
_VLLM = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
_BENCH_DATE = re.compile(r'"date": "(\d{8})-(\d{6})"')
# whole tokens only: a trace or span id in hex holds runs of digits like these ('...5f1974049296b9...')
_EPOCH_NS = re.compile(r"(?<![\w.])(1[789]\d{17})(?![\w.])")  # OTLP's ...UnixNano (the traced runs' spans)
_EPOCH_MS = re.compile(r"(?<![\w.])(1[789]\d{11})(?![\w.])")
_EPOCH_S = re.compile(r"(?<![\w.])(1[789]\d{8})(\.\d+)?(?![\w])")
YEAR = 2026  # the lab's year: vLLM's stamps carry none


def shift_text(text: str, delta: timedelta) -> str:
    """``text`` with every recognised time moved by ``delta`` (whole seconds keep every sub-second part)."""
    secs = int(delta.total_seconds())

    def iso(m: re.Match) -> str:
        t = datetime(*map(int, m.groups())) + delta
        return t.strftime("%Y-%m-%dT%H:%M:%S")

    def ngx(m: re.Match) -> str:
        t = datetime(*map(int, m.groups())) + delta
        return t.strftime("%Y/%m/%d %H:%M:%S")

    def vllm(m: re.Match) -> str:
        t = datetime(YEAR, *map(int, m.groups()[1:])) + delta
        return f"{m[1]} {t.strftime('%m-%d %H:%M:%S')}"

    def bench(m: re.Match) -> str:
        t = datetime.strptime(m[1] + m[2], "%Y%m%d%H%M%S") + delta
        return f'"date": "{t.strftime("%Y%m%d-%H%M%S")}"'

    text = _ISO.sub(iso, text)
    text = _NGX_ERR.sub(ngx, text)
    text = _VLLM.sub(vllm, text)
    text = _BENCH_DATE.sub(bench, text)
    text = _EPOCH_NS.sub(lambda m: str(int(m[1]) + secs * 1_000_000_000), text)
    text = _EPOCH_MS.sub(lambda m: str(int(m[1]) + secs * 1000), text)
    return _EPOCH_S.sub(lambda m: str(int(m[1]) + secs) + (m[2] or ""), text)


def copy_shifted(src: Path, dest: Path, delta: timedelta, rename=None) -> None:
    """Every file under ``src`` into ``dest`` with its times moved by ``delta`` (``rename``: relative path ->
    new relative path, or None to leave the file out)."""
    for p in sorted(src.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(src).as_posix()
        if rename is not None:
            rel = rename(rel)
            if rel is None:
                continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        # newline="": every byte but the times as the program wrote it. Text mode's universal newlines turned vLLM's
        # CR-ended record lines into CR-less ones and its progress bars' lone CRs into new lines: a calm log laid
        # after a real one read as another writer's, its start-up banner cut into one-line records (no version)
        with open(p, encoding="utf-8", errors="surrogateescape", newline="") as f:
            text = f.read()
        with open(out, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write(shift_text(text, delta))


def copy(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest)
    for p in dest.rglob("*"):  # the fixtures are read-only: their copies must not be
        p.chmod(0o755 if p.is_dir() else 0o644)


def span(folder: Path) -> tuple[datetime, datetime]:
    """First and last epoch-stamped time of a lab folder's nginx access log (the folder's traffic); with no
    gateway (a server that never started: kv-short-refused), the first and last stamp of its server logs."""
    if (folder / "nginx-access.log").exists():
        ts = [float(m[1]) for m in re.finditer(r"msec=(\d+\.\d+)", (folder / "nginx-access.log").read_text())]
        return datetime.fromtimestamp(min(ts), UTC), datetime.fromtimestamp(max(ts), UTC)
    stamps = [
        datetime(YEAR, *map(int, m.groups()[1:]), tzinfo=UTC)  # the lab's clocks are UTC
        for p in sorted(folder.glob("vllm-server*.log"))
        for m in _VLLM.finditer(p.read_text(errors="replace"))
    ]
    return min(stamps), max(stamps)


def calm_replica_beside(
    run: Path, calm: Path, dest: Path, keep: tuple[str, ...] = ("vllm-server.log",)
) -> None:
    """``run`` copied to ``dest`` with ``calm``'s files named in ``keep`` beside it as a second replica
    (``dest/replica-b``), shifted onto the run's minutes (whole seconds, by the two folders' first access lines)."""
    lo, _ = span(run)
    calm_lo, _ = span(calm)
    copy(run, dest)
    delta = timedelta(seconds=int((lo - calm_lo).total_seconds()))
    copy_shifted(calm, dest / "replica-b", delta, rename=lambda rel: rel if rel in keep else None)


CALM_GAP = timedelta(minutes=10)  # between the incident's traffic and the calm run's laid before or after it
_ROTATED = ("vllm-server.log", "nginx-access.log", "nginx-error.log")


def earlier_calm(rel: str) -> str | None:
    """The calm run as this server's and gateway's previous rotation, its client and metrics beside."""
    if rel in _ROTATED:
        return rel + ".1"
    if rel.startswith("client-"):
        return rel
    if rel.startswith("prometheus/"):
        return "prometheus-earlier/" + rel.split("/", 1)[1]
    return None  # the lab's ground truth and nginx.conf (the incident's own stays)


def later_calm(rel: str) -> str | None:
    """The calm run as this server's and gateway's current files (the incident's rotated before them)."""
    if rel in _ROTATED or rel.startswith("client-"):
        return rel
    if rel.startswith("prometheus/"):
        return "prometheus-later/" + rel.split("/", 1)[1]
    return None


def calm_hour_before(run: Path, calm: Path, dest: Path, rename=earlier_calm) -> datetime:
    """``run`` copied to ``dest`` with ``calm``'s files (placed by ``rename``) ending ten minutes before the run's
    first access line (whole seconds); returns that first line's time."""
    lo, _ = span(run)
    _, calm_end = span(calm)
    delta = timedelta(seconds=int((lo - CALM_GAP - calm_end).total_seconds()))
    copy(run, dest)
    copy_shifted(calm, dest, delta, rename=rename)
    return lo


def calm_hour_after(run: Path, calm: Path, dest: Path) -> datetime:
    """``run`` copied to ``dest``, its server's and gateway's logs rotated to ``.1``, with ``calm``'s as the current
    files starting ten minutes after the run's last access line (whole seconds); returns that last line's time."""
    _, hi = span(run)
    calm_lo, _ = span(calm)
    delta = timedelta(seconds=int((hi + CALM_GAP - calm_lo).total_seconds()))
    copy(run, dest)
    for name in _ROTATED:
        if (dest / name).exists():
            (dest / name).rename(dest / (name + ".1"))
    copy_shifted(calm, dest, delta, rename=later_calm)
    return hi


# Layouts a real collection gives the same files in (tests/test_metamorphic_layout.py): what each does to a copy.
# Names a collection gives the lab's files, where their format is detected by what they hold: kubelet's pod and
# container log, nginx's own defaults, a load generator's job, a /metrics scrape saved by curl, a dmesg capture.
_NAMES = (
    (re.compile(r"^vllm-server(-\w+)?\.log$"), r"vllm-7f9c6d5b8-x2k4q\1_vllm.log"),
    (re.compile(r"^nginx-(access|error)\.log$"), r"\1.log"),
    (re.compile(r"^client-([\w-]+)\.log$"), r"loadgen-\1-job.log"),
    (re.compile(r"^client-([\w-]+)\.jsonl$"), r"loadgen-\1-requests.jsonl"),
    (re.compile(r"^metrics(-\w+)?\.prom\.log$"), r"vllm-metrics\1.txt"),
    (re.compile(r"^otlp-([\w-]+)\.jsonl$"), r"otel-export-\1.jsonl"),
    (re.compile(r"^kernel\.log$"), "dmesg.txt"),
    (re.compile(r"^prometheus/"), "prom-export/"),
)


def renamed(rel: str) -> str:
    """``rel`` as a collection names it, its rotation and compression suffixes kept."""
    m = re.search(r"(\.\d{1,3})?(\.gz)?$", rel)
    stem, tail = rel[: m.start()], m[0]
    for pat, to in _NAMES:
        if pat.search(stem):
            return pat.sub(to, stem) + tail
    return rel


def rename_all(folder: Path) -> None:
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            to = folder / renamed(p.relative_to(folder).as_posix())
            if to != p:
                to.parent.mkdir(parents=True, exist_ok=True)
                p.rename(to)
    for d in sorted((d for d in folder.rglob("*") if d.is_dir()), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()


def gzip_all(folder: Path) -> None:
    """Every file gzipped in place (``name.gz``), as a collection compresses what it ships."""
    import gzip

    for p in sorted(folder.rglob("*")):
        if p.is_file():
            p.with_name(p.name + ".gz").write_bytes(gzip.compress(p.read_bytes(), mtime=0))
            p.unlink()


def rotate(folder: Path, pattern: str = "vllm-server*.log", parts: int = 3) -> None:
    """Each server log as logrotate leaves it after ``parts - 1`` rotations: ``name.2`` (oldest), ``name.1``,
    ``name``, cut at line boundaries into about equal numbers of lines."""
    for p in sorted(folder.rglob(pattern)):
        lines = p.read_bytes().splitlines(keepends=True)
        step = -(-len(lines) // parts)
        for i in range(parts):
            name = p.name + (f".{parts - 1 - i}" if i < parts - 1 else "")
            (p.parent / name).write_bytes(b"".join(lines[i * step : (i + 1) * step]))


def crlf(folder: Path, pattern: str = "client-*") -> None:
    """Windows line endings (CRLF) on the files ``pattern`` names (the client logs: a load test run on Windows)."""
    for p in sorted(folder.rglob(pattern)):
        if p.is_file():
            p.write_bytes(p.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))


DEEPER = "incident-2026-12-01"  # the folder a collection is put in (``deeper``)


def deeper(folder: Path, name: str = DEEPER) -> None:
    """The folder's files one level deeper, under ``name`` (the input is then the folder holding it)."""
    inner = folder / name
    inner.mkdir()
    for p in sorted(folder.iterdir()):
        if p != inner:
            p.rename(inner / p.name)
