"""A figure of the engine's histogram carries the bucket's precision in every output of compare, read on the lab's
runs whose vLLM histograms Prometheus scraped (seqs-8 / 16 / 32 / 64: truth.json gives each step's queue time p95
bucket). compare.html gave seqs-8's queue time p95 at c=16 as '4.375 s' with 'in 2.5–5 s' under it, and the change
as '+3.875 s (+775 %)': histogram_quantile's interpolation inside the bucket, digits the buckets do not hold. Now the
bucket is the figure (compare.json keeps the interpolation for machines, beside both buckets' bounds and the range
of B − A they allow), and two quantiles in one bucket are 'same bucket', never a move (the whole run's e2e p95
(engine), 10–15 s in both, read '+0.338 s (+2 %)' and 'within noise', the trade table listed such rises).
"""

from __future__ import annotations

import html
import json
import re

import jsonschema
import pytest
from compare_helpers import SCHEMA

from conftest import LAB
from logscope.api import compare, sweep
from logscope.report.fmt import fnum

PAIRS = [("seqs-64", "seqs-8"), ("seqs-16", "seqs-32")]


def _texts(res: dict) -> tuple[dict, str, str]:
    p = res["paths"]
    doc = json.loads(p["compare_json"].read_text())
    return doc, p["compare_md"].read_text(), html.unescape(p["compare_html"].read_text())


def _bucketed(doc: dict):
    for sc in [doc["whole"], *doc["steps"]]:
        for r in sc["metrics"]:
            if r["bucket"] and r["a"] is not None and r["b"] is not None:
                yield sc, r


def _md_cells(md: str, scope: dict, title: str) -> list[str]:
    """A figure's row in the ticket's table of one scope: its cells."""
    if scope["label"] == "whole run":
        part = md.split("## What moved (whole runs)")[1].split("\n### Step ")[0]
    else:
        part = md.split(f"\n### Step {scope['label']} (")[1].split("\n### Step ")[0]
    line = next(ln for ln in part.splitlines() if ln.startswith(f"| {title} | "))
    return [c.strip().replace("\\", "") for c in line.strip("|").split(" | ")]  # the md filter's escapes


def _html_cells(page: str, scope: dict, title: str) -> list[str]:
    if scope["label"] == "whole run":
        part = page.split('id="moved"')[1].split('id="steps"')[0]
    else:
        part = page.split(f"<summary>step {scope['label']}: ")[1].split("</details>")[0]
    row = re.search(
        re.escape(f"<td>{title}<br>")
        + r'<span class="small muted">[^<]*</span></td>((?:<td[^>]*>[^<]*</td>){4})',
        part,
    )
    assert row, (scope["label"], title)
    return re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_a_histograms_quantile_is_its_bucket_in_every_output(lab_out, tmp_path, a, b):
    doc, md, page = _texts(compare(lab_out(a), lab_out(b), tmp_path / "c"))
    jsonschema.validate(doc, SCHEMA)
    rows = list(_bucketed(doc))
    assert len(rows) >= 3 * len(doc["steps"])  # the engine's TTFT, e2e and queue time at every step
    truth = {
        side: {
            s["concurrency"]: s
            for s in json.loads((LAB / run / "truth.json").read_text())["purpose"]["steps"]
        }
        for side, run in (("a", a), ("b", b))
    }
    for sc, r in rows:
        bounds = r["bucket_bounds"]
        for side in ("a", "b"):
            lo, hi = bounds[side]
            assert r["bucket"][side] == f"{lo:g}–{hi:g} s" and lo < r[side] <= hi
            if r["name"] == "queue_p95" and sc["label"] != "whole run":  # the bucket truth.json computed
                assert [lo, hi] == truth[side][int(sc["value"])]["engine_queue_time_p95_bucket_s"]
        la, ha = bounds["a"]
        lb, hb = bounds["b"]
        assert r["change_bounds"] == [pytest.approx(lb - ha), pytest.approx(hb - la)]
        assert r["change_rel"] is None
        # the ticket's cells: title, where, A, B, change, B is, noise; the page's: A, B, change, B is
        md_cells, html_cells = _md_cells(md, sc, r["title"])[2:6], _html_cells(page, sc, r["title"])
        for cells in (md_cells, html_cells):
            assert cells[:2] == [r["bucket"]["a"], r["bucket"]["b"]], (sc["label"], r["name"], cells)
            if r["bucket"]["a"] != r["bucket"]["b"]:  # the range the buckets allow, no ratio
                assert cells[2].replace("\u00a0", " ") == f"{_signed(lb - ha)} to {_signed(hb - la)} s"


