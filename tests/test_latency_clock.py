"""Every request row names the clock of its latencies (requests.latency_clock / latency_source), keeps the caller's
figures where a client measured them, and gives the gateway's own span beside them (gateway_e2e_s): the gap between
two clocks is a figure, never a mix. The windows' percentiles are on one clock, named (windows.latency_clock).
Before, a folder whose client log covered part of the run mixed the callers' e2e with the gateway's in its windows."""

from __future__ import annotations

import re
import shutil

import polars as pl
import pytest
from test_correlate import run_lab

from conftest import DATA, LAB, need
from logscope import schemas
from logscope.api import AnalyzeOptions, correlate, ingest
from logscope.correlate import correlate_tables, ingest_tables

_NGINX = re.compile(r'msec=([\d.]+) .*?client_rid="([^"]*)".*? rt=([\d.]+)')


def _gateway_spans(run: str) -> pl.DataFrame:
    """Per client id, the gateway's span from the raw access log: first (msec - $request_time) to last msec."""
    rows = [
        (crid, float(msec) - float(rt), float(msec))
        for msec, crid, rt in _NGINX.findall((need(LAB / run) / "nginx-access.log").read_text())
    ]
    df = pl.DataFrame(rows, schema=["logical_request_id", "g0", "g1"], orient="row")
    return df.group_by("logical_request_id").agg((pl.col("g1").max() - pl.col("g0").min()).alias("raw"))


@pytest.mark.parametrize("run", ["retry-storm", "orphan"])
def test_client_rows_keep_the_callers_clock_and_the_gateways_beside(tmp_path_factory, run):
    out, _ = run_lab(tmp_path_factory, run)
    req = pl.read_parquet(out / "requests.parquet")
    assert req.columns == list(schemas.TABLES["requests"])
    with_figure = req.filter(pl.col("ttft_s").is_not_null() | pl.col("e2e_s").is_not_null())
    assert set(with_figure["latency_clock"]) == {"client"} and set(with_figure["latency_source"]) == {
        "client_records"
    }
    assert req.filter(pl.col("ttft_s").is_null() & pl.col("e2e_s").is_null())[
        "latency_clock"
    ].null_count() == (req.height - with_figure.height)
    j = req.join(_gateway_spans(run), on="logical_request_id")
    assert j.height == req.height
    # nginx's times are milliseconds: the span computed again from them, to a few of them
    assert (j["gateway_e2e_s"] - j["raw"]).abs().max() < 0.005
    ok = j.filter(pl.col("outcome") == "ok")
    # the caller's e2e holds the gateway's span and the network on either side: a few milliseconds more
    gap = ok["e2e_s"] - ok["gateway_e2e_s"]
    assert 0 <= gap.median() < 0.05 and (gap > -0.01).all()
    w = pl.read_parquet(out / "windows.parquet")
    assert set(w["latency_clock"]) == {"client"}


@pytest.mark.parametrize("source", ["ladder", "aiperf"])
def test_a_load_tests_records_are_its_own_source(tmp_path_factory, tmp_path, source):
    """vllm bench's per-request results (the ladder, through nginx) and AIPerf's profile export (straight to a
    server): the callers' clock, from a load test."""
    if source == "ladder":
        out, _ = run_lab(tmp_path_factory, "ladder")
    else:
        src = tmp_path / "in"
        src.mkdir()
        shutil.copy(need(DATA / "clients" / "aiperf-profile_export.jsonl"), src)
        out = tmp_path / "out"
        ingest(src, out, AnalyzeOptions())
        correlate(out)
    req = pl.read_parquet(out / "requests.parquet")
    got = req.filter(pl.col("latency_clock").is_not_null())
    assert (
        got.height > 0
        and set(got["latency_clock"]) == {"client"}
        and set(got["latency_source"]) == {"load_test"}
    )


def test_gateway_rows_are_on_the_gateways_clock(tmp_path_factory):
    """The crash run without its client log: every logical request is the gateway's, on its clock, e2e its span."""
    out, _ = run_lab(tmp_path_factory, "crash")
    tabs = ingest_tables.read_tables(out)
    for name in ("client_attempts", "client_requests"):
        tabs[name] = schemas.empty(name)
    res = correlate_tables(tabs)
    req = res.requests
    assert set(req["origin"]) == {"gateway"} and set(req["latency_clock"]) == {"gateway"}
    assert set(req["latency_source"]) == {"gateway_log"}
    assert (req["e2e_s"] - req["gateway_e2e_s"]).abs().max() < 1e-9
    assert set(res.windows["latency_clock"]) == {"gateway"}


def test_windows_never_mix_two_clocks(tmp_path):
    """The storm's client log cut at 60 % (the client killed then): the requests after it are the gateway's, on its
    clock; the windows' percentiles stay on the callers' clock, and hold none where only the gateway timed them."""
    src = need(LAB / "retry-storm")
    folder = tmp_path / "in"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("client-*"))
    lines = (src / "client-storm.jsonl").read_text().splitlines(keepends=True)
    (folder / "client-storm.jsonl").write_text("".join(lines[: int(len(lines) * 0.6)]))
    ingest(folder, tmp_path / "out", AnalyzeOptions())
    correlate(tmp_path / "out")
    req = pl.read_parquet(tmp_path / "out" / "requests.parquet")
    assert {"client", "gateway"} <= set(req["latency_clock"].drop_nulls())
    w = pl.read_parquet(tmp_path / "out" / "windows.parquet")
    assert set(w["latency_clock"]) == {"client"}
    last_client = req.filter(pl.col("latency_clock") == "client")["ts_start"].max()
    after = w.filter(pl.col("ts") > last_client)
    assert after.height and after["e2e_p50"].null_count() == after.height
