"""Evidence before verdict (#37): each numbered item of the issue on the real recordings that showed it (the
lab's runs of this round, bundled in tests/data/fixtures/lab with their truth.json, and public excerpts). Each
asserts the claim's fields (state, facts, what was missing) and then what the outputs say of it."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA, LAB, PUBLIC, PUBLIC2, need
from logscope.api import AnalyzeOptions, analyze

LAB_NOTES = ("manifest.json", "truth.json", "events.jsonl", "commands.log", "notes.md", "lab-events.log")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """analyze of a folder (a copy without the listed files, or a range), once per module: (out, summary,
    diagnosis, claims by id)."""
    done: dict = {}

    def get(src: Path, *left_out: str, **opts):
        key = (src, left_out, tuple(sorted(opts.items())))
        if key not in done:
            root = tmp_path_factory.mktemp(src.name)
            if left_out or src.is_file():
                copy = root / "in"
                if src.is_file():
                    copy.mkdir()
                    shutil.copy2(src, copy / src.name)
                else:
                    shutil.copytree(need(src), copy, ignore=shutil.ignore_patterns(*left_out))
                src = copy
            out = root / "out"
            analyze(need(src), out, AnalyzeOptions(**opts))
            s = json.loads((out / "summary.json").read_text())
            d = json.loads((out / "diagnosis.json").read_text())
            done[key] = out, s, d, {c["id"]: c for c in s["claims"]}
        return done[key]

    return get


def fact(claim: dict, name: str):
    return next(f for f in claim["facts"] if f["name"] == name)


def value(claim: dict, name: str):
    return fact(claim, name)["value"]


def t(x: str) -> datetime:
    return datetime.fromisoformat(x).replace(tzinfo=UTC)


# ------------------------------------------------------------------ 1: cancellation


@pytest.mark.parametrize("name", ["abort-ignored", "orphan"])
def test_item1_not_propagated_by_configuration(run, name):
    """Callers left (3 s client timeouts) through nginx :8082, whose nginx.conf has proxy_ignore_client_abort on;
    vLLM aborted none (truth: 0 'Aborted request'). Not 'propagated' (the abort-ignored run's 45 finishes within
    the race window are no evidence of it): not propagated, by configuration, the directive named."""
    out, s, _, claims = run(LAB / name)
    truth = json.loads((LAB / name / "truth.json").read_text())
    c = claims["cancellation"]
    assert c["state"] == "not propagated by configuration"
    assert value(c, "aborted") == truth["vllm"]["requests_aborted"] == 0
    assert value(c, "proxy_ignore_client_abort") == "on" and value(c, "listeners") == ":8082"
    assert fact(c, "proxy_ignore_client_abort")["source"] == "nginx_conf"
    assert "proxy_ignore_client_abort on" in (LAB / name / "nginx.conf").read_text()
    canc = s["retries"]["cancellation"]
    assert canc["verdict"] == c["state"] and s["retries"]["cancellation_propagated"] is False
    assert (
        "not propagated, by configuration (nginx.conf: proxy_ignore_client_abort on at :8082" in c["sentence"]
    )
    md = (out / "summary.md").read_text().replace("\\", "")
    # item 9: the sentence after the retries table is a paragraph of its own, not a row of the table
    assert f"|\n\n{c['sentence']}\n" in md
    assert c["sentence"] in (out / "report.html").read_text()


def _left_behind(name: str, lo: datetime, hi: datetime, race_s: float = 1.0) -> tuple[int, int]:
    """From the run's truth.json: the attempts sent in [lo, hi] whose caller left (its timeout), and how many of
    them vLLM finished more than race_s after the caller left (nginx logs each when vLLM finished it)."""
    truth = json.loads((LAB / name / "truth.json").read_text())
    n = late = 0
    for o in truth["orphans"]["list"]:
        sent = datetime.fromisoformat(o["client_sent"])
        if lo <= sent <= hi:
            n += 1
            left = sent.timestamp() + o["client_timeout_s"]
            late += datetime.fromisoformat(o["nginx_logged"]).timestamp() - left > race_s
    return n, late


@pytest.mark.parametrize(
    ("until", "state"), [("02:06:50", "not observed"), ("02:07:00", "not propagated")], ids=["1-min", "70-s"]
)
def test_item1_no_abort_seen_is_never_propagated(run, until, state):
    """The abort-ignored run without its nginx.conf, from 02:05:50: vLLM aborted none of the abandoned attempts.
    Until 02:06:50 the 3 abandoned all finished within the 1 s race window (truth: 0.12-0.27 s after the caller
    left): with no abort seen, propagation is not observed, and the claim says why (the old rule called it
    'propagated'). Until 02:07:00, 6 of the 9 ran on 1.4-1.9 s after their callers left: not propagated."""
    lo, hi = t("2026-12-06T02:05:50"), t(f"2026-12-06T{until}")
    _, s, _, claims = run(LAB / "abort-ignored", "nginx.conf", *LAB_NOTES, since=lo, until=hi)
    c = claims["cancellation"]
    abandoned, late = _left_behind("abort-ignored", lo, hi)
    assert (abandoned, late) == ((3, 0) if until == "02:06:50" else (9, 6))
    assert (value(c, "abandoned"), value(c, "aborted"), value(c, "ran_on")) == (abandoned, 0, late)
    assert value(c, "finished_in_race") == abandoned - late and value(c, "proxy_ignore_client_abort") is None
    assert c["state"] == state
    if state == "not observed":
        assert "an abort by vLLM" in c["missing"][0] and s["retries"]["cancellation_propagated"] is None
    else:
        assert s["retries"]["cancellation_propagated"] is False


# ------------------------------------------------------------------ 3: clocks


def test_item3_engine_clock_only_is_said(run):
    """v0-ladder without its client's files: the steps' TTFT is vLLM's histogram alone. The SLO verdict says it
    was met by the engine's clock and that the callers' TTFT is not in this folder; every step's TTFT fact
    names the engine clock and its source."""
    _, s, d, claims = run(LAB / "v0-ladder", "client-*", *LAB_NOTES)
    b = claims["ladder.boundary"]
    assert b["state"] == "met" and value(b, "engine_only") is True
    assert "by the engine's clock (the callers' TTFT is not in this folder)" in s["verdict"][0]
    for st in s["ladder"]["steps"]:
        f = fact(claims[f"ladder.step.{st['step']}"], "ttft_p95")
        assert (f["clock"], f["source"]) == ("engine", "engine_histogram")
    lad = next(f for f in s["findings"] if f["kind"] == "ladder")
    assert (
        "by the engine's clock" in lad["title"] and "callers' TTFT is not in this folder" in lad["evidence"]
    )


@pytest.mark.parametrize("name", ["v0-ladder", "seqs-8"])
def test_item3_two_clocks_give_their_gap_per_step(run, name):
    """v0-ladder with its client, and the --max-num-seqs 8 ladder with vllm bench's per-request results: each
    step's TTFT on the callers' clock and vLLM's histogram beside it, their gap a claim of its own where 10 or more
    requests of one attempt give the callers' p95 (no large gap in either: the lab's truth for seqs-8, callers
    1.19 s and engine 0.94 s at c=8, ratios 0.6-1.5 from c=8 up)."""
    _, s, _, claims = run(LAB / name)
    steps = s["ladder"]["steps"]
    assert {st["ttft_clock"] for st in steps} == {"client"}
    judged = 0
    for st in steps:
        g = claims.get(f"clock_gap.ladder.step.{st['step']}.ttft")
        if st.get("ttft_p95_engine_bucket") is None:
            continue
        assert fact(g, "engine_p95_hi")["clock"] == "engine"
        assert st["ttft_p95_engine_bucket"] == value(g, "engine_p95_bucket")
        if g["state"] == "unknown":  # too few requests of one attempt in the step for a p95
            assert value(g, "requests") < 10 and g["missing"]
            continue
        judged += 1
        assert fact(g, "callers_p95")["clock"] == "client" and g["state"] == "small gap"
    assert judged >= 4
    assert not [f for f in s["findings"] if "in front of the engine" in f["title"]]


def test_item3_no_gap_from_a_range_shorter_than_its_latency(run):
    """frontend-bound: 48 streams through one API server, vLLM's waiting queue 0 throughout (truth). Over its c=48
    phase the callers' TTFT p95 is 2.51 s and vLLM's 1.86 s (truth: ratio 1.35, no front-end queue of the 3x the
    lab aimed for). Its 2 s TTFT episodes compared the callers' p95 of the requests started in them (2.9 s) with
    the engine's histogram of the first tokens that fell inside them (other requests): 'a queue in front of the
    engine, at least 2.1 s'. A range shorter than twice the callers' p95 gives no gap, and says why."""
    _, s, _, claims = run(LAB / "frontend-bound")
    truth = json.loads((LAB / "frontend-bound" / "truth.json").read_text())
    high = truth["purpose"]["phases"][truth["purpose"]["high_rate_phase"]]
    assert high["waiting_max"] == 0 and high["ttft_p95_ratio_callers_over_engine"] < 2
    gaps = [c for c in claims.values() if c["kind"] == "clock_gap"]
    assert gaps and not [c for c in gaps if c["state"] == "large gap"]
    short = [c for c in gaps if c["state"] == "unknown" and "times the callers' p95" in c["missing"][0]]
    assert short, [(c["id"], c["state"]) for c in gaps]
    for c in short:
        span = (t(value(c, "end")[:19]) - t(value(c, "start")[:19])).total_seconds()
        assert span < c["thresholds"]["clock_gap_span_ratio"] * value(c, "callers_p95")
    assert not [f for f in s["findings"] if "in front of the engine" in f["title"]]


# ------------------------------------------------------------------ 4: ladder steps


def test_item4_cold_start_set_aside_is_shown(run):
    """ladder-b's first step (c=3) starts right after the server: 21 of its requests fall in the 30 s cold window
    and are left out of its figures; the step's claim and the ladder finding say how many, which step and why."""
    out, s, _, claims = run(LAB / "ladder-b")
    truth = json.loads((LAB / "ladder-b" / "truth.json").read_text())
    # every step of the climb (its log and its JSON lines both describe the phases: one client, not two)
    assert [x["concurrency"] for x in s["ladder"]["steps"]] == [
        x["concurrency"] for x in truth["ladder_steps"]
    ]
    st = s["ladder"]["steps"][0]
    assert st["cold_set_aside"] == 21 and "after a server start" in st["cold_why"]
    c = claims["ladder.step.1"]
    assert value(c, "cold_set_aside") == 21 and "21 request(s) set aside as cold start" in c["sentence"]
    lad = next(f for f in s["findings"] if f["kind"] == "ladder")
    assert "set aside as cold start: 21 request(s) of step 1" in lad["evidence"]
    assert s["ladder"]["cold_set_aside"] == [{"step": 1, "requests": 21, "why": st["cold_why"]}]


