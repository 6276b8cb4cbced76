"""How many preemptions an episode counted from vLLM V0's warnings stands for, in words.

V0's scheduler prints "Sequence group X is preempted by PreemptionMode.… total_num_cumulative_preemption=N" only
when its counter is a multiple of 50 (vllm/core/scheduler.py, ``_preempt``: ``if self.num_cumulative_preemption %
50 == 0``), N being the count after this one: 1, 51, 101, …. So a warning is one per 50 preemptions: where every
line carries N the count is vLLM's own counter (vllm-public 04: 101; lab v0-ladder: 1 … 201); where a line is cut
before its number (vllm-public 33's last line) the lines give a floor only, never "1 preemption" as exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .records import Episode

COUNTER = "vLLM's cumulative counter (total_num_cumulative_preemption)"
FLOOR = "vLLM V0 logs every 50th"


def _n(n: int) -> str:
    return f"{n:,} preemption{'s' if n != 1 else ''}"


def words(e: Mapping[str, Any] | Episode) -> str:
    """'N preemptions', 'N preemptions by vLLM's cumulative counter (…)' or 'at least N preemption(s) (vLLM V0
    logs every 50th)', from the episode's count and how its details say it was counted."""
    n = e["count"]
    by = (e.get("details") or {}).get("preemptions_counted_by")
    if e["signal"] != "preemptions" or by is None:
        return _n(n)
    if by == "v0_counter":
        return f"{_n(n)} by {COUNTER}"
    return f"at least {_n(n)} ({FLOOR})"


def counted_by(lines: int, uncounted: int) -> str | None:
    """How V0 warnings count an episode: by vLLM's counter when every line carries it, else as a floor."""
    if not lines:
        return None
    return "v0_floor" if uncounted else "v0_counter"


def untimed_words(lines: int, cumulative: int | None) -> str:
    """A title for V0 warnings that carry no time: the counter's last value, or a floor where no line carries it."""
    if cumulative is None:
        return f"At least {_n(lines)} ({FLOOR}), on warning(s) without a time ({lines} line(s))"
    return f"{_n(cumulative)[0].upper()}{_n(cumulative)[1:]} by {COUNTER}, on warning(s) without a time ({lines} line(s))"
