"""A real queue in front of the engine (#37 item 3): the lab's gateway-queue, nginx's request-rate limit
(``limit_req rate=3r/s burst=300``, no ``nodelay``) on :8083 in front of one vLLM 0.32, streaming callers offering
1 req/s then 4 req/s. vLLM never queued (waiting 0, 0 preemptions); nginx held 467 of 493 requests back. The
figures asserted are its truth.json "purpose" (computed from the raw files by the lab's purpose_gwqueue.py):
phase 1 (the 465 requests sent at 4/s) callers' TTFT p95 33.773 s against the engine's histogram p95 in
(0.25, 0.5] s; nginx request_time p95 34.249 s against upstream_response_time p95 1.478 s."""

from __future__ import annotations

import html
import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, correlate, diagnose, ingest
from metamorphic import copy, copy_shifted, span

RUN = LAB / "gateway-queue"


def _truth() -> dict:
    return json.loads((need(RUN) / "truth.json").read_text())["purpose"]


def _phase(truth: dict, n: int) -> dict:
    return next(p for p in truth["phases"] if p["requests"] == n)


@pytest.fixture(scope="module")
def out(analyzed) -> Path:
    return analyzed(need(RUN))[0]


def _diag(out: Path) -> dict:
    return json.loads((out / "diagnosis.json").read_text())


def _gap(diag: dict, figure: str = "TTFT") -> dict:
    """The large clock-gap claim of ``figure`` over an episode (one episode holds the load: the rate-limited
    phase); the load's phases have their own (``scope`` 'load', tests/test_clock_gap_load.py)."""
    got = [
        c
        for c in diag["claims"]
        if c["kind"] == "clock_gap"
        and c["state"] == "large gap"
        and _v(c, "figure") == figure
        and _v(c, "scope") is None
    ]
    assert len(got) == 1, [(c["id"], c["state"]) for c in diag["claims"]]
    return got[0]


def _v(claim: dict, name: str):
    return next((f["value"] for f in claim["facts"] if f["name"] == name), None)


def _fact(claim: dict, name: str) -> dict:
    return next(f for f in claim["facts"] if f["name"] == name)


def test_the_recording_is_what_it_claims() -> None:
    """The ground truth itself: callers' p95 at least 3x the engine's and 2 s above it, no engine queue."""
    t = _truth()
    w = t["whole_run"]
    assert t["shows_gateway_queue"] is True
    assert w["ttft_p95_ratio_callers_over_engine"] >= 3 and w["ttft_p95_gap_s"] >= 2
    assert (w["waiting_max"], w["preemptions"], t["gateway"]["rejected_503"]) == (0, 0, 0)


def _from_first_slow(out: Path, c: dict) -> pl.DataFrame:
    """The requests of the episode's range: it runs from the first request above the 2 s SLO (08:27:23.640) to the
    last (diagnose/slow.py), so it holds phase 1's 465 requests but its first 11, which nginx's burst let through
    under 2 s (the truth's phase figures are over all 465: the episode's are within 1 % of them)."""
    req = pl.read_parquet(out / "requests.parquet").with_columns(pl.col("ts_start").dt.truncate("1ms"))
    lo, hi = (datetime.fromisoformat(_v(c, k).replace("Z", "+00:00")) for k in ("start", "end"))
    return req.filter(pl.col("ts_start").is_between(lo, hi))


def test_large_clock_gap_with_the_truths_figures(out: Path) -> None:
    """The finding's figures are the truth's: the callers' p95 over the range's 454 single-attempt requests (phase
    1's 465 from its first slow one), the engine's p95 as its histogram bucket, and the gap to the bucket's upper
    bound, each on its clock."""
    t = _phase(_truth(), 465)
    c = _gap(_diag(out))
    mine = _from_first_slow(out, c)
    assert _v(c, "requests") == mine.height == t["ok_200"] - 11 == 454
    callers = _fact(c, "callers_p95")
    assert (callers["clock"], callers["source"]) == ("client", "client_records")
    assert callers["value"] == pytest.approx(mine["ttft_s"].quantile(0.95, "linear"), abs=1e-3)
    assert callers["value"] == pytest.approx(t["callers_ttft_p95_s"], rel=0.01)
    lo, hi = t["engine_ttft_p95_bucket_s"]
    assert _v(c, "engine_p95_bucket") == f"{lo:g}–{hi:g} s"
    engine = _fact(c, "engine_p95_hi")
    assert (engine["clock"], engine["source"], engine["value"]) == ("engine", "engine_histogram", hi)
    assert lo <= _v(c, "engine_p95") <= hi
    assert _v(c, "gap_s") == pytest.approx(callers["value"] - hi, abs=1e-3)
    assert callers["value"] >= 3 * hi


