"""A KV connector's failed load is no preemption, and an episode whose queue still rises is no one-off.

public-2 n19 (LMCache's cache-migration README, vLLM V1 ~0.13): 'Recovered from KV load failure: 215 request(s)
rescheduled (373752 tokens affected)' at 01:40:17, then KV 100 % -> 82.4 % while Waiting climbs 47 -> 233 to the last
line. It read "1 preemption at 01:40:17" and "Sustained KV pressure: 1 preemption 01:40:17–01:40:17", told to
measure capacity with a ladder; with that line no longer a preemption, the KV episode read "One-off: back to
baseline" beside a queue still rising when the log ends. Real preemptions stay preemptions: vllm-public 33 (V0
'preempted by PreemptionMode.SWAP mode') and SGLang's 'KV cache pool is full. Retract requests. #retracted_reqs: 1'
(5 lines)."""

from __future__ import annotations

from conftest import DATA, PUBLIC, PUBLIC2, need

N19 = PUBLIC2 / "n19-v1-lmcache-kv-load-failure-215-rescheduled-kv100-waiting-47-to-233.log"
TITLE = "Cached KV failed to load from the KV connector at 01:40:17: 215 request(s) rescheduled, 373,752 tokens to compute again"


def test_a_failed_kv_load_is_the_cause_not_a_preemption(analyzed, rendered):
    out, s, diag = analyzed(need(N19))
    assert [e["signal"] for e in diag["episodes"]] == ["kv_pressure"]  # no preemption episode
    f1, f2 = s["findings"][:2]
    assert f1["title"] == TITLE
    facts = {x["name"]: x["value"] for x in next(c for c in s["claims"] if c["id"] == f1["claim"])["facts"]}
    assert (facts["requests_rescheduled"], facts["tokens_affected"], facts["lines"]) == (215, 373752, 1)
    # the logs end inside it: the title carries the verdict's qualifier
    assert (
        f2["title"] == "Sustained KV pressure, as far as the logs show: KV cache ≥ 90.0 % 01:40:18–01:41:08"
    )
    assert f2["cause"].startswith("a KV connector's failed load at 01:40:17 sent 215 request(s) back")
    assert "up to 233 new requests waited" in f2["cause"]
    assert "KV connector" in f2["next_test"] and "ladder" not in f2["next_test"]
    assert s["verdict"][0].endswith(f"; {TITLE[0].lower()}{TITLE[1:]} (F1).")
    for name, text in rendered(out, s).items():
        assert TITLE in text, name
        assert "1 preemption" not in text, name


def test_a_queue_rising_to_the_end_is_not_a_recovery(analyzed):
    """The KV cache fell under 90 % at 01:41:18 (85.6 %) but the queue rose to 233 on the log's last line."""
    _, s, diag = analyzed(need(N19))
    (ep,) = diag["episodes"]
    assert ep["class"] == "sustained" and ep["recovered"] is False
    assert "its queue still abnormal when the logs end" in ep["reason"]
    queue = next(c for c in ep["details"]["companions"] if c["signal"] == "queue")
    assert (queue["peak"], queue.get("to_the_end")) == (233.0, True)
    assert s["verdict"][1].startswith("Sustained as far as the logs show: its queue still abnormal")
    assert s["episodes"][0]["class"] == "sustained"


def test_real_preemptions_stay_preemptions(analyzed):
    _, s, diag = analyzed(need(PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log"))
    assert [(e["signal"], e["count"]) for e in diag["episodes"]] == [("preemptions", 1)]
    assert s["findings"][0]["title"] == (
        "Sustained KV pressure, as far as the logs show: at least 1 preemption (vLLM V0 logs every 50th) at 11:16:41"
    )
    assert "swaps them out to CPU memory" in s["findings"][0]["cause"]
    _, s, diag = analyzed(need(DATA / "sglang" / "retract-kv-pool-full.log"))
    assert [(e["signal"], e["count"]) for e in diag["episodes"]] == [("preemptions", 5)]
    assert not any("KV connector" in f["title"] for f in s["findings"])


def test_the_timeline_counts_no_preemption_for_a_failed_kv_load(analyzed):
    """The findings said n19 holds no preemption while its timeline's Preemptions panel drew 1 at 01:40:18: the
    windows counted the 'Recovered from KV load failure' line as a V0 preemption warning. The windows read the
    line's mode as the findings do; vllm-public 33's SWAP preemption and SGLang's retractions are still drawn."""
    import polars as pl

    out, _, _ = analyzed(need(N19))
    win = pl.read_parquet(out / "windows.parquet")
    assert win["preemptions"].fill_null(0).sum() == 0
    assert '"series":"preemptions","value":1.0' not in (out / "report.html").read_text()
    for src, n in (
        (PUBLIC / "33-v0-0.6.3-pending-98-then-swap-preemption.log", 1),
        (DATA / "sglang" / "retract-kv-pool-full.log", 5),
    ):
        out, _, _ = analyzed(need(src))
        assert pl.read_parquet(out / "windows.parquet")["preemptions"].fill_null(0).sum() == n, src.name
