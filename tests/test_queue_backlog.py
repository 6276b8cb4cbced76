"""A queue that began after the last arrival and drained with none after it is the backlog of the last requests,
and its advice follows that evidence (evid17). lab kv-short (3 long prompts, 601 tokens each, sent at once as the
load ended, on a KV cache of 1,056 tokens: served one at a time, waiting 2 → 1 → 0, KV at most 75 %) was told "Run
a concurrency ladder … then cap --max-num-seqs there": a cap cannot shorten a backlog that drained on its own."""

from __future__ import annotations

from conftest import LAB, need

CAUSE = (
    "the backlog of the last requests: up to 2 waited behind 1 running after the last arrival (04:43:30) and "
    "drained in 11 s with no new one, the KV cache at most 75.0 %: each waiting request needed more free blocks "
    "than the running ones left, so they ran one after another; their prompts averaged 601 tokens, against 1,056 "
    "tokens in the whole KV cache; the load before it (0.85 requests/s) queued nothing"
)
TEST = (
    "No change to --max-num-seqs (64): this queue drained on its own after the load ended, and a lower cap would "
    "admit fewer, not more. If the last requests' wait matters, give the KV cache more memory "
    "(--gpu-memory-utilization) so that more than one of them fits (601-token prompts, 1,056 tokens now) and "
    "replay the same requests, during the load this time (none followed them here)"
)


def test_a_drained_backlog_is_no_cap_problem(analyzed, rendered):
    out, s, _ = analyzed(need(LAB / "kv-short"))
    (f,) = [f for f in s["findings"] if f["kind"] == "pressure"]
    assert f["title"] == "Spike queue: a waiting queue of up to 2 04:43:34–04:43:45"
    assert f["cause"] == CAUSE, f["cause"]
    assert f["next_test"].startswith(TEST), f["next_test"]
    for stale in ("concurrency ladder", "cap --max-num-seqs there", "Lower --max-num-seqs", "worked off"):
        assert stale not in f["cause"] + f["next_test"]
    assert (
        f["severity"] == "medium" and f["slowed_requests"] == 3
    )  # the 3 long requests' TTFT: felt, not high
    seen = rendered(out, s)
    for where in ("summary.md", "report.html"):
        assert f["cause"] in seen[where] and f["next_test"] in seen[where]
    assert f["next_test"] in seen["terminal"]  # the verdict's first test is this finding's
