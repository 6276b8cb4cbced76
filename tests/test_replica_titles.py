"""A Prometheus target is no replica unless it is tied to a server log (#37). traced-2r-kill's two scrape files
without an instance label (metrics-a.prom.log, metrics-b.prom.log) could not be tied by their gauges (they follow
both logs: the two replicas shared the load), and the report told every incident twice: E1 on metrics-a.prom (169
preemptions) beside E2 on vllm-server-a (192). Their counters tie them: each reads the same token and preemption
totals, at the same moments, as the Prometheus target whose address a server log names (``ingest.metric_twins``).
A target with no log keeps its episodes, once. Beside it, a folder where the targets are tied by their gauges
(spike-b with calm-b's log and scrape beside as a second replica, shifted onto its minutes) names log replicas
only."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from metamorphic import calm_replica_beside, copy

COUNTED = re.compile(r"(\d+) replicas \(([^)]*)\)")


def _titles(out: Path) -> list[str]:
    return [f["title"] for f in json.loads((out / "summary.json").read_text())["findings"]]


def _replicas_counted(titles: list[str]) -> list[list[str]]:
    return [m.group(2).split(", ") for t in titles for m in COUNTED.finditer(t)]


@pytest.fixture(scope="module")
def kill(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kill") / "out"
    analyze(need(LAB / "traced-2r-kill"), out, AnalyzeOptions())
    return out


def _scraped_ports(folder: Path) -> dict[str, str]:
    """The lab's own record of which port each scrape file read (commands.log: scrape_metrics.sh FILE STEP ADDR)."""
    found = re.findall(
        r"scrape_metrics\.sh \$RUN/(\S+)\.log \d+ [\d.]+:(\d+)", (folder / "commands.log").read_text()
    )
    return dict(found)


def _listening(folder: Path) -> dict[str, str]:
    """port -> the server log that says it listens there ('Starting vLLM server on http://127.0.0.1:8001')."""
    out = {}
    for log in folder.glob("vllm-server-*.log"):
        for port in re.findall(r"Starting vLLM server on http://[\d.]+:(\d+)", log.read_text()):
            out[port] = log.stem
    return out


def _preemptions(out: Path) -> dict[str, int]:
    st = pl.read_parquet(out / "server_stats.parquet").filter(pl.col("origin") == "prometheus")
    return {r: int(n) for r, n in st.group_by("replica").agg(pl.col("preemptions").sum()).iter_rows()}


def test_scrapes_of_one_server_are_tied_by_their_counters(kill: Path) -> None:
    folder = need(LAB / "traced-2r-kill")
    ports, listening = _scraped_ports(folder), _listening(folder)
    assert ports == {"metrics-a.prom": "8001", "metrics-b.prom": "8002"}  # the lab's truth, from its commands
    notes = json.loads((kill / "ingest.json").read_text())["notes"]
    for target, port in ports.items():
        [note] = [n for n in notes if n.startswith(f"metrics scrapes {target} ")]
        assert f"taken to be the server of log replica {listening[port]}: " in note, note
        assert f"read the same totals as 127.0.0.1:{port}'s" in note, note
    s = json.loads((kill / "summary.json").read_text())
    assert {e["replica"] for e in s["episodes"]} == {"vllm-server-a", "vllm-server-b"}
    titles = _titles(kill)
    assert not any("metrics" in t for t in titles), titles
    assert any(
        t.startswith("2 replicas (vllm-server-a, vllm-server-b): Recurring KV pressure: ") for t in titles
    )
    # one server, counted once: notes.md's per-replica preemptions from its scrapes ('a 360 ..., b 31')
    truth = re.search(
        r"Preemptions \(per replica, from its scrapes\): a (\d+) .*?, b (\d+)",
        (folder / "notes.md").read_text(),
    )
    assert truth is not None
    assert _preemptions(kill) == {"vllm-server-a": int(truth[1]), "vllm-server-b": int(truth[2])}
    # one incident, one episode: the sustained preemptions of replica a are told once
    sustained = [e for e in s["episodes"] if e["class"] == "sustained"]
    assert [(e["replica"], e["signal"]) for e in sustained] == [("vllm-server-a", "preemptions")]


