"""Checks of the CLI's option values that the library would take too late or not at all: a bad value is
exit 2 with what is accepted, before any file is read (README, exit codes)."""

from __future__ import annotations

import difflib
import functools
import zoneinfo
from enum import StrEnum

from .errors import ExitCode, LogscopeError

MIN_WINDOW_S = 0.1  # below the log lines' own resolution (vLLM prints whole seconds)
MAX_WINDOW_S = 86_400.0  # one window for a day: past it a chart has nothing left to show


class FailOn(StrEnum):
    """The episode classes --fail-on takes (its --help lists them)."""

    SPIKE = "spike"
    SUSTAINED = "sustained"
    RECURRING = "recurring"
    CRASH = "crash"


@functools.cache
def _zones() -> frozenset[str]:
    # polars (which converts the times) knows every zone of the database but these two
    return (frozenset(zoneinfo.available_timezones()) | {"UTC"}) - {"Factory", "localtime"}


def zone(tz: str) -> str:
    """``tz`` when it names a time zone of the IANA database (what ``--tz`` takes), else a usage error that
    shows the form and the closest names."""
    if (
        tz == "UTC" or tz in _zones()
    ):  # the default needs no look at the database (30 ms: every zone file read)
        return tz
    close = difflib.get_close_matches(tz, sorted(_zones()), n=3, cutoff=0.5)
    raise LogscopeError(
        f"--tz: unknown time zone {tz!r}",
        hint="an IANA zone name, Area/Location: UTC, Europe/Paris, America/New_York, Asia/Kolkata"
        + (f" (close: {', '.join(close)})" if close else "")
        + "; `python -c 'import zoneinfo; print(sorted(zoneinfo.available_timezones()))'` lists them all",
        code=ExitCode.USAGE,
    )


def window(text: str | None) -> str | None:
    """``--window``'s value when it is a width logscope can use: a positive number and a unit, from 100 ms
    to a day (the grammar is ``logscope.correlate.windows.parse_width``'s)."""
    if text is None:
        return None
    from .correlate.windows import parse_width

    try:
        w = parse_width(text)
    except ValueError as e:
        raise LogscopeError(
            f"--window: {e}", hint="a number and a unit: 500ms, 10s, 1m, 1h", code=ExitCode.USAGE
        ) from None
    if w is None or not MIN_WINDOW_S <= w <= MAX_WINDOW_S:
        raise LogscopeError(
            f"--window: {text!r} is outside 100ms … 24h",
            hint="a number and a unit: 500ms, 10s, 1m, 1h",
            code=ExitCode.USAGE,
        )
    return text
