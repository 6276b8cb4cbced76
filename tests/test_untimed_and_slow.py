"""What the report said of real excerpts it had never been tuned to, and now says from their evidence: records that
carry no time (a pasted request table, an openai-python log without asctime, SGLang's Decode line alone) are counted
and said, never 'no records were recognised'; a decode of well under a token a second per request with nothing
waiting is a slow engine, not 'nothing alarming'; a level read on the last stats line is said at its time, not as a
regime 'over 0 s'; several SGLang lines of one second are its last state, not their sum."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA, LAB, PUBLIC, PUBLIC2, need
from logscope.api import AnalyzeOptions, analyze
from logscope.errors import LogscopeError

SLOW = DATA / "vllm-slow-decode"


@pytest.fixture
def run(analyzed):
    return analyzed


def one(folder: Path, prefix: str) -> Path:
    return next(p for p in sorted(need(folder).glob(f"{prefix}*.log")))


def every_output(out: Path, text: str) -> None:
    """The same sentence in the terminal's source (summary.json), summary.md and the report (escaped as HTML)."""
    import html

    s = json.loads((out / "summary.json").read_text())
    assert text in " ".join(s["verdict"]) or any(text in f["title"] for f in s["findings"])
    assert text.replace("_", "\\_") in (out / "summary.md").read_text()
    assert html.escape(text, quote=False) in (out / "report.html").read_text()


# ------------------------------------------------------------------ records that carry no time


def test_openai_log_without_times_is_counted(run):
    """public-2 c05 (openai-python through llama-swap, no asctime): 9 requests, 5 answered 200, one 502 and three
    connection errors after retries, 17 attempts: truth 5 x 200, 2 x 502 seen, 8 retries, final connection error."""
    out, s, d = run(one(PUBLIC2, "c05"))
    f = d["findings"][0]
    assert f["severity"] == "medium"
    assert f["title"].startswith(
        "4 of 9 requests failed (3 × no HTTP answer, 1 × 502) in 17 attempts (8 retries)"
    )
    assert "when is unknown" in f["title"]
    assert not any("Nothing to diagnose" in x["title"] for x in d["findings"])
    every_output(out, "4 of 9 requests failed")


def test_pasted_request_table_without_times(run):
    """public-2 c06: 6 requests, all answered, TTFT up to 4.0879 s on the client's clock (truth ttft_max_s), above
    the default 2 s SLO: a medium finding that names the clock."""
    out, s, d = run(one(PUBLIC2, "c06"))
    f = d["findings"][0]
    assert f["title"].startswith(
        "6 request(s), none failed; TTFT up to 4.09 s (client clock) above the SLO's 2 s"
    )
    claim = next(c for c in s["claims"] if c["id"] == f["claim_id"])
    ttft = next(x for x in claim["facts"] if x["name"] == "ttft_max")
    assert ttft["value"] == pytest.approx(4.0879) and ttft["clock"] == "client"


def test_sglang_decode_line_without_time(run):
    """public-2 s02: SGLang's 'Decode batch.' line pasted alone: 1010 running, 12279 queued, token usage 0.93."""
    out, s, d = run(one(PUBLIC2, "s02"))
    f = d["findings"][0]
    assert f["kind"] == "pressure" and f["severity"] == "medium"
    assert "1,010 running, 12,279 waiting, KV / token usage up to 93.0 %" in f["title"]
    assert "no time" in f["title"]
    every_output(out, "12,279 waiting")


@pytest.mark.parametrize("prefix", ["n05", "n06"])
def test_lines_read_are_never_nothing_recognised(run, prefix):
    """public-2 n05 / n06: speculative-decoding metrics lines alone. They were read (server_spec_decode), so the
    report says how many lines it recognised, not that it recognised none."""
    out, s, d = run(one(PUBLIC2, prefix))
    title = d["findings"][0]["title"]
    assert title.startswith("Nothing to diagnose in the ")
    assert "recognised line(s)" in title and "were recognised" not in title
    files = pl.read_parquet(out / "files.parquet")
    assert f"Nothing to diagnose in the {int(files['lines_parsed'].sum())} recognised" in title


# ------------------------------------------------------------------ slow decode