@pytest.mark.parametrize("slo", [0.05, 0.3, 2.0])
def test_item4_boundary_never_above_an_open_step(run, slo):
    """v0-ladder without its client (TTFT from vLLM's histogram): at 2 s, c=16's bucket 1-2.5 s is undecided and
    the boundary stays at 8; at 0.05 s, c=8's 0.04-0.06 s is; whatever the SLO, no boundary above the first
    undecided or unknown step."""
    _, s, _, claims = run(LAB / "v0-ladder", "client-*", *LAB_NOTES, slo_ttft_s=slo)
    steps = s["ladder"]["steps"]
    wb = s["ladder"]["working_boundary"]
    first_open = next((st["step"] for st in steps if st["slo_status"] in ("unknown", "undecided")), None)
    assert wb is None or first_open is None or wb["step"] < first_open
    assert (first_open is not None) == (slo != 0.3)
    for st in steps:
        c = claims[f"ladder.step.{st['step']}"]
        if st["slo_status"] == "undecided":
            assert c["state"] == "undecided" and "between " in value(c, "undecided_bucket")
    if slo == 2.0:
        assert (wb["concurrency"], steps[2]["slo_status"]) == (8, "undecided")


# ------------------------------------------------------------------ 5: capacity


def test_item5_load_above_capacity(run):
    """overload-long: an open loop offered 1,798 requests in 300.8 s (truth: 5.98/s measured, the 9/s setting
    not reached) while the server completed 2.78/s; vLLM's waiting queue grew to 953 at the end of arrivals. It
    is a finding with its figures (it was not: the pressure episode alone said 'sustained')."""
    _, s, _, claims = run(LAB / "overload-long")
    truth = json.loads((LAB / "overload-long" / "truth.json").read_text())
    c = claims["capacity.overload"]
    assert c["state"] == "over capacity"
    assert value(c, "arrival_rate") == pytest.approx(truth["client"]["logical_requests"] / 300.8, rel=0.02)
    assert value(c, "completion_rate") == pytest.approx(2.78, abs=0.05)
    assert value(c, "duration_s") == 300 and value(c, "backlog_growth") > 900
    f = next(f for f in s["findings"] if f["claim"] == c["id"])
    assert f["severity"] == "high" and f["kind"] == "capacity"
    assert f["title"].startswith("Load above capacity: 6.0 requests/s offered, 2.8/s completed for 5 min")
    assert "2.8/s here" in f["next_test"]
    # the cause leads the verdict, the preemption episode (3,645 over the run, 953 waiting) is its symptom
    assert f["id"] == "F1", [g["title"] for g in s["findings"][:3]]
    head = s["verdict"][0]
    assert head.startswith("Load above capacity: 6.0 requests/s offered, 2.8/s completed for 5 min")
    assert "(F1); its symptom: 3,645 preemptions" in head and "953 waiting" in head
    assert s["verdict"][2].startswith("First thing to test: Keep the offered rate below")


