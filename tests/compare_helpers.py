"""What the compare tests share (tests/test_compare*.py): compare.json's schema, one figure's row of a compare
document, a lab run's truth.json, and the text a reader gets from a comparison. A lab run's analysis by name is
conftest's ``lab_out`` fixture."""

from __future__ import annotations

import html
import json

from conftest import LAB, ROOT
from logscope.compare.render import terminal_lines

SCHEMA = json.loads((ROOT / "logscope" / "compare.schema.json").read_text())


def metric_row(doc: dict, name: str, scope: str = "whole") -> dict:
    """The row of figure ``name``: the whole runs' (``scope`` 'whole') or a matched step's (its label)."""
    rows = (
        doc["whole"]["metrics"]
        if scope == "whole"
        else next(s for s in doc["steps"] if s["label"] == scope)["metrics"]
    )
    return next(r for r in rows if r["name"] == name)


def lab_truth(run: str) -> dict:
    """The lab run's truth.json (lab/truth.py: what its client, server and gateway recorded)."""
    return json.loads((LAB / run / "truth.json").read_text())


def reader_text(res: dict) -> str:
    """What a reader gets: the terminal's verdict, compare.md and compare.html (unescaped)."""
    return "\n".join(
        [
            " ".join(terminal_lines(res["doc"])),
            res["paths"]["compare_md"].read_text().replace("\\", ""),
            html.unescape(res["paths"]["compare_html"].read_text()),
        ]
    )
