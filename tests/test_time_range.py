"""--since / --until: correlation, diagnosis and report look at the records that overlap a time range
(logscope.resources.time_range), on the real lab recordings; every line is still read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze
from logscope.cli import app
from logscope.diagnose.thresholds import Thresholds
from logscope.resources import time_range

SCHEMA = json.loads((ROOT / "logscope" / "summary.schema.json").read_text())


def T(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(2026, 11, 29, h, m, s, tzinfo=UTC)


def _analyse(tmp_path_factory, run: str, since: str | None = None, until: str | None = None) -> Path:
    out = tmp_path_factory.mktemp(run.replace("-", "_"))
    rng = time_range.make(since, until)
    analyze(need(LAB / run), out, AnalyzeOptions(since=rng.since, until=rng.until))
    return out


@pytest.fixture(scope="module")
def storm(tmp_path_factory):
    """The retry storm whole, and from 08:30:20 to 08:31:00 (its overload, cut in the middle)."""
    return (
        _analyse(tmp_path_factory, "retry-storm"),
        _analyse(tmp_path_factory, "retry-storm", "2026-11-29T08:30:20Z", "2026-11-29 08:31:00"),
    )


def test_times_are_read_in_the_zone_given():
    assert time_range.parse_time("2026-11-29T08:30:00Z") == T("08:30:00")
    assert time_range.parse_time("2026-11-29 09:30:00+01:00") == T("08:30:00")
    assert time_range.parse_time("2026-11-29 09:30", "Europe/Paris") == T("08:30:00")  # naive: in --tz
    with pytest.raises(ValueError, match="not a date and time"):
        time_range.parse_time("yesterday")
    with pytest.raises(ValueError, match="is after --until"):
        time_range.make("2026-11-29T09:00:00Z", "2026-11-29T08:00:00Z")
    assert not time_range.make(None, None) and time_range.make(None, "2026-11-29T08:00:00Z")
    # from a notebook: datetimes, a naive one in the options' zone
    opts = AnalyzeOptions(since=datetime(2026, 11, 29, 9, 30), until=T("09:00:00"), tz="Europe/Paris")
    assert time_range.of(opts) == time_range.Range(T("08:30:00"), T("09:00:00"))


def test_a_record_is_kept_when_its_times_overlap_the_range(storm):
    """On the storm's gateway attempts: kept = any time in the range, or times straddling it, or no time."""
    whole, _ = storm
    ga = pl.read_parquet(whole / "gateway_attempts.parquet")
    rng = time_range.make("2026-11-29T08:30:20Z", "2026-11-29T08:30:21Z")
    kept = ga.filter(time_range.where("gateway_attempts", rng))
    want = ga.filter(pl.col("ts_end") >= rng.since, pl.col("ts_start") <= rng.until)
    assert kept.height == want.height > 10 and kept.equals(want)
    straddling = kept.filter(pl.col("ts_start") < rng.since, pl.col("ts_end") > rng.until)
    assert straddling.height > 0  # long requests running through the second are in it
    assert (
        time_range.where("files", rng) is None
        and time_range.where("gateway_attempts", time_range.ALL) is None
    )


def test_the_storm_analysed_over_forty_seconds(storm):
    whole, part = storm
    s = json.loads((part / "summary.json").read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(s)]
    assert errors == []
    assert s["span"]["start"] == "2026-11-29T08:30:20.000Z" and s["span"]["end"] == "2026-11-29T08:31:00.000Z"
    assert s["span"]["range"] == {"since": "2026-11-29T08:30:20.000Z", "until": "2026-11-29T08:31:00.000Z"}
    assert (s["span"]["inputs_start"], s["span"]["inputs_end"]) == (
        "2026-11-29T08:28:20.000Z",
        "2026-11-29T08:32:23.000Z",
    )
    # every line still read: the coverage is that of the whole input
    assert pl.read_parquet(part / "files.parquet").equals(pl.read_parquet(whole / "files.parquet"))
    # the requests are those that overlap the range, and every request lying inside it is there
    req, all_req = pl.read_parquet(part / "requests.parquet"), pl.read_parquet(whole / "requests.parquet")
    assert req.filter((pl.col("ts_end") < T("08:30:20")) | (pl.col("ts_start") > T("08:31:00"))).height == 0
    inside = all_req.filter(pl.col("ts_start") >= T("08:30:20"), pl.col("ts_end") <= T("08:31:00"))
    assert inside.height > 100
    assert inside["logical_request_id"].is_in(req["logical_request_id"].implode()).all()
    assert 653 > req.height >= inside.height  # 653 in the whole run
    # the overload is one sustained episode, cut by the range, and said so
    eps = [(e["class"], e["start"][11:19]) for e in s["episodes"]]
    assert eps == [("sustained", "08:30:20")]
    why = json.loads((part / "diagnosis.json").read_text())["episodes"][0]["why"]
    assert "still abnormal when the range analysed ends (--until)" in why
    ep = pl.read_parquet(part / "episodes.parquet")
    assert ep["start"].min() >= T("08:30:20") and ep["end"].max() <= T("08:31:00")
    whole_pre = json.loads((whole / "summary.json").read_text())["episodes"][0]["count"]
    assert whole_pre == 540 and 0 < s["episodes"][0]["count"] < whole_pre
    html = (part / "report.html").read_text()
    assert "range analysed" in html and "range analysed" not in (whole / "report.html").read_text()
    assert (
        "range analysed with --since/--until; the logs run from 2026-11-29 08:28:20 UTC"
        in (part / "summary.md").read_text()
    )