@pytest.mark.parametrize(
    ("src", "per_request", "running", "samples"),
    [
        (("public-2", "n14"), 0.2, 2, 4),  # issue 15018: 0.4 tokens/s for 2 running, KV 0.6 %
        (("slow", "8847"), 0.8, 1, 3),  # issue 8847: 0.8 tokens/s for 1 running on a GPU
        (("slow", "12153"), 0.1, 1, 2),  # issue 12153: 0.1 tokens/s for 1 running on a CPU
    ],
)
def test_slow_decode_is_a_finding(run, src, per_request, running, samples):
    folder = PUBLIC2 if src[0] == "public-2" else SLOW
    out, s, d = run(one(folder, src[1]))
    f = d["findings"][0]
    assert f["kind"] == "stall" and f["severity"] == "high"
    assert f["title"].startswith(f"Decode at {per_request:.2f} tokens/s per running request")
    claim = next(c for c in s["claims"] if c["id"] == f["claim_id"])
    facts = {x["name"]: x["value"] for x in claim["facts"]}
    assert facts["per_request_tps"] == pytest.approx(per_request)
    assert facts["running_max"] == running and facts["samples"] == samples and facts["waiting_max"] == 0
    assert not any(x["title"].startswith("Nothing alarming") for x in d["findings"])
    every_output(out, f"Decode at {per_request:.2f} tokens/s per running request")


@pytest.mark.parametrize("run_name", ["calm", "ladder"])
def test_no_slow_decode_on_working_servers(run, run_name):
    """The lab's vLLM (CPU, tiny model) at rest and up a ladder to 64: never a slow-decode finding."""
    out, s, d = run(LAB / run_name)
    assert not any(f["title"].startswith("Decode at") for f in d["findings"])


# ------------------------------------------------------------------ one stats line, and SGLang's lines per second


@pytest.mark.parametrize(("src", "kv"), [((PUBLIC, "05"), "99.0 %"), ((PUBLIC2, "n01"), "100.0 %")])
def test_last_line_level_is_said_at_its_time(run, src, kv):
    """vllm-public 05 (KV 99 %, 115 pending on one V0 line) and public-2 n01 (DP engines at KV 100 %, 225 waiting,
    one second): no 'over 0 s', no 'Sustained regime' from one line, and no 'Nothing alarming' beside it."""
    out, s, d = run(one(*src))
    head, when = s["verdict"][0], s["verdict"][1]
    assert "over 0 s" not in head and "(one stats line)" in head and f"KV up to {kv}" in head
    assert when.startswith("One stats line, still abnormal when the logs end")
    f = d["findings"][0]
    assert f["severity"] == "medium" and f["title"].startswith("KV pressure when the logs end")
    assert not any(x["title"].startswith("Nothing alarming") for x in d["findings"])


def test_sglang_lines_of_one_second_are_its_last_state(run):
    """public-2 s01: SGLang prefill lines, two in some seconds. truth: queue_max 38, running_max 21; the lines carry
    no generation figure, so no '0 tokens/s' stall."""
    out, s, d = run(one(PUBLIC2, "s01"))
    ep = d["episodes"][0]
    assert ep["signal"] == "queue" and ep["peak"] == 38
    assert not any(e["signal"] == "stall" for e in d["episodes"])
    assert s["verdict"][0].startswith("A queue of up to 38 waiting over 4 s")
    assert s["verdict"][1].startswith("Sustained as far as the logs show")


@pytest.mark.parametrize(
    ("src", "lines", "waited", "cause"),
    [
        ((PUBLIC2, "n15"), 2, 10, "although most of the cache is free"),  # KV 22.9 %, spec acceptance 0
        ((PUBLIC, "07"), 3, 14, "with 23.2 % of the cache free"),  # KV 76.8 %: blocks may be short
    ],
)
def test_queue_none_admitted(run, src, lines, waited, cause):
    """A queue behind one running request with no prompt prefilled on any line: none was admitted, said from the
    server's own lines; with no request record in the folder, the arrival rate is unknown, never 0/s."""
    out, s, d = run(one(*src))
    f = d["findings"][0]
    assert f"no prompt prefilled on any of its {lines} stats lines" in f["evidence"]
    assert f"while up to {waited} waited and 1 ran" in f["evidence"] and cause in f["cause"]
    assert "py-spy dump" in f["next_test"]
    ep = d["episodes"][0]
    assert ep["arrival_rate_during"] is None and ep["arrival_rate_before"] is None
    assert "0/s during" not in f["evidence"]


