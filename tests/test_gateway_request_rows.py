"""Each gateway request counted once, by schemas.gateway_request_row(), wherever a count of them is made.

HAProxy (%rc) and Envoy's JSON log (its attempt count) write one line per request whose row is its last attempt:
`attempt == 1` kept only the requests that were not retried (haproxy.log: 4 of its 26 lines; envoy-access.json: 13
of 26), so the gateway's outcomes when no request table is correlated (findings/gateway.py `_from_gateway`) and the
gateway's layer around a kill (kill_cost.at) lost every retried request, and the 5xx among them.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from conftest import DATA, PUBLIC2, need
from logscope.diagnose import kill_cost, tables
from logscope.diagnose.findings.gateway import _from_gateway


def _haproxy_statuses(text: str) -> list[int]:
    """Each line's status, read off the log: '... 0/0/0/54/54 200 409 - - ---- ...'."""
    return [int(s) for s in re.findall(r" -?\d+/-?\d+/-?\d+/-?\d+/\+?\d+ (\d{3}) ", text)]


def _envoy_statuses(text: str) -> list[int]:
    """response_code per line; 0 is no answer sent (line 8: the caller left, '0 DC'), no status."""
    return [json.loads(line)["response_code"] or None for line in text.splitlines() if line.strip()]


CASES = {
    "haproxy": (DATA / "haproxy" / "haproxy.log", _haproxy_statuses),
    "envoy-json": (DATA / "envoy" / "envoy-access.json", _envoy_statuses),
}


@pytest.mark.parametrize("key", sorted(CASES))
def test_gateway_outcomes_count_each_request_once(analyzed, key) -> None:
    path, statuses = CASES[key]
    want = Counter(statuses(need(path).read_text()))
    assert sum(want.values()) == 26
    out, _, _ = analyzed(path)
    ga = tables.read(out, "gateway_attempts", tables.COLUMNS["gateway_attempts"])
    assert ga.height == 26 and (ga["attempt"].fill_null(1) > 1).any()  # retried lines are there
    got = _from_gateway(ga)
    assert Counter(got["status"].to_list()) == want
    assert int((got["outcome"] == "error").sum()) == sum(n for s, n in want.items() if s is None or s >= 400)
    # the gateway's layer around a kill at its first request: every request ends from it on, by its status
    [layer] = [x for x in kill_cost.at(out, ga["ts_start"].min()) if x.layer == "gateway"]
    assert sum(layer.after.values()) == 26
    assert {k: n for k, n in layer.after.items() if k.isdigit()} == {str(s): n for s, n in want.items() if s}


# an access line of uvicorn in front of LiteLLM, as text or inside a JSON record: '"POST /v1/chat/completions
# HTTP/1.1" 200'
_ACCESS = re.compile(r'\\?"(?:GET|POST) \S+ HTTP/1\.1\\?" \d{3}')


@pytest.mark.parametrize(
    ("src", "retries"),
    [
        # 8 failure lines state 'LiteLLM Retried: 2 times' (litellm-proxy.log 5, litellm-proxy-json.log 3)
        (DATA / "litellm", 16),
        (PUBLIC2 / "g09-litellm-proxy-compose-wrapped-200s-then-upstream-503-overloaded-no-fallback.log", 0),
    ],
    ids=["tests-data-litellm", "g09"],
)
def test_litellm_requests_are_its_access_lines(analyzed, src, retries) -> None:
    """LiteLLM's router lines apart from uvicorn's access lines are no requests of their own (tests/data/litellm
    read 212 gateway requests for its 55 access lines; g09 4 for its 2, INDEX.md: '2 access 200'), while the
    retries those lines state are kept."""
    src = need(src)
    files = sorted(src.glob("*.log")) if src.is_dir() else [src]
    lines = sum(len(_ACCESS.findall(f.read_text())) for f in files)
    _, _, d = analyzed(src)
    assert d["traffic"]["gateway_requests"] == lines
    assert d["traffic"]["gateway_retries"] == retries


def test_litellm_router_alone_its_failure_lines_are_the_requests(analyzed) -> None:
    """g01 has no access line: each router failure line is a request, with the 10 retries it states."""
    path = PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log"
    truth = json.loads((PUBLIC2 / "truth.json").read_text())[path.name]
    _, _, d = analyzed(need(path))
    assert d["traffic"]["gateway_requests"] == truth["router_failures"] == 3
    assert d["traffic"]["gateway_retries"] == 3 * truth["retries_reported_per_failure"]
