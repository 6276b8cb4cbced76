"""A KV-pressure finding's cause says what the folder shows of evictions, not a textbook sentence (evidence before
verdict). public-2 n13 (vLLM #6737, V0 0.4.2: KV 99.7-100 %, 740-768 pending, Swapped 0 and no preemption line) and
vllm-public 05 (V0 0.3: KV 99 %, 115 pending) were told "the scheduler evicts running requests (preemption) and
recomputes them", which none of their lines shows; vllm-public 33's preemption was a swap, not a recompute."""

from __future__ import annotations

import html

import pytest

from conftest import LAB, PUBLIC, PUBLIC2, need

NOT_COUNTED = "whether running requests were evicted is not known: preemptions not counted in the folder"
UNCOUNTED = {  # excerpt: the most that waited in the episode
    "n13": (PUBLIC2 / "n13-v0-0.4.2-kv-99.7-100-running-247-219-pending-740-768.log", 768),
    "05": (PUBLIC / "05-v0-0.3-stuck-pending-115-kv-99.log", 115),
}


def _pressure(s: dict) -> dict:
    found = [f for f in s["findings"] if "KV cache filled" in (f.get("cause") or "")]
    assert len(found) == 1, [f["title"] for f in s["findings"]]
    return found[0]


@pytest.mark.parametrize("key", sorted(UNCOUNTED))
def test_evictions_nothing_counted_are_said_unknown(analyzed, key):
    src, waited = UNCOUNTED[key]
    out, s, _ = analyzed(need(src))
    f = _pressure(s)
    assert f["cause"].startswith(
        f"the KV cache filled and up to {waited} new requests waited for free blocks; "
    )
    assert NOT_COUNTED in f["cause"]
    assert "evicts running requests" not in f["cause"]
    # the one finding object, in every output
    md, page = (out / "summary.md").read_text(), (out / "report.html").read_text()
    assert f["cause"].replace("_", "\\_") in md
    assert html.escape(f["cause"], quote=False) in page


def test_a_swap_preemption_is_said_as_a_swap(analyzed):
    """vllm-public 33 (V0 0.6.3): "preempted by PreemptionMode.SWAP mode": swapped out to CPU, not recomputed."""
    _, s, _ = analyzed(need(PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log"))
    f = _pressure(s)
    assert "the scheduler evicts running requests (preemption) and swaps them out to CPU memory" in f["cause"]
    assert "recomputes" not in f["cause"]
    assert "up to 98 new requests waited" in f["cause"]


@pytest.mark.parametrize("run", ["ladder", "orphan"])
def test_counted_preemptions_keep_the_eviction(analyzed, run):
    """The lab's runs count preemptions (vllm:num_preemptions_total; V1 only recomputes): the eviction stays."""
    _, s, _ = analyzed(need(LAB / run))
    causes = [f["cause"] for f in s["findings"] if "KV cache filled" in (f.get("cause") or "")]
    assert causes
    for c in causes:
        assert "the scheduler evicts running requests (preemption) and recomputes them" in c
        assert "not known" not in c
