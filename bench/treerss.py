"""The resident memory of a process and all its descendants, summed, sampled while it runs.

ru_maxrss (GNU time's %M) is the peak of the largest single process of a tree, not of their sum: when
``logscope analyze`` ingests in a child process (logscope/ingest/child_process.py), parent and child are resident at once,
and only a sampled sum says what the machine held. Samples are taken every ``interval`` seconds, so a peak
shorter than that can be missed: the bench reports the larger of this and ru_maxrss.
"""

from __future__ import annotations

import threading
from pathlib import Path


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(x) for x in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return kids


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and every descendant, summed (kB)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _rss_kb(p)
        todo += _children(p)
    return total


class TreeSampler:
    """``with TreeSampler(pid) as s: ...`` then ``s.peak_kb``: the largest summed RSS seen."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval, self.peak_kb = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
