"""The ``logscope`` command: a thin layer over ``logscope.api``.

Each command parses its options and calls one library function; ``boundary.command`` is the one error boundary
that turns what the library raises into a message and an exit code (``logscope.errors.ExitCode``), as
``run`` does for the command line's own usage errors. Options shared by several commands are defined once
below.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import webbrowser
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from . import __version__, cliargs, outdir, slo
from .boundary import command, output
from .errors import ExitCode, LogscopeError
from .invisible_chars import json_visible
from .terminal import (
    chosen_range,
    err,
    fail_on_note,
    out,
    print_files,
    print_verdict,
    range_note,
    reuse_note,
    shown,
)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Post-mortem of LLM-serving incidents.")

__all__ = [
    "ExitCode",
    "app",
    "run",
]  # ExitCode: logscope.errors', here too for the tests and scripts using it


# readable=False: click would exit 2 on an unreadable folder; _check_input says so with exit 3 (README)
Input = Annotated[
    Path, typer.Argument(metavar="DIR", help="folder (or file) with the incident's logs", readable=False)
]
OutOpt = Annotated[
    Path | None, typer.Option("-o", "--out", help="output folder (default: ./logscope-<input name>)")
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="analyse only what overlaps this time on, e.g. 2026-11-29T08:30:00Z ('2026-11-29 08:30': in --tz); every line is still read",
    ),
]
UntilOpt = Annotated[str | None, typer.Option("--until", help="... and up to this time")]
# None where not given: analyze shows logscope.slo's defaults, report keeps the folder's SLO
SloTtftOpt = Annotated[float | None, typer.Option("--slo-ttft", help="SLO: TTFT p95 in seconds")]
SloE2eOpt = Annotated[float | None, typer.Option("--slo-e2e", help="SLO: end-to-end p95 in seconds")]
SloSuccessOpt = Annotated[
    float | None, typer.Option("--slo-success", help="SLO: share of requests that succeed")
]
NoPreemptOpt = Annotated[
    bool,
    typer.Option(
        "--slo-no-preemption",
        help="a ladder step with a preemption misses the SLO (otherwise pressure is reported beside it)",
    ),
]
NoQueueOpt = Annotated[
    bool, typer.Option("--slo-no-queue", help="a ladder step with a sustained queue misses the SLO")
]
MaxMemOpt = Annotated[
    str,
    typer.Option(
        "--max-memory",
        help="memory the analysis may take, e.g. 4G (given, ingest's batches shrink to hold it too); past it, the range around the worst minute that fits is analysed ('auto': 80 % of the memory free; 'none': the whole input whatever it takes)",
    ),
]
TzOpt = Annotated[
    str, typer.Option("--tz", help="zone of timestamps that carry none (vLLM, nginx error.log)")
]
PromptsOpt = Annotated[bool, typer.Option("--include-prompts", help="copy prompt text into the outputs")]
ReplicaOpt = Annotated[
    str | None, typer.Option("--replica", help="replica name for server logs (default: folder or file stem)")
]
NginxFmtOpt = Annotated[
    str | None, typer.Option("--nginx-log-format", help="nginx log_format string of the access logs")
]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="print nothing but errors")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="print more detail")]
DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug", help=f"on an internal error, show the traceback and write it to OUT/{outdir.DEBUG_FILE}"
    ),
]
LinksOpt = Annotated[
    bool,
    typer.Option(
        "--follow-links",
        help="read symbolic links that point out of the input folder (by default they are listed as skipped, not read)",
    ),
]
PngOpt = Annotated[
    bool,
    typer.Option(
        "--png",
        help="also draw timeline.png, the timeline as a picture for summary.md (adds ~2 s; report.html draws its own)",
    ),
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="write into an -o folder that holds files logscope did not write")
]


def _options(tz="UTC", include_prompts=False, replica=None, nginx_log_format=None, follow_links=False, **kw):
    from .api import AnalyzeOptions

    return AnalyzeOptions(
        tz=tz,
        include_prompts=include_prompts,
        replica=replica,
        nginx_log_format=nginx_log_format,
        follow_links=follow_links,
        command_line=shlex.join(["logscope", *sys.argv[1:]]),
        **kw,
    )


def _range(since: str | None, until: str | None, tz: str):
    from .resources import time_range

    try:
        return time_range.make(since, until, tz)
    except ValueError as e:
        raise LogscopeError(
            f"--since/--until: {e}", hint="times are ISO 8601, with an offset or in --tz", code=ExitCode.USAGE
        ) from None


def _memory(text: str) -> int | str | None:
    from .resources import memory

    if text.strip().lower() == "auto":
        return "auto"
    try:
        return memory.parse_size(text)
    except ValueError as e:
        raise LogscopeError(f"--max-memory: {e}", code=ExitCode.USAGE) from None


def _check_input(path: Path) -> None:
    if not path.exists():
        raise LogscopeError(
            f"{path} does not exist",
            hint="give the folder that holds the incident's logs",
            code=ExitCode.NO_INPUT,
        )
    from .resources import memory

    if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
        raise LogscopeError(
            f"{path} cannot be read (permission denied)",
            hint="run as a user who may read it",
            code=ExitCode.NO_INPUT,
        )
    if path.is_dir() and next(memory.input_paths(path), None) is None:
        raise LogscopeError(
            f"{path} holds no files",
            hint="collect the vLLM, gateway and client logs there",
            code=ExitCode.NO_INPUT,
        )


def _out_dir(inp: Path, out_opt: Path | None, force: bool = False) -> Path:
    o = out_opt or Path.cwd() / f"logscope-{inp.resolve().name}"
    if out_opt is None and inp.is_file() and o.resolve().is_relative_to(inp.resolve().parent):
        raise LogscopeError(
            f"the default output folder {o} would be beside the input log, among the logs",
            hint="give -o a folder elsewhere: logscope writes next to its input only when told to",
            code=ExitCode.OUTPUT,
        )
    if inp.is_dir():
        try:
            o.resolve().relative_to(inp.resolve())
            raise LogscopeError(
                f"output folder {o} is inside the input folder",
                hint="choose -o outside it: inputs are never modified",
                code=ExitCode.OUTPUT,
            )
        except ValueError:
            pass
    outdir.check(o, force)
    return o


def _progress(quiet: bool):
    if quiet:
        return None, None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn  # a quiet run draws none

    prog = Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err, transient=True
    )
    task = prog.add_task("reading logs", total=1.0)

    def cb(msg: str, frac: float) -> None:
        prog.update(task, description=shown(msg[:60]), completed=min(frac, 1.0))

    return prog, cb


@app.command()
@command
def ingest(
    input: Input,
    out_dir: OutOpt = None,
    tz: TzOpt = "UTC",
    include_prompts: PromptsOpt = False,
    replica: ReplicaOpt = None,
    nginx_log_format: NginxFmtOpt = None,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
    follow_links: LinksOpt = False,
) -> None:
    """Parse every log under DIR into Parquet tables (no analysis)."""
    cliargs.zone(tz)
    _check_input(input)
    o = output(_out_dir(input, out_dir, force))
    from . import api

    prog, cb = _progress(quiet)
    opts = _options(tz, include_prompts, replica, nginx_log_format, follow_links)
    with prog or _Null():
        res = api.ingest(input, o, opts, cb, known_only=True)
    if not quiet:
        print_files(res.files, f"ingested {res.bytes_in / 1e6:.1f} MB in {res.seconds:.1f} s -> {o}")


@app.command()
@command
def detect(
    input: Input,
    scores: Annotated[bool, typer.Option(help="every format's score per file")] = False,
    debug: DebugOpt = False,
    follow_links: LinksOpt = False,
) -> None:
    """Show the format each file is recognised as, its confidence and line coverage."""
    from . import api

    _check_input(input)
    files, all_scores = api.detect(input, _options(follow_links=follow_links))
    print_files(files, f"formats under {input}")  # files not read among them, each with why
    if scores:
        t = Table(title="detection scores")
        names = sorted({n for s in all_scores.values() for n in s})
        t.add_column("file")
        for n in names:
            t.add_column(n)
        for path, sc in sorted(all_scores.items()):
            t.add_row(shown(path), *[f"{sc.get(n, 0):.2f}" for n in names])
        out.print(t)


@app.command()
@command
def formats() -> None:
    """List the log formats logscope knows."""
    import logscope.parsers as parsers

    t = Table(title="formats")
    for c in ("name", "kind", "description"):
        t.add_column(c)
    for m in parsers.FORMATS:
        t.add_row(m.NAME, m.KIND, m.DESCRIPTION)
    out.print(t)
    from .ingest import envelopes  # the records some files wrap every line in, undone before detection

    w = Table(title="wrappers")
    for c in ("name", "description"):
        w.add_column(c)
    for name, what in envelopes.NAMES.items():
        w.add_row(name, what)
    out.print(w)


@app.command("export-traces")
@command
def export_traces(
    out_dir: Annotated[Path, typer.Argument(help="an analyze output folder")],
    dest: Annotated[
        Path | None, typer.Option("-o", "--output", help="file to write (default OUT/traces.otlp.jsonl)")
    ] = None,
) -> None:
    """Write the rebuilt requests, logs and spans merged, as OTLP JSON lines (Jaeger, Perfetto, a Collector)."""
    from . import traces_export

    if not (out_dir / "requests.parquet").exists() and not (out_dir / "spans.parquet").exists():
        raise LogscopeError(
            f"{out_dir}: no analyze output here (requests.parquet, spans.parquet)",
            hint="give a folder written by `logscope analyze`",
            code=ExitCode.NO_INPUT,
        )
    target = dest or out_dir / traces_export.FILE
    got = traces_export.write(out_dir, target)
    out.print(
        f"{target}: {got['spans']:,} spans ({got['input_spans']:,} from the input's traces, "
        f"{got['log_spans']:,} rebuilt from the logs) in {got['lines']:,} OTLP export line(s)"
    )


@app.command()
@command
def analyze(
    input: Input,
    out_dir: OutOpt = None,
    tz: TzOpt = "UTC",
    window: Annotated[
        str | None, typer.Option("--window", help="window width, e.g. 10s, 1m (default: from the span)")
    ] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    slo_ttft: SloTtftOpt = slo.DEFAULTS["slo_ttft_s"],
    slo_e2e: SloE2eOpt = slo.DEFAULTS["slo_e2e_s"],
    slo_success: SloSuccessOpt = slo.DEFAULTS["slo_success"],
    slo_no_preemption: NoPreemptOpt = False,
    slo_no_queue: NoQueueOpt = False,
    max_memory: MaxMemOpt = "auto",
    include_prompts: PromptsOpt = False,
    replica: ReplicaOpt = None,
    nginx_log_format: NginxFmtOpt = None,
    reparse: Annotated[
        bool,
        typer.Option(
            "--reparse", help="parse the logs again even when OUT holds the tables of the same files"
        ),
    ] = False,
    force: ForceOpt = False,
    open_: Annotated[bool, typer.Option("--open", help="open the report in the browser")] = False,
    json_: Annotated[bool, typer.Option("--json", help="print summary.json to stdout")] = False,
    follow_links: LinksOpt = False,
    png: PngOpt = False,
    export_traces_: Annotated[
        bool,
        typer.Option(
            "--export-traces",
            help="also write traces.otlp.jsonl: the rebuilt requests, the logs' view of each and the input's spans as OTLP JSON lines (Jaeger, Perfetto, a Collector)",
        ),
    ] = False,
    fail_on: Annotated[
        list[cliargs.FailOn] | None,
        typer.Option(
            "--fail-on",
            help="exit 1 if an episode of this class exists (repeatable)",
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            envvar="LOGSCOPE_CLUSTER",
            help="run the ingest and the correlation's slices as tasks on this Dask scheduler (tcp://HOST:8786), or on a local cluster of N worker processes (local[:N]); DIR and OUT on storage every worker shares",
        ),
    ] = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Ingest, correlate, diagnose and write report.html, summary.json/.md and the Parquet tables."""
    from .resources import memory

    cliargs.zone(tz)
    _check_input(input)
    limit = _memory(max_memory)
    budget = memory.budget_of(limit)
    # before polars is loaded (the next import): how its allocator returns memory is set when it starts
    if memory.tune_allocator(input, budget) and verbose:
        err.print(
            f"logscope: note: memory is tight: polars' allocator returns freed memory promptly "
            f"({memory.ALLOCATOR_ENV}={memory.RETURN_FREED})",
            style="yellow",
        )
    if memory.tune_glibc(input, budget) and verbose:
        err.print(
            "logscope: note: memory is tight: buffers of 128 KiB or more are mapped apart and handed back whole "
            f"({memory.GLIBC_ENV}={memory.GLIBC_MMAP})",
            style="yellow",
        )
    apart = memory.tight(input, budget)
    if apart and verbose:
        err.print(
            "logscope: note: memory is tight: an ingest runs in a process of its own, so that the later "
            "stages start from a fresh heap",
            style="yellow",
        )
    from . import api
    from .diagnose.thresholds import Thresholds

    cliargs.window(window)
    slos = slo.given(slo_ttft, slo_e2e, slo_success)
    rng = _range(since, until, tz)
    o = output(_out_dir(input, out_dir, force))
    opts = _options(
        tz,
        include_prompts,
        replica,
        nginx_log_format,
        follow_links,
        window=window,
        since=rng.since,
        until=rng.until,
        max_memory=limit,
        reparse=reparse,
        ingest_apart=apart,
        png=png,
        export_traces=export_traces_,
        thresholds=Thresholds(slo_no_preemption=slo_no_preemption, slo_no_queue=slo_no_queue),
        **slos,
    )
    prog, cb = _progress(quiet or json_)
    started = datetime.now(UTC).replace(microsecond=0)
    with _cluster(cluster, input, o, verbose) as address, prog or _Null():
        opts.cluster = address
        paths = api.analyze(input, o, opts, cb)
    summary = json.loads(Path(paths["summary_json"]).read_text())
    if json_:  # the same data, its invisible characters as \u escapes
        sys.stdout.write(json_visible(Path(paths["summary_json"]).read_text()))
    elif not quiet:
        reuse_note(o, started)
        print_verdict(summary, paths, verbose)
    if open_:
        webbrowser.open(Path(paths["report_html"]).resolve().as_uri())
    classes = {e.get("class") for e in summary.get("episodes", [])}
    if fail_on and chosen_range(summary):
        err.print(
            "logscope: warning: --fail-on saw only the range chosen to fit memory; give --max-memory "
            "(or --max-memory none) to judge the whole input",
            style="yellow",
        )
    wanted = {c.value for c in fail_on or []}
    if wanted and classes & wanted:
        fail_on_note(summary, wanted)
        raise typer.Exit(ExitCode.FAIL_ON)


