"""The lab's oom-cgroup run (issue #40): vLLM 0.32 CPU in a cgroup-v1 memory limit, its worker killed by the kernel
OOM killer under 32 streaming workers. The kernel's kill (03:55:11.983, to the microsecond) comes ~4 s before vLLM's
own death lines (whole-second stamps): the tie, the verdict and the cost are checked against truth.json."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from clirun import cli
from conftest import LAB, need

RUN = "oom-cgroup"


def _truth() -> dict:
    return json.loads((need(LAB / RUN) / "truth.json").read_text())["purpose"]


def _kill_ts(truth: dict) -> datetime:
    """truth's kill time: the kernel's 'Killed process' line ('2026-12-06T03:55:11,983150+00:00')."""
    return datetime.fromisoformat(truth["kill_time"].replace(",", "."))


@pytest.fixture(scope="module")
def oom(tmp_path_factory) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("oom") / "out"
    res = cli("analyze", need(LAB / RUN), "-o", out)
    assert res.returncode == 0, res.stderr
    return out, json.loads((out / "summary.json").read_text()), res.stdout


TITLE = "Server killed by the kernel OOM killer at 03:55:11 (memory limit 5.72 GiB), not a CUDA OOM"


def test_every_output_names_the_kernel_oom_kill(oom):
    """The verdict, the findings, summary.json, summary.md, the page and the terminal say one thing: killed by the
    kernel OOM killer with the cgroup's limit, not a CUDA OOM; the kill is no second finding and the API server's
    own shutdown after the death is no 'graceful stop' of its own."""
    out, s, stdout = oom
    truth = _truth()
    assert f"{truth['limit_at_kill_bytes'] / 2**30:.2f} GiB" == "5.72 GiB"
    top = s["findings"][0]
    assert top["title"].startswith(TITLE) and top["severity"] == "critical"
    assert (
        s["verdict"][0]
        == "The vLLM server was killed by the kernel OOM killer at 03:55:11, with no restart in the logs."
    )
    md = (out / "summary.md").read_text().replace("\\", "")
    page = html.unescape((out / "report.html").read_text())
    for text in (*s["verdict"], top["title"]):
        assert text in stdout and text in md and text in page, text
    titles = [f["title"] for f in s["findings"]]
    assert sum("killed by the kernel OOM killer" in t for t in titles) == 1, titles
    assert not any("graceful shutdown" in t for t in titles), titles
    assert s["server_lifecycle"]["graceful_shutdowns"] == []
    assert "engine died + kernel OOM kill" in page  # the timeline's death label names the platform's cause
    # the lines that show it, each with its file and line
    for line in (
        "kernel.log line 29: memory: usage 6001020kB, limit 6001020kB",
        "kernel.log line 82: Memory cgroup out of memory: Killed process 9924 (VLLM::Worker)",
    ):
        assert line in top["evidence"]
    assert "vLLM's log holds no CUDA out-of-memory error" in top["evidence"]
    assert "KV cache 4.00 GiB (host memory: a CPU engine)" in top["evidence"]
    assert "Worker proc VllmWorker-0 died unexpectedly (exit code: None)" in top["symptom"]
    # who killed it and the clock each time was read on: the kernel's line to the microsecond, vLLM's whole second
    assert (
        "the kernel OOM killer killed pid 9924 (VLLM::Worker: vllm-server's Worker) at 03:55:11.983 (read on the "
        "kernel host's clock: the wall time dmesg / journalctl wrote on the line); vllm-server logged the death at "
        "03:55:16 (its own clock)" in top["symptom"]
    )


def test_the_tie_is_the_truths(oom):
    """pid 9924 is the worker (its log's '(Worker pid=9924)'), killed at the kernel's time; the death vLLM logged
    (EngineCore pid 8773, 03:55:16) is the first from the kill's second on; the API server and EngineCore pids are
    the log's, as truth.json lists them."""
    from logscope.diagnose import platform
    from logscope.diagnose.tables import read

    out, s, _ = oom
    truth = _truth()
    pids = truth["vllm_pids"]
    facts = platform.load(out)
    (k,) = platform.kills(facts, read(out, "server_events"))
    assert (k.pid, k.role, k.process) == (pids["Worker (killed)"], "Worker", "VLLM::Worker")
    assert k.ts == _kill_ts(truth)
    assert k.limit_bytes == truth["limit_at_kill_bytes"]
    assert k.mapping.startswith(f"pid {pids['Worker (killed)']} is vllm-server's Worker: its log names it")
    servers = platform.servers_of(read(out, "server_events"))
    names = {p: r for p, (r, _) in servers["vllm-server"].pids.items()}
    assert names[pids["APIServer"]] == "APIServer" and names[pids["EngineCore"]] == "EngineCore"
    (death,) = s["server_lifecycle"]["deaths"]
    assert death["ts"] == "2026-12-06T03:55:11.983Z"  # the kernel's time, not vLLM's whole second
    assert death["pid"] == pids["EngineCore"] and "kernel_oom" in death["kinds"]
    # vLLM's first death line (truth's), stamped '12-06 03:55:16': 4.0 to 5.0 s after the kill
    first = truth["vllm_log_death_lines"][0]
    assert "(EngineCore pid=8773) ERROR 12-06 03:55:16" in first and "died unexpectedly" in first
    assert (
        "its death record at 03:55:16 (whole seconds) is the first from the kill's second on: 4.0–5.0 s"
        in s["findings"][0]["evidence"]
    )
    from logscope.diagnose import lifecycle, tables
    from logscope.diagnose.thresholds import Thresholds

    inp = tables.load(out)
    life = lifecycle.analyse(
        inp.stats, inp.events, inp.access, inp.server_requests, inp.requests, Thresholds()
    )
    assert [d.ts for d in life.deaths] == [datetime(2026, 12, 6, 3, 55, 16, tzinfo=UTC)]  # vLLM's own record
    platform.attach(life, [k])
    assert k.logged_ts == datetime(2026, 12, 6, 3, 55, 16, tzinfo=UTC) and k.attached
    assert [d.ts for d in life.deaths] == [k.ts]


def test_the_requests_it_cost_are_the_truths(oom):
    """In flight at the kill and how the later ones ended: the callers' records and the gateway's lines, each on its
    own clock, as truth.json counts them."""
    from logscope.diagnose.kill_cost import at

    out, s, _ = oom
    truth = _truth()
    layers = {x.layer: x for x in at(out, _kill_ts(truth))}
    assert layers["callers"].in_flight == truth["in_flight_at_kill_client"] == 24
    assert layers["gateway"].in_flight == truth["in_flight_at_kill_nginx"] == 18
    assert layers["callers"].after == truth["client_outcomes_after_kill"]
    assert layers["gateway"].after == {str(k): v for k, v in truth["nginx_statuses_after_kill"].items()}
    ev = s["findings"][0]["evidence"]
    assert (
        "24 of the callers' requests in flight at the kill and 534 ending from it on: 497 × 502, 32 × APIError, 5 × 200"
        in ev
    )
    assert "18 requests open at the gateway in flight at the kill and 1,523 ending from it on" in ev


def _copy(dest: Path, keep_lines: int | None = None, kernel_shift: timedelta | None = None) -> Path:
    from metamorphic import copy, shift_text

    copy(need(LAB / RUN), dest)
    for p in ("truth.json", "manifest.json", "notes.md", "events.jsonl", "commands.log", "lab-events.log"):
        (dest / p).unlink(missing_ok=True)  # what the lab knew, not what a user collects
    if keep_lines is not None:
        log = dest / "vllm-server.log"
        log.write_text("".join(log.read_text().splitlines(keepends=True)[:keep_lines]))
    if kernel_shift is not None:
        k = dest / "kernel.log"
        k.write_text(shift_text(k.read_text(), kernel_shift))
    return dest


def _analyze(src: Path, out: Path) -> dict:
    from logscope.api import AnalyzeOptions, analyze

    analyze(src, out, AnalyzeOptions())
    return json.loads((out / "summary.json").read_text())


def test_a_log_that_stops_at_the_kill_still_gets_it(tmp_path):
    """vLLM's log cut before its first death line (the worker killed, nothing logged: a log that just stops): the
    kill, tied by pid, is the death, at the kernel's time."""
    src = _copy(tmp_path / "in", keep_lines=301)  # line 302: 'Worker proc VllmWorker-0 died unexpectedly'
    s = _analyze(src, tmp_path / "out")
    top = s["findings"][0]
    assert top["title"] == TITLE + "; no restart in the logs"
    assert (
        "vLLM prints nothing when killed: vllm-server's log logs no death and ends at 03:55:14"
        in top["symptom"]
    )
    assert [d["ts"] for d in s["server_lifecycle"]["deaths"]] == ["2026-12-06T03:55:11.983Z"]


def test_a_kernel_clock_an_hour_off_ties_no_death(tmp_path):
    """The kernel's lines an hour later than the server's (another zone): the pid still names the worker, but the kill
    falls an hour after the server's log ended, so it is no cause of the death vLLM logged, and says why."""
    src = _copy(tmp_path / "in", kernel_shift=timedelta(hours=1))
    s = _analyze(src, tmp_path / "out")
    titles = [f["title"] for f in s["findings"]]
    assert not any(t.startswith("Server killed by the kernel OOM killer") for t in titles), titles
    kill = next(f for f in s["findings"] if "killed by the kernel OOM killer at" in f["title"])
    assert kill["title"].startswith(
        "Process VLLM::Worker (pid 9924) killed by the kernel OOM killer at 04:55:11"
    )
    assert "the kernel's clock and the log's disagree" in kill["evidence"]
    assert [d["kinds"] for d in s["server_lifecycle"]["deaths"]] == [["engine_dead"]]
    # the death vLLM logged: who killed it is unknown, and the kernel log's hours and its refused kill are said
    # no error of the worker's own precedes it: it ended from outside (findings/engine_exit.py)
    died = next(
        f
        for f in s["findings"]
        if f["title"].startswith("Engine process ended with no error of its own at 03:55:16")
    )
    assert (
        "who killed it: unknown: the kernel log (kernel.log) covers 04:55:11–04:55:16 on the kernel host's clock, "
        "not 03:55:16 (its OOM kills: pid 9924 (VLLM::Worker) at 04:55:11: pid 9924 is vllm-server's Worker"
    ) in died["evidence"] and "the kernel's clock and the log's disagree" in died["evidence"]


@pytest.mark.parametrize(
    "kernel", [None, "kernel-dmesg-iso-oom-global-ert-7797.log"], ids=["none", "another-host"]
)
def test_with_no_kernel_line_of_the_kill_who_killed_it_is_unknown(tmp_path, kernel):
    """The same run with its kernel.log left out, or replaced by a real kernel log of another machine (equinor/ert
    #7797: a perl process killed in 2024): vLLM's own death (03:55:16, 'Worker proc VllmWorker-0 died
    unexpectedly') stays a death, no output calls it the OOM killer's, and its finding says who killed it is unknown
    and what the folder lacks (no kernel log; no kubectl output) or what its kernel log covers."""
    from conftest import DATA

    src = _copy(tmp_path / "in")
    (src / "kernel.log").unlink()
    if kernel:
        (src / kernel).write_bytes((DATA / "platform" / kernel).read_bytes())
    s = _analyze(src, tmp_path / "out")
    assert [(d["kinds"], d["ts"]) for d in s["server_lifecycle"]["deaths"]] == [
        (["engine_dead"], "2026-12-06T03:55:16.000Z")
    ]
    top = s["findings"][0]
    day = "" if kernel is None else "2026-12-06 "  # a folder spanning years writes its dates
    assert (
        top["title"]
        == f"Engine process ended with no error of its own at {day}03:55:16, no restart in the logs"
    )
    # the worker the kernel killed (truth: pid 9924), named from vLLM's own lines, with where to look
    assert (
        "worker process VllmWorker-0 (pid 9924)" in top["next_test"] and "killed from outside" in top["cause"]
    )
    where = (
        "the folder holds no kernel log (dmesg -T / journalctl -k: the OOM killer's lines)"
        if kernel is None
        else f"the kernel log ({kernel}) covers 2024-04-29 12:55:41–2024-04-29 12:55:46 on the kernel host's "
        "clock, not 2026-12-06 03:55:16 (its OOM kills: pid 1440763 (perl) at 2024-04-29 12:55:41: pid 1440763 "
        "(perl) is no process of a server log in the folder)"
    )
    want = f"who killed it: unknown: {where}; no kubectl output (get events, describe pod: OOMKilled"
    assert want in top["evidence"], top["evidence"]
    md = (tmp_path / "out" / "summary.md").read_text().replace("\\", "")
    page = html.unescape((tmp_path / "out" / "report.html").read_text())
    assert "who killed it: unknown" in md and "who killed it: unknown" in page
    assert not any("OOM killer at 03:55" in f["title"] for f in s["findings"])


def test_the_verdict_holds_with_every_clock_shifted(tmp_path):
    """Metamorphic: every file's times moved by one hour, the same verdict an hour later."""
    from metamorphic import copy_shifted

    src = tmp_path / "in"
    copy_shifted(_copy(tmp_path / "orig"), src, timedelta(hours=1))
    s = _analyze(src, tmp_path / "out")
    assert s["findings"][0]["title"].startswith(TITLE.replace("03:55:11", "04:55:11"))
    gw = pl.read_parquet(tmp_path / "out" / "gateway_attempts.parquet")
    assert gw.height  # the shifted folder was read whole
