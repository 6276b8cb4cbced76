"""A clock gap measured over one client's phases says which client, and names the clients whose phases were not
measured (clockgap_run: one client's phases per run).

Lab kv-blip has two clients (manifest client_start: 'calm' 180:c1, 'burst' 3 requests at concurrency 3): its claims
clock_gap.phase.0.* read "phase 0 (concurrency 1)" with no word of whose phase, nor that the burst client's phase
(0.15 s inside it) had none. kv-short: 'kvshort' 120:c2, then 'kvlong' 0.15:c3; the kvlong phase (near the
episode) is measured, the 120 s kvshort phase was not, and nothing said so. Each phase's callers are every
caller's requests started in it: said too."""

from __future__ import annotations

import json

import pytest

from conftest import LAB, need

CASES = {  # run: (the client measured, the other client and its phases as its files log them)
    "kv-blip": ("client-calm", "client-burst's phase 0 (concurrency 3)"),
    "kv-short": ("client-kvlong", "client-kvshort's phase 0 (concurrency 2)"),
}


@pytest.mark.parametrize("run", sorted(CASES))
def test_clock_gap_claims_name_their_client(analyzed, rendered, run):
    client, other = CASES[run]
    out, s, _ = analyzed(need(LAB / run))
    started = [
        e
        for e in json.loads((LAB / run / "manifest.json").read_text())["events"]
        if e["event"] == "client_start"
    ]
    assert sorted(e["client"] for e in started) == sorted(
        n.removeprefix("client-") for n in (client, other.split("'")[0])
    )
    scope = {c["id"]: {f["name"]: f["value"] for f in c["facts"]}.get("scope") for c in s["claims"]}
    gaps = [c for c in s["claims"] if c["id"].startswith("clock_gap.") and scope[c["id"]] == "load"]
    assert gaps
    seen = rendered(out, s)
    for c in gaps:
        facts = {f["name"]: f["value"] for f in c["facts"]}
        assert facts["client"] == client and facts["clients_not_measured"] == other
        said = f"of {client} (every caller's requests in it; {other}: not measured)"
        assert said in c["sentence"], c["sentence"]
        assert c["sentence"] in seen["summary.md"]
