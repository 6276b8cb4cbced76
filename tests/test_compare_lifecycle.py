"""compare says which servers died in each run and whether they came back (compare.lifecycle), and counts the
replicas that served as a setting. crash against kill-norestart, and traced-1r against traced-2r-kill, printed
nothing of the deaths behind their success shares, and traced-2r-kill's second replica was no change at all.
What the lab did is its truth.json's lab_events (a SIGKILL, a restart asked for, a start that failed)."""

from __future__ import annotations

import json

import pytest
from compare_helpers import lab_truth, reader_text

from logscope.api import compare
from logscope.compare.render import terminal_lines

DIED = ("vllm_sigkill", "vllm_restart_requested", "vllm_start_failed")


def _truth(run: str) -> tuple[int, int, int]:
    """(servers killed or failed, of them back, replicas) as the lab logged them."""
    ev = lab_truth(run)["lab_events"]
    died = sum(e["event"] in DIED for e in ev)
    back = sum(e["event"] == "vllm_ready_after_restart" for e in ev)
    replicas = len({e.get("replica") for e in ev if e["event"] == "vllm_ready"}) or 1
    return died, back, replicas


# (A, B): one run's server died where the other's did not, or both died, one never back
DEATHS = [
    ("crash", "kill-norestart"),
    ("traced-1r", "traced-2r-kill"),
    ("traced-2r-kill", "traced-1r"),
    ("traced-ladder", "traced-ladder-kill"),
    ("kv-short", "kv-short-refused"),
]


@pytest.mark.parametrize(("a", "b"), DEATHS)
def test_a_death_in_either_run_is_said(a, b, lab_out, tmp_path):
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    for side, run in (("a", a), ("b", b)):
        died, back, _ = _truth(run)
        life = doc["lifecycle"][side]
        assert (life["deaths"], life["back"]) == (died, back), (run, life)
    line = next(v for v in doc["verdict"] if v.startswith("A server died: "))
    assert doc["verdict"].index(line) == 1  # next to what changed
    for side in ("A", "B"):
        assert f"in {side}, {doc['lifecycle'][side.lower()]['text']}" in line
    # the terminal, compare.md, compare.html and compare.json say it the same way
    text = reader_text(res)
    assert text.count(line) >= 3
    assert line in json.loads(res["paths"]["compare_json"].read_text())["verdict"]


def test_a_death_reads_the_same_both_ways(lab_out, tmp_path):
    ab = compare(lab_out("traced-1r"), lab_out("traced-2r-kill"), tmp_path / "ab")["doc"]
    ba = compare(lab_out("traced-2r-kill"), lab_out("traced-1r"), tmp_path / "ba")["doc"]
    assert ab["lifecycle"]["a"] == ba["lifecycle"]["b"] and ab["lifecycle"]["b"] == ba["lifecycle"]["a"]
    assert (
        "vllm-server-b killed without a trace at 03:24:34 (ready again at 03:31:29, down 415 s)"
        in (ab["lifecycle"]["b"]["text"])
    )
    assert (
        "not back before the logs end"
        in compare(lab_out("traced-ladder"), lab_out("traced-ladder-kill"), tmp_path / "k")["doc"][
            "lifecycle"
        ]["b"]["text"]
    )


@pytest.mark.parametrize(("a", "b"), [("seqs-8", "seqs-16"), ("calm", "calm-b")])
def test_no_death_no_line(a, b, lab_out, tmp_path):
    doc = compare(lab_out(a), lab_out(b), tmp_path / "c")["doc"]
    assert (doc["lifecycle"]["a"]["deaths"], doc["lifecycle"]["b"]["deaths"]) == (0, 0)
    assert _truth(a)[0] == _truth(b)[0] == 0
    assert not any(v.startswith("A server died") for v in doc["verdict"])


@pytest.mark.parametrize(
    ("a", "b"),
    [("traced-1r", "traced-2r-kill"), ("traced-2r-kill", "traced-1r"), ("crash", "kill-norestart")],
)
def test_the_replicas_are_a_setting(a, b, lab_out, tmp_path):
    """A restart in one log stream (crash) is one replica; two streams (traced-2r-kill's a and b) are two."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    row = next(r for r in doc["settings"] if r["name"] == "replicas")
    ra, rb = _truth(a)[2], _truth(b)[2]
    assert (row["a"], row["b"]) == (ra, rb)
    assert row["status"] == ("changed" if ra != rb else "same") and row["counted"] == (ra != rb)
    assert ("replicas" in doc["comparable"]["changed"]) == (ra != rb)
    if ra != rb:
        assert f"replicas {ra} → {rb}" in doc["verdict"][0]
        assert reader_text(res).count(f"replicas {ra} → {rb}") >= 3


@pytest.mark.parametrize(("a", "b"), [("calm", "two-servers-one-port"), ("two-servers-one-port", "calm")])
def test_a_server_restarted_with_other_arguments_is_said(a, b, lab_out, tmp_path):
    """two-servers-one-port's first server ran max_num_seqs 64, the one after it 16 (its manifest): the settings
    compared are the last start's, and the verdict says the run's figures mix both; before, only compare.md's
    notes said 'started 2 times with different arguments'."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    side = "A" if a == "two-servers-one-port" else "B"
    line = next(v for v in doc["verdict"] if v.startswith(f"In {side}, the server's arguments changed"))
    assert "max_num_seqs 64, then 16" in line and "max_model_len 1024, then 512" in line
    assert reader_text(res).count(line) >= 3
    row = next(r for r in doc["settings"] if r["name"] == "max_num_seqs")
    assert row[side.lower()] == 16


@pytest.mark.parametrize(("a", "b"), [("traced-1r", "traced-2r-kill"), ("traced-2r-kill", "traced-1r")])
def test_replicas_on_other_ports_are_no_change_of_arguments(a, b, lab_out, tmp_path):
    """traced-2r-kill's replicas a and b differ only in their port, and b's restart in nothing: no note of
    arguments that changed ('the server started 3 times with different arguments')."""
    doc = compare(lab_out(a), lab_out(b), tmp_path / "c")["doc"]
    assert not [n for n in doc["notes"] if "arguments" in n]
    assert not [v for v in doc["verdict"] if "arguments changed" in v]


@pytest.mark.parametrize(
    ("a", "b", "ports"), [("calm", "calm-b", (8083, 8081)), ("crash", "kill-norestart", (8081, 8083))]
)
def test_the_gateways_port_is_no_change_of_setting(a, b, ports, lab_out, tmp_path):
    """Where nginx listened is shown, never counted (as the server's host and port are not): calm against calm-b
    read '5 settings differ (gateway_listener 8083 → 8081; …)'."""
    res = compare(lab_out(a), lab_out(b), tmp_path / "c")
    doc = res["doc"]
    row = next(r for r in doc["settings"] if r["name"] == "gateway_listener")
    assert (row["a"], row["b"], row["status"], row["counted"]) == (*ports, "changed", False)
    assert "gateway_listener" not in doc["comparable"]["changed"]
    assert doc["comparable"]["settings_changed"] == 4
    assert "4 settings differ" in doc["verdict"][0] and "gateway_listener" not in doc["verdict"][0]
    assert "gateway_listener" not in " ".join(terminal_lines(doc))
