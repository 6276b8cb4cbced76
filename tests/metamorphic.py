"""Transforms of a real recorded folder that must not change a verdict: every clock shifted by one offset,
the same server's calm logs of an earlier hour laid beside as the rotated file before, a calm replica added
beside it. Each copies the folder (the fixtures are read-only) and rewrites only the times the lab's real
programs printed, in the shapes they printed them (tests/test_metamorphic.py)."""

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
_EPOCH_NS = re.compile(r"(?<![\d.])(1[789]\d{17})(?![\d.])")  # OTLP's ...UnixNano (the traced runs' spans)
_EPOCH_MS = re.compile(r"(?<![\d.])(1[789]\d{11})(?![\d.])")
_EPOCH_S = re.compile(r"(?<![\d.])(1[789]\d{8})(\.\d+)?(?![\d])")
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
        out.write_text(
            shift_text(p.read_text(encoding="utf-8", errors="surrogateescape"), delta),
            encoding="utf-8",
            errors="surrogateescape",
        )


def copy(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest)
    for p in dest.rglob("*"):  # the fixtures are read-only: their copies must not be
        p.chmod(0o755 if p.is_dir() else 0o644)


def span(folder: Path) -> tuple[datetime, datetime]:
    """First and last epoch-stamped time of a lab folder's nginx access log (the folder's traffic)."""
    ts = [float(m[1]) for m in re.finditer(r"msec=(\d+\.\d+)", (folder / "nginx-access.log").read_text())]
    return datetime.fromtimestamp(min(ts), UTC), datetime.fromtimestamp(max(ts), UTC)
