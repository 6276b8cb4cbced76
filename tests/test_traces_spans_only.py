"""A folder holding only spans gets the diagnosis its spans support (correlate/span_sources.py), on the lab's two
traced runs: their OTLP files alone, copied out of the recordings (truth.json / notes.md figures)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze


def _only(tmp: Path, run: str, files: tuple[str, ...]) -> Path:
    src = tmp / "in"
    src.mkdir()
    for f in files:
        shutil.copy2(need(LAB / run / f), src / f)
    analyze(src, tmp / "out", AnalyzeOptions())
    return tmp / "out"


@pytest.fixture(scope="module")
def kill(tmp_path_factory) -> Path:
    files = ("otlp-lab-client.jsonl", "otlp-vllm-a.jsonl", "otlp-vllm-b.jsonl")
    return _only(tmp_path_factory.mktemp("so2"), "traced-2r-kill", files)


def _schema_errors(out: Path) -> list[str]:
    """summary.json against logscope/summary.schema.json (its traces object declared key by key)."""
    import jsonschema

    import logscope

    schema = json.loads((Path(logscope.__file__).parent / "summary.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return [
        f"{e.json_path}: {e.message}" for e in v.iter_errors(json.loads((out / "summary.json").read_text()))
    ]


def _latency_axes(out: Path) -> set[str]:
    """The y-axis titles of the timeline's TTFT and e2e panels."""
    from logscope.report import context
    from logscope.report.load import load
    from logscope.report.summary import build

    ld = load(out)
    spec = context(ld, build(ld, AnalyzeOptions()), AnalyzeOptions())["charts"]["timeline"]
    titles = {"Time to first token", "End-to-end latency"}
    return {
        lay["encoding"]["y"]["title"]
        for v in spec["vconcat"]
        if (v.get("title") if isinstance(v.get("title"), str) else (v.get("title") or {}).get("text"))
        in titles
        for lay in v["layer"]
        if lay.get("mark", {}).get("type") == "line"
    }


def _findings(out: Path) -> list[dict]:
    return json.loads((out / "diagnosis.json").read_text())["findings"]


def test_callers_spans_are_the_client_records(kill: Path) -> None:
    req = pl.read_parquet(kill / "requests.parquet")
    # truth: 637 logical requests, 640 attempts; 582 x 200, 35 APITimeoutError, 20 APIConnectionError
    assert req.height == 637 and req["client_attempts"].sum() == 640
    assert dict(req.group_by("outcome").len().iter_rows()) == {"ok": 582, "timeout": 35, "error": 20}
    assert (req.filter(pl.col("outcome") == "ok")["e2e_s"].median() or 0) == pytest.approx(9.65, abs=0.05)
    # the caller's spans: clock client, source spans (#37's columns)
    assert set(
        req.filter(pl.col("e2e_s").is_not_null()).select("latency_clock", "latency_source").rows()
    ) == {("client", "spans")}
    notes = json.loads((kill / "correlation.json").read_text())["notes"]
    assert any(n.startswith("no client log: the callers' spans") for n in notes)
    assert _latency_axes(kill) == {"seconds (clock client)"}
    kinds = {f["kind"] for f in _findings(kill)}
    assert "errors" in kinds and "retries" in kinds
    assert not any(f["title"].startswith("Nothing to diagnose") for f in _findings(kill))


def test_vllm_spans_alone_give_engine_requests_and_latency(tmp_path: Path) -> None:
    out = _only(tmp_path, "traced-2r-kill", ("otlp-vllm-a.jsonl", "otlp-vllm-b.jsonl"))
    req = pl.read_parquet(out / "requests.parquet")
    # the 581 requests vLLM finished (a 528, b 53); what the callers got is not in the folder
    assert (
        req.height == 581 and set(req["origin"]) == {"spans (engine)"} and set(req["outcome"]) == {"unknown"}
    )
    assert req["ttft_s"].null_count() == 0
    assert set(req.select("latency_clock", "latency_source").rows()) == {("engine", "spans")}
    assert set(pl.read_parquet(out / "windows.parquet")["latency_clock"].drop_nulls()) == {"engine"}
    # the surviving replica's queue after b died: TTFT on the engine's clock far above the 2 s SLO
    assert req["ttft_s"].max() > 50
    slow = [f for f in _findings(out) if f["kind"] == "latency"]
    # no stats line, no metric: the queue is the spans' time_in_queue, never "no queue" for want of a figure
    assert slow and all(
        f["cause"].startswith("requests queue before they are admitted: vLLM's spans") for f in slow
    )
    # the timeline's TTFT and e2e name their clock
    assert _latency_axes(out) == {"seconds (clock engine)"}
    # what the callers got is not in the folder: said so, not "no HTTP answer"
    md = (out / "summary.md").read_text()
    assert "| unknown | no caller's or gateway's record | 581 |" in md
    assert _schema_errors(out) == []
    # every latency sentence names its clock: the symptom, the episode's evidence and its figures (#37 item 3;
    # the symptom read 'TTFT p95 above 2 s', the figures 'TTFT p95 6.98 s' with no clock)
    assert all(f["symptom"].startswith("TTFT p95 (engine clock, spans) above 2 s for ") for f in slow)
    assert all("TTFT p95 (engine clock, spans) 03:" in f["evidence"] for f in slow)
    assert all(" s (engine clock, " in f["evidence"] and "clock unknown" not in f["evidence"] for f in slow)
    # after the death, a's queue: its figures are those of the requests started inside the episode (its times are
    # written to the millisecond): 133 since the episode is its slow requests themselves (diagnose/slow.py), 140 when
    # it was a run of 2 s windows
    ep = slow[-1]
    inside = req.filter(
        pl.col("ts_start").is_between(
            datetime.fromisoformat(ep["start"].replace("Z", "+00:00")),
            datetime.fromisoformat(ep["end"].replace("Z", "+00:00")) + timedelta(milliseconds=1),
        )
    )
    ttft = inside["ttft_s"].quantile(0.95, "linear")
    last = ep["cause"]
    assert f"of {inside.height} requests: time in queue p95 " in last and f"TTFT p95 {ttft:.2f} s" in last, (
        last
    )
    assert inside.height == 133 and 58 < ttft < 59 and "clock engine" in last
    assert not any("outside the engine" in f["cause"] for f in _findings(out))
    # no caller's or gateway's record: whether a caller left is unknown, not "no caller left"
    diag = json.loads((out / "diagnosis.json").read_text())
    [canc] = [c for c in diag["claims"] if c["id"] == "cancellation"]
    assert canc["state"] == "not observed" and "whether a caller left is unknown" in canc["sentence"]
    assert "no caller left" not in md and "no caller left" not in (out / "report.html").read_text()


def test_one_replica_spans_alone(tmp_path: Path) -> None:
    out = _only(tmp_path, "traced-1r", ("otlp-lab-client.jsonl", "otlp-vllm-a.jsonl"))
    req = pl.read_parquet(out / "requests.parquet")
    # truth: 303 logical requests, 312 attempts (9 timed out at 3 s and were retried), all ended 200
    assert req.height == 303 and req["client_attempts"].sum() == 312
    assert dict(req.group_by("outcome").len().iter_rows()) == {"ok": 303}
    assert set(req.select("latency_clock", "latency_source").rows()) == {("client", "spans")}
    assert [f["kind"] for f in _findings(out)] == ["retries"]
