"""compare's tables give a duration, a rate or a mean to the digits its data holds (logscope/compare/precision.py):
retry-storm against storm-b showed 'load s 181.279' (a span of minutes, its sends stamped to the second by the
gateway's log), 'arrival rate 3.602', 'prompt tokens mean 101.129' and 'waiting, mean 15.319' (a mean of a gauge
of whole requests sampled every 2 s). A relative change says what its rounding carries ('<1 %', not '-0 %'; '25x',
not '+2402 %'), a mean its three digits on both sides ('1.03 -> 1.00'), and the verdict a figure as the table
does (69.799 s, not 69.8 s beside it)."""

from __future__ import annotations

import html
import re

import polars as pl
import pytest
from compare_helpers import metric_row

from logscope.api import compare
from logscope.compare.render import terminal_lines


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
    ("retry-storm", "storm-b", "15.3", "5.73", "-9.6 (-63 %)"),  # -9.59 claimed a digit 15.3 does not show
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


def _cells(res: dict, title: str) -> list[tuple[str, str, str]]:
    """(A, B, change) of each row titled ``title`` in compare.md and compare.html (the whole runs' first)."""
    md = res["paths"]["compare_md"].read_text().replace("\\", "").replace("\u00a0", " ")
    page = html.unescape(res["paths"]["compare_html"].read_text()).replace("\u00a0", " ")
    out = []
    for line in md.splitlines():
        bits = [b.strip() for b in line.split("|")]
        if len(bits) > 6 and bits[1] == title:
            out.append((bits[3], bits[4], bits[5]))
            assert f'<td class="num">{bits[3]}</td><td class="num">{bits[4]}</td>' in page
    return out


# (A, B, a row's title, its change in the whole runs' table): a change under half a percent of A's figure, and one
# of ten times A's figure or more
RELATIVE = [
    ("spike", "spike-b", "e2e p50 (callers)", "-0.008 s (<1 %)"),
    ("seqs-8", "seqs-64", "e2e p95 (gateway)", "-0.042 s (<1 %)"),
    ("traced-1r", "traced-2r-kill", "e2e p95 (gateway)", "+67.009 s (25x)"),
    ("retry-storm", "storm-b", "e2e p95 (callers)", "+17.926 s (11x)"),
]


@pytest.mark.parametrize(("a", "b", "title", "ch"), RELATIVE)
def test_a_relative_change_says_what_its_rounding_carries(a, b, title, ch, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    va, vb, got = next(c for c in _cells(res, title) if c[2] == ch)  # the whole runs' row or a step's
    ratio = float(vb.removesuffix(" s")) / float(va.removesuffix(" s"))
    if ch.endswith("x)"):  # ten times A's figure or more: the ratio, to two digits
        assert ratio >= 10 and ch.endswith(f"({float(f'{ratio:.2g}'):g}x)")
    else:
        assert abs(ratio - 1) < 0.005
    page = html.unescape(res["paths"]["compare_html"].read_text())
    for text in (res["paths"]["compare_md"].read_text().replace("\\", ""), page):
        assert "-0\u00a0%" not in text and "+0\u00a0%" not in text
        assert not re.search(r"[+-]\d{4,}\u00a0%", text.replace(",", ""))  # no '+2402 %'


# (A, B, vLLM executions per logical request in A and B over the whole runs, three significant digits each)
EXECUTIONS = [("traced-1r", "traced-2r-kill", "1.03", "1.00"), ("calm", "orphan", "1.00", "2.20")]


@pytest.mark.parametrize(("a", "b", "va", "vb"), EXECUTIONS)
def test_a_mean_keeps_its_digits_on_both_sides(a, b, va, vb, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    row = metric_row(res["doc"], "amplification")
    assert (f"{row['a']:.3g}", f"{row['b']:.3g}") == (va.rstrip("0").rstrip("."), vb.rstrip("0").rstrip("."))
    assert _cells(res, row["title"])[0][:2] == (va, vb)
    assert f"{row['title']} {va} → {vb}" in " ".join(res["doc"]["verdict"])


# (A, B): the gateway's e2e p95 over the whole runs, shown in the verdict beside the table (two loads)
SAME_ROUNDING = [("traced-1r", "traced-2r-kill"), ("retry-storm", "storm-b")]


@pytest.mark.parametrize(("a", "b"), SAME_ROUNDING)
def test_the_verdict_rounds_a_figure_as_the_table_does(a, b, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    row = metric_row(res["doc"], "gateway_e2e_p95")
    va, vb, _ = _cells(res, row["title"])[0]
    assert vb == f"{row['b']:.3f}".rstrip("0").rstrip(".") + " s"  # the millisecond its clock records
    said = f"{row['title']} {va} → {vb}"
    assert said in " ".join(res["doc"]["verdict"])
    md = res["paths"]["compare_md"].read_text().replace("\\", "")
    assert said in md and said in " ".join(terminal_lines(res["doc"]))


def _places(text: str) -> int:
    """The decimals a figure's text shows ('5.73' 2, '-9.6' 1, '184' 0)."""
    num = re.sub(r"[^\d.]", "", text.split(" (")[0])
    return len(num.split(".")[1]) if "." in num else 0


# (A, B, a scope: the whole runs or a step, A's and B's mean waiting requests as shown, and their change, which
# read with a digit finer than A's: '-9.59' beside 15.3, '-4.96' beside 14.1, '-4.12' beside 13.5)
CHANGE_DIGITS = [
    ("retry-storm", "storm-b", "whole", "15.3", "5.73", "-9.6 (-63 %)"),
    ("ladder", "ladder-b", "whole", "14.1", "9.15", "-5.0 (-35 %)"),
    ("seqs-8", "seqs-64", "c=32", "13.5", "9.42", "-4.1 (-30 %)"),
]


@pytest.mark.parametrize(("a", "b", "scope", "va", "vb", "ch"), CHANGE_DIGITS)
def test_a_change_is_given_to_the_digits_of_the_figures_it_compares(
    a, b, scope, va, vb, ch, lab_out, tmp_path
):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    row = metric_row(res["doc"], "waiting_mean", scope)
    assert (f"{row['a']:.3g}", f"{row['b']:.3g}") == (va, vb)
    assert round(row["change"], 1) == float(ch.split(" ")[0])
    md = res["paths"]["compare_md"].read_text().replace("\\", "").replace("\u00a0", " ")
    assert f"| waiting, mean | engine's clock · engine metrics | {va} | {vb} | {ch} |" in md
    page = html.unescape(res["paths"]["compare_html"].read_text()).replace("\u00a0", " ")
    assert f'<td class="num">{va}</td><td class="num">{vb}</td><td class="num">{ch}</td>' in page
    # every row of every table but a latency's (to the millisecond, its zeros dropped: '3.3 s' is 3.300 s): no
    # change finer than the coarser of the two figures beside it (a '0' bounds no digit)
    for line in md.splitlines():
        bits = [b.strip() for b in line.split("|")]
        if len(bits) < 7 or not re.fullmatch(r"[+-][\d,.]+( \(.*\))?", bits[5]):
            continue
        shown = [x for x in bits[3:5] if re.fullmatch(r"-?[\d,.]+", x) and x != "0"]
        if len(shown) == 2 or (len(shown) == 1 and "0" in bits[3:5]):
            assert _places(bits[5]) <= min(_places(x) for x in shown), line
