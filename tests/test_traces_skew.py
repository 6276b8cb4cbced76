"""An engine's clock off its callers' (issue #38): "before the engine" and "after the engine" subtract two
processes' stamps, so an offset between the hosts' clocks lands in the split of the callers' time undetected. The
spans' nesting bounds it (an engine span cannot start before its parent attempt nor end after its caller's
request span): on the lab's traced runs (one host) the bounds hold 0, a few ms wide; one replica's span file, or
the client's, moved by a few whole seconds (a tmp copy) is measured to the millisecond, removed, and named in
every output, and the verdicts, the joins and each segment's requests hold. A clock that steps during the run
fits no single offset: the split is unknown, with the estimate and how it was measured."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from metamorphic import copy, shift_text


def _run(src: Path, dest: Path, moved: str | None = None, secs: float = 0.0, from_line: int = 0) -> tuple:
    """A copy of ``src`` with the OTLP file ``moved`` shifted by ``secs`` (whole tokens, from its line
    ``from_line`` on: a clock stepped between two exports), analyzed."""
    copy(need(src), dest / "in")
    if moved:
        p = dest / "in" / moved
        lines = p.read_text().splitlines(keepends=True)
        shifted = shift_text("".join(lines[from_line:]), timedelta(seconds=secs))
        p.write_text("".join(lines[:from_line]) + shifted)
    analyze(dest / "in", dest / "out", AnalyzeOptions())
    return dest / "out", json.loads((dest / "out" / "summary.json").read_text())


def _skews(summary: dict) -> dict[str, dict]:
    return {k["service"]: k for k in summary["traces"]["clock_skew"]}


@pytest.mark.parametrize(
    ("run", "lo_ms", "hi_ms", "gw_lo", "gw_hi"),
    [
        ("traced-1r", -2.065, 1.583, -1.837, 1.409),
        ("traced-2r-kill", -1.480, 1.313, -1.717, 1.706),
        ("traced-ladder", -0.995, 1.281, -1.511, 1.409),
    ],
)
def test_one_host_the_spans_nesting_holds_no_offset(
    tmp_path, rendered, run, lo_ms, hi_ms, gw_lo, gw_hi
) -> None:
    """The lab's runs, client and engine on one host: no engine span starts before its parent or ends after its
    caller; the offset lies within a few ms of 0 (the smallest gateway + network time each way). The gateway's
    access lines likewise start inside their attempt spans: its clock agrees with the client's within nginx's
    millisecond stamps."""
    out, summary = _run(LAB / run, tmp_path)
    sk = _skews(summary)
    a = sk["vllm-a"]
    assert (a["status"], a["offset_ms"], a["starts_before_parent"], a["ends_after_caller"]) == (
        "agree",
        None,
        0,
        0,
    )
    assert a["lo_ms"] == pytest.approx(lo_ms, abs=0.01) and a["hi_ms"] == pytest.approx(hi_ms, abs=0.01)
    assert all(k["status"] == "agree" for k in sk.values()) and a["clock"] == "engine - client"
    seen = rendered(out, summary)
    for name in ("summary.md", "report.html"):
        assert a["note"] in seen[name], name
    assert "clock runs" not in seen["terminal"] and "unknown: client and engine" not in seen["terminal"]
    g = summary["traces"]["gateway_clock"]
    assert (g["service"], g["clock"], g["status"], g["starts_before_parent"], g["ends_after_caller"]) == (
        "nginx-access.log",
        "gateway - client",
        "agree",
        0,
        0,
    )
    assert g["lo_ms"] == pytest.approx(gw_lo, abs=0.01) and g["hi_ms"] == pytest.approx(gw_hi, abs=0.01)
    for name in ("summary.md", "report.html"):
        assert g["note"] in seen[name], name


def _waterfall(out: Path) -> tuple[dict[tuple, tuple[float, float]], dict[tuple, float], list[str]]:
    """report.html's waterfall: (request, lane, n-th bar of its lane) -> (from, to), (request, marker) -> where,
    in seconds from the row's first span; and each row's clock as the chart names it."""
    import re

    page = (out / "report.html").read_text()
    spec = json.loads(re.search(r'id="spec-waterfall"[^>]*>(.*?)</script>', page, re.S).group(1))
    bars: dict[tuple, tuple[float, float]] = {}
    marks: dict[tuple, float] = {}
    for chart in spec["vconcat"]:
        title, n = chart["title"]["text"], {}
        for bar in chart["layer"][0]["data"]["values"]:
            n[bar["lane"]] = n.get(bar["lane"], 0) + 1
            bars[(title, bar["lane"], n[bar["lane"]])] = (bar["x"], bar["x2"])
        for layer in chart["layer"][1:]:
            for m in layer["data"]["values"]:
                marks[(title, m["label"].split(" (moved")[0])] = m["x"]
    return bars, marks, [chart["title"]["subtitle"] for chart in spec["vconcat"]]


def _split(summary: dict) -> dict[str, dict[str, float | None]]:
    return {g["segment"]: g["split_mean_ms"] for g in summary["traces"]["segments"]}


@pytest.mark.parametrize(
    ("run", "moved", "secs", "service"),
    [
        ("traced-2r-kill", "otlp-vllm-b.jsonl", 3.0, "vllm-b"),  # one replica's clock ahead
        ("traced-ladder", "otlp-lab-client.jsonl", -4.0, "vllm-a"),  # the client's behind: the engine's ahead
        ("traced-1r", "otlp-vllm-a.jsonl", -2.0, "vllm-a"),  # the only replica's behind
        ("traced-ladder-kill", "otlp-vllm-a.jsonl", 3.0, "vllm-a"),  # ahead, and SIGKILLed: 33 spans lost
    ],
)
def test_a_clock_offset_is_measured_removed_and_named(tmp_path, rendered, run, moved, secs, service) -> None:
    """Before, the split carried the shift whole (traced-2r-kill: 'before the engine' +3 s on b's requests) and
    nothing named it."""
    base, a = _run(LAB / run, tmp_path / "base")
    out, b = _run(LAB / run, tmp_path / "moved", moved, secs)
    off = secs if moved.startswith("otlp-vllm") else -secs
    k = _skews(b)[service]
    assert k["status"] == "corrected" and k["offset_ms"] == pytest.approx(off * 1000, abs=5)
    assert k["lo_ms"] <= off * 1000 <= k["hi_ms"] and k["hi_ms"] - k["lo_ms"] < 10
    # the spans' own facts: every span of that engine out of its parent or its caller, one way
    assert max(k["starts_before_parent"], k["ends_after_caller"]) == k["requests"]
    assert {s: x["status"] for s, x in _skews(b).items() if s != service} == {
        s: x["status"] for s, x in _skews(a).items() if s != service
    }
    # the verdicts, the joins, the reasons and each segment's requests hold; the split within the offset's spread
    assert b["verdict"] == a["verdict"] and [f["title"] for f in b["findings"]] == [
        f["title"] for f in a["findings"]
    ]
    skip = ("segments", "stops", "clock_skew", "gateway_clock")
    assert {x: v for x, v in b["traces"].items() if x not in skip} == {
        x: v for x, v in a["traces"].items() if x not in skip
    }
    assert [(g["segment"], g["requests"]) for g in b["traces"]["segments"]] == [
        (g["segment"], g["requests"]) for g in a["traces"]["segments"]
    ]
    sa, sb = _split(a), _split(b)
    for seg, parts in sa.items():
        for part, ms in parts.items():
            assert sb[seg][part] == pytest.approx(ms, abs=5.0), (seg, part)
    # the whole range holds that engine's requests: its difference of two clocks names the offset removed
    label = "engine - client, the engine's clock offset removed (traces.clock_skew)"
    whole = b["traces"]["segments"][0]
    assert whole["clocks"]["before the engine (gateway + API server + network)"] == label
    assert whole["clocks"]["after the engine (the answer's way back)"] == label.replace(
        "engine - client", "client - engine"
    )
    # the gateway's log against the client's spans: measured the same way, moved when the client's clock is
    ga, gb = a["traces"]["gateway_clock"], b["traces"]["gateway_clock"]
    assert ga["status"] == "agree"
    if moved.startswith("otlp-vllm"):
        assert gb == ga
    else:
        assert gb["status"] == "corrected" and gb["offset_ms"] == pytest.approx(-secs * 1000, abs=3)
        assert gb["lo_ms"] <= -secs * 1000 <= gb["hi_ms"] and gb["clock"] == "gateway - client"
    # report.html's waterfall on one clock: every bar (engine, gateway log) and marker (a log's stop, a replica's
    # last exported span) where the unshifted run has it, and the moved source named under each row it is in
    (wa, ma, _), (wb, mb, names) = _waterfall(base), _waterfall(out)
    assert wa.keys() == wb.keys() and {lane for _, lane, _ in wa} >= {"engine", "gateway"}
    for key, (x, x2) in wa.items():
        assert wb[key][0] == pytest.approx(x, abs=0.005) and wb[key][1] == pytest.approx(x2, abs=0.005), key
    assert ma.keys() == mb.keys() and (bool(ma) == ("kill" in run))
    for key, x in ma.items():
        assert mb[key] == pytest.approx(x, abs=0.005), key
    assert all(n.startswith("clock client (seconds from the first span)") for n in names)
    said = (
        f"{service}'s spans {-k['offset_ms'] / 1000:+.3f} s"
        if moved.startswith("otlp-vllm")
        else f"gateway log {-gb['offset_ms'] / 1000:+.3f} s"
    )
    assert any(said in n for n in names), names
    seen = rendered(out, b)
    for name in ("summary.md", "report.html", "terminal"):
        assert k["note"] in seen[name], name
    assert f"{service}'s clock runs {k['offset_ms'] / 1000:+.3f} s against its callers'" in k["note"]


def test_a_clock_that_steps_fits_no_offset_and_leaves_the_split_unknown(tmp_path, rendered) -> None:
    """traced-1r's engine spans from its 20th export on moved 3 s (the clock stepped between two exports): the
    early requests bound the offset near 0, the late ones near +3 s; no single offset fits, so the time before
    and after the engine is unknown (not a mean of the two), named in every output; the verdict holds."""
    _, a = _run(LAB / "traced-1r", tmp_path / "base")
    out, b = _run(LAB / "traced-1r", tmp_path / "moved", "otlp-vllm-a.jsonl", 3.0, from_line=20)
    k = _skews(b)["vllm-a"]
    assert k["status"] == "unknown" and k["offset_ms"] is None and k["lo_ms"] > k["hi_ms"]
    assert k["note"].startswith("unknown: client and engine (vllm-a) clocks differ by ~")
    assert "no single offset fits every request" in k["note"]
    whole = b["traces"]["segments"][0]
    assert whole["split_mean_ms"]["before the engine (gateway + API server + network)"] is None
    assert whole["split_mean_ms"]["after the engine (the answer's way back)"] is None
    assert whole["split_mean_ms"]["queue"] == pytest.approx(
        a["traces"]["segments"][0]["split_mean_ms"]["queue"]
    )
    assert b["verdict"] == a["verdict"]
    # the waterfall cannot put vllm-a's spans on the client's clock: each row with them says so
    names = _waterfall(out)[2]
    assert names and all("not moved: vllm-a's spans on its own clock (offset unknown)" in n for n in names)
    seen = rendered(out, b)
    for name in ("summary.md", "report.html", "terminal"):
        assert k["note"] in seen[name], name


@pytest.mark.parametrize("run", ["traced-1r", "traced-2r-kill"])
def test_a_client_clock_that_steps_leaves_the_waterfall_rows_naming_what_is_not_moved(
    tmp_path, rendered, run
) -> None:
    """The client's spans from its 10th export on moved 3 s: neither the engine's nor the gateway log's offset to
    the client's fits a single value, so neither is moved onto the client's clock, and every row of report.html's
    waterfall says so (the gateway's measured, unknown, named in every output); the verdict holds."""
    _, a = _run(LAB / run, tmp_path / "base")
    out, b = _run(LAB / run, tmp_path / "moved", "otlp-lab-client.jsonl", 3.0, from_line=10)
    g = b["traces"]["gateway_clock"]
    assert g["status"] == "unknown" and g["offset_ms"] is None and g["lo_ms"] > g["hi_ms"]
    assert g["note"].startswith("unknown: client and gateway (nginx-access.log) clocks differ by ~")
    assert "no single offset fits every attempt" in g["note"] and g["starts_before_parent"] > 0
    assert all(k["status"] == "unknown" for k in b["traces"]["clock_skew"]) and b["verdict"] == a["verdict"]
    names = _waterfall(out)[2]
    assert names and all(
        "not moved: " in n and "gateway log and log stops on the logs' own clock (offset unknown)" in n
        for n in names
    )
    seen = rendered(out, b)
    for name in ("summary.md", "report.html", "terminal"):
        assert g["note"] in seen[name], name
