"""A KV pressure that retries overlapped is told the change its dominant cause points to (findings.retry_share).

Lab retry-storm and storm-b each read "Lower --max-num-seqs … preemptions should stop" while the callers' retries ran
1.56× and 2.92× executions per request at the server in the same range (the client's --max-retries 3, 5 s / 20 s
timeouts; retry-storm's nginx :8080 also re-sends POSTs). The most that ran at once over that amplification is
the load alone: storm-b's 27 / 2.92 ≈ 9.3 fit in the 11.2 requests its cache holds (the retries filled it: their
change first, the cap only if preemptions stay); retry-storm's 26 / 1.56 ≈ 16.6 do not (the load alone fills it:
the cap, measured with the executions per request beside it). The real pair storm-retries (client retries 0 vs 3,
the same 14 req/s) is the control: without retries the advice is the one it was, with them the cache's size is
unknown (no capacity line), so the retries' change comes first and the cap waits for a measurement."""

from __future__ import annotations

import pytest

from conftest import DATA, LAB, need
from logscope.diagnose.findings.pressure import _hold

PAIR = DATA / "pairs" / "storm-retries"


def _pressure(s: dict, diag: dict) -> tuple[dict, dict]:
    [f] = [f for f in s["findings"] if f["kind"] == "pressure"]
    [ep] = [e for e in diag["episodes"] if e["episode_id"] == f["episode"]]
    return f, ep


@pytest.mark.parametrize(
    "run, dominant, first",
    [
        ("storm-b", "within", "Bound retries to one or two"),
        ("retry-storm", "above", "Lower --max-num-seqs from 64 to 9"),
    ],
)
def test_pressure_advice_follows_the_retries_share(analyzed, rendered, run, dominant, first):
    out, s, diag = analyzed(need(LAB / run))
    f, ep = _pressure(s, diag)
    amp, run_max = ep["details"]["amplification"], ep["running_max"]
    hold, _ = _hold(diag["capacity"])
    assert amp > 1.5 and ep["details"]["client_retries"] > 400
    said = f"retries overlapped it: {amp:.2f}× executions per request at the server in its range"
    assert said in f["cause"], f["cause"]
    alone = run_max / amp
    assert (alone <= hold) == (dominant == "within")
    assert (
        f"would be about {alone:.1f} without them" in f["cause"]
        and f"{dominant} the {hold:.1f}" in f["cause"]
    )
    assert f["next_test"].startswith(first), f["next_test"]
    assert f"executions per request again ({amp:.2f}× here)" in f["next_test"]
    if dominant == "within":  # the retries filled it: the cap only if the preemptions stay without them
        assert f["next_test"].endswith(f"lower --max-num-seqs from 64 to {int(hold)} only if they stay")
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert said in seen[name] and f["next_test"] in seen[name], name


def test_without_retries_the_pressure_advice_is_unchanged(analyzed):
    _, s0, d0 = analyzed(need(PAIR / "retries0"))
    _, s3, d3 = analyzed(need(PAIR / "retries3"))
    f0, e0 = _pressure(s0, d0)
    f3, e3 = _pressure(s3, d3)
    assert e0["details"]["client_retries"] == 0 and "retries overlapped" not in f0["cause"]
    assert f0["next_test"].startswith("Measure capacity: run a concurrency ladder")
    # with retries and no capacity line: unknown, the missing fact named; the retries' change first
    assert e3["details"]["client_retries"] > 1000
    assert (
        "whether the load alone would fill the cache is unknown: what the KV cache holds is not known"
        in (f3["cause"])
    )
    assert f3["next_test"].startswith("Retry at one layer only: drop non_idempotent from proxy_next_upstream")
    assert f3["next_test"].endswith(
        "measure what the cache holds (a concurrency ladder) before changing --max-num-seqs from 64"
    )