@app.command()
@command
def report(
    out_dir: Annotated[
        Path, typer.Argument(metavar="OUT", help="a folder written by logscope analyze/ingest")
    ],
    since: SinceOpt = None,
    until: UntilOpt = None,
    whole: Annotated[
        bool, typer.Option("--whole", help="analyse the whole input again (drop an earlier --since/--until)")
    ] = False,
    slo_ttft: SloTtftOpt = None,
    slo_e2e: SloE2eOpt = None,
    slo_success: SloSuccessOpt = None,
    max_memory: MaxMemOpt = "auto",
    png: PngOpt = False,
    tz: TzOpt = "UTC",
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Render report.html and summary.json/.md again from the Parquet tables (no re-parsing); with --since /
    --until (or --whole), correlate and diagnose again over that range first: ingest once, look at many ranges.
    With --slo-*, diagnose again against that SLO (the others stay as the folder was diagnosed). --whole analyses
    what analyze would: the range that fits --max-memory when the whole input does not."""
    from . import api

    cliargs.zone(tz)
    asked = slo.given(slo_ttft, slo_e2e, slo_success)
    if not (out_dir / "files.parquet").exists():
        raise LogscopeError(
            f"{out_dir} has no files.parquet",
            hint="run `logscope analyze DIR -o OUT` (or `logscope ingest`) first",
            code=ExitCode.NO_INPUT,
        )
    output(out_dir)
    rng = _range(since, until, tz)
    if whole and rng:
        raise LogscopeError("--whole and --since/--until exclude each other", code=ExitCode.USAGE)
    again = whole or bool(rng)
    limit = _memory(max_memory)
    opts = _options(
        tz, since=rng.since, until=rng.until, max_memory=limit, png=png, **(_settings_of(out_dir) | asked)
    )

    paths, diagnosed = api.rerender(out_dir, opts, again, bool(asked))
    if not quiet:
        summary = json.loads(Path(paths["summary_json"]).read_text())
        if diagnosed:  # a new diagnosis: its verdict, as analyze prints it
            print_verdict(summary, paths, False)
        else:
            range_note(summary, paths)
            out.print(f"report: {shown(str(paths['report_html']))}")


@app.command()
@command
def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="A B [C …]",
            help="runs: analyze output folders, or input folders (analysed first); two for a pair, three or more "
            "for a sweep of one setting",
        ),
    ],
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            help="output folder (default: ./logscope-compare-<A>-<B>, ./logscope-sweep-<A>-<last>)",
        ),
    ] = None,
    slo_ttft: SloTtftOpt = None,
    slo_e2e: SloE2eOpt = None,
    slo_success: SloSuccessOpt = None,
    json_: Annotated[bool, typer.Option("--json", help="print compare.json to stdout")] = False,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Did the one change help? compare.html/.json/.md for two runs of the same traffic (what changed, what
    moved beyond the run-to-run noise on each clock, the trade, the verdict), or for a sweep of three or more
    (each run's working boundary and figures per step against the setting, and which value met the SLO at the
    highest load). The SLO is the first run's unless given."""
    from . import api
    from .compare import check_count, default_out, slo_given, terminal_lines

    check_count(runs)
    o = out_dir or Path.cwd() / default_out(runs)
    for p in runs:
        _check_input(p)
        _out_dir(p, o)
    output(o)
    opts = _options(compare_slo=slo_given(slo_ttft, slo_e2e, slo_success))
    prog, cb = _progress(quiet or json_)
    with prog or _Null():
        pair = len(runs) == 2
        res = api.compare(runs[0], runs[1], o, opts, cb) if pair else api.sweep(runs, o, opts, cb)
    if json_:
        sys.stdout.write(Path(res["paths"]["compare_json"]).read_text())
    elif not quiet:
        for i, line in enumerate(terminal_lines(res["doc"])):
            out.print(shown(line), style="bold" if i == 0 else None, soft_wrap=True)
        out.print(f"compare: {shown(str(res['paths']['compare_html']))}")


def _settings_of(out_dir: Path) -> dict:
    """The SLO and thresholds the folder was diagnosed with, so that another range is judged alike."""
    try:
        from .diagnose import slo_options
        from .diagnose.thresholds import from_dict

        d = json.loads((out_dir / "diagnosis.json").read_text(encoding="utf-8"))
        kept = {k: v for k, v in slo_options(d).items() if _possible(k, v)}  # one no SLO can be: the default
        th, unknown = from_dict(d.get("thresholds") or {})
        return {**kept, "thresholds": th, "thresholds_unknown": tuple(unknown)}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _possible(field: str, value) -> bool:
    try:
        slo.check({field: value})
    except LogscopeError:
        return False
    return True


@contextmanager
def _cluster(address: str | None, input: Path, o: Path, verbose: bool) -> Iterator[str | None]:
    """The cluster session (logscope.cluster), opened and checked while the files are detected, said once it
    is (its problems come out of the analysis, before any task); None: no cluster."""
    if not address:
        yield None
        return
    from . import cluster

    def said(s: cluster.Session) -> None:
        if verbose:
            err.print(
                shown(
                    f"logscope: cluster {s.address}: {s.workers} workers, {s.threads} threads; dashboard: "
                    f"{s.dashboard or 'none (pip install bokeh)'}"
                )
            )
        for note in s.notes:
            err.print(shown(f"logscope: cluster: {note}"))

    with cluster.opening(address, input, o, said):
        yield address


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def version_callback(value: bool) -> None:
    if value:
        out.print(f"logscope {__version__}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True)] = False,
) -> None:
    """Post-mortem of LLM-serving incidents: vLLM, gateway and client logs into one report."""
    for c in (out, err):
        if not c.is_terminal:  # piped or redirected: whole lines (rich would fold them at 80 columns)
            c.soft_wrap, c.width = True, _UNWRAPPED


_UNWRAPPED = 100_000


def run() -> None:
    """The console script: typer's app, with a usage error said like every other error (one line and a hint,
    exit 2) and no traceback but with --debug (which the commands handle)."""
    try:
        from typer import _click as click  # typer >= 0.26 carries its own click
    except ImportError:  # pragma: no cover - older typer
        import click  # type: ignore[no-redef]

    command = typer.main.get_command(app)
    try:
        code = command.main(prog_name="logscope", standalone_mode=False)
    except click.exceptions.UsageError as e:
        err.print(f"[bold red]logscope: error:[/] {shown(e.format_message())}")
        err.print(shown(f"  help: {e.ctx.command_path if e.ctx else 'logscope'} --help"))
        sys.exit(ExitCode.USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):
        err.print("logscope: interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except click.exceptions.ClickException as e:
        err.print(f"[bold red]logscope: error:[/] {shown(e.format_message())}")
        sys.exit(e.exit_code)
    if code == ExitCode.INTERRUPTED:  # typer turns Ctrl-C's KeyboardInterrupt into this code
        err.print("logscope: interrupted")
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
