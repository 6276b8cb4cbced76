"""The digits compare's tables give a duration, a rate or a mean: what the data behind it holds.

The rule: a duration of a minute or more to the second (a load's span runs from a first send to a last one, and
the gateway's access log stamps them to the second: 'load s 167.929' claimed the millisecond), a shorter one to
the tenth; a rate or a mean of counts to three significant digits (a count over a span each known to within a
percent over minutes). Latencies keep the millisecond their clocks record (moves, render.value); shares the
tenth of a point. The loads are compared on the unrounded figures (traffic.differences): only what is shown is
rounded.

One function (``text``) gives a figure for the tables and for the verdict: 'e2e p95 (gateway)' read 69.799 s in the
table and 69.8 s in the verdict. A mean keeps its three digits where they are zeros (executions per request
'1.03 -> 1' read as if B's were known to the unit), and a relative change says what its rounding carries ('-0 %'
for 1.665 -> 1.657 s; '+2402 %' for a figure 25 times A's).

A change (``change``) is rounded by the same rule as the figures it compares: never finer than the coarser of the two
figures' last shown digits ('waiting, mean 15.3 → 5.73, -9.59' claimed a hundredth that A's figure does not show;
now '-9.6').
"""

from __future__ import annotations

import math
from typing import Any

from ..report.fmt import fnum, pct

# a count's mean (waiting, mean: a gauge of whole requests sampled at scrapes) or a ratio of counts (executions
# per request): three significant digits
MEANS = ("count", "x")


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


def text(x: Any, unit: str | None) -> str:
    """A figure as the tables and the verdict give it: a latency to the millisecond its clock records, a share
    to the tenth of a point, tokens per second whole, a mean to three significant digits."""
    if x is None:
        return "unknown"
    if unit == "share":
        return pct(x)
    if unit == "s":
        return f"{fnum(x, 3)} s"
    if unit == "tps":  # tokens per second over a step of seconds: a whole token is its precision
        return f"{round(x):,}"
    if unit in MEANS and isinstance(x, float) and x:
        return f"{x:,.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"  # '1.00', not '1', beside '1.03'
    return fnum(x, 3)


def last_digit(x: Any, unit: str | None) -> float | None:
    """The place of the last digit ``text`` shows of ``x`` (0.001 for a latency's millisecond, 0.1 for a mean shown
    '15.3', 1 for a whole number; None for an unknown figure or a mean of 0, whose '0' bounds no digit)."""
    if x is None or isinstance(x, bool):
        return None
    if unit == "share":
        return 0.001  # the tenth of a point
    if unit == "s":
        return 0.001  # the millisecond its clock records, a whole second's too ('0 s' of orphaned generation)
    if unit == "tps" or isinstance(x, int):
        return 1.0
    if unit in MEANS:
        return 10.0 ** -max(0, 2 - math.floor(math.log10(abs(x)))) if x else None
    return 0.001  # fnum(x, 3): a latency's millisecond, any other figure's third decimal


def change(ch: float | int, a: Any, b: Any, unit: str | None) -> str:
    """B − A as the table gives it beside A and B, to the coarser of their last shown digits ('-9.6' between 15.3
    and 5.73, '+0.008' between two latencies to the millisecond), with its sign; a change that rounds to 0 there
    is said below that digit ('<0.1'), never '-0'. A share's change is its own ('+1.2 pt': render.change)."""
    steps = [s for s in (last_digit(a, unit), last_digit(b, unit)) if s is not None]
    step = max(steps) if steps else 0.001
    places = max(0, -round(math.log10(step)))
    r = round(ch, places)
    if r == 0:
        return "0" if ch == 0 else f"<{fnum(step, places)}"
    sign = "+" if r > 0 else ""
    if unit == "tps" or places == 0:
        return f"{sign}{round(r):,}"
    if unit in MEANS:  # the mean's own style: its digits kept where they are zeros ('1.00 → 2.20, +1.20')
        return f"{sign}{r:,.{places}f}"
    return f"{sign}{fnum(r, places)}"


def relative(rel: float | None) -> str:
    """B's change against A's figure: '-3 %'; '<1 %' where the whole percent rounds to 0 (never '-0 %'); from
    ten times A's up, the ratio to two digits ('25x', not '+2402 %')."""
    if rel is None:
        return ""
    if round(rel * 100) == 0:
        return "<1\u00a0%"
    if rel >= 9:  # two significant digits, as the whole percent below it gives ('283x' claimed a third)
        r = 1 + rel
        return f"{fnum(round(r, 1 - math.floor(math.log10(r))))}x"
    return f"{rel * 100:+.0f}\u00a0%"
