"""Ingest in a process of its own, so that the stages after it start from a fresh heap.

Polars' allocator (jemalloc) keeps part of what a stage freed mapped, and the parsers touch code pages that
no later stage needs: a 5 GB folder's ingest leaves ~110 MB resident that correlate then adds its own peak
to (docs/performance.md, item 34). A child process gives all of it back when it exits. Its tables are on
disk anyway; what comes back is the small ``IngestResult`` (the files table) and the progress messages.

The child is a new interpreter (``python -c``), not a fork: a fork of a process whose polars thread pools
run may deadlock, and multiprocessing's ``spawn`` runs the caller's main script again, which a notebook
cell or a script without a ``__main__`` guard does not survive. It inherits the environment (the allocator
setting ``logscope.resources.memory`` made) and is told the rest on its stdin; its messages come back pickled on a
pipe of their own, so that what it prints stays the user's. It costs a Python start and polars' import
(~0.5 s), and is chosen only when memory is tight (``logscope.resources.memory.tight``).
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import threading
import traceback
from pathlib import Path

from ..errors import ExitCode, LogscopeError
from . import ingest as ingest_here
from .options import IngestOptions, IngestResult, Progress

CHILD = "logscope.ingest.child_process:child"
POSSIBLE = os.name == "posix"  # the messages' pipe is handed to the child by ``pass_fds``


def child(root: str, out_dir: str, options: IngestOptions, send) -> None:
    """The child's work: ingest, with each progress message and the result sent to the parent."""
    send(("done", ingest_here(root, out_dir, options, lambda msg, frac: send(("progress", msg, frac)))))


def main() -> None:
    """The child process: its task pickled on stdin, its messages pickled to the file descriptor in argv."""
    out = os.fdopen(int(sys.argv[1]), "wb")
    lock = threading.Lock()  # ingest reports progress from several threads

    def send(msg: tuple) -> None:
        with lock:
            pickle.dump(msg, out)
            out.flush()

    try:
        sys_path, target, args = pickle.load(sys.stdin.buffer)
        sys.path[:] = sys_path
        mod, _, fn = target.partition(":")
        getattr(importlib.import_module(mod), fn)(*args, send)
    except LogscopeError as e:
        send(("logscope_error", e.what, e.hint, e.code))
    except BaseException as e:  # noqa: BLE001 - whatever it was, the parent says it
        send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))
    finally:
        out.close()


def ingest(
    root: str | Path,
    out_dir: str | Path,
    options: IngestOptions,
    progress: Progress | None = None,
    target: str = CHILD,
) -> IngestResult:
    """``logscope.ingest.ingest`` run in a child process: the same tables, result and progress. An error raised
    there is raised here (a ``LogscopeError`` as itself), and a child that died without a word (the kernel's OOM
    killer) is a ``LogscopeError`` that says so (exit ``ExitCode.STAGE_DIED``). ``target`` ('module:function') is what the child runs."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import logscope.ingest.child_process as a; a.main()", str(w)],
            stdin=subprocess.PIPE,
            pass_fds=(w,),
        )
    finally:
        os.close(w)
    done = False
    try:
        with os.fdopen(r, "rb") as messages:
            assert proc.stdin is not None
            try:
                proc.stdin.write(pickle.dumps((sys.path, target, (str(root), str(out_dir), options))))
                proc.stdin.close()
            except BrokenPipeError:  # it ended before it read its task: said below, by its exit code
                pass
            while True:
                try:
                    kind, *rest = pickle.load(messages)
                except (EOFError, pickle.UnpicklingError):  # the child ended without its last word
                    break
                if kind == "progress":
                    if progress is not None:
                        progress(*rest)
                elif kind == "done":
                    done = True
                    return rest[0]
                elif kind == "logscope_error":
                    raise LogscopeError(rest[0], hint=rest[1], code=rest[2])
                else:
                    raise RuntimeError(f"ingest failed in its process: {rest[0]}\n{rest[1]}")
        raise LogscopeError(
            _died(proc.wait()),
            code=ExitCode.STAGE_DIED,  # never 1, which says "--fail-on matched": a crash is not a finding
            hint="run `logscope ingest` alone to see its own messages; when memory ran out, give "
            "less to read at once (--since/--until, fewer files)",
        )
    finally:
        if not done:  # leaving on an error (Ctrl-C, the child's own): what it still does is of no use
            proc.kill()
        proc.wait()


def _died(code: int | None) -> str:
    what = f"the ingest process ended before it finished (exit code {code})"
    if code is not None and code < 0:
        what += f": killed by signal {-code}" + (
            " (SIGKILL: what the kernel's OOM killer sends)" if code == -9 else ""
        )
    return what
