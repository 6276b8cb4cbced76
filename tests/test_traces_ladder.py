"""The split of the callers' time per ladder step from spans, on the lab's traced-ladder (one traced vLLM 0.32
replica behind nginx, closed-loop concurrency 1, 4, 8, 16, 32 for 60 s each, streaming, 1,239 requests, every one
with an engine span). The figures asserted are its truth.json "purpose.steps", computed by the lab from the raw
files: per step the engine span's TTFT (clock engine, source spans), the callers' own TTFT from their records
(clock client), the per-request gap between them, the queue, the time before the engine and the callers' e2e."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze

RUN = LAB / "traced-ladder"
MS = 0.051  # truth.json keeps seconds to 4 decimals: 0.05 ms either way


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("tladder")
    shutil.copytree(need(RUN), base / "in")
    analyze(base / "in", base / "out", AnalyzeOptions())
    return base / "out"


def schema_errors(out: Path) -> list[str]:
    import jsonschema

    import logscope

    schema = json.loads((Path(logscope.__file__).parent / "summary.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return [
        f"{e.json_path}: {e.message}" for e in v.iter_errors(json.loads((out / "summary.json").read_text()))
    ]


def _truth() -> list[dict]:
    return json.loads((RUN / "truth.json").read_text())["purpose"]["steps"]


def _steps(out: Path) -> list[dict]:
    segs = json.loads((out / "diagnosis.json").read_text())["spans"]["segments"]
    return [s for s in segs if s["kind"] == "ladder step"]


def test_each_step_has_the_engine_spans_and_the_callers_ttft(out: Path) -> None:
    steps, truth = _steps(out), _truth()
    assert (
        [s["requests"] for s in steps] == [t["with_engine_span"] for t in truth] == [47, 130, 294, 420, 348]
    )
    assert [s["segment"] for s in steps][-1] == "step 5 (concurrency 32)"
    for s, t in zip(steps, truth, strict=True):
        L = s["latencies"]
        assert (L["ttft"]["clock"], L["ttft"]["source"]) == ("engine", "spans")
        assert (L["caller_ttft"]["clock"], L["caller_ttft"]["source"]) == ("client", "client_records")
        assert L["caller_minus_engine_ttft"]["clock"] == "client - engine"
        for metric, key in (
            ("ttft", "spans_ttft"),
            ("caller_ttft", "callers_ttft"),
            ("caller_minus_engine_ttft", "callers_minus_spans_ttft"),
            ("queue", "spans_queue"),
            ("before_engine", "before_engine"),
            ("caller_e2e", "callers_e2e"),
        ):
            for q in ("p50", "p95"):
                # the callers' e2e is their request span here, the truth's their JSONL record: 0.2 ms apart at most
                tol = 0.2 if metric == "caller_e2e" else MS
                assert L[metric][f"{q}_ms"] == pytest.approx(t[f"{key}_{q}_s"] * 1000, abs=tol), (
                    s["segment"],
                    metric,
                )
    # at c=32 the engine's queue is where the time went: 4.63 s p95 against none below
    assert steps[-1]["latencies"]["queue"]["p95_ms"] == pytest.approx(4631.0, abs=1)
    assert all(s["latencies"]["queue"]["p95_ms"] < 1 for s in steps[:-1])


def test_the_split_per_step_adds_up_to_the_callers_time(out: Path) -> None:
    """Means add up: the parts of each step make its callers' mean e2e (their request span). The answer's way back is
    measured from the request span's end, not from the streaming attempt's httpx span, which ends at the headers
    (notes.md: that one gives a negative 'after the engine')."""
    for s in _steps(out):
        parts = {p["part"]: p for p in s["split"]}
        assert sum(p["mean_ms"] for p in s["split"]) == pytest.approx(
            s["latencies"]["caller_e2e"]["mean_ms"], rel=0.01
        ), s["segment"]
        assert parts["after the engine (the answer's way back)"]["mean_ms"] > 0
        assert all(p["n"] == s["requests"] for p in s["split"])
    first, last = _steps(out)[0], _steps(out)[-1]
    q = lambda s: next(p["mean_ms"] for p in s["split"] if p["part"] == "queue")  # noqa: E731
    assert q(first) < 0.1 and q(last) > 1000  # c=1 never queues; at c=32 a request waits ~1 s on average


def test_every_output_says_the_same_per_step(out: Path) -> None:
    """diagnosis.json's spans are the one object: summary.json, summary.md and the report render it."""
    assert schema_errors(out) == []
    steps = _steps(out)
    summ = [
        g
        for g in json.loads((out / "summary.json").read_text())["traces"]["segments"]
        if g["kind"] == "ladder step"
    ]
    for s, g in zip(steps, summ, strict=True):
        assert g["segment"] == s["segment"]
        for m in ("ttft", "caller_ttft", "caller_minus_engine_ttft", "queue", "caller_e2e"):
            assert g[f"{m}_p95_ms"] == s["latencies"][m]["p95_ms"]
        assert g["split_mean_ms"] == {p["part"]: p["mean_ms"] for p in s["split"]}
    md = (out / "summary.md").read_text()
    assert (
        "| step 5 (concurrency 32) | 348 | 1.1 s / 4.71 s | 1.56 s / 5.02 s | 1.34 s | 4.63 s | 10.7 s |"
        in md
    )
    assert "| step 1 (concurrency 1) | 47 | 22.1 ms / 494 ms | 82.7 ms / 582 ms | 285 ms |" in md
    page = (out / "report.html").read_text()
    section = page[page.index("Where the callers' time went") :]
    assert (
        '<span class="small muted">engine</span> <span class="nowrap">1.1 s / 4.71 s</span><br>'
        '<span class="small muted">callers</span> <span class="nowrap">1.56 s / 5.02 s</span>'
    ) in section


def test_every_clock_shifted_keeps_each_steps_figures(out: Path, tmp_path: Path) -> None:
    """Metamorphic: every time of the folder (logs, metrics, the client's records, the spans' UnixNano) moved by
    one odd offset: the same ladder steps, each with the same requests and the same figures on each clock."""
    from datetime import timedelta

    from metamorphic import copy_shifted

    copy_shifted(RUN, tmp_path / "in", timedelta(days=1, hours=3, minutes=17, seconds=13))
    analyze(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    a, b = _steps(out), _steps(tmp_path / "out")
    assert [(s["segment"], s["requests"]) for s in b] == [(s["segment"], s["requests"]) for s in a]
    for x, y in zip(a, b, strict=True):
        for m in ("ttft", "caller_ttft", "caller_minus_engine_ttft", "queue", "before_engine", "caller_e2e"):
            assert y["latencies"][m]["p95_ms"] == pytest.approx(x["latencies"][m]["p95_ms"], abs=1e-3), m
