"""traced-ladder-kill (lab, 2026-12-07, notes.md): a traced closed-loop ladder (c=1, 4, 16) on the only vLLM replica,
its process group SIGKILLed 30 s into the c=16 step. The second real sample of "spans lost" (traced-2r-kill: 1) and
of the engine spans checked against vLLM's histograms per ladder step (traced-ladder: 25 of 25 agree).

From the raw files: 365 requests ended on 127.0.0.1:8001 before the kill, 332 with an engine span, the last of them
at 11:15:54.741 (nginx); the 33 others all ended with 200 after it (11:15:55.056 to 11:15:58.399), less than 5 s
before vLLM's log stops (11:15:58): the batch vLLM had not exported."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze

RUN = LAB / "traced-ladder-kill"
KILL = datetime(2026, 12, 7, 11, 15, 59, 20000, tzinfo=UTC).timestamp()  # events.jsonl vllm_sigkill


@pytest.fixture(scope="module")
def tlk(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tlk") / "out"
    analyze(need(RUN), out, AnalyzeOptions())
    return out, json.loads((out / "summary.json").read_text())


def _raw() -> tuple[dict[str, tuple[float, int]], set[str]]:
    """nginx's $request_id -> (msec at the line's end, status) on :8001 before the kill; the ids vLLM's spans name."""
    ends = {}
    for line in (RUN / "nginx-access.log").read_text().splitlines():
        m = re.search(r'msec=(\S+) rid=(\S+) .*? status=(\d+) .* ua="([^"]*)"', line)
        if m and m[4].split(", ")[-1] == "127.0.0.1:8001" and float(m[1]) < KILL:
            ends[m[2]] = (float(m[1]), int(m[3]))
    ids = set()
    for line in (RUN / "otlp-vllm-a.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for sp in (sp for ss in rs["scopeSpans"] for sp in ss["spans"]):
                for kv in sp.get("attributes", []):
                    if kv["key"] == "gen_ai.request.id":
                        ids.add(kv["value"]["stringValue"].split("-")[1])  # cmpl-<nginx id>-0-<hex>
    return ends, ids


def _hms(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]


def test_the_batch_a_killed_replica_had_not_exported(tlk, rendered) -> None:
    out, summary = tlk
    ends, ids = _raw()
    covered = max(t for k, (t, _) in ends.items() if k in ids)
    lost = sorted(t for k, (t, s) in ends.items() if k not in ids and s == 200 and t > covered)
    assert (len(ends), len(ids), _hms(covered), len(lost)) == (365, 332, "11:15:54.741", 33)
    tr = summary["traces"]
    assert tr["no_engine_span"]["by_class"] == {"cut by death": 16, "never reached": 171, "spans lost": 33}
    ev = f"the last request its spans cover ended at {_hms(covered)} (the gateway's line)"
    assert ev in tr["stops"][0]["evidence"]
    why = tr["no_engine_span"]["examples"]["spans lost"]
    assert f"finished on vllm-server at {_hms(lost[0])}" in why and f"spans cover ({_hms(covered)})" in why
    seen = rendered(out, summary)
    for name in ("summary.md", "report.html"):
        assert ev in seen[name] and why in seen[name], name
    assert "spans lost 33" in seen["terminal"]


def test_engine_spans_against_the_histograms_of_each_finished_step(tlk, rendered) -> None:
    """Three steps with spans and histograms, five figures each: 12 agree; each of the 3 that do not is named with
    both figures (the spans and the histogram over a step count requests a little apart at its edges: 62 and 59 at
    c=1), never averaged away. The clocks agree: one host."""
    out, summary = tlk
    hc = summary["traces"]["histogram_check"]
    assert (hc["checked"], hc["agree"], hc["clock"]) == (15, 12, "engine")
    assert hc["disagree"] == [
        "step 1 (concurrency 1) e2e: spans 1.434 s over 62 requests, vllm:e2e_request_latency_seconds 1.5–2 s over 59",
        "step 1 (concurrency 1) prefill: spans 0.181 s over 62 requests, vllm:request_prefill_time_seconds 0.3–0.5 s "
        "over 59",
        "step 2 (concurrency 4) decode: spans 2.678 s over 144 requests, vllm:request_decode_time_seconds 2–2.5 s over "
        "143",
    ]
    assert [k["status"] for k in summary["traces"]["clock_skew"]] == ["agree"]
    seen = rendered(out, summary)
    for name in ("summary.md", "report.html"):
        assert "12 of 15 figures fall in the histogram's bucket" in seen[name], name
        assert all(d in seen[name] for d in hc["disagree"]), name
