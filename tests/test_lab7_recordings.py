"""lab7's recordings (tests/data/fixtures/lab/README.md, each folder's notes.md and truth.json).

two-servers-one-port: server A (API server pid 32174, --max-num-seqs 64 --max-model-len 1024) served 60 requests on
:8001, was stopped with SIGINT at 14:15:11 (its '[shutdown]' lines and uvicorn's 'Application shutdown complete.' in
vllm-server.log), and server B (pid 9699, --max-num-seqs 16 --max-model-len 512) started at 14:15:51 on the same port,
appending to the same log, and served 75. A graceful stop carried nothing of the start after it: summary.json said
'2 starts, 2 graceful shutdowns' and nowhere that the second start was another server, nor which requests each
served. The stop now says it (lifecycle._stop, same_server, as after a death) in summary.json, report.html and
summary.md. Second and third samples, spliced from real logs as a collector writing two lives under one name would
hold them (no line written here): calm's server stopped, then seqs-16's (other max_num_seqs: two servers), and calm's
then calm-b's (the same flags: one server restarted).

kill-norestart: the only replica SIGKILLed at 14:09:39 and never restarted, nginx refusing on to callers. logscope
reads no death there today (the lead's branch reads one from the refused connections); what it reads right is
tested here: the callers' outcomes and the requests sent after the server's log ends.
"""

from __future__ import annotations

import re

import pytest

from conftest import LAB, need

REDEPLOY = (
    "vllm-server: stopped gracefully at 14:15:11 (60 request(s) received since its start); a start at 14:15:51: "
    "the start after it is another server, not a restart: the same log stream (vllm-server) but max_num_seqs 64 → "
    "16, max_model_len 1024 → 512 (75 request(s) received after it)."
)


def _received(log: str, pid: int) -> int:
    """'Received request <id>' lines of one API server pid in a raw vLLM log (completions and tokenize alike)."""
    return len(re.findall(rf"^\(APIServer pid={pid}\) INFO .*Received request \S", log, re.M))


def test_two_servers_on_one_port_are_two_servers_with_their_own_requests(analyzed, rendered):
    run = need(LAB / "two-servers-one-port")
    out, s, _ = analyzed(run)
    log = (run / "vllm-server.log").read_text(errors="replace")
    # the raw log: both starts print 'Starting vLLM server on http://127.0.0.1:8001' and version 0.32.0; their
    # 'non-default args' lines differ: 'max_model_len': 1024 ... 'max_num_seqs': 64 (pid 32174, 14:12:08) and
    # 'max_model_len': 512 ... 'max_num_seqs': 16 (pid 9699, 14:15:51); A's stop: '(APIServer pid=32174) INFO
    # 12-07 14:15:11 [launcher.py:254] [shutdown] API server: shutdown triggered'
    assert log.count("Starting vLLM server on http://127.0.0.1:8001") == 2
    assert (
        "(APIServer pid=32174) INFO 12-07 14:15:11 [launcher.py:254] [shutdown] API server: shutdown triggered"
        in log
    )
    args = re.findall(
        r"\(APIServer pid=(\d+)\).*non-default args:.*'max_model_len': (\d+).*'max_num_seqs': (\d+)", log
    )
    assert args == [("32174", "1024", "64"), ("9699", "512", "16")]
    assert (_received(log, 32174), _received(log, 9699)) == (60, 75)  # = clients tsa 60 x 200, tsb 75 x 200

    life = s["server_lifecycle"]
    assert life["deaths"] == [] and life["starts"] == 2  # graceful stops: no death, no crash loop
    stop, last = life["graceful_shutdowns"]
    assert (stop["ts"], stop["restart"], stop["new_pid"]) == (
        "2026-12-07T14:15:11.000Z",
        "2026-12-07T14:15:51.000Z",
        9699,
    )
    same = stop["same_server"]
    assert (same["state"], same["differs"], same["missing"]) == (
        "two servers",
        ["max_num_seqs", "max_model_len"],
        [],
    )
    assert (same["before"]["max_num_seqs"], same["after"]["max_num_seqs"]) == (64, 16)
    assert (same["before"]["max_model_len"], same["after"]["max_model_len"]) == (1024, 512)
    assert same["before"]["address"] == same["after"]["address"] == "http://127.0.0.1:8001"
    assert (stop["received_before"], stop["received_after"]) == (60, 75)
    # B's own stop at the end (SIGTERM 14:19:38): no start after it
    assert (last["ts"], last["restart"], last["same_server"], last["received_before"]) == (
        "2026-12-07T14:19:38.000Z",
        None,
        None,
        75,
    )
    assert not [f for f in s["findings"] if f["kind"] == "crash"]
    outputs = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert REDEPLOY in outputs[name], name
    for name, text in outputs.items():
        assert "Nothing alarming" in text, name
        assert "crash loop" not in text and "killed without a trace" not in text, name


