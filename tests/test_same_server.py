"""A death followed by a new start in the same log stream says why that start is this server back or another one
(diagnose.same_server), from what each start printed of itself: its address, version, model and limits.

Lab crash: pid 7682 killed at 08:34:22, pid 8600 ready at 08:35:31, both 'Starting vLLM server on
http://127.0.0.1:8001' with the same model and args in vllm-server.log: one server restarted, and the finding now
says why. traced-2r-kill: vllm-server-b (pid 27538 -> 4836, both on :8002) the same. A stream holding two servers
(the crash log up to its kill, then traced-2r-kill's server b, as a collector writing two servers' output under
one name would hold it: real lines, none written here) read "back at ..." as if the same server had returned: it is
another server (its address differs), and its title says so."""

from __future__ import annotations

import pytest

from conftest import LAB, need

CASES = {  # run: (replica, pid before, pid after, address on both)
    "crash": ("vllm-server", 7682, 8600, "http://127.0.0.1:8001"),
    "traced-2r-kill": ("vllm-server-b", 27538, 4836, "http://127.0.0.1:8002"),
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_a_restart_says_why_it_is_the_same_server(analyzed, rendered, run):
    replica, pid, new_pid, address = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    log = (LAB / run / f"{replica}.log").read_text(errors="replace")
    for p in (pid, new_pid):  # each start printed its address in the raw log
        assert f"(APIServer pid={p}) INFO" in log and f"Starting vLLM server on {address}" in log
    [d] = s["server_lifecycle"]["deaths"]
    assert (d["pid"], d["new_pid"]) == (pid, new_pid)
    same = d["same_server"]
    assert same["state"] == "one server restarted" and same["differs"] == [] and same["missing"] == []
    assert same["before"]["address"] == same["after"]["address"] == address
    assert same["before"]["version"] == same["after"]["version"] == "0.32.0"
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    said = f"one server restarted: the same log stream ({replica}), address {address}, version 0.32.0"
    assert said in f["evidence"] and ", back at " in f["title"]
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert said in seen[name], name


def test_two_servers_in_one_stream_are_not_a_restart(tmp_path, analyzed, rendered):
    crash = (LAB / "crash" / "vllm-server.log").read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(crash) if line.startswith(b"(APIServer pid=8600)"))
    other = (LAB / "traced-2r-kill" / "vllm-server-b.log").read_bytes()
    (tmp_path / "vllm-server.log").write_bytes(b"".join(crash[:cut]) + other)
    out, s, _ = analyzed(tmp_path / "vllm-server.log")
    d = s["server_lifecycle"]["deaths"][0]
    assert (d["pid"], d["new_pid"]) == (7682, 27538)
    same = d["same_server"]
    assert same["state"] == "two servers" and same["differs"] == ["address"]
    assert (same["before"]["address"], same["after"]["address"]) == (
        "http://127.0.0.1:8001",
        "http://127.0.0.1:8002",
    )
    [f] = [f for f in s["findings"] if f["kind"] == "crash" and f["start"].startswith("2026-11-29T08:34")]
    assert "another server ready at" in f["title"] and ", back at " not in f["title"]
    assert (
        "the start after it is another server, not a restart: the same log stream (vllm-server) but address "
        "http://127.0.0.1:8001 → http://127.0.0.1:8002"
    ) in f["evidence"]
    # the verdict says it too, everywhere it is rendered: not 'ready again'
    said = "at 11-29 08:34:22; another server in its log stream was ready at 12-06 03:22:56"
    assert said in s["verdict"][0] and "ready again" not in s["verdict"][0]
    seen = rendered(out, s)
    for name, text in seen.items():
        assert said in text, name


def _spliced(tmp_path, first: tuple[str, str, int], then: tuple[str, str]):
    """One stream: a lab server's log up to the start (of pid ``first[2]``) after its death, then another lab
    server's log: real lines, as a collector writing two servers' output under one name would hold them."""
    run, name, pid = first
    lines = (LAB / run / name).read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if line.startswith(f"(APIServer pid={pid})".encode()))
    (tmp_path / "vllm-server.log").write_bytes(b"".join(lines[:cut]) + (LAB / then[0] / then[1]).read_bytes())
    return tmp_path / "vllm-server.log"


