"""A queue held at the server's --max-num-seqs while the KV cache had room is said as the cap binding, and tested by
raising the cap to what the cache holds (evid16). lab seqs-8 (the ladder at --max-num-seqs 8: 8 running on every line
with requests waiting, up to 56 waiting, KV at most 86.5 %) and the spike at --max-num-seqs 8 (tests/data/pairs) were
told "each waiting request needs more free blocks than remain (long prompts), or the engine is stalled" and "Run a
concurrency ladder ..., then cap --max-num-seqs there", a cap they already had."""

from __future__ import annotations

import pytest

from conftest import DATA, LAB, need

CASES = {  # folder: (title, cause's figures, next test)
    "seqs-8": (
        LAB / "seqs-8",
        "Sustained queue: a waiting queue of up to 56 03:06:12–03:06:46",
        "the cap on requests run at once binds: on 18 of the 18 stats lines with requests waiting, 8 ran, the "
        "server's --max-num-seqs 8, while up to 56 waited and the KV cache stayed at most 86.5 %",
        "Raise --max-num-seqs from 8 to 9 (what the KV cache holds at the observed request size: 9.3 requests of 384 "
        "tokens) and replay the same traffic",
    ),
    "pairs-seqs8": (
        DATA / "pairs" / "spike-seqs" / "seqs8",
        "Sustained queue: a waiting queue of up to 40 08:30:43–08:31:15",
        "the cap on requests run at once binds: on 16 of the 17 stats lines with requests waiting, 8 ran, the "
        "server's --max-num-seqs 8, while up to 40 waited and the KV cache stayed at most 68.5 %",
        "Raise --max-num-seqs from 8 to 11 (8 running filled at most 68.5 % of the KV cache: about 11 fit) and "
        "replay the same traffic",
    ),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_a_queue_at_the_sequence_cap_raises_the_cap(analyzed, rendered, key):
    src, title, cause, test = CASES[key]
    out, s, _ = analyzed(need(src))
    f = next(f for f in s["findings"] if f["title"] == title)
    assert f["cause"].startswith(cause), f["cause"]
    assert f["next_test"].startswith(test), f["next_test"]
    assert "long prompts" not in f["cause"] and "Run a concurrency ladder" not in f["next_test"]
    seen = rendered(out, s)
    for where in ("summary.md", "report.html"):
        assert f["cause"] in seen[where] and f["next_test"] in seen[where]
    assert f"[{f['severity']}] {title}" in seen["terminal"]
