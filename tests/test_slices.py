"""Correlation in time slices (logscope/correlate/slices.py) against the whole correlation, on the lab runs.

The lab runs last minutes: cut on 2-second steps, 50 request rows a slice, each makes 17 to 80 slices,
so nearly every request has a slice edge near it."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import polars as pl
import pytest
from test_correlate import LAYERS, run_lab

from logscope import schemas
from logscope.api import AnalyzeOptions, correlate
from logscope.correlate import ingest_tables, link, slices

OUTPUTS = ("requests", "windows", "clock_offsets")


def _copy(src, dst):
    dst.mkdir()
    for f in src.glob("*.parquet"):
        if f.stem not in OUTPUTS:
            shutil.copy(f, dst / f.name)
    return dst


def _both(tmp_path, base, rows: int = 50):
    whole, cut = _copy(base, tmp_path / "whole"), _copy(base, tmp_path / "cut")
    a = correlate(whole)
    b = correlate(cut, AnalyzeOptions(slice_rows=rows))
    return whole, cut, a, b


def _same_tables(x, y) -> list[str]:
    return [
        n
        for n in OUTPUTS
        if not pl.read_parquet(x / f"{n}.parquet").equals(pl.read_parquet(y / f"{n}.parquet"))
    ]


@pytest.fixture
def fine(monkeypatch):
    """Edges on 2-second steps and a margin of the longest request span alone (no slack for id chains)."""
    monkeypatch.setattr(slices, "STEP", "2s")
    monkeypatch.setattr(slices, "CHAIN_SLACK_S", 0.0)


@pytest.mark.parametrize("run", list(LAYERS))
def test_slices_give_the_whole_correlation(tmp_path, tmp_path_factory, fine, run):
    base, _ = run_lab(tmp_path_factory, run)
    whole, cut, a, b = _both(tmp_path, base)
    info = b.pop("slices")
    assert info["count"] >= 15 and len(info["edges"]) == info["count"] - 1
    assert b["notes"].pop(0).startswith(f"correlated in {info['count']} time slices of about 50 request rows")
    assert _same_tables(whole, cut) == []
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert b["retry_multiplication"]["logical_requests"] == LAYERS[run][0]


@pytest.mark.parametrize("run", ["killed-debug", "abort-ignored"])
def test_slices_of_abandoned_and_unfinished_requests(tmp_path, tmp_path_factory, fine, run):
    """A killed client's requests in flight (paired by time with the gateway's 499s, only a DEBUG log) and attempts
    abandoned through proxy_ignore_client_abort: every output the same in slices as whole."""
    base, _ = run_lab(tmp_path_factory, run)
    whole, cut, a, b = _both(tmp_path, base)
    assert b.pop("slices")["count"] >= 15 and b["notes"].pop(0).startswith("correlated in")
    assert _same_tables(whole, cut) == []
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize(
    "dropped",
    [
        ("gateway_attempts", "gateway_errors"),
        ("gateway_attempts", "gateway_errors", "client_attempts", "client_requests"),
        ("server_requests", "server_events", "server_stats"),
    ],
    ids=["no gateway", "vLLM alone", "no vLLM"],
)
def test_slices_with_layers_missing(tmp_path, tmp_path_factory, fine, dropped):
    """Without a gateway the clock reference is vLLM's (and the probe's reference too); without client and
    gateway every vLLM request is its own logical request; without vLLM the gateway's: the same as whole."""
    base, _ = run_lab(tmp_path_factory, "crash")
    src = _copy(base, tmp_path / "src")
    for name in dropped:
        schemas.empty(name).write_parquet(src / f"{name}.parquet")
    whole, cut, a, b = _both(tmp_path, src)
    assert b.pop("slices")["count"] >= 8 and b["notes"].pop(0).startswith("correlated in")
    assert _same_tables(whole, cut) == [] and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert b["retry_multiplication"]["logical_requests"] == (351 if "client_attempts" in dropped else 550)


