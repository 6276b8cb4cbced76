"""The one error type the library raises on purpose, and the exit codes the command line ends with.

``ExitCode`` is the only place a code is defined: ``LogscopeError.code`` is one, the CLI exits with one, and
docs/usage.md's exit-code table is checked against it (tests/test_errors.py). A pipeline reads these codes, so a
code's meaning never changes; a new kind of failure gets a new member.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What ``logscope`` exits with; each member's doc line is the row docs/usage.md's table shows."""

    OK = 0
    FAIL_ON = (
        1  # --fail-on matched an episode class (nothing else may exit 1: a pipeline reads it as a finding)
    )
    USAGE = 2  # bad options (also typer's own code)
    NO_INPUT = 3  # input folder missing, empty or unreadable
    NOTHING_PARSED = 4  # files found, none in a known format
    OUTPUT = 5  # output folder not usable, inside the input, or its disk full
    CLUSTER = (
        6  # --cluster: scheduler unreachable or without worker, a worker that cannot run, or died at start
    )
    STAGE_DIED = (
        7  # a stage run in a process of its own died without a word (the kernel's OOM killer, a signal)
    )
    INTERNAL = 70  # a bug (or a stage that died without a word): please report with --debug output
    INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + SIGINT, as shells say it


class LogscopeError(Exception):
    """A failure logscope explains: ``what`` went wrong, a ``hint`` of what to do, the ``code`` to exit with."""

    def __init__(self, what: str, hint: str | None = None, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(what)
        self.what = what
        self.hint = hint
        self.code = ExitCode(code)


# docs/usage.md's "Exit codes" table, row by row: ``python -m logscope.errors`` prints it, tests/test_errors.py keeps
# docs/usage.md equal to it (edit the text here, then paste the output there)
MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.FAIL_ON: "`--fail-on` matched an episode class",
    ExitCode.USAGE: "bad options",
    ExitCode.NO_INPUT: "input folder missing, empty or unreadable (or none of its files can be read)",
    ExitCode.NOTHING_PARSED: "files found, none in a known format",
    ExitCode.OUTPUT: "output folder not usable (inside the input folder, a file, on a read-only or kernel file system, not writable, holding files logscope did not write without `--force`, an analysis' folder given to `compare`, or its disk full: the tables take ~2 % of the logs' size, up to ~10 % while ingest runs, twice that while a run replaces earlier outputs)",
    ExitCode.CLUSTER: "`--cluster`: the scheduler cannot be reached or has no worker, or a worker runs another logscope or cannot see DIR or write OUT",
    ExitCode.STAGE_DIED: "the ingest, run in a process of its own when memory is tight, died without a word (killed by the kernel's OOM killer or a signal): give it less to read at once (`--since`/`--until`, fewer files) or more memory",
    ExitCode.INTERNAL: "internal error (re-run with `--debug` and report the traceback)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, SIGINT): the run stops, its staging folder and lock are removed, OUT keeps its previous complete outputs",
}


def table() -> str:
    """docs/usage.md's exit-code table, from ``MEANINGS``."""
    rows = [f"| {int(c)} | {MEANINGS[c]} |" for c in ExitCode]
    return "\n".join(["| code | meaning |", "|---|---|", *rows]) + "\n"


if __name__ == "__main__":
    print(table(), end="")