def test_the_gateway_is_named_from_its_own_clock(out: Path) -> None:
    """nginx's request_time against its upstream_response_time for the same requests, and the requests its
    limit_req delayed (its error log's 'delaying request' lines): the finding says the time went to the gateway
    and the change to test is its rate limit."""
    truth = _truth()
    t = _phase(truth, 465)
    diag = _diag(out)
    c = _gap(diag)
    rt, up = _fact(c, "gateway_request_time_p95"), _fact(c, "gateway_upstream_p95")
    assert (rt["clock"], up["clock"]) == ("gateway", "gateway")
    # over the episode's 454 requests of phase 1's 465 (_from_first_slow): within 1 % of the phase's
    assert rt["value"] == pytest.approx(t["gateway_request_time_p95_s"], rel=0.01)
    assert up["value"] == pytest.approx(t["gateway_upstream_response_time_p95_s"], rel=0.01)
    assert _v(c, "gateway_outside_upstream_p95") == pytest.approx(
        t["gateway_time_before_upstream_p95_s"], rel=0.01
    )
    # the gateway's lines in the range on its own clock: 453 of the range's 454 requests (one line falls outside)
    assert _from_first_slow(out, c).height == 454 and _v(c, "gateway_requests") == 453
    assert _v(c, "gateway_rate_limit_delayed") == 453  # every one of them (phase 1: 464 of 465 delayed)
    assert t["gateway_limit_req"]["DELAYED"] == 464
    assert _v(c, "gateway_rate_limit_rejected") == truth["gateway"]["rejected_503"] == 0
    f = next(f for f in diag["findings"] if f.get("claim_id") == c["id"])
    assert f["title"].startswith("TTFT waits in the gateway, in front of the engine")
    assert "33.3 s" in f["title"]
    assert "limit_req" in f["cause"] and "34.24 s against 1.47 s" in f["cause"]
    assert "request-rate limit" in f["next_test"]
    # the slow first tokens of the same episode say where the time went, and the verdict's first test is that one
    slow = next(f for f in diag["findings"] if f["title"].startswith("Slow first token"))
    assert "in the gateway" in slow["cause"] and slow["next_test"] == f["next_test"]
    assert diag["verdict"][-1] == "First thing to test: " + f["next_test"]


def test_nothing_met_on_the_engines_clock(out: Path) -> None:
    """The callers waited 34 s at p95: no claim says 'met', none says 'nothing alarming'."""
    diag = _diag(out)
    assert not [c["id"] for c in diag["claims"] if c["state"] in ("met", "nothing alarming")]
    assert not any("met" in line.split() for line in diag["verdict"])
    assert diag["ladder"] is None


def test_every_output_gives_the_finding(out: Path) -> None:
    diag = _diag(out)
    c = _gap(diag)
    f = next(f for f in diag["findings"] if f.get("claim_id") == c["id"])
    summary = json.loads((out / "summary.json").read_text())
    assert f["title"] in [x["title"] for x in summary["findings"]]
    assert f["title"] in (out / "summary.md").read_text()
    assert f["title"] in html.unescape((out / "report.html").read_text())


def test_the_error_log_counts_the_rate_limit(out: Path) -> None:
    """Every 'delaying request, excess: …, by zone' line of nginx's error log is one limit_req_delayed row."""
    errs = pl.read_parquet(out / "gateway_errors.parquet")
    kinds = dict(errs.group_by("kind").len().iter_rows())
    g = _truth()["gateway"]
    assert kinds.get("limit_req_delayed") == g["error_log_delaying_request_lines"] == 467
    assert kinds.get("limit_req_rejected", 0) == g["error_log_limiting_requests_lines"] == 0


def _large_in_gateway(diag: dict) -> tuple[float, float]:
    """(callers' p95, time in the gateway p95) of the large gap, which must name the gateway. A transform may move
    the episode's edges by up to one window (2 s; 10 s once a calm hour widens the span, test_metamorphic), and the
    wait grows by a third of a second a second through the range: the figures stay within 5 %."""
    c = _gap(diag)
    f = next(f for f in diag["findings"] if f.get("claim_id") == c["id"])
    assert f["title"].startswith("TTFT waits in the gateway")
    return _v(c, "callers_p95"), _v(c, "gateway_outside_upstream_p95")


