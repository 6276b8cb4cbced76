"""Rebuild this folder's journalctl outputs from the lab's spike vLLM log (see README.md): the log's lines become
journal entries stamped with the second they were logged at plus a millisecond a line, written into a journal
file by systemd-journal-remote and printed by journalctl.

    python make.py ../../../../shared/fixtures/lab/spike/vllm-server.log
"""

import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

VLLM_TIME = re.compile(rb" (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) ")
BOOT_ID = "4b1c0a9e3f2d4c5b8a7e6d5c4b3a2f1e"


def export(lines: list[bytes]) -> bytes:
    """Journal Export Format (one entry per line; a text field may not hold a newline, and none here does)."""
    base, k, out = datetime(2026, 11, 29, 8, 24, tzinfo=UTC), 0, []
    for line in lines:
        m = VLLM_TIME.search(line)
        if m:
            t = datetime(2026, *map(int, m.groups()), tzinfo=UTC)
            if t != base:
                base, k = t, 0
        k += 1
        us = int(base.timestamp()) * 1_000_000 + k * 1000
        out.append(b"\n".join([
            f"__REALTIME_TIMESTAMP={us}".encode(), f"__MONOTONIC_TIMESTAMP={us - 1764300000000000}".encode(),
            f"_BOOT_ID={BOOT_ID}".encode(), b"_HOSTNAME=gpu-node-1", b"SYSLOG_IDENTIFIER=vllm", b"_PID=3887",
            b"PRIORITY=6", b"_TRANSPORT=stdout", b"MESSAGE=" + line]) + b"\n")
    return b"\n".join(out) + b"\n"


def main() -> None:
    lines = Path(sys.argv[1]).read_bytes().split(b"\n")[:-1]
    here = Path(__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "export.txt").write_bytes(export(lines))
        journal = Path(tmp) / "vllm.journal"
        subprocess.run(["/lib/systemd/systemd-journal-remote", "-o", str(journal), str(Path(tmp) / "export.txt")],
                       check=True)
        for fmt in ("short", "short-iso", "short-iso-precise"):
            out = subprocess.run(["journalctl", "--file", str(journal), "-o", fmt, "--no-pager"], check=True,
                                 capture_output=True, env={"TZ": "UTC"}).stdout
            (here / f"vllm-{fmt}.log").write_bytes(out)


if __name__ == "__main__":
    main()