def test_item5_load_above_capacity_after_a_replica_died(run):
    """The second real sample: traced-2r-kill's open loop (2 requests/s setting: truth 637 logical requests over
    its 360.2 s phase, 03:23:14.864-03:29:15.064) lost replica b at 03:24:36.685; replica a alone completed fewer
    than arrived until the arrivals ended and its queue grew. Load above capacity, from the kill to the end of
    the load, with its figures."""
    _, s, _, claims = run(LAB / "traced-2r-kill")
    truth = json.loads((LAB / "traced-2r-kill" / "truth.json").read_text())
    phase = truth["client"]["phases"][0]
    c = claims["capacity.overload"]
    assert c["state"] == "over capacity"
    assert value(c, "arrival_rate") == pytest.approx(truth["client"]["logical_requests"] / 360.2, rel=0.05)
    assert value(c, "completion_rate") == pytest.approx(1.33, abs=0.05)
    # after the kill (03:24:36.685), within the load (arrivals until 03:29:15)
    assert "2026-12-06T03:24:36" < value(c, "start") and value(c, "end") <= phase["end"]
    assert value(c, "duration_s") == 210 and value(c, "backlog_growth") > 90
    f = next(f for f in s["findings"] if f["claim"] == c["id"])
    assert f["kind"] == "capacity"
    assert f["title"].startswith("Load above capacity: 1.8 requests/s offered, 1.3/s completed for 4 min")