def _diagnosed(folder: Path, out: Path, **opts) -> dict:
    o = AnalyzeOptions(**opts)
    ingest(folder, out, o)
    correlate(out, o)
    return diagnose(out, o)


def test_gap_stable_under_shift_calm_replica_and_calm_hour(out: Path, tmp_path: Path) -> None:
    """Every clock shifted, a calm replica beside, the calm run an hour before as rotated logs: the same large
    gap, the same figures, the gateway named."""
    base = _large_in_gateway(_diag(out))
    shift = timedelta(days=1, hours=3, minutes=17, seconds=13)
    copy_shifted(RUN, tmp_path / "shifted", shift)
    assert _large_in_gateway(_diagnosed(tmp_path / "shifted", tmp_path / "o1")) == pytest.approx(
        base, rel=0.05
    )
    calm = need(LAB / "calm")
    lo, _ = span(RUN)
    copy(RUN, tmp_path / "replica")
    copy_shifted(
        calm,
        tmp_path / "replica" / "replica-b",
        timedelta(seconds=int((lo - span(calm)[0]).total_seconds())),
        rename=lambda rel: rel if rel == "vllm-server.log" else None,
    )
    assert _large_in_gateway(_diagnosed(tmp_path / "replica", tmp_path / "o2")) == pytest.approx(
        base, rel=0.05
    )

    def earlier(rel: str) -> str | None:
        if rel in ("vllm-server.log", "nginx-access.log", "nginx-error.log"):
            return rel + ".1"
        if rel.startswith("client-"):
            return rel
        return "prometheus-earlier/" + rel.split("/", 1)[1] if rel.startswith("prometheus/") else None

    copy(RUN, tmp_path / "hour")
    delta = timedelta(seconds=int((lo - timedelta(minutes=60) - span(calm)[1]).total_seconds()))
    copy_shifted(calm, tmp_path / "hour", delta, rename=earlier)
    assert _large_in_gateway(_diagnosed(tmp_path / "hour", tmp_path / "o3")) == pytest.approx(base, rel=0.05)


def test_gap_stable_when_the_range_is_narrowed(tmp_path: Path) -> None:
    """--since/--until around the rate-limited phase (the requests crossing its edges kept whole)."""
    o = tmp_path / "out"
    base = _large_in_gateway(_diagnosed(RUN, o))
    t = _phase(_truth(), 465)
    start = datetime.fromisoformat(t["window"][0]) - timedelta(seconds=20)
    end = datetime.fromisoformat(t["window"][1]) + timedelta(seconds=12)
    opts = AnalyzeOptions(since=start, until=end)
    correlate(o, opts)
    assert _large_in_gateway(diagnose(o, opts)) == pytest.approx(base, rel=0.05)


def test_a_public_rate_limits_refusals_are_read(tmp_path: Path) -> None:
    """A second real sample of the module's lines (tests/data/nginx-limit-req, crowdsecurity/hub#420: nginx's older
    spelling without a comma after the excess): each 'limiting requests' line is one limit_req_rejected row, the
    reporter's '...' counted as unrecognized."""
    ingest(Path(__file__).parent / "data" / "nginx-limit-req", tmp_path / "out", AnalyzeOptions())
    errs = pl.read_parquet(tmp_path / "out" / "gateway_errors.parquet")
    assert errs["kind"].to_list() == ["limit_req_rejected"] * 4
    assert errs["level"].unique().to_list() == ["error"]
    un = pl.read_parquet(tmp_path / "out" / "unrecognized.parquet")
    assert un.filter(pl.col("path").str.ends_with("error.log"))["count"].sum() == 1


def test_a_request_signal_lasting_to_the_last_arrival_is_not_cut_by_the_logs(out: Path) -> None:
    """The TTFT stretch is timed by the requests' arrivals, so it has no sample after the last one (08:29:21), while
    the logs go on until the gateway's queue drained and nginx stopped (08:30:04). It said 'still abnormal when the
    logs end'; it lasted as long as the load did."""
    diag = _diag(out)
    e1 = diag["episodes"][0]
    assert e1["signal"] == "ttft" and e1["class"] == "sustained"
    assert "no recovery while the load lasted (last arrival 08:29:21)" in e1["reason"]
    s = json.loads((out / "summary.json").read_text())
    assert (
        s["verdict"][1]
        == "Sustained regime, not a one-off: no recovery while the load lasted (last arrival 08:29:21)."
    )
    claim = next(c for c in s["claims"] if c["id"] == e1["claim_id"])
    assert {f["name"]: f["value"] for f in claim["facts"]}["rule"] == "load_end"
