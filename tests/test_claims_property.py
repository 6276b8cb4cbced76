"""No claim without its evidence (#37), as a property of every real input the repository carries: every lab
recording, every public excerpt, every folder under tests/data (tests/everyfolder.py lists them; each is
analysed once for this module).

For each: every claim of summary.json has the facts its state needs, not null, and an undecided state names
what was missing (claims.REQUIRED); every finding and episode names a claim that exists; every latency figure
names its clock (the claims' facts, the ladder steps, the episodes, the cold-start windows); and the terminal,
summary.json, summary.md and report.html say the same verdict, whose claim is diagnosis.json's."""

from __future__ import annotations

import everyfolder
import pytest

from logscope.diagnose.claims import CLOCKS, from_dict
from logscope.report.markdown import md

ITEMS = everyfolder.folders() + everyfolder.excerpts()
# inputs in no format logscope reads (analyze exits 4 with its message): scripts and a lone README, and excerpts
# whose format has no parser yet (an lm-eval progress line, a reporter's own table, a pretty-printed Envoy
# record, llama-swap's proxy, SGLang 0.3's batch lines)
UNREAD = {
    "data/gateway-tools",
    "data/pasted-aggregates",  # a benchmark summary table: read by nothing on purpose (not per-request rows)
    "public-2/c03-lm-eval-harness-client-timeout-retry-tqdm-glued.log",
    "public-2/c06-custom-client-per-request-ttft-table-6-reqs-success.log",
    "public-2/g07-higress-envoy-pretty-json-accesslog-503-UC-connection-termination.log",
    "public-2/g08-llama-swap-proxy-200-then-backend-fatal-then-502s.log",
    "public-2/s01-sglang-0.3-prefill-batches-queue-draining-token-usage-rising.log",
    "public-2/s02-sglang-single-decode-line-running-1010-queue-12279-token-usage-0.93.log",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, everyfolder.Run]:
    """Every input analysed once (about a minute and a half on two cores)."""
    root = tmp_path_factory.mktemp("every")
    return {everyfolder.name(p): everyfolder.analysed(p, root / str(i)) for i, p in enumerate(ITEMS)}


def _read(runs: dict, name: str) -> everyfolder.Run | None:
    """The run, or None for an input refused as in no known format (exit 4: nothing is claimed of it)."""
    r = runs[name]
    if r.error is not None and name in UNREAD:
        assert "no file in a known format" in r.error, (name, r.error)
        return None
    assert r.error is None, (name, r.error)
    return r


def _clock_ok(clock) -> bool:
    return isinstance(clock, str) and all(c in CLOCKS for c in clock.split(" + "))


NAMES = [everyfolder.name(p) for p in ITEMS]


def test_every_input_is_listed():
    """The lab's recordings (11 in LAB, 3 in lab2, 4 in pairs), 62 public excerpts, the other folders."""
    assert {n.split("/")[0] for n in NAMES} >= {
        "lab",
        "lab2",
        "spike-seqs",
        "storm-retries",
        "data",
        "public-2",
    }
    assert len(everyfolder.excerpts()) >= 62 and len([n for n in NAMES if n.startswith("lab/")]) >= 11


@pytest.mark.parametrize("name", NAMES)
def test_no_claim_without_its_evidence(runs, name):
    r = _read(runs, name)
    if r is None:
        return
    s = r.summary
    got = {c["id"]: c for c in s["claims"]}
    assert "verdict" in got
    problems = [p for c in s["claims"] for p in from_dict(c).problems()]
    assert not problems, problems
    for c in s["claims"]:
        assert c["sentence"], c["id"]
    for f in s["findings"]:  # every finding's title states a claim that exists
        assert f["claim"] in got, (f["title"], f["claim"])
    for e in s["episodes"]:
        assert e["claim"] in got and got[e["claim"]]["kind"] == "episode_class", e["id"]
    # nothing alarming is said only where the folder shows the server serving (#37 item 7)
    calm = got.get("calm")
    if calm is not None and calm["state"] == "nothing alarming":
        served = next(f for f in calm["facts"] if f["name"] == "normal_serving")
        assert served["value"], name
    # a verdict of a one-off or a sustained regime names its episode and the claim of its class
    v = got["verdict"]
    if v["state"] in ("one-off", "sustained", "recurring", "crash"):
        ep = next(f["value"] for f in v["facts"] if f["name"] == "episode")
        assert got[f"episode.{ep}"]["state"] == v["state"]