def _spliced(tmp_path, first: str, then: str):
    """One stream: lab run ``first``'s whole server log (up to its graceful stop), then run ``then``'s."""
    path = tmp_path / "vllm-server.log"
    path.write_bytes(b"".join(need(LAB / r / "vllm-server.log").read_bytes() for r in (first, then)))
    return path


# first, then: the stop's pids, state, what differs, requests each side (raw 'Received request' lines; seqs-16's 483
# are 476 'cmpl-' and the 7 'tokenize-' of vllm bench's start-up)
SPLICED = {
    "calm-then-seqs-16": ("calm", "seqs-16", (17282, 23259), "two servers", ["max_num_seqs"], (186, 483)),
    "calm-then-calm-b": ("calm", "calm-b", (17282, 31716), "one server restarted", [], (186, 80)),
}


@pytest.mark.parametrize("case", sorted(SPLICED))
def test_a_graceful_stop_says_whether_the_start_after_it_is_the_same_server(
    tmp_path_factory, analyzed, rendered, case
):
    first, then, (pid, new_pid), state, differs, (before, after) = SPLICED[case]
    logs = [(LAB / r / "vllm-server.log").read_text(errors="replace") for r in (first, then)]
    assert (_received(logs[0], pid), _received(logs[1], new_pid)) == (before, after)
    out, s, _ = analyzed(_spliced(tmp_path_factory.mktemp(case), first, then))
    life = s["server_lifecycle"]
    assert life["deaths"] == [] and life["starts"] == 2
    stop = life["graceful_shutdowns"][0]
    same = stop["same_server"]
    assert (stop["new_pid"], same["state"], same["differs"]) == (new_pid, state, differs)
    assert (stop["received_before"], stop["received_after"]) == (before, after)
    outputs = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert (
            same["words"] in outputs[name] and f"({after} request(s) received after it)" in outputs[name]
        ), name


def test_kill_without_restart_callers_and_the_raw_facts(analyzed, rendered):
    """Callers' outcomes and the requests sent after the log ends, as the raw files give them (the death these facts
    give is tests/test_refused_death.py's)."""
    run = need(LAB / "kill-norestart")
    out, s, _ = analyzed(run)
    log = (run / "vllm-server.log").read_text(errors="replace").splitlines()
    # the raw log's last line: '(APIServer pid=22935) INFO 12-07 14:09:39 [loggers.py:335] Engine 000: ...';
    # nginx-error.log: 285 'connect() failed (111: Connection refused)' to 127.0.0.1:8001, 14:09:40 to 14:10:51;
    # client-knr.jsonl: 226 requests, 130 x 200, 95 x 502 (3 attempts each), 1 APIConnectionError (a cut stream)
    assert log[-1].startswith("(APIServer pid=22935) INFO 12-07 14:09:39 ")
    refused = [x for x in (run / "nginx-error.log").read_text().splitlines() if "connect() failed (111" in x]
    assert (len(refused), refused[0][11:19], refused[-1][11:19]) == (285, "14:09:40", "14:10:51")
    access = (run / "nginx-access.log").read_text()
    assert (access.count(" status=502 "), access.count(" status=200 ")) == (285, 131)
    assert s["server_lifecycle"]["starts"] == 1
    assert [(d["kinds"], d["ts"]) for d in s["server_lifecycle"]["deaths"]] == [
        (["silent"], "2026-12-07T14:09:39.000Z")
    ]
    seen = {o["outcome"]: o["requests"] for o in s["outcomes"]["by_status"]}
    assert seen == {"error": 95, "ok": 130, "truncated": 1}
    said = "95 of 226 logical requests never reached vLLM (95 sent after the server log ends (14:09:39))"
    outputs = rendered(out, s)
    for name in ("summary.md", "terminal"):
        assert said in outputs[name], name
