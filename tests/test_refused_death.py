"""A server whose log stops while the gateway's connections to its address are refused, with no start after it, died.

lab traced-ladder-kill: its only replica's process group was SIGKILLed at 11:15:59.020 (notes.md); vLLM's log stops
at 11:15:58 with no shutdown line, and nginx's 181 'connect() failed (111: Connection refused)' to 127.0.0.1:8001
follow from 11:15:59 to 11:16:00. No death was read: the headline was the ladder's ("the SLO held up to 4; at 16
success broke first"). Runs whose refused connections go to an address no server log claims (the lab's dead
upstream :8002) or come before a restart (crash) gain none."""

from __future__ import annotations

import pytest

from conftest import LAB, need

KILL = "traced-ladder-kill"


def _deaths(s: dict) -> list[tuple[str, str]]:
    return [(d["replica"], d["ts"][11:19]) for d in s["server_lifecycle"]["deaths"]]


# run: (last line, pid, address, first refusal, refusals, last refusal), each read off the raw files (notes.md):
# traced-ladder-kill as above; kill-norestart (lab7: one replica SIGKILLed at 14:09:39.316 under steady load, no
# restart): its last line a stats line at 14:09:39, nginx's 285 'connect() failed (111: Connection refused)' to
# 127.0.0.1:8001 from 14:09:40 to 14:10:51
KILLS = {
    KILL: ("11:15:58", 10934, "127.0.0.1:8001", "11:15:59", 181, "11:16:00"),
    "kill-norestart": ("14:09:39", 22935, "127.0.0.1:8001", "14:09:40", 285, "14:10:51"),
}


@pytest.mark.parametrize("run", sorted(KILLS))
def test_a_log_that_stops_with_its_connections_refused_is_a_death(analyzed, rendered, run):
    last, pid, addr, first, n, end = KILLS[run]
    out, s, _ = analyzed(need(LAB / run))
    assert _deaths(s) == [("vllm-server", last)]
    assert s["verdict"][0] == (
        "The vLLM server was killed silently (its log stops, the gateway's connections to it are refused) at "
        f"{last}, with no restart in the logs."
    )
    said = (
        f"the log of pid {pid} stops at {last} with no shutdown line, and the gateway's connections to "
        f"{addr} are refused from {first} ({n} 'connect() failed' line(s) to {end})"
    )
    for name, text in rendered(out, s).items():
        assert "killed silently (its log stops, the gateway's connections to it are refused)" in text, name
        if name != "terminal":  # the evidence is the pages'
            assert said in text.replace("\\_", "_"), name


@pytest.mark.parametrize("run,deaths", [("crash", 1), ("retry-storm", 0), ("ladder", 0)])
def test_refusals_before_a_restart_or_to_no_server_add_no_death(analyzed, run, deaths):
    _, s, _ = analyzed(need(LAB / run))
    assert len(s["server_lifecycle"]["deaths"]) == deaths


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_calm_hour_beside_the_kill_keeps_its_time(tmp_path, where, rendered):
    """A calm server's log laid ten minutes before or after traced-ladder-kill (tests/metamorphic.py) leaves the death
    at 11:15:58. After it, the calm server starts on the same address, so the kill reads as a silent death with a
    restart; its time was read as 11:25:48 ('down 1 s'): the new process's 44 s of loading lines before its start
    marker were counted as the old process's last ones. The old process (pid 10934) is the one that stops."""
    import json

    from logscope.api import AnalyzeOptions, analyze
    from metamorphic import calm_hour_after, calm_hour_before

    lay = calm_hour_after if where == "after" else calm_hour_before
    lay(need(LAB / KILL), need(LAB / "calm"), tmp_path / "in")
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert _deaths(s) == [("vllm-server", "11:15:58")]
    (d,) = s["server_lifecycle"]["deaths"]
    assert d["pid"] == 10934
    if where == "after":  # the calm server (pid 17282) is ready at 11:25:49: down 591 s, not 1 s
        assert (d["new_pid"], d["downtime_s"]) == (17282, 591.0)
    for name, text in rendered(tmp_path / "out", s).items():
        assert "11:15:58" in text, name
        assert "11:25:48" not in text, name
