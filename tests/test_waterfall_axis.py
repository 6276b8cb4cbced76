"""The waterfall's time axis is seconds written as decimals: Vega's SI format ('~s') wrote 0.02 s as '20m', which
reads as twenty minutes (traced-ladder-kill's 'never reached' row spans 0.13 s: its ticks read 0m … 120m). Rendered
by Vega itself (vl_convert, the report's own renderer for PNG charts). traced-ladder-kill is the one traced run with a
row under a second; traced-2r-kill's and traced-ladder's rows (whole-second ticks) must stay plain numbers too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import LAB, need


@pytest.mark.parametrize("run", ["traced-ladder-kill", "traced-2r-kill", "traced-ladder"])
def test_waterfall_ticks_are_seconds_in_decimals(analyzed, run):
    import vl_convert

    out, _, _ = analyzed(need(LAB / run))
    page = (Path(out) / "report.html").read_text()
    spec = json.loads(re.search(r'id="spec-waterfall"[^>]*>(.*?)</script>', page, re.S).group(1))
    svg = vl_convert.vegalite_to_svg(spec)
    # the x axes' tick labels (the lanes' names are the y axes')
    ticks = re.findall(r'<text[^>]*text-anchor="middle"[^>]*>([^<]+)</text>', svg)
    numbers = [t for t in ticks if re.fullmatch(r"[-0-9.,µmkM]+", t)]
    assert numbers, "no tick label read"
    assert all(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", t) for t in numbers), sorted(set(numbers))
