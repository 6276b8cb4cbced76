"""A recurring pattern says 'about every N s' only when its spikes keep a rhythm; otherwise it says how far apart they
started. abort-ignored's 3 preemption spikes (truth: 02:07:04, 02:08:09, 02:08:42) read "starting about every 66 s"
(the upper median of 66 and 34 s); frontend-bound's 4 TTFT spikes of one 120-s phase at c=48 "about every 35 s" (17,
35 and 56 s apart). The class stays recurring: only the words of the spacing follow the gaps."""

from __future__ import annotations

from datetime import datetime

import pytest

from conftest import LAB, need

CASES = {  # run: (signal, spikes); a signal's noun as it is said ('TTFT spikes')
    "abort-ignored": ("preemptions", 3),
    "frontend-bound": ("ttft", 4),
}


def _gaps(eps: list[dict]) -> list[float]:
    starts = sorted(datetime.fromisoformat(e["start"].replace("Z", "+00:00")) for e in eps)
    return sorted((b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False))


@pytest.mark.parametrize("run", sorted(CASES))
def test_irregular_spikes_say_how_far_apart(analyzed, rendered, run):
    sig, n = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    eps = [e for e in s["episodes"] if e["class"] == "recurring" and e["signal"] == sig]
    assert len(eps) == n
    gaps = _gaps(eps)
    assert gaps[0] < 0.75 * gaps[len(gaps) // 2]  # no rhythm: the shortest gap is far below the median
    said = f"{n} {sig.removesuffix('s').replace('ttft', 'TTFT')} spikes, starting {gaps[0]:.0f}–{gaps[-1]:.0f} s apart"
    for e in eps:
        assert e["evidence"].startswith(said), e["evidence"]
        claim = next(c for c in s["claims"] if c["id"] == e["claim"])
        facts = {f["name"]: f["value"] for f in claim["facts"]}
        assert facts["regular"] is False and facts["spikes"] == n
        assert round(facts["spacing_min_s"]) == round(gaps[0]) and round(facts["spacing_max_s"]) == round(
            gaps[-1]
        )
        assert claim["sentence"].endswith(
            f"recurring, one of {n} spikes {gaps[0]:.0f}–{gaps[-1]:.0f} s apart"
        )
    outputs = rendered(out, s)
    for name, text in outputs.items():
        assert "about every" not in text, name
    assert said in outputs["summary.md"] and said in outputs["report.html"]
    if s["verdict"][1].startswith("Recurring"):  # frontend-bound: the pattern is the verdict's second line
        assert said in s["verdict"][1] and said in outputs["terminal"]
