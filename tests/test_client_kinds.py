"""One request is one logical request, whichever kind of client record tells of it (README, "A request in flight
when its client's log ended ... is unfinished, counted once").

killed-debug (/work/lab-runs, 2026-12-06): a client SIGKILLed in an overload with 490 requests in flight, whose
folder holds only its openai-python DEBUG log (the JSONL was moved out; truth.json "purpose" was computed from it).
Before: the 490 were 'unknown', never 'unfinished' (unfinished: 0).

A killed client's log is what it wrote until it died: the lab runs that hold both the client's JSON lines and its
DEBUG log, each cut at the same instant, are the same client killed then, seen through either record kind (on
overload-long, a starved host, the client's pool sent some requests 1-3 s after logging 'Sending HTTP Request'). Before,
the DEBUG log (which names a request only when it finishes) counted each request in flight twice, once from its
send and once from the gateway's line: the storm cut at 60 % gave 753 logical requests where its JSON lines give
653, 153 'never reached vLLM' for 53, amplification 1.21 for 1.40."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze, correlate, ingest

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)")


def _jsonl_time(line: str) -> float:
    d = json.loads(line)
    return max(v for k, v in d.items() if k in ("t", "send", "end") and isinstance(v, int | float))


def _log_time(line: str) -> float | None:
    m = _STAMP.match(line)
    return datetime.fromisoformat(m[1]).replace(tzinfo=UTC).timestamp() if m else None


def _prefix(path, when, t_cut: float) -> str:
    """The file as its writer left it when killed at ``t_cut``: its lines up to the first stamped at or after."""
    lines = path.read_text().splitlines(keepends=True)
    k = next((i for i, x in enumerate(lines) if (t := when(x)) is not None and t >= t_cut), len(lines))
    return "".join(lines[:k])


def _figures(out) -> dict:
    s = json.loads((out / "correlation.json").read_text())
    req = pl.read_parquet(out / "requests.parquet")
    rm, o = s["retry_multiplication"], s["orphans"]
    return {
        "layers": {
            k: rm[k] for k in ("logical_requests", "client_attempts", "gateway_requests", "server_requests")
        },
        "amplification": rm["amplification"],
        "by_origin": rm["by_origin"],
        "outcomes": dict(sorted(req["outcome"].value_counts().iter_rows())),
        "never_reached_vllm": req.filter(pl.col("server_requests") == 0).height,
        "abandoned": o["abandoned"],
        "by_class": {k: (c["abandoned"], c["aborted"], c["ran_on"]) for k, c in o["by_class"].items()},
    }


@pytest.mark.parametrize(
    "run, share",
    [
        ("retry-storm", 0.6),
        ("orphan", 0.6),
        ("retry-storm", 0.3),
        ("overload-long", 0.6),
        ("overload-long", 0.3),
    ],
)
def test_a_killed_client_is_counted_alike_from_either_log(tmp_path, run, share):
    src = need(LAB / run)
    [jsonl], [log] = src.glob("client-*.jsonl"), src.glob("client-*.log")
    times = [_jsonl_time(x) for x in jsonl.read_text().splitlines()]
    t_cut = min(times) + (max(times) - min(times)) * share
    got = {}
    for kind, path, when in (("jsonl", jsonl, _jsonl_time), ("debug log", log, _log_time)):
        folder = tmp_path / kind.replace(" ", "-")
        shutil.copytree(src, folder / "in", ignore=shutil.ignore_patterns("client-*"))
        (folder / "in" / path.name).write_text(_prefix(path, when, t_cut))
        ingest(folder / "in", folder / "out", AnalyzeOptions())
        correlate(folder / "out")
        got[kind] = _figures(folder / "out")
    # what each kind records of why an attempt was left differs (the DEBUG log names each timeout; the lab's JSON
    # lines give its timeout only in the request record, missing for a request in flight): the classes may differ,
    # never the counts
    for f in got.values():
        f.pop("by_class")
    assert got["debug log"] == got["jsonl"]
    whole = {"retry-storm": 653, "orphan": 320, "overload-long": 1798}[
        run
    ]  # every request the gateway saw, once
    assert got["jsonl"]["layers"]["logical_requests"] == whole
    assert got["jsonl"]["outcomes"].get("unfinished", 0) > 0


def test_a_client_killed_with_only_its_debug_log(tmp_path):
    run = need(LAB / "killed-debug")
    truth = json.loads((run / "truth.json").read_text())["purpose"]
    analyze(run, tmp_path, AnalyzeOptions())
    f = _figures(tmp_path)
    assert f["layers"]["logical_requests"] == truth["logical_requests_sent"] == 812
    assert f["layers"]["client_attempts"] == truth["attempts"] == 812
    assert f["layers"]["server_requests"] == 812 and f["amplification"] == 1.0
    assert f["outcomes"] == {"ok": truth["answered_200"], "unfinished": truth["in_flight_at_kill"]}
    assert f["never_reached_vllm"] == truth["logical_requests_never_reached_vllm"] == 0
    # the client that stopped left them; vLLM aborted each (cancellation propagated: no proxy_ignore_client_abort)
    assert f["by_class"]["client_stopped"] == (490, truth["in_flight_at_kill_aborted_by_vllm"], 0)
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["retries"]["unfinished_requests"] == 490
    w = pl.read_parquet(tmp_path / "windows.parquet")
    assert w["arrivals"].sum() == 812
