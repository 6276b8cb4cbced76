"""The ``logscope`` command: a thin layer over ``logscope.api``.

Each command parses its options, calls one library function and maps library errors to
exit codes (see ``ExitCode``). Options shared by several commands are defined once below.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import sys
import webbrowser
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__, slo
from .errors import LogscopeError
from .visible import json_visible, visible

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Post-mortem of LLM-serving incidents.")
err = Console(stderr=True, soft_wrap=True)  # error lines stay whole (greppable)
out = Console()
_ERROR = "[bold red]logscope: error:[/] "


def shown(text: object) -> str:
    """Text for a terminal line: its control characters escaped (a file name can hold ESC sequences that
    retitle or clear the terminal, a U+202E that reverses it) and no rich markup read in it."""
    return escape(visible(str(text), line=True))


def say(con: Console, text: object, style: str | None = None, lead: str = "", **kw) -> None:
    """Every line the command prints goes through here: ``text`` may name files or quote logs (``shown``);
    ``lead`` is logscope's own markup, such as the red 'logscope: error:'."""
    con.print(lead + shown(text), style=style, **kw)


class ExitCode(IntEnum):
    OK = 0
    FAIL_ON = 1  # --fail-on matched an episode class
    USAGE = 2  # bad options (typer's own code)
    NO_INPUT = 3  # input folder missing, empty or unreadable
    NOTHING_PARSED = 4  # files found, none in a known format
    OUTPUT = 5  # output folder not writable, inside the input, or its disk full
    INTERNAL = 70  # a bug: please report with --debug output


Input = Annotated[Path, typer.Argument(help="folder (or file) with the incident's logs")]
OutOpt = Annotated[Path | None, typer.Option("-o", "--out", help="output folder (default: ./logscope-<input name>)")]
SinceOpt = Annotated[str | None, typer.Option("--since", help="analyse only what overlaps this time on, e.g. 2026-11-29T08:30:00Z ('2026-11-29 08:30': in --tz); every line is still read")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="... and up to this time")]
# None where not given: analyze shows logscope.slo's defaults, report keeps the folder's SLO
SloTtftOpt = Annotated[float | None, typer.Option("--slo-ttft", help="SLO: TTFT p95 in seconds")]
SloE2eOpt = Annotated[float | None, typer.Option("--slo-e2e", help="SLO: end-to-end p95 in seconds")]
SloSuccessOpt = Annotated[float | None, typer.Option("--slo-success", help="SLO: share of requests that succeed")]
MaxMemOpt = Annotated[str, typer.Option("--max-memory", help="memory the analysis may take after ingest, e.g. 4G; past it, the range around the worst minute that fits is analysed ('auto': 80 % of the memory free; 'none': the whole input whatever it takes)")]
TzOpt = Annotated[str, typer.Option("--tz", help="zone of timestamps that carry none (vLLM, nginx error.log)")]
PromptsOpt = Annotated[bool, typer.Option("--include-prompts", help="copy prompt text into the outputs")]
ReplicaOpt = Annotated[str | None, typer.Option("--replica", help="replica name for server logs (default: folder or file stem)")]
NginxFmtOpt = Annotated[str | None, typer.Option("--nginx-log-format", help="nginx log_format string of the access logs")]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="print nothing but errors")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="print more detail")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="show tracebacks")]
LinksOpt = Annotated[bool, typer.Option("--follow-links", help="read symbolic links that point out of the input folder (by default they are listed as skipped, not read)")]


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
    from .resources import scope

    try:
        return scope.make(since, until, tz)
    except ValueError as e:
        raise LogscopeError(f"--since/--until: {e}", hint="times are ISO 8601, with an offset or in --tz",
                            code=ExitCode.USAGE) from None


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
        raise LogscopeError(f"{path} does not exist", hint="give the folder that holds the incident's logs", code=3)
    if path.is_dir() and not any(p.is_file() for p in path.rglob("*")):
        raise LogscopeError(f"{path} holds no files", hint="collect the vLLM, gateway and client logs there", code=3)


def _out_dir(inp: Path, out_opt: Path | None) -> Path:
    o = out_opt or Path.cwd() / f"logscope-{inp.resolve().name}"
    if inp.is_dir():
        try:
            o.resolve().relative_to(inp.resolve())
            raise LogscopeError(
                f"output folder {o} is inside the input folder", hint="choose -o outside it: inputs are never modified", code=5
            )
        except ValueError:
            pass
    return o