def test_slices_of_a_range_and_of_nothing(tmp_path, tmp_path_factory, fine):
    """With --since/--until the slices read what the whole correlation reads of the range; a folder with no
    request is one slice, and every output is written."""
    base, _ = run_lab(tmp_path_factory, "retry-storm")
    opts = {
        "since": dt.datetime(2026, 11, 29, 8, 30, tzinfo=dt.UTC),
        "until": dt.datetime(2026, 11, 29, 8, 31, 30, tzinfo=dt.UTC),
    }
    whole, cut = _copy(base, tmp_path / "whole"), _copy(base, tmp_path / "cut")
    a, b = correlate(whole, AnalyzeOptions(**opts)), correlate(cut, AnalyzeOptions(**opts, slice_rows=50))
    assert b.pop("slices")["count"] >= 30 and b["notes"].pop(0).startswith("correlated in")
    assert (
        json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
        and a["range"]["since"] == "2026-11-29T08:30:00Z"
    )
    assert _same_tables(whole, cut) == [] and 0 < pl.read_parquet(cut / "requests.parquet").height < 653
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in ingest_tables.INPUTS:
        schemas.empty(name).write_parquet(empty / f"{name}.parquet")
    s = correlate(empty, AnalyzeOptions(slice_rows=10))
    assert s["slices"]["count"] == 1 and s["retry_multiplication"]["logical_requests"] == 0
    for name in OUTPUTS:
        assert pl.read_parquet(empty / f"{name}.parquet").columns == list(schemas.TABLES[name])


def test_without_a_margin_slices_lose_links(tmp_path, tmp_path_factory, fine, monkeypatch):
    """The margin is what makes a slice whole: with none, requests near the edges lose their retries."""
    monkeypatch.setattr(slices, "max_span", lambda out, rng: -link.EXACT_TOL_S)
    base, _ = run_lab(tmp_path_factory, "retry-storm")
    whole, cut, a, b = _both(tmp_path, base)
    assert b["slices"]["margin_s"] == 0.0
    assert "requests" in _same_tables(whole, cut)
    assert b["match"] != a["match"] or b["retry_multiplication"] != a["retry_multiplication"]


def test_clock_probe_finds_the_skew(tmp_path, tmp_path_factory, fine, monkeypatch):
    """Past PROBE_ROWS the offsets come from one gateway id in k (and each log's first ids) and the rows carrying
    those ids: with vLLM's
    clock 7 minutes fast, that sample finds the same offset as the whole (within its stamp resolution's
    voting), and the slices, cut on the corrected clock, join every request as the whole does."""
    base, _ = run_lab(tmp_path_factory, "retry-storm")
    src = _copy(base, tmp_path / "skewed")
    for name in ("server_requests", "server_request_events", "server_stats", "server_events"):
        df = pl.read_parquet(src / f"{name}.parquet")
        ts = [c for c, t in df.schema.items() if t == schemas.TS]
        df.with_columns([pl.col(c) + dt.timedelta(minutes=7) for c in ts]).write_parquet(
            src / f"{name}.parquet"
        )
    monkeypatch.setattr(slices, "PROBE_ROWS", 600)  # 3,089 request rows: one gateway id in 7
    monkeypatch.setattr(slices, "PER_SOURCE", 20)  # and the first 20 ids of each client and vLLM log
    whole, cut, a, b = _both(tmp_path, src)
    off_a = {o["source"]: o for o in a["clock_offsets"]}["vllm-server.log"]
    off_b = {o["source"]: o for o in b["clock_offsets"]}["vllm-server.log"]
    assert (
        off_b["verified"]
        and abs(off_a["offset_s"] + 420) < 1
        and abs(off_b["offset_s"] - off_a["offset_s"]) < 0.01
    )
    assert 100 < off_b["n_matches"] < 250 and off_a["n_matches"] == 914
    assert [(o["source"], o["verified"]) for o in b["clock_offsets"]] == [
        (o["source"], o["verified"]) for o in a["clock_offsets"]
    ]
    assert b["notes"][1].startswith(
        "clock offsets estimated from one request id in 7 of the gateway log, the first "
        "20 of each client and vLLM log"
    )
    assert b["match"] == a["match"] and b["retry_multiplication"] == a["retry_multiplication"]
    assert b["orphans"]["count"] == a["orphans"]["count"]