@pytest.mark.parametrize("name", ["ladder-b", "seqs-64"])
def test_item5_a_closed_loop_ladder_is_no_overload(run, name):
    """A ladder's concurrency steps hold more requests in flight at each step (a closed loop): its capacity is its
    working boundary, never 'load above capacity'."""
    _, s, _, claims = run(LAB / name)
    assert "capacity.overload" not in claims and s["ladder"]["working_boundary"] is not None


@pytest.mark.parametrize(
    ("src", "short"),
    [
        (PUBLIC / "19-v0-0.6.4-startup-capacity-ok-vs-maxseqlen-error.log", (0.82, 29000)),
        (PUBLIC / "47-v0-0.6.4-startup-0.31x-131072-maxseqlen-valueerror.log", (0.31, 131072)),
        (PUBLIC / "21-v1-startup-kv-capacity-enginecore-dp0.log", None),
        (LAB / "ladder-b", None),
    ],
    ids=["public-19-0.82x", "public-47-0.31x", "public-21-1.30x", "ladder-b"],
)
def test_item5_one_request_that_cannot_fit_is_a_finding(run, src, short):
    """vLLM's start-up line 'Maximum concurrency for N tokens per request: Xx' below 1 (public-19: 29,000 tokens,
    0.82x, prefixes stripped by its reporter; public-47: 131,072 tokens, 0.31x, whole V0 0.6.4 lines from a
    public repository) says one full-length request cannot fit in the KV cache: a finding with its figures, and
    never 'nothing alarming'. At 1.30x (public-21, V1) or on the lab's ladder-b, no such claim."""
    _, s, _, claims = run(need(src))
    c = claims.get("capacity.kv_fit")
    if short is None:
        assert c is None and not [f for f in s["findings"] if "does not fit in the KV cache" in f["title"]]
        return
    assert c["state"] == "not met"
    assert (value(c, "max_concurrency"), value(c, "max_concurrency_tokens")) == short
    assert fact(c, "max_concurrency")["source"] == "engine_log"
    f = next(f for f in s["findings"] if f["claim"] == c["id"])
    assert f["kind"] == "capacity" and f["title"].startswith(
        f"One request of {short[1]:,} tokens does not fit"
    )
    assert claims["verdict"]["state"] != "nothing alarming"


