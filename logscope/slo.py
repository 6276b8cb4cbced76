"""The SLO a diagnosis judges by, by its option field (``AnalyzeOptions``, ``--slo-*``): its defaults live
here, apart from the diagnosis, so that the command line reads them without loading polars."""

from __future__ import annotations

import math

from .cliargs import USAGE  # the one bad-option code the library uses (cli.ExitCode.USAGE)
from .errors import LogscopeError

DEFAULTS = {"slo_ttft_s": 2.0, "slo_e2e_s": 20.0, "slo_success": 0.99}
# each field's option and what it takes: a latency is a positive number of seconds (a p95 of 0 s or less, or
# an endless one, can never be the line a step is judged by), a success share lies in [0, 1]
_OPTIONS = {
    "slo_ttft_s": ("--slo-ttft", "a number of seconds above 0, e.g. 2 or 0.5"),
    "slo_e2e_s": ("--slo-e2e", "a number of seconds above 0, e.g. 20"),
    "slo_success": ("--slo-success", "a share from 0 to 1, e.g. 0.99 for 99 %"),
}


def given(ttft_s: float | None, e2e_s: float | None, success: float | None) -> dict[str, float]:
    """The SLO fields set on a command line (None: not given), by option field, each checked (``check``)."""
    values = dict(zip(DEFAULTS, (ttft_s, e2e_s, success), strict=True))
    return check({k: v for k, v in values.items() if v is not None})


def check(fields: dict[str, float]) -> dict[str, float]:
    """``fields`` (option field -> value) when every value is one an SLO can hold, else a usage error that
    names the option, the value and what it takes: NaN, an infinity, a latency of 0 s or less, a share
    outside [0, 1]."""
    for k, v in fields.items():
        if k not in _OPTIONS:
            continue
        opt, takes = _OPTIONS[k]
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        ok = math.isfinite(x) and (0.0 <= x <= 1.0 if k == "slo_success" else x > 0.0)
        if not ok:
            raise LogscopeError(
                f"{opt}: {v!r} is not a possible SLO", hint=f"{opt} takes {takes}", code=USAGE
            )
    return fields