@pytest.mark.parametrize("name", NAMES)
def test_every_latency_names_its_clock(runs, name):
    r = _read(runs, name)
    if r is None:
        return
    s = r.summary
    for st in (s["ladder"] or {}).get("steps") or []:
        for f in ("ttft", "e2e"):
            if st.get(f"{f}_p95") is not None:
                assert _clock_ok(st.get(f"{f}_clock")), (st["step"], f, st.get(f"{f}_source"))
        for f in (
            "queue",
            "prefill",
            "decode",
        ):  # vLLM's histograms alone: the engine's clock, by their bucket
            if st.get(f"{f}_p95") is not None:
                assert st.get(f"{f}_p95_bucket"), (st["step"], f)
    for e in s["episodes"]:
        for f in ("ttft", "e2e"):
            if e["metrics"].get(f"{f}_p95") is not None:
                assert _clock_ok(e["latency_sources"].get(f"{f}_clock")), (e["id"], f)
    cold = s["cold_start"] or {}
    for w in [*(cold.get("windows") or []), *([cold["warm"]] if cold.get("warm") else [])]:
        for f in ("ttft", "e2e"):
            if w.get(f"{f}_p95") is not None:
                assert _clock_ok(w.get(f"{f}_clock")), (w, f)


@pytest.mark.parametrize("name", NAMES)
def test_no_length_beyond_what_was_asked(runs, name):
    """No output-token quantile above the largest max_tokens the requests asked for (a histogram's interpolation
    inside a bucket is held to it, #37 item 6)."""
    import polars as pl

    r = _read(runs, name)
    if r is None or not (r.out / "requests.parquet").exists():
        return
    req = pl.read_parquet(r.out / "requests.parquet", columns=["max_tokens"])
    cap = req["max_tokens"].max()
    ol = (r.summary["output_lengths"] or {}).get("overall") or {}
    # (exact per-request figures win over histograms: they are what they are)
    if (
        cap is not None
        and ol.get("output_tokens_p50") is not None
        and ol.get("source") == "metrics histogram"
    ):
        assert ol["output_tokens_p50"] <= cap, (ol, cap)


@pytest.mark.parametrize("name", NAMES)
def test_every_output_says_the_same_verdict(runs, name):
    r = _read(runs, name)
    if r is None:
        return
    s = r.summary
    lines = s["verdict"]
    assert lines == r.diagnosis["verdict"][:3]
    claim = next(c for c in s["claims"] if c["id"] == "verdict")
    assert claim["sentence"] == "\n".join(r.diagnosis["verdict"])
    for line in lines:
        assert line in r.terminal, ("terminal", line)
        assert line in r.md, ("summary.md", line)
        assert line in r.html, ("report.html", line)
    # the claims the findings state: the same object on both pages, its state beside the finding and its
    # sentence (what wording made of its facts) in the claims table (everyfolder reads both pages unescaped)
    for f in s["findings"]:
        if f["claim"]:
            c = next(c for c in s["claims"] if c["id"] == f["claim"])
            assert f"Claim ({c['id']}): {c['state']}" in r.md, f["title"]
            assert 'href="#claim-' in r.html
            assert md(c["sentence"]).replace("\\", "") in r.md, (c["id"], "summary.md")  # r.md: unescaped
            assert c["sentence"] in r.html, (c["id"], "report.html")  # r.html: unescaped
    if s["findings"]:
        assert s["findings"][0]["title"] in r.terminal