# ------------------------------------------------------------------ 6: impossible figures


@pytest.mark.parametrize("name", ["killed-debug", "v0-ladder"])
def test_item6_lengths_bounded_by_what_was_asked(run, name):
    """No per-request output lengths in the folder (killed-debug: the client's DEBUG log only; v0-ladder without
    its client), so they come from vLLM's histogram. Its p50 interpolated in the 200-500 bucket (350) was above
    every request's max_tokens; the exact mean equals the largest max_tokens, so every request generated
    exactly that: the p50 is that value, exact."""
    out, s, _, _ = run(LAB / name, "client-*", *LAB_NOTES)
    ol = s["output_lengths"]["overall"]
    cap = pl.read_parquet(out / "requests.parquet")["max_tokens"].max()
    assert ol["source"] == "metrics histogram" and ol["output_tokens_mean"] == cap
    assert ol["output_tokens_p50"] == cap and ol["output_tokens_p50_bucket"] is None
    assert "generated exactly" in ol["output_tokens_bound"]


# ------------------------------------------------------------------ 7: deaths and what a folder can support


def test_item7_engine_dead_then_shutting_down_is_a_death(run):
    """public-2/n18: both engine cores die, the API server's output handler raises EngineDeadError, then
    'Shutting down FastAPI HTTP server' in the same second. It was read as a graceful shutdown's harmless
    traceback ('Nothing alarming'): it is a death, and the shutdown is the death's end, not a stop."""
    _, s, _, claims = run(need(next(PUBLIC2.glob("n18-*.log"))))
    [death] = s["server_lifecycle"]["deaths"]
    assert death["kinds"] == ["engine_dead"] and death["ts"].endswith("11:46:39.000Z")
    assert s["server_lifecycle"]["graceful_shutdowns"] == []
    assert claims["verdict"]["state"] == "crash" and s["findings"][0]["severity"] == "critical"
    assert s["verdict"][0].startswith("The vLLM server died (its engine process is gone) at 11:46:39")


