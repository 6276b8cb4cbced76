"""A Prometheus target whose address two server logs claim is tied to the log running when it was scraped
(ingest.metric_claims). The lab's servers all listened at 127.0.0.1:8001; a calm run's log and its Prometheus dump
laid beside an incident, ten minutes before it, make one target (127.0.0.1:8001) scraped across both runs and
claimed by both logs. It was weighed against every log over its whole span and left untied: traced-2r-kill's
preemptions became episodes of their own (10 -> 19 episodes). Its scrapes now go to the claimant of their time,
and, where two claimants ran at once (the calm replica beside), to the one whose gauges it follows."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, ingest
from metamorphic import calm_hour_before, calm_replica_beside

ADDR = "127.0.0.1:8001"


def _calm_before(run: str, dest: Path, rename) -> None:
    """``run`` with the calm run's log and Prometheus dump ten minutes before it, as ``rename`` places them."""
    calm_hour_before(LAB / run, need(LAB / "calm"), dest, rename=rename)


def _prom(out: Path) -> pl.DataFrame:
    st = pl.read_parquet(out / "server_stats.parquet").filter(pl.col("origin") == "prometheus")
    return st.group_by("replica").agg(
        pl.col("ts").min().alias("lo"), pl.col("ts").max().alias("hi"), pl.col("preemptions").sum()
    )


def _notes(out: Path) -> list[str]:
    return json.loads((out / "ingest.json").read_text())["notes"]


# (run, where the calm run's files go, the incident's log replica, the calm log's replica)
CASES = [
    # the calm server's log as the rotated file of a log of another name (tests/test_metamorphic.py's transform)
    (
        "traced-2r-kill",
        lambda rel: (
            {"vllm-server.log": "vllm-server.log.1"}.get(rel)
            or ("prometheus-earlier/" + rel.split("/", 1)[1] if rel.startswith("prometheus/") else None)
        ),
        "vllm-server-a",
        "vllm-server",
    ),
    # the calm run in a folder of its own beside a one-server incident
    (
        "ladder",
        lambda rel: "earlier/" + rel if rel == "vllm-server.log" or rel.startswith("prometheus/") else None,
        "vllm-server",
        "earlier",
    ),
]


@pytest.mark.parametrize(("run", "rename", "incident", "calm"), CASES, ids=[c[0] for c in CASES])
def test_a_target_claimed_by_two_logs_of_other_times_is_the_one_running_then(
    run, rename, incident, calm, tmp_path
) -> None:
    base = tmp_path / "base"
    ingest(need(LAB / run), base, AnalyzeOptions())
    _calm_before(run, tmp_path / "in", rename)
    ingest(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    notes = _notes(tmp_path / "out")
    assert not any(n.startswith(f"metrics target {ADDR} tied to no server log") for n in notes), notes
    said = [n for n in notes if n.startswith(f"metrics instance {ADDR} scraped ")]
    assert len(said) == 2 and all("the one log claiming its address that ran then" in n for n in said), said
    assert any(
        " before " in n
        and n.endswith(f"is log replica {calm} (the one log claiming its address that ran then)")
        for n in said
    )
    assert any(" from " in n and f"is log replica {incident} (" in n for n in said)
    got, was = _prom(tmp_path / "out"), _prom(base)
    assert ADDR not in got["replica"].to_list()
    # the incident's scrapes are its log's, as without the calm run: the same rows and preemptions
    row = got.filter(pl.col("replica") == incident).row(0, named=True)
    assert row == was.filter(pl.col("replica") == incident).row(0, named=True)
    # the calm run's scrapes are its own log's, all before the incident's
    assert got.filter(pl.col("replica") == calm)["hi"][0] < row["lo"]


def test_two_claimants_at_once_are_told_apart_by_their_gauges(tmp_path) -> None:
    """The calm run's log beside traced-2r-kill over the same minutes, also saying it listens at :8001: both
    claimants ran while the target was scraped; its gauges follow replica a's (0.97), not the calm log's (0.20)."""
    calm_replica_beside(need(LAB / "traced-2r-kill"), need(LAB / "calm"), tmp_path / "in")
    ingest(tmp_path / "in", tmp_path / "out", AnalyzeOptions())
    [note] = [n for n in _notes(tmp_path / "out") if n.startswith(f"metrics instance {ADDR} ")]
    assert note.startswith(
        f"metrics instance {ADDR} is log replica vllm-server-a (its 'Starting vLLM server' address, and of the logs claiming it that ran then"
    )
    assert "(correlation 0.97, next replica-b 0.20)" in note, note
    got = _prom(tmp_path / "out")
    assert got.filter(pl.col("replica") == "vllm-server-a")["preemptions"][0] == 360  # notes.md: 'a 360'
    assert set(got["replica"]) == {"vllm-server-a", "vllm-server-b"}


def test_three_runs_on_one_address_each_get_their_own_scrapes(tmp_path) -> None:
    """tests/data/lab2: three lab runs in folders of their own, each server at 127.0.0.1:8001, each folder with its
    query_range export: one target across 13 minutes, claimed by three logs. It was left untied (1147 preemptions
    on '127.0.0.1:8001'); each run's scrapes are now its log's, with the preemptions its truth.json counts."""
    src = Path(__file__).parent / "data" / "lab2"
    ingest(src, tmp_path / "out", AnalyzeOptions())
    got = {r["replica"]: r for r in _prom(tmp_path / "out").iter_rows(named=True)}
    assert set(got) == {"client-killed", "sigterm-overload", "long-burst"}
    for run in got:
        truth = json.loads((src / run / "truth.json").read_text())["preemptions"]["total"]
        # truth counts metrics.prom.log's 2 s scrapes; the folder holds the query_range export, which reads 242 of
        # sigterm-overload's 244 (the other two: exact)
        assert abs(got[run]["preemptions"] - truth) <= 2, (run, got[run]["preemptions"], truth)
    assert sum(r["preemptions"] for r in got.values()) == 1147
    said = [n for n in _notes(tmp_path / "out") if n.startswith(f"metrics instance {ADDR} scraped ")]
    assert [n.split(" is log replica ")[1].split(" ")[0] for n in said] == [
        "client-killed",
        "sigterm-overload",
        "long-burst",
    ]
