"""Did the retried attempts reach vLLM? correlation.json's ``flags.retried_attempts`` gives, per layer, the retried
attempts that reached vLLM, did not and are unknown: the facts a retries finding needs before it says "most retried
attempts never reached vLLM" (a finding said so while all 357 of its retried attempts had reached it). Counted here
again from the raw files of real runs: the client's retries (JSON lines), the nginx line of each (client_rid and
x-stainless-retry-count), its connect times, and vLLM's 'Received request cmpl-<nginx $request_id>-0' lines."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from test_correlate import run_lab

from conftest import LAB, need

_NGINX = re.compile(
    r'rid=(\w+) .*?client_rid="([^"]*)".*? ua="([^"]*)".*? uct="([^"]*)".*? retry_hdr="(\d+)"'
)
_RECEIVED = re.compile(r"Received request cmpl-(\w+)-0")


def _raw(run: str) -> dict:
    d = need(LAB / run)
    [jsonl] = d.glob("client-*.jsonl")
    sends = [json.loads(x) for x in jsonl.read_text().splitlines() if '"attempt_send"' in x]
    retries = [(s["rid"], s["retry_count"]) for s in sends if s["retry_count"] != "0"]
    line, conn, gw = {}, {}, Counter()
    received = Counter(_RECEIVED.findall((d / "vllm-server.log").read_text()))
    for m in _NGINX.finditer((d / "nginx-access.log").read_text()):
        rid, crid, ua, uct, k = m.groups()
        line[(crid, k)] = rid
        # upstream attempts: 'no live upstreams' names the group, without a port (no attempt made)
        ucts = [u.strip() for a, u in zip(ua.split(","), uct.split(","), strict=True) if ":" in a]
        conn[rid] = any(u != "-" for u in ucts)
        for u in ucts[1:]:  # the gateway's retries: the upstream attempts after a line's first
            gw["retries"] += 1
            gw["not_reached"] += u == "-"
    client = Counter()
    for crid, k in retries:
        rid = line.get((crid, k))
        client[
            "reached" if rid and received[rid] else "not_reached" if rid and not conn[rid] else "unknown"
        ] += 1
    return {"client": client, "gateway": gw}


@pytest.mark.parametrize("run", ["retry-storm", "storm-b", "crash", "orphan"])
def test_retried_attempts_that_reached_vllm(tmp_path_factory, run):
    _, s = run_lab(tmp_path_factory, run)
    got = s["flags"]["retried_attempts"]
    raw = _raw(run)
    c = got["client"]
    assert c["retries"] == s["flags"]["multi_layer_retries"]["client_retries"] == sum(raw["client"].values())
    assert (c["reached"], c["not_reached"], c["unknown"]) == tuple(
        raw["client"][k] for k in ("reached", "not_reached", "unknown")
    )
    g = got["gateway"]
    assert g["retries"] == s["flags"]["multi_layer_retries"]["gateway_retries"] == raw["gateway"]["retries"]
    assert g["not_reached"] == raw["gateway"]["not_reached"]
    assert g["reached"] + g["not_reached"] + g["unknown"] == g["retries"]
    if run == "storm-b":  # every retry reached the server (amplification 1.98)
        assert c["reached"] == c["retries"] > 0
    if run == "crash":  # the server was down: the retries got nginx's 502 and never reached it
        assert c["not_reached"] > 0.9 * c["retries"]


def test_retries_with_no_vllm_log_are_unknown(tmp_path_factory):
    """Without vLLM's log nothing says whether a retry that connected reached vLLM: unknown, never 'did not'."""
    from logscope import schemas
    from logscope.correlate import correlate_tables, ingest_tables

    out, s = run_lab(tmp_path_factory, "retry-storm")
    tabs = ingest_tables.read_tables(out)
    tabs["server_requests"] = schemas.empty("server_requests")
    got = correlate_tables(tabs).summary["flags"]["retried_attempts"]
    whole = s["flags"]["retried_attempts"]
    assert got["client"]["reached"] == 0 and got["gateway"]["reached"] == 0
    # the retries nginx could not connect for did not reach it, whatever the server's log
    assert got["client"]["not_reached"] == whole["client"]["not_reached"]
    assert got["client"]["unknown"] == whole["client"]["reached"]
    assert set(got["client"]["unknown_why"]) == {"no vLLM request line in the input"}
