"""compare's tables give a duration, a rate or a mean to the digits its data holds (logscope/compare/precision.py):
retry-storm against storm-b showed 'load s 181.279' (a span of minutes, its sends stamped to the second by the
gateway's log), 'arrival rate 3.602', 'prompt tokens mean 101.129' and 'waiting, mean 15.319' (a mean of a gauge
of whole requests sampled every 2 s)."""

from __future__ import annotations

import html

import polars as pl
import pytest
from compare_helpers import metric_row

from logscope.api import compare


def _load_s(out) -> float:
    """The run's load span as analyze's requests table gives it: its first send to its last."""
    ts = pl.read_parquet(out / "requests.parquet")["ts_start"]
    return (ts.max() - ts.min()).total_seconds()


# (A, B): two pairs of lab runs of minutes each
PAIRS = [("retry-storm", "storm-b"), ("spike", "spike-b")]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_the_traffic_table_gives_the_load_to_the_second(a, b, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    page = html.unescape(res["paths"]["compare_html"].read_text())
    cells = []
    for side, run in (("a", a), ("b", b)):
        raw = _load_s(lab_out(run))
        assert raw > 60 and raw != round(raw)  # minutes, with the milliseconds the requests' stamps carry
        t = doc["traffic"][side]
        assert t["load_s"] == round(raw)
        rate = t["requests"] / raw
        assert t["arrival_rate"] == pytest.approx(rate, rel=5e-3) == float(f"{rate:.3g}")
        cells.append(f"<td>{round(raw)} s</td>")
    assert f"<td>load s</td>{cells[0]}{cells[1]}" in page
    assert f"{_load_s(lab_out(a)):.3f}" not in page + res["paths"]["compare_json"].read_text()


# (A, B, the whole runs' mean waiting requests to three significant digits, and the change)
WAITING = [
    ("retry-storm", "storm-b", "15.3", "5.73", "-9.59 (-63 %)"),
    ("spike", "spike-b", "4.44", "3.46", "-0.98 (-22 %)"),
]


@pytest.mark.parametrize(("a", "b", "va", "vb", "ch"), WAITING)
def test_a_mean_of_whole_requests_is_given_to_three_digits(a, b, va, vb, ch, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    row = metric_row(res["doc"], "waiting_mean")
    assert (f"{row['a']:.3g}", f"{row['b']:.3g}") == (va, vb)
    md = res["paths"]["compare_md"].read_text().replace("\\", "").replace("\u00a0", " ")
    assert f"| waiting, mean | engine's clock · engine metrics | {va} | {vb} | {ch} |" in md
    page = html.unescape(res["paths"]["compare_html"].read_text()).replace("\u00a0", " ")
    assert f'<td class="num">{va}</td><td class="num">{vb}</td><td class="num">{ch}</td>' in page