def test_analyze_slices_when_only_slices_fit(tmp_path, tmp_path_factory):
    """A budget between the sliced and the whole estimate: analyze correlates the whole input in slices, not a
    range of it, and the report says so."""
    from logscope import api
    from logscope.correlate.client_sources import kept_client_sources
    from logscope.resources import budget

    base, whole = run_lab(tmp_path_factory, "orphan")
    kept, _ = kept_client_sources(base, sample=budget.PICK_SAMPLE)
    rec = budget.records_bytes(base, kept)
    limit = (budget.need(rec) + budget.need(rec, sliced=True)) // 2
    opts = api.fit_memory(base, AnalyzeOptions(max_memory=limit))
    assert opts.slice_rows == budget.SLICE_ROWS and opts.since is None and opts.range_chosen is None
    assert (
        api.fit_memory(base, AnalyzeOptions(max_memory=budget.need(rec, sliced=True) - 1)).since is not None
    )
    out = _copy(base, tmp_path / "out")
    shutil.copy(base / "files.parquet", out / "files.parquet")
    s = api.correlate(out, opts)
    assert s["slices"]["count"] == 1 and s["orphans"]["count"] == whole["orphans"]["count"]
    assert s["orphans"]["count"] + s["orphans"]["finished_in_race"] == 570
    api.diagnose(out, opts)
    html = (api.render(out, opts)["report_html"]).read_text()
    assert "correlated in 1 time slice of about 500,000 request rows" in html


def test_the_cli_says_it_sliced(tmp_path, tmp_path_factory):
    from typer.testing import CliRunner

    from conftest import LAB, need
    from logscope.cli import app
    from logscope.correlate.client_sources import kept_client_sources
    from logscope.resources import budget

    base, _ = run_lab(tmp_path_factory, "spike")
    rec = budget.records_bytes(base, kept_client_sources(base, sample=budget.PICK_SAMPLE)[0])
    limit = (budget.need(rec) + budget.need(rec, sliced=True)) // 2
    r = CliRunner().invoke(
        app, ["analyze", str(need(LAB / "spike")), "-o", str(tmp_path / "o"), "--max-memory", str(limit)]
    )
    assert r.exit_code == 0, r.output
    assert (
        "logscope: note: correlated in 1 time slice of about 500,000 request rows each, to bound memory"
        in " ".join(r.output.split())
    )
    assert (
        json.loads((tmp_path / "o" / "correlation.json").read_text())["retry_multiplication"][
            "logical_requests"
        ]
        == 284
    )


def test_every_log_has_its_ids_in_the_probe(tmp_path, tmp_path_factory, monkeypatch):
    """One id in k alone can miss a small log altogether (calm, one id in 558: no log matched, every clock left
    as logged); the first ids of each client and vLLM log are always probed, so each gets its estimate."""
    base, _ = run_lab(tmp_path_factory, "calm")
    monkeypatch.setattr(slices, "PROBE_ROWS", 1)
    verified = {}
    for per_source in (0, 20):
        monkeypatch.setattr(slices, "PER_SOURCE", per_source)
        s = correlate(_copy(base, tmp_path / f"p{per_source}"), AnalyzeOptions(slice_rows=100))
        verified[per_source] = {o["source"]: (o["verified"], o["n_matches"]) for o in s["clock_offsets"]}
    assert not any(v for v, _ in verified[0].values())
    assert verified[20] == {
        "nginx-access.log": (True, 0),
        "vllm-server.log": (True, 20),
        "client-calm.jsonl": (True, 20),
    }