def test_item7_enginecore_killed_is_a_death_with_its_5xx(run):
    """The lab's enginecore-kill: SIGKILL of VLLM::EngineCore alone at 04:09:35.867; vLLM logs '[shutdown]
    MPClient: engine core exited unexpectedly', EngineDeadError, two 500s, then 'Shutting down' and exits; nginx
    answers 2,176 x 502 after. The parser marks what follows a '[shutdown]' line as the graceful stop's harmless
    traceback: the run read '2182 failed requests', no death. With no stop before it, it is a death, and the 5xx
    the callers got after it are counted to it (truth: 2 x 500, 2,176 x 502)."""
    _, s, _, claims = run(LAB / "enginecore-kill")
    truth = json.loads((LAB / "enginecore-kill" / "truth.json").read_text())
    [death] = s["server_lifecycle"]["deaths"]
    assert death["kinds"] == ["engine_dead"] and death["ts"].endswith("04:09:36.000Z")
    assert (
        death["gateway_5xx_after_by_status"]
        == {"500": 2, "502": truth["gateway"]["statuses"]["502"]}
        == {
            "500": 2,
            "502": 2176,
        }
    )
    assert s["server_lifecycle"]["graceful_shutdowns"] == []
    assert claims["verdict"]["state"] == "crash"
    assert s["findings"][0]["title"].startswith("Engine process ended with no error of its own at 04:09:36")


@pytest.mark.parametrize(
    ("src", "failed", "first"),
    [(LAB / "crash" / "nginx-error.log", 814, "08:34:23"), (DATA / "nginx" / "error.log", 1, "09:49:35")],
    ids=["lab-crash", "nginx-data"],
)
def test_item7_gateway_error_log_alone(run, src, failed, first):
    """A folder holding only nginx's error log (the crash run's, truth: 814 'no live upstreams'; the nginx test
    data's, with a dead pair) was 'Nothing to diagnose': the upstream was down, from when, how many requests
    failed (each 'no live upstreams' is a request nginx answered 502), and what the folder lacks."""
    _, s, _, claims = run(need(src))
    c = claims["gateway.upstream_down"]
    assert value(c, "failed_requests") == failed and value(c, "refused") >= 1
    assert value(c, "first")[11:19] == first
    f = s["findings"][0]
    assert f["claim"] == c["id"] and f["severity"] == "high"
    assert f["title"].startswith(f"Upstream down from {first}: {failed:,} request(s) failed")
    assert not s["verdict"][0].startswith("Nothing")


@pytest.mark.parametrize(
    "src",
    [DATA / "compose", PUBLIC / "21-v1-startup-kv-capacity-enginecore-dp0.log"],
    ids=["compose-startup", "public-21-startup"],
)
def test_item7_nothing_alarming_needs_normal_serving(run, src):
    """Start-up lines only (a ROCm server's start through compose, with one GET /v1/models; a V1 start-up with its
    KV capacity): no generation served, no stats line. 'Nothing alarming' cannot be said; the claim names what
    is missing."""
    _, s, _, claims = run(need(src))
    c = claims["calm"]
    assert c["state"] == "unknown" and value(c, "served") is None
    assert "request served" in c["missing"][0]
    assert claims["verdict"]["state"] == "unknown"
    assert s["verdict"][0].startswith("Nothing alarming cannot be said")


# ------------------------------------------------------------------ 8: noise


def test_item8_severity_follows_impact(run):
    """The lab ladder's c=16 step preempts 58 times (truth) yet every request of it met the SLO: no request
    slowed or failed, so its pressure finding is low, not the HIGH of a 'sustained' class; c=64's, where 169
    requests were slowed, stays high."""
    _, s, _, _ = run(LAB / "ladder")
    p = {f["title"].split(": ", 1)[1].split(" ")[0]: f for f in s["findings"] if f["kind"] == "pressure"}
    assert (p["58"]["severity"], p["58"]["slowed_requests"], p["58"]["failed_requests"]) == ("low", 0, 0)
    assert "severity low by its impact: 0 of the" in p["58"]["evidence"]
    assert p["245"]["severity"] == "high" and p["245"]["slowed_requests"] > 100


# ------------------------------------------------------------------ 9: contradictions


