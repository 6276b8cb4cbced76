"""Vega-Lite specs written as plain dicts.

The charts were built with altair, which cost a small report ~1.3 s of its ~5 s (0.46 s to import altair,
0.8 s of deep copies and schema wrapping for one timeline); a dict costs nothing to build. The tests check
every spec against Vega-Lite's JSON schema (``VALIDATE``), as altair did.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

SCHEMA_URL = "https://vega.github.io/schema/vega-lite/v6.4.1.json"  # the Vega-Lite of vl-convert 1.9's bundle

# altair's check of every spec against the Vega-Lite schema: the tests turn it on (tests/test_report.py), a run
# does not pay for it
VALIDATE = False


@cache
def _theme_text() -> str:
    return (
        resources.files("logscope.report_templates").joinpath("chart_theme.json").read_text(encoding="utf-8")
    )


def theme() -> dict:
    return json.loads(_theme_text())


class Data:
    """The datasets of one top-level spec: every layer names its rows, the rows are written once."""

    def __init__(self) -> None:
        self.sets: dict[str, list[dict]] = {}

    def add(self, name: str, rows: pl.DataFrame | list[dict]) -> dict:
        """``{"name": …}`` of these rows under a name unique in the spec (stable: same inputs, same bytes)."""
        key, n = name, 1
        while key in self.sets:
            n += 1
            key = f"{name}-{n}"
        self.sets[key] = rows.to_dicts() if isinstance(rows, pl.DataFrame) else list(rows)
        return {"name": key}


def finish(spec: dict, data: Data | None = None) -> dict:
    """The top-level spec: schema, theme, datasets; checked against the Vega-Lite schema when ``VALIDATE``."""
    out = {"$schema": SCHEMA_URL, **spec, "config": theme()}
    if data is not None and data.sets:
        out["datasets"] = data.sets
    if VALIDATE:
        validate(out)
    return out


def validate(spec: dict) -> None:
    """Raise when ``spec`` is not valid Vega-Lite (altair's schema and validator, loaded only here)."""
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema import core

    validate_jsonschema(spec, core.load_schema(), raise_error=True)


def tip(field: str, title: str | None = None, kind: str = "nominal", fmt: str | None = None) -> dict:
    d: dict[str, Any] = {"field": field, "type": kind}
    if title is not None:
        d["title"] = title
    if fmt is not None:
        d["format"] = fmt
    return d


def legend(labels: list[str], width: int, symbol: str = "stroke") -> dict:
    """A legend above its panel whose entries wrap into as many columns as fit ``width`` px: a legend wider
    than its chart was cut at 1024 px (the page's narrowest width)."""
    widest = max((len(s) for s in labels), default=1)
    entry = 26 + 6.6 * min(widest, 40)  # symbol, padding and ~6.6 px a character at 11 px
    columns = max(1, min(len(labels), int((width - 4) // (entry + 10))))
    return {
        "orient": "top",
        "direction": "horizontal",
        "columns": columns,
        "symbolType": symbol,
        "symbolStrokeWidth": 2.5,
        "labelLimit": 260,
        "columnPadding": 10,
        "title": None,
    }


# d3's SI ticks share one prefix over an axis: 0 was drawn '0k' beside '0.5k'
ZERO_PLAIN = "datum.value == 0 ? '0' : datum.label"


def int_scale(top: float | None, ticks: int = 4) -> tuple[dict, dict]:
    """(axis, scale) of a count axis from 0 to ``top``: whole-number ticks only. Vega's tickMinStep is not enough
    (over [0, 1] it still asks d3 for two intervals and labels 0.5), so the ticks are given: a round step (1, 2,
    5, 10, 20, …) giving at most ``ticks`` intervals, the domain ending on the last tick."""
    top = max(float(top or 0), 1.0)
    step, k = 1, 0
    while top / step > ticks:
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    values = list(range(0, int(-(-top // step)) * step + 1, step))
    return {"values": values, "format": "~s", "labelExpr": ZERO_PLAIN}, {
        "domain": [0, values[-1]],
        "nice": False,
    }