def test_a_target_with_no_log_keeps_its_episodes_once(tmp_path: Path) -> None:
    """Without replica b's log, its Prometheus target (127.0.0.1:8002) is tied to no log: it keeps its episodes,
    named as a target, and its address-less scrape file (metrics-b.prom) is the same server, not a second one."""
    copy(need(LAB / "traced-2r-kill"), tmp_path / "in")
    for f in ("vllm-server-b.log", "otlp-vllm-b.jsonl"):
        (tmp_path / "in" / f).unlink()
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    notes = json.loads((tmp_path / "out" / "ingest.json").read_text())["notes"]
    assert any(
        n.startswith("metrics scrapes metrics-b.prom (no instance label) taken to be target 127.0.0.1:8002: ")
        for n in notes
    ), notes
    assert not any("metrics-b.prom" in n and "vllm-server-a" in n for n in notes), notes
    eps = json.loads((tmp_path / "out" / "summary.json").read_text())["episodes"]
    assert {e["replica"] for e in eps} == {"vllm-server-a", "127.0.0.1:8002"}
    assert _preemptions(tmp_path / "out") == {"vllm-server-a": 360, "127.0.0.1:8002": 31}
    assert any(
        "a metrics target tied to no server log (127.0.0.1:8002)" in t for t in _titles(tmp_path / "out")
    )


def test_tied_targets_name_log_replicas_only(tmp_path: Path) -> None:
    calm_replica_beside(
        LAB / "spike-b", need(LAB / "calm-b"), tmp_path / "in", ("vllm-server.log", "metrics.prom.log")
    )
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    titles = _titles(tmp_path / "out")
    assert not any("metrics target" in t for t in titles), titles
    eps = json.loads((tmp_path / "out" / "summary.json").read_text())["episodes"]
    assert {e["replica"] for e in eps} == {"vllm-server"}


def test_retried_attempts_that_reached_vllm_agree_with_the_spans(kill: Path) -> None:
    """traced-2r-kill's retries finding once read '0 retried attempts reached it' while its counts and the
    client's spans showed the 3 client retries reached an engine (truth: 640 attempts, 3 retries). Its title now
    counts from the same reach object as its evidence, and the spans agree."""
    s = json.loads((kill / "summary.json").read_text())
    [f] = [f for f in s["findings"] if f["kind"] == "retries"]
    assert "0 retried attempts reached" not in f["title"]
    # client retries 3 + nginx's 23 failovers off the dead replica b: 26 retried requests, 52 attempts, the 26
    # first tries never reached vLLM and the 26 retries did
    # said as the spread of the requests' attempts (retry_spread), not their mean (1.00 per request)
    assert (
        f["title"]
        == "Retries: 26 of 637 requests retried (up to 2 attempts; 26 of their 52 attempts reached vLLM)"
    )
    assert "client retries 3, gateway retries 23" in f["evidence"]
    assert "26 of the 52 attempts of the 26 retried requests never reached vLLM (26 did)" in f["evidence"]
    ra = s["traces"]["retried_attempts"]
    assert ra["retries"] == 3 and ra["with_engine_span"] == 3


