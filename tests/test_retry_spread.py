"""Retries said as the counts hold them (diagnose/retry_spread.py).

* A retry count the log states is evidence of retries, with its source named, and no attempt it does not show:
  public-2 g01's LiteLLM router ends each of its 3 failures with "LiteLLM Retried: 10 times" (truth.json: 3 router
  failures, 10 retries reported each) and no retries were counted; HAProxy's %rc on each line (tests/data/haproxy).
* A mean per request read as if every request tried that often: public-2 c02's "Retries: 2 attempts per request"
  was one request of 3 attempts and one of 1 (truth: 4 HTTP 429, 2 'Retrying'); c01 is one request of 3.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from conftest import LAB, PUBLIC2, ROOT, need
from logscope.api import AnalyzeOptions, analyze

HAPROXY = ROOT / "tests" / "data" / "haproxy" / "haproxy.log"
LITELLM_PROXY = ROOT / "tests" / "data" / "litellm" / "litellm-proxy.log"


def _analyzed(path: Path, tmp_path: Path) -> tuple[dict, str, str]:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(need(path), src / path.name)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    out = tmp_path / "out"
    return (
        json.loads((out / "summary.json").read_text()),
        (out / "summary.md").read_text().replace("\\", ""),
        html.unescape((out / "report.html").read_text()),
    )


def _retries_finding(s: dict) -> dict:
    [f] = [f for f in s["findings"] if f["kind"] == "retries"]
    return f


def _haproxy_rc() -> list[int]:
    """Each line's %rc (retries), read off the log: '---- 1/1/0/0/+1 0/0 "POST ...'."""
    return [int(n) for n in re.findall(r' \S{4} \d+/\d+/\d+/\d+/\+?(\d+) \d+/\d+ "', HAPROXY.read_text())]


def _g01() -> tuple[Path, dict]:
    path = PUBLIC2 / "g01-litellm-router-ratelimit-retried-10-times-fallback-loop.log"
    truth = json.loads((PUBLIC2 / "truth.json").read_text())[path.name]
    n, each = truth["router_failures"], truth["retries_reported_per_failure"]
    want = {
        "requests": n,
        "retried": n,
        "max_attempts": each + 1,
        "retries": n * each,
        "attempts": n * (each + 1),
    }
    return path, {**want, "source": "LiteLLM's own 'LiteLLM Retried: N times'", "shown": n}


def _haproxy() -> tuple[Path, dict]:
    rc = _haproxy_rc()
    want = {
        "requests": len(rc),
        "retried": sum(1 for r in rc if r),
        "max_attempts": max(rc) + 1,
        "retries": sum(rc),
        "attempts": sum(r + 1 for r in rc if r),
    }
    return HAPROXY, {**want, "source": "HAProxy's retries field (%rc)", "shown": None}


@pytest.mark.parametrize("case", [_g01, _haproxy], ids=["g01-litellm", "haproxy"])
def test_a_retry_count_the_log_states_is_evidence_of_retries(case, tmp_path: Path) -> None:
    path, want = case()
    s, md, page = _analyzed(path, tmp_path)
    r = s["retries"]
    stated = r["gateway_retries_stated"]
    assert {
        k: stated[k] for k in ("requests", "retried", "max_attempts", "retries", "attempts", "source")
    } == {k: want[k] for k in ("requests", "retried", "max_attempts", "retries", "attempts", "source")}
    assert r["gateway_retries"] == want["retries"]  # g01: 30 (was 0); haproxy: 36 (was 0)
    jsonschema.Draft202012Validator(
        json.loads((ROOT / "logscope" / "summary.schema.json").read_text())
    ).validate(s)
    if want["shown"] is not None:  # no attempt the log does not show: g01's 3 lines stay 3 attempts
        assert r["gateway_attempts"] == want["shown"]
    said = f"{want['retries']} of them stated by {want['source']}, not shown as attempts"
    assert said in md and said in page
    f = _retries_finding(s)
    assert f["title"] == (
        f"Retries: {want['retried']} of {want['requests']} gateway requests retried (up to {want['max_attempts']} "
        "attempts, as the log states)"
    )
    assert (
        f["severity"] == "low" and f["rank"] > 1
    )  # what they answered leads (g01: the rate-limited upstream)
    assert (
        f"gateway retries {want['retries']} ({want['retries']} of them stated by the gateway log"
        in f["evidence"]
    )
    assert want["source"] in f["evidence"]
    # the claim the title states, with the statement named (every finding names one: test_claims_property)
    [c] = [c for c in s["claims"] if c["id"] == f["claim"] == "retries.stated"]
    assert c["sentence"] == (
        f"the gateway log states {want['retries']} retries of {want['retried']} of its {want['requests']} requests "
        f"(up to {want['max_attempts']} attempts) in {want['source']}, none of them a line of its own"
    )


