"""Invisible characters made visible: file names and log text are attacker-controlled.

A folder name holding ``ESC ] 0 ;`` retitles the terminal that prints it, ``ESC [ 2 J`` clears it, and a
U+202E (right-to-left override) in a file name makes ``log.exe`` of ``exe.gol`` on a page. Every text that
logscope shows (the terminal, report.html, summary.md) goes through ``visible``: C0 and C1 control
characters, DEL, the bidi controls and the other invisible format characters are written as escapes
(``\\x1b``, ``\\u202e``); the text stays otherwise as it was. summary.json and the tables keep the data as read.
"""

from __future__ import annotations

import re
from typing import Any

# C0 (but tab and newline, which a page or a table renders as space), DEL, C1; soft hyphen, Arabic letter
# mark, Mongolian vowel separator; zero-width characters and the bidi marks, embeddings, overrides and
# isolates; line and paragraph separators; word joiner and invisible operators; BOM; interlinear annotations
_INVISIBLE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
)
_UNSEEN = re.compile(f"[{_INVISIBLE}]")
_UNSEEN_LINE = re.compile(f"[\t\n{_INVISIBLE}]")  # on a terminal line, a newline or tab is shown too


def _escape(m: re.Match) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: str, line: bool = False) -> str:
    """``text`` with its invisible characters escaped; ``line``: tab and newline too (one terminal line)."""
    return (_UNSEEN_LINE if line else _UNSEEN).sub(_escape, text)


def visible_all(obj: Any) -> Any:
    """``visible`` applied to every string (keys too) in nested dicts and lists: the data of a chart."""
    if isinstance(obj, str):
        return visible(obj)
    if isinstance(obj, dict):
        return {visible_all(k): visible_all(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [visible_all(v) for v in obj]
    return obj


def has_invisible(text: str) -> bool:
    return _UNSEEN.search(text) is not None


def json_visible(text: str) -> str:
    """JSON text with its invisible characters as ``\\u`` escapes: the same data, safe on a terminal (in JSON
    such a character can only stand inside a string, where the escape means the same)."""
    return _UNSEEN.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