def test_a_death_in_the_range_is_told_from_the_start_before_it(tmp_path_factory):
    """The crash run from 08:33:30: the server started at 08:32:45 (outside) and died silently at 08:34:22;
    the start before the range is read to tell the death, not reported as a start in it."""
    out = _analyse(tmp_path_factory, "crash", "2026-11-29T08:33:30Z", "2026-11-29T08:36:00Z")
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["range"] == {"since": "2026-11-29T08:33:30Z", "until": "2026-11-29T08:36:00Z"}
    deaths = d["server_lifecycle"]["deaths"]
    assert [(x["kinds"], x["ts"], x["restart"], x["pid"], x["new_pid"]) for x in deaths] == [
        (["silent"], "2026-11-29T08:34:22.000Z", "2026-11-29T08:34:45.000Z", 7682, 8600)
    ]
    assert d["server_lifecycle"]["starts"] == 1  # the restart; the first start is before the range
    assert d["capacity"]["kv_tokens"]  # the start-up lines before the range still tell the KV cache


def test_a_bad_range_is_a_usage_error(tmp_path):
    src = need(LAB / "calm")
    r = CliRunner().invoke(app, ["analyze", str(src), "-o", str(tmp_path / "o"), "--since", "noon"])
    assert r.exit_code == 2 and "--since/--until" in r.output and "not a date and time" in r.output
    r = CliRunner().invoke(
        app,
        [
            "analyze",
            str(src),
            "-o",
            str(tmp_path / "o"),
            "--since",
            "2026-11-29T09:00:00Z",
            "--until",
            "2026-11-29T08:00:00Z",
        ],
    )
    assert r.exit_code == 2 and "is after --until" in r.output
    assert not (tmp_path / "o").exists()  # checked before anything is written


def test_ingest_once_then_look_at_ranges(storm, tmp_path):
    """`logscope report OUT --since/--until` correlates and diagnoses the range again from the tables (no
    re-parsing) and gives what `analyze --since/--until` gives; `--whole` goes back to the whole input."""
    import shutil

    whole, part = storm
    out = tmp_path / "out"
    shutil.copytree(whole, out)
    shutil.rmtree(out / "_parts", ignore_errors=True)
    r = CliRunner().invoke(
        app, ["report", str(out), "--since", "2026-11-29T08:30:20Z", "--until", "2026-11-29 08:31:00", "-q"]
    )
    assert r.exit_code == 0, r.output
    for name in ("requests.parquet", "windows.parquet", "episodes.parquet"):
        assert pl.read_parquet(out / name).equals(pl.read_parquet(part / name)), name
    assert (out / "diagnosis.json").read_text() == (part / "diagnosis.json").read_text()
    r = CliRunner().invoke(app, ["report", str(out), "-q"])  # re-render: keeps the range it was given
    assert r.exit_code == 0 and "range analysed" in (out / "report.html").read_text()
    r = CliRunner().invoke(app, ["report", str(out), "--whole", "-q"])
    assert r.exit_code == 0, r.output
    assert (out / "diagnosis.json").read_text() == (whole / "diagnosis.json").read_text()
    assert pl.read_parquet(out / "requests.parquet").equals(pl.read_parquet(whole / "requests.parquet"))
    assert "range analysed" not in (out / "report.html").read_text()
    r = CliRunner().invoke(app, ["report", str(out), "--whole", "--since", "2026-11-29T08:30:20Z"])
    assert r.exit_code == 2 and "exclude each other" in r.output


