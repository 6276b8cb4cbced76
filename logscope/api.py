"""The library API; ``logscope.cli`` is a thin layer over these functions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from . import outdir, slo
from .errors import ExitCode, LogscopeError
from .ingest import PARSED_TABLES, IngestOptions, IngestResult, Progress, child_process
from .ingest import ingest as _ingest
from .ingest import reuse as _reuse
from .ingest.derive import TABLES as DERIVED
from .resources import memory

if (
    TYPE_CHECKING
):  # the diagnosis' package is imported when a diagnosis runs: `logscope ingest` needs none of it
    from .diagnose.thresholds import Thresholds

# what an ingest writes: a second analyze of the same files reuses these (logscope.ingest.reuse)
INGEST_FILES = ("ingest.json", *(f"{n}.parquet" for n in (*PARSED_TABLES, *DERIVED, "files", "unrecognized")))

# what each later stage writes: a re-render links the rest of the folder into its staging folder (outdir.staged)
# (the traces' export is of the correlated requests: stale when they are correlated again)
CORRELATE_FILES = (
    "requests.parquet",
    "windows.parquet",
    "clock_offsets.parquet",
    "correlation.json",
    "request_spans.parquet",
    "traces.otlp.jsonl",
)
DIAGNOSE_FILES = ("diagnosis.json", "episodes.parquet", "findings.parquet", "ladder.parquet")
RENDER_FILES = ("summary.json", "summary.md", "report.html", "timeline.png")


@dataclass
class AnalyzeOptions:
    tz: str = "UTC"
    window: str | None = None  # e.g. "10s"; None = chosen from the data span
    since: datetime | None = (
        None  # analyse only records overlapping [since, until] (UTC; logscope.resources.time_range)
    )
    until: datetime | None = None
    # memory the analysis after ingest may take: "auto" (a share of what is free), bytes, or None (no limit);
    # past it, analyze looks at the range that fits (logscope.resources.budget) unless since/until are given
    max_memory: int | str | None = "auto"
    range_chosen: dict | None = None  # set by fit_memory: why the range was chosen
    # correlate in time slices of about this many request-level rows (logscope.correlate.slices): None or 0,
    # the whole at once unless fit_memory finds that only slices fit the memory budget
    slice_rows: int | None = None
    # ingest in a process of its own (logscope.ingest.child_process), so that the later stages start from a fresh heap: None,
    # when memory is tight for the input (logscope.resources.memory.tight)
    ingest_apart: bool | None = None
    slo_ttft_s: float = slo.DEFAULTS["slo_ttft_s"]
    slo_e2e_s: float = slo.DEFAULTS["slo_e2e_s"]
    slo_success: float = slo.DEFAULTS["slo_success"]
    include_prompts: bool = False
    png: bool = (
        False  # draw timeline.png too (~2 s of vl-convert on a small folder; report.html draws its own)
    )
    # write traces.otlp.jsonl: the rebuilt requests, the logs' view of each and the input's spans as OTLP JSON
    export_traces: bool = False
    replica: str | None = None
    nginx_log_format: str | None = None
    follow_links: bool = False  # read symbolic links out of the input folder (by default listed, not read)
    reparse: bool = False  # parse again even when out_dir holds the tables of the same files (ingest.reuse)
    workers: int | None = None  # None: logscope.ingest.default_workers()
    chunk_bytes: int | None = None  # None: logscope.ingest.sources.CHUNK_BYTES
    # a Dask scheduler's address, or local[:N]: the ingest's streams and the correlation's slices run as its tasks
    # (logscope.cluster; the 'dask' extra)
    cluster: str | None = None
    command_line: str = ""
    # the diagnosis' thresholds (logscope.diagnose.thresholds), and the names a stored diagnosis.json set that no
    # threshold of this version has (``logscope report OUT --since`` judges by the stored ones; reported, not lost)
    thresholds: Thresholds | None = None  # None: the defaults, Thresholds()
    thresholds_unknown: tuple[str, ...] = ()
    # ``logscope compare``: the SLO fields given on its command line ({"ttft_s", "e2e_s", "success"}; None: the
    # first run's)
    compare_slo: dict[str, float] | None = None

    def ingest_options(self) -> IngestOptions:
        return IngestOptions(
            tz=self.tz,
            include_prompts=self.include_prompts,
            replica=self.replica,
            nginx_log_format=self.nginx_log_format,
            follow_links=self.follow_links,
            **({"workers": self.workers} if self.workers else {}),
            **({"chunk_bytes": self.chunk_bytes} if self.chunk_bytes else {}),
            memory_budget=memory.limit_of(self.max_memory),
        )


def ingest(
    root: str | Path,
    out_dir: str | Path,
    options: AnalyzeOptions | None = None,
    progress: Progress | None = None,
    known_only: bool = False,
) -> IngestResult:
    """Parse every log under ``root`` into the Parquet tables of ``out_dir`` (written whole or not at all:
    ``logscope.outdir``); with ``known_only``, none when no file is in a known format."""
    with outdir.staged(out_dir) as work:
        res = _ingest(root, work, (options or AnalyzeOptions()).ingest_options(), progress)
        if known_only:
            require_known_format(res, root)
    return replace(res, out_dir=Path(out_dir))


def correlate(out_dir: str | Path, options: AnalyzeOptions | None = None) -> dict:
    """Join the layers (client -> gateway -> vLLM), estimate clock skew, write requests/windows tables."""
    from .correlate import run

    return run(Path(out_dir), options or AnalyzeOptions())


def diagnose(out_dir: str | Path, options: AnalyzeOptions | None = None) -> dict:
    """Episodes, ladder, capacity and findings from the correlated tables."""
    from .diagnose import run

    return run(Path(out_dir), _checked(options or AnalyzeOptions()))


def _checked(options: AnalyzeOptions) -> AnalyzeOptions:
    """``options`` when its SLO is one a diagnosis can judge by (``slo.check``: a LogscopeError, code 2, else):
    a notebook's options are checked as the command line's are."""
    slo.check(
        {"slo_ttft_s": options.slo_ttft_s, "slo_e2e_s": options.slo_e2e_s, "slo_success": options.slo_success}
    )
    try:
        memory.limit_of(options.max_memory)
    except ValueError as e:
        raise LogscopeError(f"max_memory: {e}", code=ExitCode.USAGE) from None
    return options


def render(out_dir: str | Path, options: AnalyzeOptions | None = None) -> dict[str, Path]:
    """summary.json, summary.md and report.html from the tables in ``out_dir`` (no re-parsing)."""
    from .report import render as _render

    return _render(Path(out_dir), options or AnalyzeOptions())


def require_known_format(res: IngestResult, root: str | Path | None = None) -> None:
    """Nothing to analyse when no file is in a known format: say so, naming the files and why each was not
    read (its format, or why it was skipped: images, hidden folders, logscope's own outputs)."""
    known = res.files.filter(
        ~res.files["format"].is_in(["unknown", "empty", "binary", "unreadable", "skipped"])
    )
    if known.height == 0:
        seen = [
            f"{p} ({f})" + (f": {m[0]}" if m else "")
            for p, f, m in res.files.select("path", "format", "messages").iter_rows()
        ]
        shown = "; ".join(seen[:8]) + (f"; and {len(seen) - 8} more" if len(seen) > 8 else "")
        if (
            res.files.height and (res.files["format"] == "unreadable").all()
        ):  # README: exit 3, unreadable input
            raise LogscopeError(
                f"nothing in the input could be read: {shown}",
                hint="run as a user who may read the files (files.parquet says why each failed)",
                code=ExitCode.NO_INPUT,
            )
        raise LogscopeError(
            f"no file in a known format in the input: {shown or 'no file'}",
            hint="`logscope formats` lists what logscope reads; `logscope detect DIR --scores` shows each file's scores",
            code=ExitCode.NOTHING_PARSED,
        )


def require_overlap(out_dir: str | Path, options: AnalyzeOptions) -> None:
    """A --since/--until range that misses every timestamp of the inputs is a mistake: say where they are."""
    from . import clock
    from .resources import time_range

    rng = time_range.of(options)
    lo, hi = clock.files_span(Path(out_dir))
    if rng.misses(lo, hi):

        def t(x) -> str:
            return "…" if x is None else x.strftime("%Y-%m-%d %H:%M:%S UTC")

        raise LogscopeError(
            f"the range {t(rng.since)} → {t(rng.until)} holds none of the logs, which run from "
            f"{t(lo)} to {t(hi)}",
            hint="give --since/--until inside that span (UTC, or in --tz)",
            code=ExitCode.USAGE,
        )


def fit_memory(out_dir: str | Path, options: AnalyzeOptions) -> AnalyzeOptions:
    """The options to analyse with: when the whole input would not fit the memory budget and no range was
    given, correlation in time slices when that fits (``logscope.correlate.slices``), else the range that fits
    (``logscope.resources.budget.choose``), which every output then names."""
    from .resources import budget, time_range

    if time_range.of(options):
        return options
    limit = memory.budget_of(options.max_memory)
    if options.slice_rows is None and budget.slices_fit(Path(out_dir), limit):
        return replace(options, slice_rows=budget.SLICE_ROWS)
    choice = budget.choose(Path(out_dir), limit)
    if choice is None:
        return options
    return replace(
        options, since=choice.range.since, until=choice.range.until, range_chosen=choice.range.chosen
    )


def analyze(
    root: str | Path,
    out_dir: str | Path,
    options: AnalyzeOptions | None = None,
    progress: Progress | None = None,
) -> dict[str, Path]:
    """Everything: ingest, correlate, diagnose, render. The ingest is skipped when ``out_dir`` already
    holds the tables of the same files, options and code (``options.reparse`` forces it)."""
    opts = _checked(options or AnalyzeOptions())
    if opts.cluster:
        from . import cluster

        # opened and checked while the files are detected; the first task waits for it (the CLI's, when it opened one)
        with cluster.opening(opts.cluster, root, out_dir):
            return _analyze(root, out_dir, opts, progress)
    return _analyze(root, out_dir, opts, progress)


def _analyze(
    root: str | Path, out_dir: str | Path, opts: AnalyzeOptions, progress: Progress | None
) -> dict[str, Path]:
    missed: LogscopeError | None = None
    # every output is written in a staging folder and renamed into place at the end (logscope.outdir)
    with outdir.staged(out_dir) as work:
        res = None if opts.reparse else _reuse(root, out_dir, opts.ingest_options())
        if res is not None:
            outdir.link_in(Path(out_dir), work, INGEST_FILES)
            if progress:
                progress("reusing the tables of the same files", 0.75)
        # ingest is most of a first analyze: its progress runs to 0.75, then the later stages' steps
        res = res or _ingest_step(
            root, work, opts, (lambda msg, frac: progress(msg, 0.75 * frac)) if progress else None
        )
        if opts.cluster:  # opened while the files were detected: a failed check is said even when no task ran
            from . import cluster

            cluster.current()
        require_known_format(res, root)
        try:
            require_overlap(work, opts)
        except LogscopeError as e:
            if res.reused:  # nothing new: the folder stays as it was
                raise
            missed = e  # the new tables are kept: `logscope report OUT --since …` looks again without parsing
        else:
            paths = _analyze_tables(work, opts, progress)
    if missed is not None:
        raise missed
    return outdir.moved(paths, work, Path(out_dir))


def _analyze_tables(work: Path, opts: AnalyzeOptions, progress: Progress | None) -> dict[str, Path]:
    opts = fit_memory(work, opts)
    if progress:
        progress("correlating", 0.8)
    correlate(work, opts)
    if progress:
        progress("diagnosing", 0.9)
    diagnose(work, opts)
    if progress:
        progress("rendering", 0.95)
    paths = render(work, opts)
    if opts.export_traces:
        from . import traces_export

        paths["traces_otlp"] = work / traces_export.FILE
        traces_export.write(work, paths["traces_otlp"])
    return paths


def rerender(
    out_dir: str | Path, options: AnalyzeOptions, again: bool = False, rediagnose: bool = False
) -> tuple[dict[str, Path], bool]:
    """The report again from ``out_dir``'s tables (``logscope report``): correlated again when ``again`` (a
    range) or never correlated, diagnosed again then, when ``rediagnose`` (another SLO) or never diagnosed.
    The paths written and whether it diagnosed again; the outputs are replaced whole or not at all."""
    out = Path(out_dir)
    _checked(options)
    with outdir.staged(out) as work:
        require_overlap(out, options)
        again = again or not (out / "requests.parquet").exists()
        rediagnose = again or rediagnose or not (out / "diagnosis.json").exists()
        redone = {*RENDER_FILES, *(CORRELATE_FILES if again else ()), *(DIAGNOSE_FILES if rediagnose else ())}
        outdir.link_in(
            out,
            work,
            [
                p.name
                for p in out.iterdir()
                if p.is_file()
                and outdir.is_output_name(p.name)
                and p.name not in redone
                and not p.name.startswith(".")
                and p.name != outdir.DEBUG_FILE
            ],
        )
        opts = fit_memory(work, options) if again else options
        if again:
            correlate(work, opts)
        if rediagnose:
            diagnose(work, opts)
        paths = render(work, opts)
    return outdir.moved(paths, work, out), rediagnose


def _ingest_step(
    root: str | Path, out_dir: str | Path, opts: AnalyzeOptions, progress: Progress | None
) -> IngestResult:
    if opts.cluster:  # on the cluster's workers: this process only detects and assembles
        from .cluster import ingest as on_cluster

        return on_cluster.ingest(root, out_dir, opts.ingest_options(), progress)
    separate = opts.ingest_apart
    if separate is None:
        separate = memory.tight(Path(root), memory.budget_of(opts.max_memory))
    if separate and child_process.POSSIBLE:
        memory.tune_glibc(Path(root), memory.budget_of(opts.max_memory))  # here and in the ingest's process
        return child_process.ingest(root, out_dir, opts.ingest_options(), progress)
    return _ingest(root, out_dir, opts.ingest_options(), progress)


def detect(root: str | Path, options: AnalyzeOptions | None = None):
    """Formats, confidence and line coverage of every file under ``root``, plus every format's score.

    Coverage needs a real parse, so this ingests into a temporary folder and throws it away.
    """
    import tempfile

    import logscope.parsers as parsers

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
        all_scores[f.rel] = (
            {} if binary else parsers.scores(envelopes.head_lines(kind, lines) if kind else lines)
        )
    return files, all_scores


def compare(
    a: str | Path,
    b: str | Path,
    out_dir: str | Path,
    options: AnalyzeOptions | None = None,
    progress: Progress | None = None,
) -> dict:
    """Compare two runs (analyze output folders, or input folders analysed first into ``out_dir/run-a`` and
    ``run-b``): compare.json, compare.md and compare.html in ``out_dir``. Returns {"doc", "paths"}."""
    from .compare import run as _compare

    return _compare(Path(a), Path(b), Path(out_dir), *_compare_args(options, progress))


def sweep(
    runs: Sequence[str | Path],
    out_dir: str | Path,
    options: AnalyzeOptions | None = None,
    progress: Progress | None = None,
) -> dict:
    """Compare three or more runs of one traffic that differ in one setting (a sweep of --max-num-seqs, say):
    per run its working boundary and figures per step, against the setting. Returns {"doc", "paths"}."""
    from .compare import run_sweep

    return run_sweep([Path(r) for r in runs], Path(out_dir), *_compare_args(options, progress))


def _compare_args(options: AnalyzeOptions | None, progress: Progress | None):
    from .compare import CompareOptions

    opts = options or AnalyzeOptions()

    def analyse(src: Path, dst: Path) -> None:
        analyze(src, dst, replace(opts, command_line=""), progress)

    slo_given = opts.compare_slo
    if slo_given:  # {"ttft_s", "e2e_s", "success"}: checked as --slo-* are
        slo.check({f"slo_{k}": v for k, v in slo_given.items()})
    return CompareOptions(opts.command_line, slo_given), analyse