TWO = {  # the deaths' (pid, new pid), the addresses across the first, the verdict's lead
    "crash-then-2r-kill-b": (
        (("crash", "vllm-server.log", 8600), ("traced-2r-kill", "vllm-server-b.log")),
        [(7682, 27538), (27538, 4836)],
        ("http://127.0.0.1:8001", "http://127.0.0.1:8002"),
        "2 server deaths on vllm-server from 11-29 08:34:22 to 12-06 03:24:34, of 2 different servers, not one "
        "crash loop (the start after the death at 11-29 08:34:22 is another server: address http://127.0.0.1:8001 "
        "→ http://127.0.0.1:8002); the first: ",
    ),
    "2r-kill-b-then-enginecore-kill": (
        (("traced-2r-kill", "vllm-server-b.log", 4836), ("enginecore-kill", "vllm-server.log")),
        [(27538, 25488), (25488, None)],
        ("http://127.0.0.1:8002", "http://127.0.0.1:8001"),
        "2 server deaths on vllm-server from 03:24:34 to 04:09:36, of 2 different servers, not one crash loop "
        "(the start after the death at 03:24:34 is another server: address http://127.0.0.1:8002 → "
        "http://127.0.0.1:8001); the longest: ",
    ),
}


@pytest.mark.parametrize("case", sorted(TWO))
def test_two_servers_dying_in_one_stream_are_no_crash_loop(tmp_path_factory, analyzed, rendered, case):
    """Two like deaths in one stream read '2 server deaths ... (a crash loop)' though the first death's same_server
    said the start after it was another server (diagnose.death_run): the headline says two servers."""
    (first, then), pids, (a, b), lead = TWO[case]
    out, s, _ = analyzed(_spliced(tmp_path_factory.mktemp(case), first, then))
    deaths = s["server_lifecycle"]["deaths"]
    assert [(d["pid"], d["new_pid"]) for d in deaths] == pids
    same = deaths[0]["same_server"]
    assert (same["state"], same["before"]["address"], same["after"]["address"]) == ("two servers", a, b)
    assert s["verdict"][0].startswith(lead) and "(a crash loop)" not in s["verdict"][0]
    # another server's readiness is no return of this one
    assert not s["verdict"][1].startswith("A crash, down ")
    for name, text in rendered(out, s).items():
        assert lead in text and "(a crash loop)" not in text, name


@pytest.mark.parametrize("run", sorted(CASES))
def test_a_restart_whose_banner_is_lost_is_unknown(tmp_path, analyzed, rendered, run):
    """The same logs with the new start's banner record (its 'api_utils.py:347' lines: version and model) left out,
    as a collector that dropped them, or a text-mode copy that split them, leaves the log: the version and model
    after the restart are not known, so whether it is the same server is unknown and says what is missing. It read
    'one server restarted: ..., version 0.32.0, model /models/tiny-llama ... before and after' from the start before
    the death alone."""
    replica, pid, new_pid, address = CASES[run]
    lines = (LAB / run / f"{replica}.log").read_bytes().splitlines(keepends=True)
    banner = f"(APIServer pid={new_pid}) INFO ".encode()
    kept = [x for x in lines if not (x.startswith(banner) and b"[api_utils.py:347]" in x)]
    assert len(lines) - len(kept) == 6  # the banner: a blank line, four of art, a blank one
    (tmp_path / f"{replica}.log").write_bytes(b"".join(kept))
    out, s, _ = analyzed(tmp_path / f"{replica}.log")
    [d] = s["server_lifecycle"]["deaths"]
    # the death is the old process's last line, not the new one's loading lines before its listen line (lifecycle
    # ._silent tells them apart by the API server's pid: they read as the old process's, a death seconds before
    # the new start, '1 s down')
    last = [x for x in kept if x.startswith(f"(APIServer pid={pid}) ".encode())][-1]
    assert (d["pid"], d["ts"][11:19]) == (pid, last.split()[4].decode())
    same = d["same_server"]
    # the model is still read from the start's non-default args ('model': '/models/tiny-llama'), the version not
    assert (same["state"], same["after"]["version"]) == ("unknown", None)
    assert same["after"]["model"] == same["before"]["model"] == "/models/tiny-llama"
    assert same["missing"] == ["no banner version after the restart"]
    said = (
        f"one server restarted or two: unknown (no banner version after the restart); the same log stream "
        f"({replica}), address {address}, model /models/tiny-llama"
    )
    assert same["words"].startswith(said)
    assert "version 0.32.0" not in same["words"]
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    seen = rendered(out, s)
    for name in ("summary.md", "report.html"):
        assert said in seen[name], name
