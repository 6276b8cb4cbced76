"""logscope compare never reads the callers' latency over survivors (compare/censored.py).

calm beside abort-ignored read "e2e p95 (callers) 2.64 s -> 2.82 s, within noise" while 76 of abort-ignored's 169
callers had given up at their 3 s timeout (truth: APITimeoutError 76; vLLM's own e2e p95 went from 2-2.5 s to
5-10 s): the answers its callers waited for hold none of the slow ones. spike-b beside storm-b (85 of 494 callers
timed out) read its callers' e2e percentiles the same way. Where 5 % or more of a run's callers gave up, its
callers' percentiles are shown, never compared, and no SLO condition is met on them."""

from __future__ import annotations

import polars as pl
import pytest
from compare_helpers import lab_truth

from logscope.api import compare

PAIRS = [("calm", "abort-ignored"), ("spike-b", "storm-b")]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_callers_percentiles_over_survivors_are_not_compared(lab_out, tmp_path, a, b) -> None:
    out = tmp_path / "c"
    doc = compare(lab_out(a), lab_out(b), out)["doc"]
    truth = lab_truth(b)["client"]
    req = pl.read_parquet(lab_out(b) / "requests.parquet").filter(pl.col("latency_clock") == "client")
    left = int(req["outcome"].is_in(["timeout", "unfinished"]).sum())
    assert left == truth["outcomes"]["APITimeoutError"] and req.height == truth["logical_requests"]
    rows = {r["name"]: r for r in doc["whole"]["metrics"]}
    words = f"B: {left:,} of its {req.height:,} callers gave up before their answer ({left / req.height:.0%})"
    md = (out / "compare.md").read_text().replace("\\", "")
    page = (out / "compare.html").read_text()
    for name in ("e2e_p50", "e2e_p95"):
        r = rows[name]
        assert r["a"] is not None and r["b"] is not None  # both shown
        assert (r["change"], r["beyond_noise"], r["direction"]) == (None, None, None)
        assert r["noise"].startswith("censored (" + words), r["noise"]
        assert r["noise"] in md and words in page
    # A's callers did not give up: its figures are its own, and B's SLO is never met on a floor
    assert not any(r["name"] == "e2e_p95" and "A:" in r["noise"] for r in doc["whole"]["metrics"])
    for line in doc["verdict"]:
        assert "e2e p95 (callers)" not in line or "within noise" not in line
