"""An nginx ``log_format`` compiled into the field plan the compiled scanner executes (``logscope._scan.Plan``).

A layout's tokens (``_nginx_format``: literals and variables) become steps: a literal is matched where it stands, a
variable's value runs up to the first character of the literal after it (one memchr), or has the shape nginx gives
that variable (``$time_local``, ``$time_iso8601``, ``$msec``, the list-valued ``$upstream_*``: ``, `` between
attempts, `` : `` between upstream groups; a JSON string's inside with ``escape=json``); the line ends after the
last token, a trailing CR allowed. These are the steps of the regex the layout used to compile to, matched with the
same semantics (scan/src/plan.rs): every line gets the same fields. One difference, by design: the time shapes'
digits are ASCII digits (the regex crate's ``\\d`` took any script's, which no time parser reads).

Each variable is a field named for what the parser reads it as (``$req_id`` is ``request_id``); a variable seen
twice, or whose name is no identifier, is matched but not kept; only the variables asked for are kept at all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from logscope import _scan

from ._nginx_format import _OTHER_LISTS, LIST_VARS, VARIABLE_ALIASES, Layout, Token

_D = {"run": "0-9", "min": 1, "max": None}


def _digits(n: int) -> dict:
    return {"run": "0-9", "min": n, "max": n}


def _lit(text: str) -> dict:
    return {"lit": text}


# \d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}
_TIME_LOCAL = [
    _digits(2),
    _lit("/"),
    {"run": "A-Za-z", "min": 3, "max": 3},
    _lit("/"),
    _digits(4),
    _lit(":"),
    _digits(2),
    _lit(":"),
    _digits(2),
    _lit(":"),
    _digits(2),
    _lit(" "),
    {"run": "+\\-", "min": 1, "max": 1},
    _digits(4),
]
# \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)
_TIME_ISO = [
    _digits(4),
    _lit("-"),
    _digits(2),
    _lit("-"),
    _digits(2),
    _lit("T"),
    _digits(2),
    _lit(":"),
    _digits(2),
    _lit(":"),
    _digits(2),
    {"optional": [_lit("."), _D]},
    {"either": [[{"run": "+\\-", "min": 1, "max": 1}, _digits(2), _lit(":"), _digits(2)], [_lit("Z")]]},
]
_FIXED: dict[str, list[dict]] = {
    "time_local": _TIME_LOCAL,
    "time_iso8601": _TIME_ISO,
    "msec": [_D, _lit("."), _D],
    "apisix_upstream_response_time": [{"either": [[_D], [_lit("-")]]}],  # [0-9]+|-: APISIX's whole ms
}
# [^\s,"]*(?:(?:, | : )[^\s,"=]*)*: entries separated by ", " (attempts) or " : " (another upstream group)
_LIST: list[dict] = [
    {"run": '^\\s,"'},
    {"repeat": [{"either": [[_lit(", ")], [_lit(" : ")]]}, {"run": '^\\s,"='}]},
]
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _value(var: str, nxt: str | None, escape: str) -> list[dict]:
    """The steps of one variable's value, by what follows it (``nxt``: the next literal, "" for another variable,
    None at the end)."""
    if var in _FIXED:
        return _FIXED[var]
    if var in LIST_VARS or var in _OTHER_LISTS:
        return [{"quoted": True}] if (escape == "json" and nxt and nxt[0] == '"') else _LIST
    if nxt is None:
        return [{"rest": True}]
    if nxt == "":  # another variable follows directly: nothing tells where this one ends
        return [{"lazy": True}]
    if escape == "json" and nxt[0] == '"':
        return [{"quoted": True}]
    return [{"until": nxt[0]}]


def steps(
    tokens: Sequence[Token],
    escape: str,
    keep: frozenset[str],
    anchored: bool = True,
    reading: Callable[[str, str], dict] | None = None,
) -> list[dict]:
    """A layout's steps, keeping the variables of ``keep`` as fields (read as ``reading(variable, escape)`` says:
    type, null spellings, escapes); unanchored: no end of line after it."""
    out: list[dict] = []
    named: set[str] = set()
    for i, (kind, text) in enumerate(tokens):
        if kind == "lit":
            out.append(_lit(text))
            continue
        nxt = None
        if i + 1 < len(tokens):
            nxt = tokens[i + 1][1] if tokens[i + 1][0] == "lit" else ""
        value = _value(text, nxt, escape)
        name = VARIABLE_ALIASES.get(text, text)
        if name in named or not _IDENT.fullmatch(name):
            out += value
            continue
        named.add(name)
        if name in keep:
            out.append({"field": name, "steps": value, **(reading(name, escape) if reading else {})})
        else:
            out += value
    if anchored:
        out.append({"end": True, "cr": True})
    return out


def kept(layout: Layout, keep: frozenset[str]) -> list[str]:
    """The variables of ``layout`` its plan keeps as fields (the layout's names, first use, in ``keep``)."""
    return [v for v in layout.variables if v in keep]


# the list-valued variables' items: ", " between attempts, " : " before the first of another upstream group's
_SPLIT = {"sep": ", ", "group": " : ", "mark": ":"}


def plan(
    layouts: Sequence[Layout],
    keep: Sequence[frozenset[str]] | None = None,
    reading: Callable[[str, str], dict] | None = None,
    anchored: bool = True,
):
    """The compiled plan of these layouts, one kind each, in order (the first that matches is a line's layout);
    ``keep``: the variables kept of each (none when not given), read as ``reading`` says; the kept list-valued
    variables give a row per item (``Plan.rows``)."""
    keys = tuple(
        (tuple(lay.tokens), lay.escape, (keep[i] if keep else frozenset())) for i, lay in enumerate(layouts)
    )
    return _compiled(keys, reading, anchored)


@functools.lru_cache(maxsize=512)
def _compiled(keys: tuple, reading, anchored: bool):
    """Cached: every file of a folder of many small logs compiles the same few layouts."""
    kinds = []
    for i, (tokens, escape, keep) in enumerate(keys):
        names = [VARIABLE_ALIASES.get(t, t) for k, t in tokens if k == "var"]
        lists = [v for v in LIST_VARS if v in keep and v in names]
        split: dict[str, object] = {"fields": lists, **_SPLIT}
        kinds.append(
            {
                "name": f"layout {i}",
                "steps": steps(tokens, escape, keep, anchored, reading),
                "split": split,
            }
        )
    return _scan.Plan(kinds)
