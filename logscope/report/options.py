"""What the report reads of its options, typed: ``ReportOptions`` (``AnalyzeOptions`` has every field), and
``Judged``, the options with the SLO the diagnosis judged by, which every output then states and draws."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class ReportOptions(Protocol):
    tz: str  # the zone of the times shown when ingest.json does not name one
    png: bool  # timeline.png is drawn beside summary.md
    include_prompts: bool  # the prompts' shapes may quote them
    command_line: str  # summary.json's generated_by
    slo_ttft_s: float
    slo_e2e_s: float
    slo_success: float


@dataclass
class Judged:
    """A report's options once the SLO the diagnosis judged by (diagnosis.json) replaced the rendering's."""

    tz: str
    png: bool
    include_prompts: bool
    command_line: str
    slo_ttft_s: float
    slo_e2e_s: float
    slo_success: float


def judged(options: ReportOptions, slo: Mapping[str, float]) -> Judged:
    """``options`` with the SLO fields ``slo`` holds (named as the analysis options, ``slo_ttft_s``...) in place of
    its own."""
    return Judged(
        tz=options.tz,
        png=options.png,
        include_prompts=options.include_prompts,
        command_line=options.command_line,
        slo_ttft_s=float(slo.get("slo_ttft_s", options.slo_ttft_s)),
        slo_e2e_s=float(slo.get("slo_e2e_s", options.slo_e2e_s)),
        slo_success=float(slo.get("slo_success", options.slo_success)),
    )


def slo_of(options: ReportOptions, name: str) -> float | None:
    """An SLO by its option's name (a timeline panel names the one it draws); None for a name of none."""
    return {
        "slo_ttft_s": options.slo_ttft_s,
        "slo_e2e_s": options.slo_e2e_s,
        "slo_success": options.slo_success,
    }.get(name)