def _signed(x: float) -> str:
    return f"{'+' if x > 0 else ''}{fnum(x, 3)}"


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_no_move_is_claimed_inside_one_bucket(lab_out, tmp_path, a, b):
    doc, md, page = _texts(compare(lab_out(a), lab_out(b), tmp_path / "c"))
    same = [(sc, r) for sc, r in _bucketed(doc) if r["bucket"]["a"] == r["bucket"]["b"]]
    apart = [(sc, r) for sc, r in _bucketed(doc) if r["bucket"]["a"] != r["bucket"]["b"]]
    assert same and apart
    for sc, r in same:
        assert r["direction"] == "same bucket" and r["beyond_noise"] is not True, (sc["label"], r["name"])
        assert _md_cells(md, sc, r["title"])[4:6] == ["same bucket", "same bucket"]
        assert _html_cells(page, sc, r["title"])[2:4] == ["same bucket", "same bucket"]
    # the trade lists no rise inside one bucket, in its object, its table or its sentence
    scopes = {
        (sc["label"] if sc["label"] == "whole run" else f"step {sc['label']}", r["name"]) for sc, r in same
    }
    assert not [m for m in doc["trade"]["rose"] if (m["scope"], m["name"]) in scopes]
    # a move into another bucket beyond the bootstrap's noise is still one
    assert [r for _, r in apart if r["beyond_noise"] and r["direction"] in ("better", "worse")]


def test_the_seqs_pairs_queue_at_c16_is_two_buckets(lab_out, tmp_path):
    """The case the page showed: seqs-64 -> seqs-8 at c=16, queue time p95 0.3–0.5 s -> 2.5–5 s."""
    doc, md, page = _texts(compare(lab_out("seqs-64"), lab_out("seqs-8"), tmp_path / "c"))
    sc = next(s for s in doc["steps"] if s["label"] == "c=16")
    r = next(r for r in sc["metrics"] if r["name"] == "queue_p95")
    assert r["bucket"] == {"a": "0.3–0.5 s", "b": "2.5–5 s"} and r["b"] == pytest.approx(4.375)
    assert r["change_bounds"] == [2.0, 4.7] and r["direction"] == "worse"
    assert _html_cells(page, sc, r["title"])[:3] == ["0.3–0.5 s", "2.5–5 s", "+2 to +4.7\u00a0s"]
    assert _md_cells(md, sc, r["title"])[2:5] == ["0.3–0.5 s", "2.5–5 s", "+2 to +4.7 s"]
    assert "4.375" not in md and "4.375" not in page.split('<script type="application/json"')[0]
    assert "| queue time p95 (engine) | step c=16 | 0.3–0.5 s | 2.5–5 s | yes |" in md
    # the steps chart draws the bucket (a bar from its bounds), not the interpolation
    spec = json.loads(re.search(r'id="spec-steps"[^>]*>(.*?)</script>', page, re.S).group(1))
    data = [d for ds in spec["datasets"].values() for d in ds if d.get("figure") == "queue_p95"]
    assert data and all("value" not in d and d["shown"] for d in data)
    assert {(d["lo"], d["hi"]) for d in data if d["step"] == "c=16"} == {(0.3, 0.5), (2.5, 5.0)}


@pytest.mark.parametrize(
    "runs", [("seqs-64", "seqs-32", "seqs-16", "seqs-8"), ("seqs-64", "seqs-16", "seqs-8")]
)
def test_the_sweeps_table_gives_the_bucket_alone(lab_out, tmp_path, runs):
    res = sweep([lab_out(r) for r in runs], tmp_path / "s")
    doc, md, page = _texts(res)
    jsonschema.validate(doc, SCHEMA)
    seen = 0
    for t in doc["sweep"]["table"]:
        for c in t["steps"]:
            for key, text in c["buckets"].items():
                lo, hi = c["bucket_bounds"][key]
                assert text == f"{lo:g}–{hi:g} s" and lo < c[key] <= hi
                seen += 1
                # the cell said '4.375 s (2.5–5 s)'
                assert (
                    f"{fnum(c[key], 3)} s ({text})" not in md and f"{fnum(c[key], 3)} s ({text})" not in page
                )
    assert seen
    assert (
        "| queue time p95 (engine) | "
        + " | ".join(
            next(c for c in t["steps"] if c["label"] == "c=16")["buckets"]["queue_p95"]
            for t in doc["sweep"]["table"]
        )
        + " |"
        in md
    )