def test_an_untied_target_beside_one_replica_is_evidence_not_an_episode(tmp_path: Path) -> None:
    """traced-2r-kill without its Prometheus dump: metrics-a.prom.log is the only record of replica a's counters and
    nothing ties it (no instance label, no target with an address to compare its counters with, gauges 0.92 with
    a's log and 0.72 with b's). Its sustained preemptions (169, 03:28:24–03:30:16) coincide with vllm-server-a's
    sustained KV pressure: one incident, told once, with the target's figures and why it could not be tied beside
    it. Its spikes that coincide with both replicas' stay its own."""
    copy(need(LAB / "traced-2r-kill"), tmp_path / "in")
    shutil.rmtree(tmp_path / "in" / "prometheus")
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    diag = json.loads((tmp_path / "out" / "diagnosis.json").read_text())
    sustained = [e for e in diag["episodes"] if e["class"] == "sustained"]
    assert [(e["replica"], e["signal"]) for e in sustained] == [("vllm-server-a", "kv_pressure")]
    [beside] = [b for b in sustained[0]["details"]["untied_beside"] if b["count"] == 169]
    assert (beside["target"], beside["signal"], beside["start"][11:19], beside["end"][11:19]) == (
        "metrics-a.prom",
        "preemptions",
        "03:28:24",
        "03:30:16",
    )
    why = re.search(
        r"follow vllm-server-a's \(correlation (0\.\d\d)\) and vllm-server-b's \((0\.\d\d)\)",
        beside["why_untied"],
    )
    assert why is not None and float(why[1]) - float(why[2]) < 0.3, beside["why_untied"]
    titles = _titles(tmp_path / "out")
    assert not any(
        t.startswith("a metrics target tied to no server log (metrics-a.prom): Sustained") for t in titles
    )
    [f] = [f for f in diag["findings"] if f["episode_id"] == sustained[0]["episode_id"]]
    said = "the metrics target metrics-a.prom showed 23 preemptions 03:27:58–03:28:12 and 169 preemptions 03:28:24–03:30:16"
    assert said in f["evidence"] and "not tied to this log: its running and KV gauges follow" in f["evidence"]
    assert said in (tmp_path / "out" / "summary.md").read_text().replace("\\", "")
    assert said in html.unescape((tmp_path / "out" / "report.html").read_text())
    # the target's own spikes beside both replicas' spikes: which server they were cannot be told, they stay
    assert any(e["replica"] == "metrics-a.prom" and e["class"] == "recurring" for e in diag["episodes"])


def _headline_everywhere(out: Path) -> str:
    """The verdict's first line, the same in summary.json, summary.md and report.html."""
    head = json.loads((out / "summary.json").read_text())["verdict"][0]
    assert head in (out / "summary.md").read_text().replace("\\", "")
    assert head in html.unescape((out / "report.html").read_text())
    return head


def test_the_headline_names_the_replica_it_happened_on(kill: Path, tmp_path: Path) -> None:
    """In a folder of two replicas the headline read 'The vLLM server was killed silently … at 03:24:34' while only
    b was (truth: SIGKILL to b's process group at 03:24:36; a served on). It names the replica, as the findings do.
    Beside it, spike-b with a calm second replica (calm-b's log) says which one preempted; spike-b alone, one
    replica, names none."""
    assert _headline_everywhere(kill).startswith(
        "The vLLM server vllm-server-b was killed silently (its log stops, a new server starts) at 03:24:34 "
    )
    # 'A crash, down 415 s' read as the service down: a served on (truth: a logged 563 requests, 499 after the kill)
    second = json.loads((kill / "summary.json").read_text())["verdict"][1]
    assert second.startswith("A crash of 1 of the 2 replicas, down 415 s, ")
    assert second in (kill / "summary.md").read_text().replace("\\", "")
    calm_replica_beside(
        LAB / "spike-b", need(LAB / "calm-b"), tmp_path / "in", ("vllm-server.log", "metrics.prom.log")
    )
    analyze(tmp_path / "in", tmp_path / "two", AnalyzeOptions())
    analyze(LAB / "spike-b", tmp_path / "one", AnalyzeOptions())
    one = _headline_everywhere(tmp_path / "one")
    assert one.startswith("183 preemptions over 24 s (09:00:16–09:00:40)")
    assert _headline_everywhere(tmp_path / "two") == f"On vllm-server: {one}"