def test_another_range_is_judged_by_the_same_slo(tmp_path):
    """report --since re-diagnoses with the SLO and thresholds the folder was diagnosed with, not defaults."""
    out = tmp_path / "calm"
    analyze(need(LAB / "calm"), out, AnalyzeOptions(slo_ttft_s=0.5, thresholds=Thresholds(cold_start_s=10)))
    r = CliRunner().invoke(app, ["report", str(out), "--since", "2026-11-29T08:20:00Z", "-q"])
    assert r.exit_code == 0, r.output
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["range"]["since"] == "2026-11-29T08:20:00Z"
    assert d["slo"]["ttft_p95_s"] == 0.5 and d["thresholds"]["cold_start_s"] == 10


def test_report_keeps_the_slo_it_was_judged_by_and_takes_another(tmp_path):
    """A plain re-render states the diagnosis's SLO (it used to fall back to the defaults); --slo-* diagnoses
    again from the tables: on the ladder, TTFT p95 <= 1 s makes c=4 (p95 1.359 s, bench) a step that failed
    below the boundary c=16, which the default 2 s does not."""
    out = tmp_path / "ladder"
    analyze(need(LAB / "ladder"), out)
    d = json.loads((out / "diagnosis.json").read_text())
    assert (
        d["ladder"]["working_boundary"]["concurrency"] == 16.0 and d["ladder"]["failed_below_boundary"] == []
    )
    correlated = (out / "requests.parquet").stat().st_mtime_ns
    r = CliRunner().invoke(app, ["report", str(out), "--slo-ttft", "1", "-q"])
    assert r.exit_code == 0, r.output
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["slo"] == {"ttft_p95_s": 1.0, "e2e_p95_s": 20.0, "success": 0.99}
    assert [b["concurrency"] for b in d["ladder"]["failed_below_boundary"]] == [4.0]
    assert (out / "requests.parquet").stat().st_mtime_ns == correlated  # diagnosed again, not correlated
    for args in (["report", str(out), "-q"], ["report", str(out), "--slo-success", "0.5", "-q"]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        s = json.loads((out / "summary.json").read_text())
        assert s["slo"]["ttft_s"] == 1.0  # kept from the diagnosis, not the default 2 s
    assert s["slo"]["success"] == 0.5


def test_the_slo_options_are_named_in_one_place(tmp_path):
    """logscope.slo holds the SLO's fields and defaults: the library's options, the diagnosis's keys and both
    commands take them from there; `analyze --slo-ttft` reaches the diagnosis, the other two keep theirs."""
    from dataclasses import fields

    from logscope import slo
    from logscope.api import AnalyzeOptions
    from logscope.diagnose import SLO_KEYS

    assert {f.name: f.default for f in fields(AnalyzeOptions) if f.name.startswith("slo_")} == slo.DEFAULTS
    assert list(SLO_KEYS) == list(slo.DEFAULTS)
    assert slo.given(None, 5.0, None) == {"slo_e2e_s": 5.0} and slo.given(None, None, None) == {}
    out = tmp_path / "ladder"
    r = CliRunner().invoke(
        app, ["analyze", str(need(LAB / "ladder")), "-o", str(out), "--slo-ttft", "1", "-q"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["slo"] == {"ttft_p95_s": 1.0, "e2e_p95_s": 20.0, "success": 0.99}
    assert [b["concurrency"] for b in d["ladder"]["failed_below_boundary"]] == [4.0]  # as report --slo-ttft 1


def test_a_range_that_misses_the_logs_says_where_they_are(tmp_path):
    """Not 'Nothing alarming' over an empty range: an error that gives the logs' own span."""
    src = need(LAB / "calm")  # 08:47:30 -> 08:51:32
    r = CliRunner().invoke(
        app,
        ["analyze", str(src), "-o", str(tmp_path / "o"), "--since", "2026-11-29T10:00:00Z"],
        terminal_width=200,
    )
    assert r.exit_code == 2
    assert (
        "the range 2026-11-29 10:00:00 UTC → … holds none of the logs, which run from 2026-11-29 08:47:30 UTC "
        "to 2026-11-29 08:51:32 UTC"
    ) in " ".join(r.output.split())
    assert not (tmp_path / "o" / "report.html").exists()
    r = CliRunner().invoke(app, ["report", str(tmp_path / "o"), "--until", "2026-11-29T08:00:00Z"])
    assert r.exit_code == 2 and "holds none of the logs" in r.output