def _run(fn, debug: bool):
    try:
        return fn()
    except LogscopeError as e:
        say(err, e.what, lead=_ERROR)
        if e.hint:
            say(err, f"  help: {e.hint}")
        raise typer.Exit(e.code) from None
    except Exception as e:  # noqa: BLE001 - one boundary turns bugs into a clear message
        if debug:
            raise
        if _disk_full(e):  # not a bug: the output's disk filled up (the incident may well be a full disk)
            say(err, f"no space left on the output folder's device ({e})", lead=_ERROR)
            say(err, "  help: free space there or give another --out: the tables take ~2 % of the logs' size, "
                      "and up to ~10 % while ingest runs (1 GB of logs: 23 MB, 92 MB at the peak)")
            raise typer.Exit(ExitCode.OUTPUT) from None
        say(err, f"{type(e).__name__}: {e}", lead="[bold red]logscope: internal error:[/] ")
        say(err, "  help: re-run with --debug and report the traceback")
        raise typer.Exit(ExitCode.INTERNAL) from None


_DISK_FULL = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))  # 'No space left on device', 'Disk quota exceeded'


def _disk_full(e: BaseException | None) -> bool:
    """Was ``e`` (or what caused it) a write to a full disk or an exhausted quota? polars reports its own
    writes' OS errors as text ('No space left on device (os error 28)')."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(e) for text in _DISK_FULL):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def _progress(quiet: bool):
    if quiet:
        return None, None
    prog = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err, transient=True)
    task = prog.add_task("reading logs", total=1.0)

    def cb(msg: str, frac: float) -> None:
        prog.update(task, description=escape(visible(msg, line=True)[:60]), completed=min(frac, 1.0))

    return prog, cb


def _print_files(files, title: str) -> None:
    """The files' formats and coverage as a table, then each file's messages on lines of their own: a
    column of messages folds a sentence into a narrow strip when the output is not a terminal (80 columns)."""
    t = Table(title=shown(title))
    for c in ("file", "format", "confidence", "parsed / total", "coverage"):
        t.add_column(c, overflow="fold")
    notes = []
    for r in files.iter_rows(named=True):
        total = r["lines_total"] or 0
        cov = f"{100 * r['lines_parsed'] / total:.1f}%" if total else "-"
        t.add_row(shown(r["path"]), shown(r["format"]), f"{r['confidence']:.2f}", f"{r['lines_parsed']:,} / {total:,}",
                  cov)
        notes += [f"{r['path']}: {m}" for m in r["messages"] or []]
    out.print(t)
    for n in notes:
        say(out, n, soft_wrap=True)


@app.command()
def ingest(
    input: Input, out_dir: OutOpt = None, tz: TzOpt = "UTC", include_prompts: PromptsOpt = False,
    replica: ReplicaOpt = None, nginx_log_format: NginxFmtOpt = None, quiet: QuietOpt = False,
    debug: DebugOpt = False, follow_links: LinksOpt = False,
) -> None:
    """Parse every log under INPUT into Parquet tables (no analysis)."""
    from . import api

    _run(lambda: _check_input(input), debug)
    o = _run(lambda: _out_dir(input, out_dir), debug)
    prog, cb = _progress(quiet)
    opts = _options(tz, include_prompts, replica, nginx_log_format, follow_links)
    with prog or _Null():
        res = _run(lambda: api.ingest(input, o, opts, cb), debug)
    _run(lambda: api.require_known_format(res), debug)
    if not quiet:
        _print_files(res.files, f"ingested {res.bytes_in / 1e6:.1f} MB in {res.seconds:.1f} s -> {o}")


@app.command()
def detect(input: Input, scores: Annotated[bool, typer.Option(help="every format's score per file")] = False,
           debug: DebugOpt = False, follow_links: LinksOpt = False) -> None:
    """Show the format each file is recognised as, its confidence and line coverage."""
    from . import api

    _run(lambda: _check_input(input), debug)
    files, all_scores = _run(lambda: api.detect(input, _options(follow_links=follow_links)), debug)
    _print_files(files, f"formats under {input}")
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
def formats() -> None:
    """List the log formats logscope knows."""
    import parsers

    t = Table(title="formats")
    for c in ("name", "kind", "description"):
        t.add_column(c)
    for m in parsers.FORMATS:
        t.add_row(shown(m.NAME), shown(m.KIND), shown(m.DESCRIPTION))
    out.print(t)


@app.command()
def analyze(
    input: Input,
    out_dir: OutOpt = None,
    tz: TzOpt = "UTC",
    window: Annotated[str | None, typer.Option("--window", help="window width, e.g. 10s, 1m (default: from the span)")] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    slo_ttft: SloTtftOpt = slo.DEFAULTS["slo_ttft_s"],
    slo_e2e: SloE2eOpt = slo.DEFAULTS["slo_e2e_s"],
    slo_success: SloSuccessOpt = slo.DEFAULTS["slo_success"],
    max_memory: MaxMemOpt = "auto",
    include_prompts: PromptsOpt = False,
    replica: ReplicaOpt = None,
    nginx_log_format: NginxFmtOpt = None,
    reparse: Annotated[bool, typer.Option("--reparse", help="parse the logs again even when OUT holds the tables of the same files")] = False,
    open_: Annotated[bool, typer.Option("--open", help="open the report in the browser")] = False,
    json_: Annotated[bool, typer.Option("--json", help="print summary.json to stdout")] = False,
    fail_on: Annotated[list[str] | None, typer.Option("--fail-on", help="exit 1 if an episode of this class exists: spike, sustained, recurring, crash (repeatable)")] = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
    follow_links: LinksOpt = False,
) -> None:
    """Ingest, correlate, diagnose and write report.html, summary.json/.md and the Parquet tables."""
    from .resources import memory

    bad = [c for c in (fail_on or []) if c not in ("spike", "sustained", "recurring", "crash")]
    if bad:
        say(err, f"--fail-on takes spike, sustained, recurring or crash (got {bad[0]})", lead=_ERROR)
        raise typer.Exit(ExitCode.USAGE)
    _run(lambda: _check_input(input), debug)
    limit = _run(lambda: _memory(max_memory), debug)
    budget = memory.budget_of(limit)
    # before polars is loaded (the next import): how its allocator returns memory is set when it starts
    if memory.tune_allocator(input, budget) and verbose:
        say(err, f"logscope: note: memory is tight: polars' allocator returns freed memory promptly "
                  f"({memory.ALLOCATOR_ENV}={memory.RETURN_FREED})", style="yellow")
    apart = memory.tight(input, budget)
    if apart and verbose:
        say(err, "logscope: note: memory is tight: an ingest runs in a process of its own, so that the later "
                  "stages start from a fresh heap", style="yellow")
    from . import api

    rng = _run(lambda: _range(since, until, tz), debug)
    o = _run(lambda: _out_dir(input, out_dir), debug)
    opts = _options(tz, include_prompts, replica, nginx_log_format, follow_links, window=window, since=rng.since, until=rng.until,
                    max_memory=limit, reparse=reparse, ingest_apart=apart, **slo.given(slo_ttft, slo_e2e, slo_success))
    prog, cb = _progress(quiet or json_)
    started = datetime.now(UTC).replace(microsecond=0)
    with prog or _Null():
        paths = _run(lambda: api.analyze(input, o, opts, cb), debug)
    summary = json.loads(Path(paths["summary_json"]).read_text())
    if json_:
        sys.stdout.write(json_visible(Path(paths["summary_json"]).read_text()))
    elif not quiet:
        _reuse_note(o, started)
        _print_verdict(summary, paths, verbose)
    if open_:
        webbrowser.open(Path(paths["report_html"]).resolve().as_uri())
    classes = {e.get("class") for e in summary.get("episodes", [])}
    if fail_on and _chosen(summary):
        say(err, "logscope: warning: --fail-on saw only the range chosen to fit memory; give --max-memory "
                  "(or --max-memory none) to judge the whole input", style="yellow")
    if fail_on and classes & set(fail_on):
        raise typer.Exit(ExitCode.FAIL_ON)


@app.command()
def report(out_dir: Annotated[Path, typer.Argument(help="a folder written by logscope analyze/ingest")],
           since: SinceOpt = None, until: UntilOpt = None,
           whole: Annotated[bool, typer.Option("--whole", help="analyse the whole input again (drop an earlier --since/--until)")] = False,
           slo_ttft: SloTtftOpt = None, slo_e2e: SloE2eOpt = None, slo_success: SloSuccessOpt = None,
           max_memory: MaxMemOpt = "auto",
           tz: TzOpt = "UTC", quiet: QuietOpt = False, debug: DebugOpt = False) -> None:
    """Render report.html and summary.json/.md again from the Parquet tables (no re-parsing); with --since /
    --until (or --whole), correlate and diagnose again over that range first: ingest once, look at many ranges.
    With --slo-*, diagnose again against that SLO (the others stay as the folder was diagnosed). --whole analyses
    what analyze would: the range that fits --max-memory when the whole input does not."""
    from . import api

    if not (out_dir / "files.parquet").exists():
        say(err, f"{out_dir} has no files.parquet", lead=_ERROR)
        say(err, "  help: run `logscope analyze DIR -o OUT` (or `logscope ingest`) first")
        raise typer.Exit(ExitCode.NO_INPUT)
    rng = _run(lambda: _range(since, until, tz), debug)
    if whole and rng:
        say(err, "--whole and --since/--until exclude each other", lead=_ERROR)
        raise typer.Exit(ExitCode.USAGE)
    again = whole or bool(rng)
    asked = slo.given(slo_ttft, slo_e2e, slo_success)
    limit = _run(lambda: _memory(max_memory), debug)
    opts = _options(tz, since=rng.since, until=rng.until, max_memory=limit, **(_settings_of(out_dir) | asked))

    def go():
        api.require_overlap(out_dir, opts)
        correlate = again or not (out_dir / "requests.parquet").exists()
        o = api.fit_memory(out_dir, opts) if correlate else opts
        if correlate:
            api.correlate(out_dir, o)
        if correlate or asked or not (out_dir / "diagnosis.json").exists():
            api.diagnose(out_dir, o)
        return api.render(out_dir, o)

    paths = _run(go, debug)
    if not quiet:
        _range_note(json.loads(Path(paths["summary_json"]).read_text()), paths)
        say(out, f"report: {paths['report_html']}")


def _settings_of(out_dir: Path) -> dict:
    """The SLO and thresholds the folder was diagnosed with, so that another range is judged alike."""
    try:
        from .diagnose import slo_options

        d = json.loads((out_dir / "diagnosis.json").read_text(encoding="utf-8"))
        return {**slo_options(d), "extra": {"thresholds": dict(d.get("thresholds") or {})}}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _chosen(summary: dict) -> dict | None:
    """Why logscope chose the range analysed (summary.json's span.range.chosen), when it did."""
    return ((summary.get("span") or {}).get("range") or {}).get("chosen")


def _reuse_note(out_dir: Path, started: datetime) -> None:
    """Say so when analyze skipped the parse (ingest.json older than this run: logscope.ingest.reuse)."""
    try:
        meta = json.loads((Path(out_dir) / "ingest.json").read_text())
        at = datetime.fromisoformat(meta["ingested_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if at < started:
        n = len((meta.get("fingerprint") or {}).get("files") or [])
        say(err, f"logscope: note: the logs were not parsed again: {out_dir} holds the tables of the same "
                 f"{n} files, parsed at {meta['ingested_at']} (--reparse parses them again)", style="yellow")


def _range_note(summary: dict, paths: dict) -> None:
    """When logscope chose the range to fit memory: why, and the commands for the other ranges."""
    chosen = _chosen(summary)
    if chosen:
        folder = shlex.quote(str(Path(paths["report_html"]).parent))
        say(err, f"logscope: note: {chosen['reason']}", style="yellow")
        for o in chosen.get("others") or []:
            say(err, f"  another range ({o['trouble']:,} trouble signs): logscope report {folder} "
                     f"--since {o['since']} --until {o['until']}", style="yellow")


def _slices_note(summary: dict) -> None:
    """When the whole input was correlated in time slices to fit memory (logscope.correlate.slices)."""
    from .correlate.slices import NOTE

    for n in (summary.get("assumptions") or {}).get("notes") or []:
        if str(n.get("text", "")).startswith(NOTE):
            say(err, f"logscope: note: {n['text']}", style="yellow")


def _copies_note(summary: dict) -> None:
    """Files read as copies of others (logscope.ingest._mark_copies): their rows are not counted."""
    from .ingest import COPY_NOTE

    copies = [(f["path"], m) for f in (summary.get("inputs") or {}).get("files") or []
              for m in f.get("messages") or [] if m.startswith(COPY_NOTE)]
    if copies:
        names = ", ".join(f"{p} ({m[len(COPY_NOTE):].split(' ', 1)[0]})" for p, m in copies[:3])
        more = f" and {len(copies) - 3} more" if len(copies) > 3 else ""
        say(err, f"logscope: note: {len(copies)} file(s) hold only lines another input holds, so their rows "
                 f"are not counted twice: {names}{more}", style="yellow")


def _links_note(summary: dict) -> None:
    """Links out of the input folder that were not read (``logscope.ingest.sources.discover``)."""
    from .ingest.sources import LINK_OUT

    links = [f["path"] for f in (summary.get("inputs") or {}).get("files") or [] if LINK_OUT in (f.get("messages") or [])]
    if links:
        more = f" and {len(links) - 3} more" if len(links) > 3 else ""
        say(err, f"logscope: note: {len(links)} link(s) out of the input folder were not read: "
                 f"{', '.join(links[:3])}{more} (--follow-links reads them)", style="yellow")


def _print_verdict(summary: dict, paths: dict, verbose: bool) -> None:
    # log-derived text may contain [brackets]: never let rich read it as markup
    _range_note(summary, paths)
    _slices_note(summary)
    _copies_note(summary)
    _links_note(summary)
    for line in summary.get("verdict", []):
        say(out, line, style="bold")
    for f in summary.get("findings", [])[: (10 if verbose else 3)]:
        # the title: what, which class, when (two findings may share a symptom, e.g. an episode and its series)
        say(out, f"  [{f.get('severity')}] {f.get('title') or f.get('symptom')}")
        if verbose:
            say(out, f"      next: {f.get('next_test')}")
    say(out, f"report: {paths['report_html']}")


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def version_callback(value: bool) -> None:
    if value:
        say(out, f"logscope {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True)] = False) -> None:
    """Post-mortem of LLM-serving incidents: vLLM, gateway and client logs into one report."""