@pytest.mark.parametrize("name", ["crash", "sigterm-overload"])
def test_item9_retries_say_what_reached_vllm_from_counts(run, name):
    """The retries finding says how many attempts of the retried requests reached vLLM and how many did not,
    from the requests' own counts (requests.parquet, counted again here), never 'most' against its evidence."""
    path = LAB / name if (LAB / name).exists() else DATA / "lab2" / name
    out, s, _, claims = run(path)
    req = pl.read_parquet(out / "requests.parquet")
    att = pl.max_horizontal(pl.col("client_attempts").fill_null(1), pl.col("gateway_attempts").fill_null(1))
    retried = req.filter(att > 1)
    attempts = int(retried.select(att).to_series().sum())
    reached = min(int(retried["server_requests"].fill_null(0).sum()), attempts)
    c = claims["retries.reach"]
    assert (value(c, "attempts"), value(c, "reached"), value(c, "not_reached")) == (
        attempts,
        reached,
        attempts - reached,
    )
    f = next(f for f in s["findings"] if f["kind"] == "retries")
    assert f["claim"] == "retries.reach"
    assert f"{attempts - reached:,} of the {attempts:,} attempts" in f["symptom"]
    assert ("never reached the server" in f["title"]) == (
        attempts - reached > reached
    ) or "never reached vLLM" in f["title"]


def _iso(x: str) -> datetime:
    return datetime.fromisoformat(x.replace("Z", "+00:00"))


@pytest.mark.parametrize(
    ("name", "stretch", "slack_s"),
    [
        # callers left through the whole second half (truth: 56 of 76 leavings from 02:07:52 on, the last work
        # finished 02:09:00.561); the episode had been its last 6 s, 'sustained', gone in a range around it
        ("abort-ignored", ("2026-12-06T02:07:52+00:00", "2026-12-06T02:09:00+00:00"), 1.0),
        # 570 orphaned requests over the 116 s preemption episode (truth: the last finished 08:46:59.573); a
        # retried request's executions are placed from its end (its last attempt's): a few seconds late
        ("orphan", ("2026-11-29T08:45:26+00:00", "2026-11-29T08:47:03+00:00"), 4.0),
    ],
)
def test_item1_orphaned_work_is_one_stretch_of_executions(run, name, stretch, slack_s):
    """Orphaned work is built from the executions that ran after their caller left (caller's end to the server's
    finish, merged within merge_gap_s), not as a per-window outlier: one stretch over the time callers were
    leaving, beside the server episodes it overlaps (their companion), never a few seconds of its tail called a
    sustained episode of its own."""
    _, s, diag, _ = run(LAB / name)
    truth = json.loads((LAB / name / "truth.json").read_text())
    ends = (
        [a["vllm_finished_gateway_clock"] for a in truth["purpose"]["abandoned"]]
        if name == "abort-ignored"
        else [o["nginx_logged"] for o in truth["orphans"]["list"]]
    )
    assert not [e for e in diag["episodes"] if e["signal"] == "orphans"]
    comp = {
        (c["start"], c["end"])
        for e in diag["episodes"]
        for c in e["details"]["companions"]
        if c["signal"] == "orphans"
    }
    lo, hi = max(comp, key=lambda c: _iso(c[1]) - _iso(c[0]))
    assert abs((_iso(lo) - _iso(stretch[0])).total_seconds()) < 1
    assert abs((_iso(hi) - _iso(stretch[1])).total_seconds()) < 1
    assert abs((_iso(hi) - _iso(max(ends))).total_seconds()) <= slack_s
    assert "executions for callers that had left over" not in s["verdict"][0]
    assert s["findings"][0]["kind"] == "orphans" and "orphaned work" in s["verdict"][0]


