"""The one error type the library raises on purpose; the CLI turns it into a message and an exit code."""

from __future__ import annotations


class LogscopeError(Exception):
    def __init__(self, what: str, hint: str | None = None, code: int = 2) -> None:
        super().__init__(what)
        self.what = what
        self.hint = hint
        self.code = code
