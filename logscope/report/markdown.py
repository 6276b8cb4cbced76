"""summary.md: verdict, findings and key tables for a ticket; the timeline is report.html's (timeline.png beside
it with --png).

Markdown has no autoescape, so every value from a log goes through ``md()``: it cannot open HTML,
a link, emphasis or a new table cell, and it stays on one line; its control and bidi characters are shown
as escapes (``logscope.invisible_chars``).
"""

from __future__ import annotations

import re
from functools import cache

import jinja2

from ..invisible_chars import visible
from . import fmt
from .html import Settings, compiled_cache, template_source

# Markdown, not HTML: no autoescape, values are escaped by |md
SETTINGS: Settings = {
    "autoescape": False,
    "trim_blocks": True,
    "lstrip_blocks": True,
    "keep_trailing_newline": True,
}

_MD_SPECIAL = re.compile(
    r"([\\`*_\[\]<>|~])"
)  # what can start markup inside a line; '#', '+' only at its start
_SPACE = re.compile(r"\s+")


def md(value: object) -> str:
    """One-line Markdown text: specials backslash-escaped (GitHub and Jira read these as literals)."""
    if value is None:
        return "–"
    text = _MD_SPECIAL.sub(r"\\\1", visible(_SPACE.sub(" ", str(value)).strip()))
    return "\\" + text if text[:1] in ("#", "+", "-", "=") else text


def md_table(cols: list[str], rows: list[list[object]]) -> str:
    head = "| " + " | ".join(md(c) for c in cols) + " |"
    rule = "|" + "---:|" * len(cols)
    body = [
        "| " + " | ".join(fmt.fnum(v) if not isinstance(v, str) else md(v) for v in r) + " |" for r in rows
    ]
    return "\n".join([head, rule, *body])


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(template_source),
        bytecode_cache=compiled_cache(**SETTINGS, finalize="visible"),
        undefined=jinja2.StrictUndefined,
        **SETTINGS,
        finalize=lambda x: visible(x) if isinstance(x, str) else x,  # also what a template prints without |md
    )
    env.filters.update(
        md=md,
        fnum=fmt.fnum,
        signal_value=fmt.signal_value,
        hms=fmt.hms,
        when=fmt.when,
        duration=fmt.duration,
        label=fmt.label,
        ms=lambda x: fmt.seconds(None if x is None else x / 1000),
    )
    env.globals["md_table"] = md_table
    return env


def render_markdown(context: dict) -> str:
    text = environment().get_template("summary.md.j2").render(**context)
    return re.sub(r"\n{3,}", "\n\n", text)