@pytest.mark.parametrize("prefix", ["n07", "n08", "n09"])
def test_calm_of_one_moment_is_said_so(run, prefix):
    """public-2 n07 / n08 / n09: one request or one stats line, in one second. 'Nothing alarming' may be said of that
    moment (a request served, the engine's own line), never as a range 'a–a' calm throughout."""
    out, s, d = run(one(PUBLIC2, prefix))
    assert s["verdict"][0].startswith("Nothing alarming in the one moment the logs cover (")
    assert s["verdict"][1].startswith("One moment shows no spike and no regime")
    every_output(out, "Nothing alarming in the one moment the logs cover")


def test_instant_episode_names_what_lasted_beside_it(run):
    """vllm-public 33 (V0 0.6.3): one preemption warning at 11:16:41 after 98 pending at KV 73.8-86.1 %. An instant
    headline said '1 preemption over 0 s (…–…)'; it names the lasting companions with their times, and nothing calls
    it one stats line. (public-2 n19's line at 01:40:17 was read as such a preemption: it is a KV connector's failed
    load, tests/test_kv_load_failure.py; its headline still holds the 233 waiting.)"""
    out, s, d = run(one(PUBLIC, "33"))
    head = s["verdict"][0]
    # one V0 warning stands for at least 1 of 50 preemptions: a floor, not an exact count
    assert head.startswith(
        "At least 1 preemption (vLLM V0 logs every 50th) at 11:16:41, beside a queue 11:16:34–11:16:39"
    )
    assert "over 0 s" not in head and "98 waiting" in head
    assert "One stats line" not in s["verdict"][1]
    out, s, d = run(one(PUBLIC2, "n19"))
    head = s["verdict"][0]
    assert head.startswith("KV cache near full over 50 s (01:40:18–01:41:08)")
    assert "over 0 s" not in head and "233 waiting" in head
    assert "One stats line" not in s["verdict"][1]


def test_a_pasted_summary_table_is_not_requests(tmp_path):
    """A benchmark summary pasted as a Markdown table (sglang's p2p README: one row per request rate, mean and
    percentile columns) names requests and TTFT as a per-request table does; read as requests it made 5 callers
    whose 'TTFT' was a mean. It is not request_table's: no client row comes of it, and its lines are counted."""
    from logscope.parsers import request_table

    src = DATA / "pasted-aggregates" / "sglang-p2p-readme-bench-table.md"
    assert request_table.detect(src.read_text().splitlines()) == 0.0
    assert request_table.detect(request_table.SAMPLES) > 0  # public-2 c06's per-request table still is
    inp = tmp_path / "in"
    inp.mkdir()
    shutil.copy2(src, inp / src.name)
    with pytest.raises(
        LogscopeError, match="no file in a known format"
    ):  # alone, it is nothing logscope reads
        analyze(inp, tmp_path / "out", AnalyzeOptions())


def test_untimed_gateway_records_name_their_layer(run):
    """tests/data/llama-swap (llama-swap's proxy log: no times): 5 requests, 2 x 502, read from the gateway's log; no
    client attempts are claimed (it said 'in 0 attempts (-5 retries)') and the layer is not 'the callers''."""
    out, s, d = run(DATA / "llama-swap")
    # the backend's own end leads (pr155: 'cmd.Wait() returned error: signal: aborted (core dumped)', no time):
    # tests/test_untimed_death.py; the 502s it explains come next
    death, f = d["findings"][:2]
    assert death["title"].startswith("Engine died (") and "signal: aborted (core dumped)" in death["title"]
    assert f["title"] == "2 of 5 requests failed (2 × 502); when is unknown: their records carry no time"
    assert "read from the gateway's log with no time" in f["evidence"] and "attempts" not in f["title"]
    assert s["verdict"][1] == "No time range could be examined: its records carry no time."


def test_a_dated_platform_finding_is_not_timeless(run):
    """tests/data/platform: the kubelet's OOMKilled has its time (2023-09-07 19:27:10): no 'no record carries a
    time' beside it, though no server series gives the folder a range."""
    out, s, d = run(DATA / "platform")
    assert "19:27:10" in s["verdict"][0]
    assert "carry no time" not in s["verdict"][1]