def test_item8_a_burst_no_caller_felt_does_not_lead(run):
    """traced-1r (non-streaming callers: no TTFT in their records, their e2e is what they felt): truth's one
    preemption burst (5 at 03:39:23.363, 0 waiting) slowed or failed none of the 7 requests in flight. Judged by
    the callers' e2e, its finding is low and says so; the verdict leads with finding 1 (the retries) and names
    the burst as felt by no caller, instead of heading with '5 preemptions over 0 s'."""
    _, s, diag, _ = run(LAB / "traced-1r")
    truth = json.loads((LAB / "traced-1r" / "truth.json").read_text())["preemptions"]
    (ep,) = [e for e in diag["episodes"] if e["signal"] == "preemptions"]
    assert ep["count"] == truth["total"] == 5
    f = next(f for f in s["findings"] if f["episode"] == ep["episode_id"])
    assert f["severity"] == "low" and (f["failed_requests"], f["slowed_requests"]) == (0, 0)
    assert "0 of the 7 requests in flight" in f["evidence"]
    assert "judged by the callers' e2e: their TTFT is not in their records" in f["evidence"]
    # truth: 9 client retries, max_retries 2 (3 attempts at most), said as the spread (retry_spread)
    assert (
        s["verdict"][0].startswith("Retries: 8 of 303 requests retried (up to 3 attempts")
        and "(F1)" in s["verdict"][0]
    )
    assert s["verdict"][1].startswith(f"No episode the callers felt: {ep['episode_id']} (5 preemptions")
    assert next(c for c in diag["claims"] if c["id"] == "verdict")["state"] == "finding"


def test_item8_e2e_judged_burst_felt_keeps_its_severity(run):
    """abort-ignored's callers are non-streaming too: its first preemption spike (02:07:02) had a caller fail
    during it, so judged by e2e it stays medium, and the verdict keeps an episode headline."""
    _, s, diag, _ = run(LAB / "abort-ignored")
    f = next(f for f in s["findings"] if f["kind"] == "pressure")
    assert f["severity"] == "medium" and f["failed_requests"] >= 1
    assert not s["verdict"][1].startswith("No episode the callers felt")


def test_item8_a_drained_backlog_is_no_sustained_queue(run):
    """kv-short: 3 long prompts sent at once at the end of the load (truth: 04:43:30.55, the last arrivals) that
    a one-request KV cache served one at a time: waiting 2 from 04:43:33, 1 from 04:43:42, 0 from 04:43:47. The
    queue began after the last arrival and drained with no new load: a one-off whose claim names the missing test
    (no arrivals after it), not 'no recovery while the load lasted'."""
    _, s, diag, claims = run(LAB / "kv-short")
    truth = json.loads((LAB / "kv-short" / "truth.json").read_text())
    (ep,) = [e for e in diag["episodes"] if e["signal"] == "queue"]
    assert ep["class"] == "spike" and ep["peak"] == 2 == truth["vllm"]["max_waiting"]["value"]
    assert t(ep["start"][:19]) >= datetime(2026, 12, 6, 4, 43, 33, tzinfo=UTC)
    assert t(ep["end"][:19]) <= datetime(2026, 12, 6, 4, 43, 47, tzinfo=UTC)
    c = claims[f"episode.{ep['episode_id']}"]
    assert c["state"] == "one-off" and value(c, "rule") == "drained"
    assert c["missing"] == ["arrivals after it: whether it recurs under load was not put to the test"]
    assert s["verdict"][1].startswith(
        "One-off: the backlog of the last requests, drained after the load ended"
    )
    assert "Sustained" not in " ".join(s["verdict"])


def test_item3_episode_latency_names_its_clock(run):
    """frontend-bound's TTFT episodes are measured on the callers' clock (the client's JSONL): the episode's
    evidence, the verdict's headline and the finding's symptom say so with the source ('TTFT p95 (client clock,
    client_records)'), as every latency figure must (the headline read 'TTFT p95 up to 12.7 s')."""
    _, s, diag, _ = run(LAB / "frontend-bound")
    eps = [e for e in diag["episodes"] if e["signal"] == "ttft"]
    assert len(eps) == 4
    named = "TTFT p95 (client clock, client_records)"
    assert all(f"{named} " in e["reason"] for e in eps)
    # the first from its first request above 2 s (04:18:48.458) to its last (04:19:03.373): diagnose/slow.py
    assert s["verdict"][0].startswith(f"{named} up to 12.7 s over 15 s (04:18:48–04:19:03)")
    [slow] = [f for f in s["findings"] if f["kind"] == "latency"]
    assert slow["symptom"] == f"{named} above 2 s for 15 s"
    assert "TTFT p95 12.68 s (client clock, client_records)" in slow["evidence"]
