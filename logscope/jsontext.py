"""The JSON files logscope writes (ingest.json, correlation.json, diagnosis.json, summary.json, compare.json, the
output folder's marker), all through ``write``: UTF-8 characters kept, a final newline, one layout per file.

Large documents are written fast and still readable:

``json.dumps(indent=...)`` runs the standard library's pure-Python encoder (its C encoder has no indent):
0.46 s for the diagnosis of a day-long folder. Here the outer ``depth`` levels are laid out one member per
line and everything below is written by the C encoder on one line: a 5 GB folder's diagnosis.json in a
third of the time, each episode's fields still a line apiece."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Layout:
    """How one file is laid out (``dumps``' arguments)."""

    depth: int | None = 3
    indent: int = 1
    sort_keys: bool = True
    strict: bool = False

    def dumps(self, obj: Any) -> str:
        return dumps(obj, depth=self.depth, indent=self.indent, sort_keys=self.sort_keys, strict=self.strict)


# each file's layout, as it was before they were all written here (the same bytes, but that ingest.json and the
# marker now keep non-ASCII characters as UTF-8 and end with a newline, as the others do)
DIAGNOSIS = Layout()  # large: outer levels a member per line
CORRELATION = Layout(depth=None)
RECORD = Layout(depth=None, sort_keys=False)  # ingest.json, the output folder's marker: in the order made
# summary.json, compare.json: read by other programs, so strict JSON (no NaN) in the order built
SUMMARY = Layout(depth=None, indent=2, sort_keys=False, strict=True)


def write(path: str | Path, obj: Any, layout: Layout = DIAGNOSIS) -> Path:
    """``obj`` written to ``path`` in ``layout``, as UTF-8; the path."""
    p = Path(path)
    p.write_text(layout.dumps(obj), encoding="utf-8")
    return p


def _json_key(k: Any) -> Any:
    """A key as JSON writes it ('null', 'true', '3'): keys of several types (a count by a status that may be null,
    from input values logscope could not read) cannot be sorted as they are."""
    if isinstance(k, str):
        return k
    return "null" if k is None else json.dumps(k) if isinstance(k, bool | int | float) else str(k)


def _keys_as_text(x: Any) -> Any:
    if isinstance(x, dict):
        return {_json_key(k): _keys_as_text(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_keys_as_text(v) for v in x]
    return x


def dumps(
    obj: Any, *, depth: int | None = 3, indent: int = 1, sort_keys: bool = True, strict: bool = False
) -> str:
    """As ``_dumps``; with sorted keys, keys of mixed types are first written as JSON writes them."""
    try:
        return _dumps(obj, depth=depth, indent=indent, sort_keys=sort_keys, strict=strict)
    except TypeError:
        if not sort_keys:
            raise
        return _dumps(_keys_as_text(obj), depth=depth, indent=indent, sort_keys=sort_keys, strict=strict)


def _dumps(
    obj: Any, *, depth: int | None = 3, indent: int = 1, sort_keys: bool = True, strict: bool = False
) -> str:
    """``obj`` as JSON text (UTF-8 characters kept), members indented down to ``depth`` levels (None: all, by the
    standard library's encoder), with a final newline. Same values as ``json.dumps``; ``json.loads`` of it gives
    ``obj`` back. ``strict``: NaN and infinities are refused (ValueError), as the documents other programs read
    (summary.json, compare.json) must be JSON that every parser takes."""
    if depth is None:
        return (
            json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=sort_keys, allow_nan=not strict)
            + "\n"
        )
    flat = json.JSONEncoder(
        ensure_ascii=False, sort_keys=sort_keys, separators=(", ", ": "), allow_nan=not strict
    ).encode
    name = json.JSONEncoder(ensure_ascii=False).encode

    def text(x: Any, level: int) -> str:
        laid_out = (
            isinstance(x, dict) and x and all(isinstance(k, str) for k in x) or isinstance(x, list) and x
        )
        if level >= depth or not laid_out:
            return flat(x)
        pad = "\n" + " " * (indent * (level + 1))
        if isinstance(x, dict):
            items = sorted(x.items()) if sort_keys else x.items()
            body = [f"{name(k)}: {text(v, level + 1)}" for k, v in items]
            return "{" + pad + ("," + pad).join(body) + "\n" + " " * (indent * level) + "}"
        return (
            "[" + pad + ("," + pad).join(text(v, level + 1) for v in x) + "\n" + " " * (indent * level) + "]"
        )

    return text(obj, 0) + "\n"