def test_retries_a_log_shows_as_lines_are_not_stated_again(tmp_path: Path) -> None:
    """LiteLLM 1.108.7 beside its uvicorn access lines: each retry is a repeated 'Exception' line, and the failure's
    'LiteLLM Retried: 2 times' is told by them; nothing is added as stated."""
    s, _, _ = _analyzed(LITELLM_PROXY, tmp_path)
    assert "LiteLLM Retried: 2 times" in LITELLM_PROXY.read_text()
    assert s["retries"]["gateway_retries_stated"] is None


@pytest.mark.parametrize(
    ("name", "spread", "title"),
    [
        (
            "c02-openai-python-langbot-429-retry-backoff.log",
            {"requests": 2, "retried": 1, "max_attempts": 3, "attempts": 4, "retries": 2},
            "Retries: 1 of 2 requests retried (up to 3 attempts)",
        ),
        (
            "c01-openai-python-via-litellm-groq-429-retry-backoff-custom-format.log",
            {"requests": 1, "retried": 1, "max_attempts": 3, "attempts": 3, "retries": 2},
            "Retries: 1 of 1 requests retried (up to 3 attempts)",
        ),
    ],
    ids=["c02", "c01"],
)
def test_attempts_are_said_as_their_spread_not_a_mean(name, spread, title, tmp_path: Path) -> None:
    s, md, page = _analyzed(PUBLIC2 / name, tmp_path)
    got = s["retries"]["retry_spread"]
    assert {k: got[k] for k in spread} == spread
    f = _retries_finding(s)
    assert f["title"] == title and s["verdict"][0] == title + "."
    assert "attempts per request" not in f["title"] and "per request)" not in f["evidence"]
    assert f"{spread['retried']} of {spread['requests']} requests retried, up to 3 attempts" in f["evidence"]
    row = f"{spread['retried']} of {spread['requests']} (up to {spread['max_attempts']} attempts)"
    assert f"| requests retried | {row} |" in md
    assert re.search(
        r"<th>requests retried</th><td class=\"num\">" + re.escape(spread["retried"].__str__()), page
    )
    assert title in md and title in page


@pytest.mark.parametrize("run", ["retry-storm", "orphan"])
def test_the_most_attempts_are_said_with_their_layer(run, tmp_path: Path, rendered) -> None:
    """A request's most attempts differ by layer when nginx re-sends a client's attempt (retry-storm: 4 at the client,
    as truth.json counts them, 5 upstream at the gateway); one bare 'up to 5 attempts' beside 'client attempts' read
    as the client's. Each layer's most is said with its layer, in every output."""
    src = need(LAB / run)
    out = tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    s = json.loads((out / "summary.json").read_text())
    sp = s["retries"]["retry_spread"]
    truth = json.loads((src / "truth.json").read_text())["client"]
    req = pl.read_parquet(out / "requests.parquet")
    assert sp["max_client"] == truth["max_attempts_one_request"] == req["client_attempts"].max()
    assert sp["max_gateway"] == req["gateway_attempts"].max() > sp["max_client"]
    assert sp["max_attempts"] == sp["max_gateway"]
    words = f"up to {sp['max_client']} attempts at the client, up to {sp['max_gateway']} at the gateway"
    assert sp["most"] == words
    seen = rendered(out, s)
    assert f"| requests retried | {sp['retried']} of {sp['requests']} ({words}) |" in seen["summary.md"]
    text = " ".join(re.sub(r"<[^>]+>", " ", seen["report.html"]).split())  # the page's text, tags aside
    assert f"requests retried {sp['retried']} of {sp['requests']} ({words})" in text
    assert f"{sp['retried']} of {sp['requests']} requests retried, {words}" in _retries_finding(s)["evidence"]
