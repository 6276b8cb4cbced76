"""The digits compare's tables give a duration, a rate or a mean: what the data behind it holds.

The rule: a duration of a minute or more to the second (a load's span runs from a first send to a last one, and
the gateway's access log stamps them to the second: 'load s 167.929' claimed the millisecond), a shorter one to
the tenth; a rate or a mean of counts to three significant digits (a count over a span each known to within a
percent over minutes). Latencies keep the millisecond their clocks record (moves, render.value); shares the
tenth of a point. The loads are compared on the unrounded figures (traffic.differences): only what is shown is
rounded.
"""

from __future__ import annotations

import math


def seconds(x: float | None) -> float | int | None:
    """A duration to the second from a minute up, else to the tenth."""
    if x is None:
        return None
    return round(x) if abs(x) >= 60 else round(x, 1)


def figures(x: float | None, digits: int = 3) -> float | int | None:
    """A rate or a mean to ``digits`` significant digits (a whole number stays whole)."""
    if x is None or x == 0:
        return x
    if isinstance(x, int):
        return x
    r = round(x, max(0, digits - 1 - math.floor(math.log10(abs(x)))))
    return int(r) if r == int(r) else r
