"""The SLO a diagnosis judges by, by its option field (``AnalyzeOptions``, ``--slo-*``): its defaults live
here, apart from the diagnosis, so that the command line reads them without loading polars."""

from __future__ import annotations

DEFAULTS = {"slo_ttft_s": 2.0, "slo_e2e_s": 20.0, "slo_success": 0.99}


def given(ttft_s: float | None, e2e_s: float | None, success: float | None) -> dict[str, float]:
    """The SLO fields set on a command line (None: not given), by option field."""
    values = dict(zip(DEFAULTS, (ttft_s, e2e_s, success), strict=True))
    return {k: v for k, v in values.items() if v is not None}
