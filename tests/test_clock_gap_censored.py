"""A clock gap is never read from survivors (diagnose/gave_up.py, clockgap.py).

abort-ignored (a 3 s client timeout, max_retries 0): 76 of its 169 callers gave up (truth: APITimeoutError 76,
the answers they waited for at most 2.949 s), while vLLM ran every request to its end (5-10 s p95). Its claims
read "small gap: e2e p95 3.18 s on the callers' clock, 5-10 s on the engine's: no gap beyond the histogram
bucket's width": a figure censored at the timeout, and below the engine's bucket, read as 'no gap'. storm-b (3 s
timeout, retries: 84 of phase 1's 345 callers timed out) and killed-debug (490 requests in flight when the client
stopped) had the same fault. Where more of a range's callers gave up than a p95 leaves above it (5 %), the claim is
'censored', with the counts and the client timeout its records state; where the callers' p95 is below the
engine's bucket with no one giving up (spike-b's and frontend-bound's last phase: the engine's histogram over the
phase counts the previous phase's tail), it is 'callers below engine'. Neither gives a gap."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl
import pytest

from conftest import LAB, need

NO_GAP = "no gap beyond the histogram bucket's width"
CENSORED = {  # run -> (claim, truth's phase the range is, or None for an episode)
    "abort-ignored": [("clock_gap.phase.0.e2e", 0), ("clock_gap.E2.e2e", None)],
    "storm-b": [("clock_gap.phase.1.e2e", 1), ("clock_gap.E1.e2e", None)],
    "killed-debug": [("clock_gap.phase.0.e2e", 0)],
}
BELOW = {"spike-b": "clock_gap.phase.2.e2e", "frontend-bound": "clock_gap.phase.2.e2e"}


def _facts(c: dict) -> dict:
    return {f["name"]: f for f in c["facts"]}


def _t(x: str) -> datetime:
    return datetime.fromisoformat(x.replace("Z", "+00:00"))


def _said(out, s, rendered) -> dict[str, str]:
    return {"summary.json": (out / "summary.json").read_text(), **rendered(out, s)}


def _listed(said: dict[str, str]) -> dict[str, str]:
    """The outputs that list the claims (the terminal prints the verdict alone)."""
    return {k: v for k, v in said.items() if k != "terminal"}


def _in_range(out, start: str, end: str) -> pl.DataFrame:
    """The correlated requests started in [start, end], as the claim's range takes them."""
    r = pl.read_parquet(out / "requests.parquet")
    return r.filter(pl.col("ts_start").is_between(_t(start), _t(end)))


def _stated_timeout(run: str) -> float | None:
    """The client timeout the lab client's own records state (client-*.jsonl, its 'request' records)."""
    got = {
        json.loads(line).get("client_timeout_s")
        for p in (LAB / run).glob("client-*.jsonl")
        for line in p.read_text().splitlines()
        if '"kind": "request"' in line
    }
    return got.pop() if len(got) == 1 else None


@pytest.mark.parametrize("run", sorted(CENSORED))
def test_a_gap_over_callers_who_gave_up_is_censored(run, analyzed, rendered) -> None:
    out, s, _ = analyzed(need(LAB / run))
    truth = json.loads((LAB / run / "truth.json").read_text())["client"]
    claims = {c["id"]: c for c in s["claims"]}
    said = _said(out, s, rendered)
    for cid, phase in CENSORED[run]:
        c = claims[cid]
        f = _facts(c)
        assert c["state"] == "censored", c["sentence"]
        mine = _in_range(out, f["start"]["value"], f["end"]["value"])
        left = mine.filter(pl.col("outcome").is_in(["timeout", "unfinished"]))
        assert (f["callers"]["value"], f["gave_up"]["value"]) == (mine.height, left.height)
        assert f["gave_up"]["value"] >= 0.05 * f["callers"]["value"]
        if phase is not None and truth["timeouts_logical"]:
            # truth's phase, from the client's raw records (abort-ignored's last request started 6 ms after
            # its phase's end record: the range, by time, leaves it out)
            tp = next(p for p in truth["phases"] if p["phase"] == phase)
            assert tp["logical_requests"] - f["callers"]["value"] in (0, 1)
            assert tp["outcomes"]["APITimeoutError"] - f["gave_up"]["value"] in (0, 1)
        elif phase is not None:
            assert f["gave_up"]["value"] == truth["unfinished_requests_client_stopped"]
        # no gap is read, and the figures that say why are in the claim
        assert f["gap_s"]["value"] is None and c["missing"]
        assert str(f["gave_up"]["value"]) in c["missing"][0]
        timeout = _stated_timeout(run)
        if truth["timeouts_logical"]:
            assert (f["client_timeout"]["value"], f["client_timeout"]["clock"]) == (timeout, "client")
            assert f["gave_up_wait_min"]["value"] >= timeout
            assert f"client timeout {timeout:g} s" in c["sentence"]
        assert f"{f['gave_up']['value']} of the {f['callers']['value']} callers left" in c["sentence"]
        for where, text in _listed(said).items():
            assert c["sentence"] in text, (where, cid)
        for where, text in said.items():
            assert f"{f['where']['value']}: e2e p95" not in text, (where, cid)
    # abort-ignored's answers came back within 2.95 s, the engine's p95 is 5-10 s: the sentence says which is above
    if run == "abort-ignored":
        assert (
            truth["latency_ok_s"]["max"]
            < 3
            < 5
            == _facts(claims["clock_gap.E2.e2e"])["engine_p95_lo"]["value"]
        )
        assert claims["clock_gap.E2.e2e"]["sentence"].endswith("5–10 s, above the callers' figure")
        for where, text in said.items():
            assert NO_GAP not in text, where


@pytest.mark.parametrize("run", sorted(BELOW))
def test_a_callers_figure_below_the_engines_gives_no_gap(run, analyzed, rendered) -> None:
    out, s, _ = analyzed(need(LAB / run))
    c = next(c for c in s["claims"] if c["id"] == BELOW[run])
    f = _facts(c)
    assert c["state"] == "callers below engine", c["sentence"]
    assert f["callers_p95"]["value"] < f["engine_p95_lo"]["value"]
    assert f["engine_p95_lo"]["clock"] == "engine" and f["gap_s"]["value"] is None
    # nobody gave up here: the two figures count different requests
    assert f["gave_up"]["value"] <= 0.05 * f["callers"]["value"]
    assert c["missing"] and f["engine_p95_bucket"]["value"] in c["missing"][0]
    said = _said(out, s, rendered)
    for where, text in _listed(said).items():
        assert c["sentence"] in text, where
    old = f"{f['where']['value']}: e2e p95 {f['callers_p95']['value']:.2f} s on the callers' clock, "
    for where, text in said.items():
        assert old not in text, where
