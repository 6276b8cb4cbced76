"""The library API; ``logscope.cli`` is a thin layer over these functions."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from . import slo
from .ingest import IngestOptions, IngestResult, Progress, apart
from .ingest import ingest as _ingest
from .ingest import reuse as _reuse


@dataclass
class AnalyzeOptions:
    tz: str = "UTC"
    window: str | None = None  # e.g. "10s"; None = chosen from the data span
    since: datetime | None = None  # analyse only records overlapping [since, until] (UTC; logscope.resources.scope)
    until: datetime | None = None
    # memory the analysis after ingest may take: "auto" (a share of what is free), bytes, or None (no limit);
    # past it, analyze looks at the range that fits (logscope.resources.budget) unless since/until are given
    max_memory: int | str | None = "auto"
    range_chosen: dict | None = None  # set by fit_memory: why the range was chosen
    # correlate in time slices of about this many request-level rows (logscope.correlate.slices): None or 0,
    # the whole at once unless fit_memory finds that only slices fit the memory budget
    slice_rows: int | None = None
    # ingest in a process of its own (logscope.ingest.apart), so that the later stages start from a fresh heap: None,
    # when memory is tight for the input (logscope.resources.memory.tight)
    ingest_apart: bool | None = None
    slo_ttft_s: float = slo.DEFAULTS["slo_ttft_s"]
    slo_e2e_s: float = slo.DEFAULTS["slo_e2e_s"]
    slo_success: float = slo.DEFAULTS["slo_success"]
    include_prompts: bool = False
    replica: str | None = None
    nginx_log_format: str | None = None
    follow_links: bool = False  # read symbolic links out of the input folder (by default listed, not read)
    reparse: bool = False  # parse again even when out_dir holds the tables of the same files (ingest.reuse)
    workers: int | None = None  # None: logscope.ingest.default_workers()
    chunk_bytes: int | None = None  # None: logscope.ingest.sources.CHUNK_BYTES
    command_line: str = ""
    extra: dict = field(default_factory=dict)

    def ingest_options(self) -> IngestOptions:
        return IngestOptions(
            tz=self.tz,
            include_prompts=self.include_prompts,
            replica=self.replica,
            nginx_log_format=self.nginx_log_format,
            follow_links=self.follow_links,
            **({"workers": self.workers} if self.workers else {}),
            **({"chunk_bytes": self.chunk_bytes} if self.chunk_bytes else {}),
        )


def ingest(root: str | Path, out_dir: str | Path, options: AnalyzeOptions | None = None,
           progress: Progress | None = None) -> IngestResult:
    """Parse every log under ``root`` into the Parquet tables of ``out_dir``."""
    return _ingest(root, out_dir, (options or AnalyzeOptions()).ingest_options(), progress)


def correlate(out_dir: str | Path, options: AnalyzeOptions | None = None) -> dict:
    """Join the layers (client -> gateway -> vLLM), estimate clock skew, write requests/windows tables."""
    from .correlate import run

    return run(Path(out_dir), options or AnalyzeOptions())


def diagnose(out_dir: str | Path, options: AnalyzeOptions | None = None) -> dict:
    """Episodes, ladder, capacity and findings from the correlated tables."""
    from .diagnose import run

    return run(Path(out_dir), options or AnalyzeOptions())


def render(out_dir: str | Path, options: AnalyzeOptions | None = None) -> dict[str, Path]:
    """summary.json, summary.md and report.html from the tables in ``out_dir`` (no re-parsing)."""
    from .report import render as _render

    return _render(Path(out_dir), options or AnalyzeOptions())


def require_known_format(res: IngestResult) -> None:
    """Nothing to analyse when no file is in a known format: say so, with what was seen."""
    known = res.files.filter(~res.files["format"].is_in(["unknown", "empty", "binary", "unreadable", "skipped"]))
    if known.height == 0:
        from .errors import LogscopeError

        seen = ", ".join(f"{p} ({f})" for p, f in res.files.select("path", "format").head(5).iter_rows())
        raise LogscopeError(
            f"no file in a known format in the input: {seen}",
            hint="`logscope formats` lists what logscope reads; `logscope detect DIR --scores` shows each file's scores",
            code=4,
        )


def require_overlap(out_dir: str | Path, options: AnalyzeOptions) -> None:
    """A --since/--until range that misses every timestamp of the inputs is a mistake: say where they are."""
    from . import clock
    from .resources import scope

    rng = scope.of(options)
    lo, hi = clock.files_span(Path(out_dir))
    if rng.misses(lo, hi):
        from .errors import LogscopeError

        def t(x) -> str:
            return "…" if x is None else x.strftime("%Y-%m-%d %H:%M:%S UTC")

        raise LogscopeError(f"the range {t(rng.since)} → {t(rng.until)} holds none of the logs, which run from "
                            f"{t(lo)} to {t(hi)}", hint="give --since/--until inside that span (UTC, or in --tz)",
                            code=2)


def fit_memory(out_dir: str | Path, options: AnalyzeOptions) -> AnalyzeOptions:
    """The options to analyse with: when the whole input would not fit the memory budget and no range was
    given, correlation in time slices when that fits (``logscope.correlate.slices``), else the range that fits
    (``logscope.resources.budget.choose``), which every output then names."""
    from .resources import budget, memory, scope

    if scope.of(options):
        return options
    limit = memory.budget_of(options.max_memory)
    if options.slice_rows is None and budget.slices_fit(Path(out_dir), limit):
        return replace(options, slice_rows=budget.SLICE_ROWS)
    choice = budget.choose(Path(out_dir), limit)
    if choice is None:
        return options
    return replace(options, since=choice.range.since, until=choice.range.until, range_chosen=choice.range.chosen)


def analyze(root: str | Path, out_dir: str | Path, options: AnalyzeOptions | None = None,
            progress: Progress | None = None) -> dict[str, Path]:
    """Everything: ingest, correlate, diagnose, render. The ingest is skipped when ``out_dir`` already
    holds the tables of the same files, options and code (``options.reparse`` forces it)."""
    opts = options or AnalyzeOptions()
    res = None if opts.reparse else _reuse(root, out_dir, opts.ingest_options())
    if res is not None and progress:
        progress("reusing the tables of the same files", 0.75)
    # ingest is most of a first analyze: its progress runs to 0.75, then the later stages' steps
    res = res or _ingest_step(root, out_dir, opts, (lambda msg, frac: progress(msg, 0.75 * frac)) if progress else None)
    require_known_format(res)
    require_overlap(out_dir, opts)
    opts = fit_memory(out_dir, opts)
    if progress:
        progress("correlating", 0.8)
    correlate(out_dir, opts)
    if progress:
        progress("diagnosing", 0.9)
    diagnose(out_dir, opts)
    if progress:
        progress("rendering", 0.95)
    return render(out_dir, opts)


def _ingest_step(root: str | Path, out_dir: str | Path, opts: AnalyzeOptions, progress: Progress | None) -> IngestResult:
    separate = opts.ingest_apart
    if separate is None:
        from .resources import memory

        separate = memory.tight(Path(root), memory.budget_of(opts.max_memory))
    if separate and apart.POSSIBLE:
        return apart.ingest(root, out_dir, opts.ingest_options(), progress)
    return ingest(root, out_dir, opts, progress)


def detect(root: str | Path, options: AnalyzeOptions | None = None):
    """Formats, confidence and line coverage of every file under ``root``, plus every format's score.

    Coverage needs a real parse, so this ingests into a temporary folder and throws it away.
    """
    import tempfile

    import parsers

    from .ingest import envelopes, sources

    with tempfile.TemporaryDirectory(prefix="logscope-detect-") as tmp:
        res = ingest(root, tmp, options)
        files = res.files
    all_scores = {}
    for f in sources.discover(Path(root), (options or AnalyzeOptions()).follow_links):
        if f.skipped:
            continue
        lines, binary = sources.head(f)
        kind = None if binary else envelopes.detect(lines)
        all_scores[f.rel] = {} if binary else parsers.scores(envelopes.head_lines(kind, lines) if kind else lines)
    return files, all_scores
