"""An episode the logs end inside is not shown to be a sustained regime: its title says so as the verdict does.

vllm-public 33 read "[high] Sustained KV pressure: 1 preemption at 11:16:41" (one SWAP warning on the excerpt's last
line), vllm-public 03 and public-2 s01 "Sustained queue: …" while their queues drain (90 -> 66, 38 -> 18) to the
excerpt's end; only the verdict said "as far as the logs show". The title now carries it (from the class claim's
rule, ends_abnormal), in summary.json, summary.md, report.html and the terminal."""

from __future__ import annotations

import pytest

from conftest import PUBLIC, PUBLIC2

P33 = PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log"
P03 = PUBLIC / "03-v1-apiserver-prefix-waiting-queue-draining.log"
S01 = PUBLIC2 / "s01-sglang-0.3-prefill-batches-queue-draining-token-usage-rising.log"


@pytest.mark.parametrize(
    ("src", "title"),
    [
        (
            P33,
            "Sustained KV pressure, as far as the logs show: at least 1 preemption (vLLM V0 logs every 50th) at "
            "11:16:41",
        ),
        (P03, "Sustained queue, as far as the logs show: a waiting queue of up to 90 15:38:10–15:38:50"),
        (S01, "Sustained queue, as far as the logs show: a waiting queue of up to 38 16:43:29–16:43:33"),
    ],
)
def test_a_title_of_an_episode_the_logs_end_in_says_as_far_as_the_logs_show(analyzed, rendered, src, title):
    out, s, diag = analyzed(src)
    (ep,) = diag["episodes"]
    claim = next(c for c in s["claims"] if c["id"] == ep["claim_id"])
    rule = {f["name"]: f["value"] for f in claim["facts"]}["rule"]
    assert (ep["class"], ep["recovered"], rule) == ("sustained", False, "ends_abnormal")
    assert s["findings"][0]["title"] == title
    # the same qualifier as the title
    assert s["verdict"][1].startswith("Sustained as far as the logs show: ")
    for name, text in rendered(out, s).items():
        assert title in text, name
