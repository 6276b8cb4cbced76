"""The gateway's requests, retries, 5xx and 499 counted once per request whatever the gateway writes
(schemas.gateway_request_row): nginx writes one gateway_attempts row per upstream try of an access line (attempts
1..n), HAProxy (%rc), Envoy (its attempt count) and Traefik (RetryAttempts) one line per request whose only row is its
last attempt. Counting attempt-1 rows alone dropped every retried request of the one-line gateways: tests/data/haproxy
read 4 requests of 26, 0 retries, 0 5xx; Envoy's json log 13 of 26. And Envoy's '0 DC' line (the caller left, no
status) was taken for a proxy's line apart from its access lines (schemas.gateway_apart): '12 of 25 retried' where
13 of its 26 lines state more than one attempt.

Every expected figure is read off the raw lines (or the run's truth.json), not off a parser's rows."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import DATA, LAB, PUBLIC2, need
from logscope.api import AnalyzeOptions, analyze, correlate, diagnose, ingest

KEYS = ("gateway_requests", "gateway_retries", "gateway_5xx", "gateway_499")


def _haproxy(path: Path) -> tuple[int, ...]:
    """(lines, retries, 5xx, 499) of an HAProxy httplog: '0/0/0/54/54 200 409 - - ---- 1/1/0/0/+1 0/0 "POST'."""
    got = re.findall(
        r" -?\d+/-?\d+/-?\d+/-?\d+/\+?\d+ (-?\d+) .*? \S{4} \d+/\d+/\d+/\d+/\+?(\d+) ", path.read_text()
    )
    st = [int(s) for s, _ in got]
    return len(got), sum(int(rc) for _, rc in got), sum(s >= 500 for s in st), st.count(499)


def _json_lines(path: Path, status: str, retries) -> tuple[int, ...]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    st = [int(r[status]) for r in rows]
    return len(rows), sum(retries(r) for r in rows), sum(s >= 500 for s in st), st.count(499)


def _envoy_json() -> tuple[Path, tuple[int, ...]]:
    p = DATA / "envoy" / "envoy-access.json"
    return p, _json_lines(p, "response_code", lambda r: max(int(r["attempts"] or 1), 1) - 1)


def _traefik() -> tuple[Path, tuple[int, ...]]:
    p = DATA / "traefik" / "traefik-access.json"
    return p, _json_lines(p, "DownstreamStatus", lambda r: int(r.get("RetryAttempts") or 0))


def _public(prefix: str) -> tuple[Path, tuple[int, ...]]:
    [p] = sorted(PUBLIC2.glob(f"{prefix}-*.log"))
    t = json.loads((PUBLIC2 / "truth.json").read_text())[p.name]
    if "upstream_status_list" in t:  # nginx: one access line, its upstream tries listed
        ups = t["upstream_status_list"]
        return p, (t["access_lines"], len(ups) - 1, int(t["access_lines"] and ups[-1] >= 500), 0)
    by = {int(k): v for k, v in t["status_counts"].items()}
    return p, (t["access_lines"], 0, sum(v for k, v in by.items() if k >= 500), by.get(499, 0))


def _retry_storm() -> tuple[Path, tuple[int, ...]]:
    """The lab's nginx: truth.json's access lines, their statuses and the upstream status entries of their lists."""
    g = json.loads((LAB / "retry-storm" / "truth.json").read_text())["gateway"]
    st = {k: v for k, v in g["statuses"].items() if k.isdigit()}
    five = sum(v for k, v in st.items() if int(k) >= 500)
    n = g["access_log_lines"]
    return LAB / "retry-storm", (n, g["upstream_status_entries"] - n, five, st.get("499", 0))


CASES = {
    "haproxy": lambda: (DATA / "haproxy" / "haproxy.log", _haproxy(DATA / "haproxy" / "haproxy.log")),
    "haproxy-id": lambda: (
        DATA / "haproxy" / "haproxy-id.log",
        _haproxy(DATA / "haproxy" / "haproxy-id.log"),
    ),
    "envoy-json": _envoy_json,
    "traefik": _traefik,
    "g04-envoy": lambda: _public("g04"),
    "g07-envoy": lambda: _public("g07"),
    "g02-ingress-nginx": lambda: _public("g02"),
    "retry-storm-nginx": _retry_storm,
}


def _folder(path: Path, tmp: Path) -> Path:
    if need(path).is_dir():
        return path
    (tmp / "in").mkdir()
    shutil.copy2(path, tmp / "in" / path.name)
    return tmp / "in"


@pytest.mark.parametrize("case", CASES)
def test_gateway_counts_one_per_request(case, tmp_path):
    """diagnosis.json's gateway requests, retries, 5xx and 499 are those of the access lines."""
    path, want = CASES[case]()
    o = AnalyzeOptions()
    ingest(_folder(path, tmp_path), tmp_path / "out", o)
    correlate(tmp_path / "out", o)
    t = diagnose(tmp_path / "out", o)["traffic"]
    assert tuple(t[k] for k in KEYS) == want, case


def test_the_retries_counted_by_the_one_line_gateways_are_nonzero():
    """The samples above hold retried requests of the one-line gateways (else they would prove nothing)."""
    assert _haproxy(DATA / "haproxy" / "haproxy.log")[:3] == (26, 36, 16)
    assert _haproxy(DATA / "haproxy" / "haproxy-id.log")[:3] == (26, 33, 13)
    assert _envoy_json()[1][:3] == (26, 16, 5)


@pytest.mark.parametrize(
    "path", [DATA / "haproxy" / "haproxy.log", DATA / "envoy" / "envoy-access.json"], ids=["haproxy", "envoy"]
)
def test_gateway_errors_signal_counts_retried_lines(path, tmp_path):
    """Without the correlation (the errors signal read from the gateway's lines, diagnose/failures.py), a request
    answered 5xx after its retries is a failure too: the errors episode counts every 5xx line."""
    o = AnalyzeOptions()
    ingest(_folder(path, tmp_path), tmp_path / "out", o)
    diag = diagnose(tmp_path / "out", o)
    five = _haproxy(path)[2] if path.suffix == ".log" else _envoy_json()[1][2]
    assert sum(e["count"] for e in diag["episodes"] if e["signal"] == "errors") == five


def test_envoy_client_abort_is_a_request(tmp_path, rendered):
    """Envoy's json log: 13 of its 26 lines state more than one attempt, the client abort '0 DC' with 2 among them
    (it was taken for a proxy's line apart from its access lines: '12 of 25')."""
    p = DATA / "envoy" / "envoy-access.json"
    rows = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    retried = [r for r in rows if int(r["attempts"] or 1) > 1]
    assert len(retried) == 13 and any(
        r["response_code"] == 0 and r["response_flags"] == "DC" for r in retried
    )
    out = tmp_path / "out"
    analyze(_folder(p, tmp_path), out, AnalyzeOptions())
    s = json.loads((out / "summary.json").read_text())
    title = "Retries: 13 of 26 gateway requests retried (up to 3 attempts, as the log states)"
    assert [f["title"] for f in s["findings"] if f["kind"] == "retries"] == [title]
    assert (
        s["retries"]["gateway_retries_stated"]["retries"]
        == sum(int(r["attempts"]) - 1 for r in retried)
        == 16
    )
    seen = rendered(out, s)
    assert title in seen["summary.md"] and title in seen["report.html"]
