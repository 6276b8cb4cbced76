"""What the CLI prints about an analysis: the verdict and the top findings, the notes a run owes its reader
(a range chosen, slices, copies, reused tables, matched --fail-on episodes) and the file tables. Log text is
escaped for rich (it may hold [brackets]); the consoles never wrap a line that goes to a pipe or a file."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .invisible_chars import visible

err = Console(stderr=True, soft_wrap=True)  # error lines stay whole (greppable)
out = Console()


def shown(text: object) -> str:
    """Text for a terminal line: its control characters escaped (a file name can hold ESC sequences that
    retitle or clear the terminal, a U+202E that reverses it) and no rich markup read in it."""
    return escape(visible(str(text), line=True))


def print_files(files, title: str) -> None:
    """The files' formats and coverage as a table, then each file's messages on lines of their own: a
    column of messages folds a sentence into a narrow strip when the output is not a terminal (80 columns)."""
    t = Table(title=shown(title))
    for c in ("file", "format", "confidence", "parsed / total", "coverage"):
        t.add_column(c, overflow="fold")
    notes = []
    for r in files.iter_rows(named=True):
        total = r["lines_total"] or 0
        cov = f"{100 * r['lines_parsed'] / total:.1f}%" if total else "-"
        t.add_row(
            shown(r["path"]),
            shown(r["format"]),
            f"{r['confidence']:.2f}",
            f"{r['lines_parsed']:,} / {total:,}",
            cov,
        )
        notes += [f"{r['path']}: {m}" for m in r["messages"] or []]
    out.print(t)
    for n in notes:
        out.print(shown(n), soft_wrap=True)


def chosen_range(summary: dict) -> dict | None:
    """Why logscope chose the range analysed (summary.json's span.range.chosen), when it did."""
    return ((summary.get("span") or {}).get("range") or {}).get("chosen")


def reuse_note(out_dir: Path, started: datetime) -> None:
    """Say so when analyze skipped the parse (ingest.json older than this run: logscope.ingest.reuse)."""
    try:
        meta = json.loads((Path(out_dir) / "ingest.json").read_text(encoding="utf-8"))
        at = datetime.fromisoformat(meta["ingested_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if at < started:
        n = len((meta.get("fingerprint") or {}).get("files") or [])
        err.print(
            shown(
                f"logscope: note: the logs were not parsed again: {out_dir} holds the tables of the same "
                f"{n} files, parsed at {meta['ingested_at']} (--reparse parses them again)"
            ),
            style="yellow",
        )


def range_note(summary: dict, paths: dict) -> None:
    """When logscope chose the range to fit memory: why, and the commands for the other ranges."""
    chosen = chosen_range(summary)
    if chosen:
        folder = shlex.quote(str(Path(paths["report_html"]).parent))
        err.print(shown(f"logscope: note: {chosen['reason']}"), style="yellow")
        for o in chosen.get("others") or []:
            err.print(
                shown(
                    f"  another range ({o['trouble']:,} trouble signs): logscope report {folder} "
                    f"--since {o['since']} --until {o['until']}"
                ),
                style="yellow",
            )


def _slices_note(summary: dict) -> None:
    """When the whole input was correlated in time slices to fit memory (logscope.correlate.slices)."""
    from .correlate.slices import NOTE

    for n in (summary.get("assumptions") or {}).get("notes") or []:
        if str(n.get("text", "")).startswith(NOTE):
            err.print(shown(f"logscope: note: {n['text']}"), style="yellow")


def _copies_note(summary: dict) -> None:
    """Files read as copies of others (logscope.ingest._mark_copies): their rows are not counted."""
    from .ingest import COPY_NOTE

    copies = [
        (f["path"], m)
        for f in (summary.get("inputs") or {}).get("files") or []
        for m in f.get("messages") or []
        if m.startswith(COPY_NOTE)
    ]
    if copies:
        names = ", ".join(f"{p} ({m[len(COPY_NOTE) :].split(' ', 1)[0]})" for p, m in copies[:3])
        more = f" and {len(copies) - 3} more" if len(copies) > 3 else ""
        err.print(
            shown(
                f"logscope: note: {len(copies)} file(s) hold only lines another input holds, so their rows "
                f"are not counted twice: {names}{more}"
            ),
            style="yellow",
        )


def fail_on_note(summary: dict, classes: set[str]) -> None:
    """Which episodes made --fail-on exit 1: a pipeline's log then says why it failed."""
    hit = [e for e in summary.get("episodes", []) if e.get("class") in classes]
    err.print(
        shown(f"logscope: --fail-on {','.join(sorted(classes))}: {len(hit)} episode(s) matched, exit 1")
    )
    for e in hit[:5]:
        where = f" on {e['replica']}" if e.get("replica") else ""
        err.print(
            shown(
                f"  {e.get('class')} {e.get('id')}: {e.get('signal')}{where}, {e.get('start')} → {e.get('end')}"
            )
        )
    if len(hit) > 5:
        err.print(f"  and {len(hit) - 5} more (summary.json's episodes)")


RETRY_ROWS = {
    "logical_requests": "logical requests", "client_attempts": "client attempts",
    "gateway_requests": "gateway requests", "gateway_attempts": "gateway upstream attempts",
    "server_requests": "vLLM requests", "server_aborts": "vLLM aborts", "amplification": "amplification",
    "orphaned_requests": "orphaned requests",
}  # fmt: skip


def unseen_words(r: dict | None) -> str | None:
    """summary.json's retries.not_observed in one line: the rows of the retries table the folder has no record
    of, grouped by what is missing (the same object the report's and summary.md's tables render)."""
    by_why: dict[str, list[str]] = {}
    eng = (r or {}).get("server_engine") or "server"  # whose records the server rows are (layers_seen.engine)
    for key, why in ((r or {}).get("not_observed") or {}).items():
        if key in RETRY_ROWS:
            by_why.setdefault(why, []).append(RETRY_ROWS[key].replace("vLLM", eng))
    if not by_why:
        return None
    return "retries, not observed: " + "; ".join(f"{', '.join(rows)}: {why}" for why, rows in by_why.items())


def trace_words(tr: dict | None) -> str | None:
    """summary.json's traces in one line: spans read, the join, attempts with no engine span and why."""
    if not tr:
        return None
    line = f"spans: {tr['spans']:,} read; {tr['requests_joined']:,} of {tr['requests']:,} requests joined to a trace"
    if tr.get("attempt_spans"):
        line += (
            f"; {tr['attempts_with_engine']:,} of {tr['attempt_spans']:,} client attempts have an engine span"
        )
        why = (tr.get("no_engine_span") or {}).get("by_class") or {}
        if why:
            line += " (without: " + ", ".join(f"{k} {v:,}" for k, v in why.items()) + ")"
    # an engine's clock off its callers': the split corrected by it, or unknown (summary.md has the evidence)
    for k in [*(tr.get("clock_skew") or []), *([tr["gateway_clock"]] if tr.get("gateway_clock") else [])]:
        if k.get("status") != "agree":
            line += f"; {k['note']}"
    return line


def print_verdict(summary: dict, paths: dict, verbose: bool) -> None:
    # log-derived text may contain [brackets]: never let rich read it as markup
    range_note(summary, paths)
    _slices_note(summary)
    _copies_note(summary)
    _links_note(summary)
    for line in summary.get("verdict", []):
        out.print(shown(line), style="bold")
    limit = 10 if verbose else 3
    found = summary.get("findings", [])
    for f in found[:limit]:
        # the title: what, which class, when (two findings may share a symptom, e.g. an episode and its series)
        out.print(shown(f"  [{f.get('severity')}] {f.get('title') or f.get('symptom')}"))
        if f.get("severity_by"):  # the rule that set it and its facts (severity.Severity)
            out.print(shown(f"      severity {f['severity_by']['sentence']}"))
        if verbose:
            out.print(shown(f"      next: {f.get('next_test')}"))
    if len(found) > limit:
        out.print(f"  +{len(found) - limit} more findings (report.html, summary.md)")
    seen = summary.get("outcomes") or {}
    # what the callers saw, when some did not get an answer, an ok may hide a stream that failed after its 200, or
    # only the engine's own end states an ok (no caller's record: compare counts the same, named so)
    engine = any(r.get("stated_by") == "engine" for r in seen.get("by_status") or [])
    if set(seen.get("by_outcome") or {}) - {"ok"} or seen.get("uncertain") or engine:
        # imported here: the diagnose package loads polars, which must wait for the allocator setting (cli)
        from .diagnose.outcomes import words as outcome_words

        out.print(shown(f"callers saw: {outcome_words(seen)}"))
    note = (summary.get("retries") or {}).get("amplification_note")
    if note:
        out.print(shown(f"amplification {summary['retries']['amplification']:.2f}, {note}"))
    sp = summary.get("span") or {}
    for key in ("far_apart", "anchored"):  # a span the files cannot vouch for: said beside the verdict
        if sp.get(key):
            out.print(shown(f"time span: {sp[key]}"))
    if layers := unseen_words(summary.get("retries")):
        out.print(shown(layers))
    if other := ((summary.get("retries") or {}).get("gateway_other") or {}).get("text"):
        out.print(shown(other))
    if spans := trace_words(summary.get("traces")):
        out.print(shown(spans))
    out.print(f"report: {shown(str(paths['report_html']))}")
    if paths.get("traces_otlp"):
        out.print(
            f"traces: {shown(str(paths['traces_otlp']))} (OTLP JSON lines: Jaeger, Perfetto, a Collector)"
        )


def _links_note(summary: dict) -> None:
    """The files and folders found that were not read (links out of the input folder, hidden folders, images,
    logscope's own outputs: ``logscope.ingest.inputs``), a note per reason naming the first three."""
    from .ingest.sources import LINK_OUT

    by_why: dict[str, list[str]] = {}
    for f in (summary.get("inputs") or {}).get("files") or []:
        if f.get("format") == "skipped" and f.get("messages"):
            by_why.setdefault(f["messages"][0], []).append(f["path"])
    for why, paths in by_why.items():
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        head = f"{', '.join(paths[:3])}{more}"
        text = (
            f"{len(paths)} link(s) out of the input folder were not read: {head} (--follow-links reads them)"
            if why == LINK_OUT
            else f"not read: {head}: {why}"
        )
        err.print(shown(f"logscope: note: {text}"), style="yellow")
