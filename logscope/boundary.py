"""The command line's one error boundary (``command``, applied to every command of ``logscope.cli``): what the
library raises becomes a message and an exit code (``logscope.errors.ExitCode``); a bug is one line, its traceback
with --debug, also written into the output folder once the command knows it (``output``)."""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import typer

from . import __version__, outdir
from .errors import ExitCode, LogscopeError
from .terminal import err, shown


@dataclass
class _Call:
    """What the error boundary needs to know of the command that runs: --debug, and the output folder once it
    is known to be one logscope may write into (where --debug's file goes)."""

    debug: bool = False
    out_dir: Path | None = None


_CALL: ContextVar[_Call] = ContextVar("logscope_call")


def output(o: Path) -> Path:
    """``o``, now known as the command's output folder."""
    call = _CALL.get(None)
    if call is not None:
        call.out_dir = o
    return o


def command(fn: Callable[..., None]) -> Callable[..., None]:
    """The error boundary of a command: a ``LogscopeError`` is its message, its hint and its exit code; a full
    disk under the output is exit 5; anything else is a bug, said in one line (the traceback with --debug), exit
    70. ``typer.Exit`` (--fail-on, --version) passes through. Ctrl-C is ``run``'s."""

    @functools.wraps(fn)
    def bounded(*args, **kwargs) -> None:
        call = _Call(debug=bool(kwargs.get("debug", False)))
        token = _CALL.set(call)
        try:
            fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except LogscopeError as e:
            err.print(f"[bold red]logscope: error:[/] {shown(e.what)}")
            if e.hint:
                err.print(f"  help: {shown(e.hint)}")
            if call.debug and e.__cause__ is not None:  # what the error was made of (a write to a full disk)
                _debug_file(e.__cause__, call.out_dir)
            raise typer.Exit(e.code) from None
        except Exception as e:  # noqa: BLE001 - one boundary turns bugs into a clear message
            raise typer.Exit(_unexpected(e, call)) from None
        finally:
            _CALL.reset(token)

    return bounded


def _unexpected(e: Exception, call: _Call) -> ExitCode:
    if outdir.disk_full(e):  # not a bug: the output's disk filled up (the incident may well be a full disk)
        err.print(
            f"[bold red]logscope: error:[/] no space left on the output folder's device ({shown(str(e))})"
        )
        err.print(f"  help: {outdir.FULL_HINT}")
        if call.debug:
            _debug_file(e, call.out_dir)
        return ExitCode.OUTPUT
    err.print(f"[bold red]logscope: internal error:[/] {shown(f'{type(e).__name__}: {e}')}")
    if call.debug:
        _debug_file(e, call.out_dir)
    else:
        err.print("  help: re-run with --debug and report the traceback")
    return ExitCode.INTERNAL


def _debug_file(e: BaseException, out_dir: Path | None) -> None:
    """--debug: the traceback on stderr, and with logscope's version and the command in OUT's debug file (in the
    temporary folder when OUT cannot hold it: its disk may be the full one), said where, or that it could not."""
    import platform
    import traceback

    tb = "".join(traceback.format_exception(e))
    sys.stderr.write(tb)
    text = (
        f"logscope {__version__}, Python {platform.python_version()} on {platform.platform()}\n"
        f"command: {shlex.join(['logscope', *sys.argv[1:]])}\n\n{tb}"
    )
    where, why = outdir.write_debug(out_dir, text)
    if why and out_dir is not None:  # why OUT could not hold it (none is given without OUT)
        err.print(shown(f"  note: {out_dir / outdir.DEBUG_FILE} could not be written: {why}"))
    if where:
        err.print(
            shown(f"  help: the traceback and logscope's version are in {where}: attach it to the report")
        )
    else:
        err.print("  help: report the traceback above, with `logscope --version`")
