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

from conftest import DATA, need
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
