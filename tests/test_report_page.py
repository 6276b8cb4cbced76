"""The report page reads at a glance (#27) and shows what happened (#25): load phases, server starts and
stops, outcomes by status and token throughput on the timeline; whole-number count axes; an outlier window
that no longer flattens its panel; the appendix's long lists folded with their counts; the cold start in
sentences; the picture drawn only when asked. Every figure asserted comes from a real lab recording.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA, LAB, ROOT, need
from logscope import clock
from logscope.api import AnalyzeOptions, analyze
from logscope.report import context, load_phases, render, views, vl
from logscope.report.load import load
from logscope.report.panels import long_rows

SIGTERM = "lab2/sigterm-overload"


def analysed(tmp_path_factory, run: str) -> Path:
    """Each recording analysed once per session, in the folder the other report tests share."""
    out = tmp_path_factory.getbasetemp() / "lab-reports" / run.replace("/", "-")
    if not (out / "report.html").exists():
        src = DATA / run if run.startswith("lab2/") else LAB / run
        analyze(need(src), out, AnalyzeOptions(command_line=f"logscope analyze {run}"))
    return out


def timeline_of(out: Path) -> tuple[dict, dict]:
    """(the timeline's spec, summary.json) as the page has them."""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return context(load(out), summary, AnalyzeOptions())["charts"]["timeline"], summary


def view(spec: dict, title: str) -> dict:
    return next(
        v
        for v in spec["vconcat"]
        if (v["title"] if isinstance(v["title"], str) else v["title"]["text"]).startswith(title)
    )


def test_load_phases_are_labelled_bands_from_the_client_or_the_ladder(tmp_path_factory):
    """The spike's client logged three phases (75 s at 2, 18 s at 48, 75 s at 2 concurrent); the ladder's steps
    come from the diagnosis; an open-loop client's phases are rates."""
    out = analysed(tmp_path_factory, "spike")
    ld = load(out)
    summary = json.loads((out / "summary.json").read_text())
    with clock.covering(*ld.rng.clip(*clock.files_span(out))):
        ph, what = load_phases.phases(ld, summary)
    assert what == "client load phases"
    assert ph.select("label", "from", "to").rows() == [
        ("c=2", "08:25:05", "08:26:20"),
        ("c=48", "08:26:20", "08:26:38"),
        ("c=2", "08:26:38", "08:27:53"),
    ]
    spec, _ = timeline_of(out)
    assert spec["vconcat"][0]["title"] == "Client load phases and server starts, stops and deaths"
    # every panel below the lanes is shaded by phase (its first layer) and by episode
    shaded = [v for v in spec["vconcat"][2:]]
    assert all(v["layer"][0]["data"]["name"] == "phase-bands" for v in shaded)
    ladder = analysed(tmp_path_factory, "ladder")
    ph, what = load_phases.phases(load(ladder), json.loads((ladder / "summary.json").read_text()))
    assert what == "ladder steps" and ph["label"].to_list() == [
        "c=1",
        "c=2",
        "c=4",
        "c=8",
        "c=16",
        "c=32",
        "c=64",
    ]
    spec, _ = timeline_of(ladder)
    assert spec["vconcat"][0]["title"].startswith("Ladder steps and server starts")
    # each short step keeps its label (centred, clear of its neighbours')
    assert [r["label"] for r in spec["datasets"]["phase-labels"]] == ph["label"].to_list()
    sig = analysed(tmp_path_factory, SIGTERM)
    ph, _ = load_phases.phases(load(sig), json.loads((sig / "summary.json").read_text()))
    assert ph["label"].to_list() == ["1.5 req/s", "16 req/s"]


def test_server_starts_stops_and_deaths_are_labelled_rules(tmp_path_factory):
    """The crash run: a start, a silent kill at 08:34:22 (the gateway answered 700 first attempts with a 502
    until the new server was ready at 08:35:31; 220 of them before its banner at 08:34:45, while it loaded the
    model), the restart, the final SIGTERM; the SIGTERM of the overload, with the same 1,089 gateway 5xx as its
    finding's title. One count in the label, the finding, diagnosis.json and summary.md."""
    out = analysed(tmp_path_factory, "crash")
    spec, summary = timeline_of(out)
    rules = spec["datasets"]["server-event-rules"]
    assert [(r["text"], r["time"]) for r in rules] == [
        ("start", "08:32:45"),
        ("killed → 700 gateway 5xx", "08:34:22"),
        ("restart", "08:34:45"),
        ("SIGTERM (graceful stop)", "08:36:56"),
    ]
    ga = pl.read_parquet(out / "gateway_attempts.parquet")
    first5 = ga.filter((pl.col("status") >= 500) & (pl.col("attempt").fill_null(1) == 1))
    t0, t1, t2 = (
        pl.datetime(2026, 11, 29, 8, m, s, time_zone="UTC") for m, s in ((34, 22), (34, 45), (35, 31))
    )
    assert first5.filter(pl.col("ts_end").is_between(t0, t1)).height == 220
    assert first5.filter(pl.col("ts_end").is_between(t0, t2)).height == 700
    [death] = summary["server_lifecycle"]["deaths"]
    assert (death["gateway_5xx_after"], death["gateway_5xx_after_by_status"]) == (700, {"502": 700})
    assert (death["gateway_5xx_until"], death["gateway_5xx_until_bound"]) == (
        "2026-11-29T08:35:31.000Z",
        "ready",
    )
    said = "the gateway answered 700 requests with 502 from it until 08:35:31 (the server was ready again)"
    f1 = summary["findings"][0]
    assert f1["title"].startswith("Server killed without a trace at 08:34:22") and said in f1["evidence"]
    assert said in (out / "summary.md").read_text().replace("\\", "")
    assert said in (out / "report.html").read_text()
    # the retries finding's count is the whole range's, and says so beside F1's until-ready one
    n_first = ga.filter(pl.col("attempt").fill_null(1) == 1).height
    [retries] = [f for f in summary["findings"] if f["title"].startswith("Retries")]
    assert (first5.height, n_first) == (815, 1166)
    assert (
        f"answered {first5.height:,} of its {n_first:,} requests over the range with 5xx itself"
        in retries["cause"]
    )
    # the error log's lines are named as such, not as requests
    assert (
        "the gateway's error log from 08:34:23.000: 12 connect_failed lines, 707 no_live_upstreams lines"
        in f1["evidence"]
    )
    # drawn across every panel, over its series (their stroke has a scale of its own: no legend entry)
    for v in spec["vconcat"][2:]:
        assert v["layer"][-1]["data"]["name"] == "server-events" and v["layer"][-1]["mark"]["type"] == "rule"
        assert v["layer"][-1]["encoding"]["stroke"]["legend"] is None
    sig = analysed(tmp_path_factory, SIGTERM)
    spec, summary = timeline_of(sig)
    stop = [r for r in spec["datasets"]["server-event-rules"] if r["kind"] == "SIGTERM"]
    assert [(r["text"], r["time"]) for r in stop] == [
        ("SIGTERM (graceful stop) → 1,089 gateway 5xx", "08:47:10")
    ]
    assert "1,089 gateway 5xx after it" in summary["findings"][0]["title"]
    # no return before the logs end: counted to the gateway's last answer, not to a cap past the inputs
    [down] = summary["server_lifecycle"]["graceful_shutdowns"]
    last = pl.read_parquet(sig / "gateway_attempts.parquet")["ts_end"].max()
    assert (down["gateway_5xx_until"], down["gateway_5xx_until_bound"]) == (
        last.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "logs_end",
    )
    assert (
        "then the gateway answered 1,089 requests with 2 × 500, 1,087 × 502 until 08:47:51 (the gateway's "
        "last answer: the server was not back before its log ends)"
    ) in summary["findings"][0]["evidence"]


def test_outcomes_by_status_count_every_request(tmp_path_factory):
    """A stacked count of how requests ended, per window: every request of the table once, by outcome and
    HTTP status."""
    expected = {
        "crash": {"ok": 343, "HTTP 502": 199, "2xx, upstream closed (nginx error log)": 8},
        "retry-storm": {"ok": 457, "HTTP 502": 116, "caller timed out (client log)": 80},
        SIGTERM: {
            "ok": 230,
            "HTTP 502": 363,
            "error, no status": 395,
            "2xx, upstream closed (nginx error log)": 2,
        },
    }
    for run, counts in expected.items():
        out = analysed(tmp_path_factory, run)
        spec, _ = timeline_of(out)
        rows = pl.DataFrame(spec["datasets"]["outcomes"])
        got = dict(rows.group_by("outcome").agg(pl.col("n").sum()).rows())
        assert got == counts, run
        assert sum(got.values()) == pl.read_parquet(out / "requests.parquet").height
        # stacked in the window's column: ok at the bottom, each part on the one below
        assert rows.filter(pl.col("k") == 0)["y0"].max() == 0
        panel = view(spec, "Outcomes as callers saw them")
        assert panel["layer"][2]["encoding"]["color"]["scale"]["domain"][0] == "ok"


def test_token_throughput_comes_from_the_server_stats(tmp_path_factory):
    """Prompt and generation tokens/s: the log's stats lines (every 2 s, in 2 s windows), not its metrics as well;
    the spike's peak generation rate is its log's 1,072 tokens/s."""
    out = analysed(tmp_path_factory, "spike")
    spec, _ = timeline_of(out)
    rows = pl.DataFrame(spec["datasets"]["panel-tokens"]).drop_nulls("value")
    st = pl.read_parquet(out / "server_stats.parquet").filter(pl.col("origin") == "log")
    assert set(rows["series"]) == {"prompt tokens/s", "generation tokens/s"}
    assert (
        rows.filter(pl.col("series") == "generation tokens/s")["value"].max() == st["gen_tps"].max() == 1072.0
    )
    assert rows.filter(pl.col("series") == "prompt tokens/s")["value"].max() == st["prompt_tps"].max()


def test_count_axes_have_whole_number_ticks(tmp_path_factory):
    """Count panels showed 0.2, 0.4: their ticks are given, whole numbers from 0."""
    assert [vl.int_scale(t)[0]["values"] for t in (0, 1, 3, 7, 118, 3584)] == [
        [0, 1],
        [0, 1],
        [0, 1, 2, 3],
        [0, 2, 4, 6, 8],
        [0, 50, 100, 150],
        [0, 1000, 2000, 3000, 4000],
    ]
    spec, _ = timeline_of(analysed(tmp_path_factory, "ladder"))
    counts = [view(spec, t) for t in ("Outcomes", "Arrivals", "Preemptions", "Retries and orphaned work")]
    for v in counts:
        y = next(
            lay["encoding"]["y"]
            for lay in v["layer"]
            if "y" in lay.get("encoding", {}) and lay["encoding"]["y"].get("type") == "quantitative"
        )
        assert all(isinstance(t, int) for t in y["axis"]["values"]) and y["scale"]["domain"][0] == 0
    # the ladder's retries reached 1 per window: 0 and 1, not 0, 0.5, 1
    retries = view(spec, "Retries and orphaned work")
    assert retries["layer"][2]["encoding"]["y"]["axis"]["values"] == [0, 1]


def test_one_outlier_window_cuts_its_axis_and_says_so(tmp_path_factory):
    """The overload's last window holds 248 outcomes (the client's leftovers failing at once), four times its
    98th percentile: the axis stops at 150, the title says what was cut and the window says its value."""
    spec, _ = timeline_of(analysed(tmp_path_factory, SIGTERM))
    panel = view(spec, "Outcomes as callers saw them")
    assert panel["title"]["subtitle"] == "axis cut at 150: 248 at 08:47:51 (drawn at the top)"
    bars = next(lay for lay in panel["layer"] if lay["mark"]["type"] == "rect" and "y" in lay["encoding"])
    assert bars["encoding"]["y"]["scale"] == {"domain": [0, 150], "nice": False, "clamp": True}
    assert [r["cut"] for r in spec["datasets"]["clipped-outcomes"]] == ["↑248"]
    # the others are drawn whole: the queue panel (a ramp, no outlier) is not cut
    assert isinstance(view(spec, "Running and waiting")["title"], str)


def test_gauges_bridge_their_sampling_but_break_at_a_silence(tmp_path_factory):
    """Stats lines every 2 s in 1 s windows drew dots, not lines: a gauge's samples are joined up to three of its
    intervals apart; after the SIGTERM the log fell silent for 40 s (08:47:08 → 08:47:48), and the line breaks."""
    out = analysed(tmp_path_factory, SIGTERM)
    w = load(out).table("windows").sort("ts")
    waiting = long_rows(w).filter(pl.col("series") == "waiting (max)").sort("t")

    def at(hms: str) -> int:  # epoch ms of a time of the recording's day
        return int(datetime.fromisoformat(f"2026-12-02T{hms}+00:00").timestamp() * 1000)

    gap = waiting.filter(pl.col("t").is_between(at("08:47:08"), at("08:47:48")))
    assert gap.select("time", "value").rows() == [("08:47:08", 371.0), (None, None), ("08:47:48", 384.0)]
    assert gap["t"][1] == at("08:47:09")  # the break, one window after the last sample before the silence
    busy = waiting.filter(pl.col("t").is_between(at("08:46:35"), at("08:47:05")))
    assert busy["value"].null_count() == 0 and busy.height >= 14  # joined, every other window


def test_the_appendix_folds_its_long_lists_with_counts(tmp_path_factory):
    """A third of the page listed Prometheus' files and the lab's own notes line by line: the input files and the
    unrecognised lines are folded, their summary line counting them; names wrap only at their separators."""
    page = (analysed(tmp_path_factory, SIGTERM) / "report.html").read_text(encoding="utf-8")
    assert (
        '<details class="appendix"><summary><h3>Input files</h3> 21 file(s); 726,101 of 726,617 lines recognised '
        "(99.9 %), 516 not; 5 file(s) in no known format</summary>"
    ) in page
    assert (
        "<summary><h3>Unrecognised lines, by shape</h3> 305 shape(s), 516 line(s) in truth.json, manifest.json, "
        "commands.log, 2 more</summary>"
    ) in page
    appendix = page[page.index('<h2 id="appendix"') : page.index("<h3>Assumptions</h3>")]
    assert appendix.count('<table class="files">') == 2 and appendix.count("</details>") == 2
    assert "<td>prometheus_<wbr>query_<wbr>range</td>" in page and "<td>nginx-<wbr>access</td>" in page
    # the first finding open, the others folded to their title
    assert page.count('<details class="card finding') == 5 and page.count('" open>\n  <summary><h3>') == 1


def test_cold_start_reads_as_sentences_and_a_short_table(tmp_path_factory):
    """The crash run started twice (pid 7682, then 8600 after the kill), each 46 s from start to ready."""
    out = analysed(tmp_path_factory, "crash")
    cold = json.loads((out / "summary.json").read_text())["cold_start"]
    v = views.cold_start_rows(cold, 30)
    assert v["lines"][0] == "From start to ready: 46.0 s and 46.0 s."
    assert [(r["pid"], r["started"][11:19], r["loading"], r["requests"]) for r in v["rows"]] == [
        (7682, "08:32:45", 46.0, 100),
        (8600, "08:34:45", 46.0, 76),
    ]
    assert v["lines"][2].startswith(
        "Warm (every other request): 374 requests, TTFT p95 0.07 s, e2e p95 3.35 s"
    )
    # side by side, no verdict of its own (the findings judge: 'Slow first tokens after the server start')
    assert v["lines"][3] == (
        "Cold windows against warm: TTFT p95 up to 3.07 s against 0.07 s (41.4×); e2e p95 up "
        "to 3.92 s against 3.35 s (1.2×)."
    )
    section = (out / "report.html").read_text()
    section = section[section.index('<h2 id="cold-start"') : section.index('<h2 id="appendix"')]
    assert '<table class="cold">' in section and "<summary>every cold-start figure</summary>" in section
    assert "<li>2 server start(s) in the logs.</li>" in section  # said once
    assert (
        "<li>vllm-server: killed without a trace (its log stops) at 08:34:22, ready again at 08:35:31"
        in section
    )
    assert views.cold_start_rows(cold, 1)["hidden"] == 1


def test_episode_peaks_say_their_unit(tmp_path_factory):
    page = (analysed(tmp_path_factory, SIGTERM) / "report.html").read_text()
    assert '<td class="num unit">25 per stats line</td><td class="num unit">0 per stats line</td>' in page
    assert '<td class="num unit">94.6 %</td><td class="num unit">95.5 %</td>' in page


@pytest.mark.slow  # a child process
def test_the_picture_is_drawn_only_when_asked_and_altair_is_never_loaded(tmp_path_factory, tmp_path):
    """timeline.png took ~2 s of a small folder's ~5 s: drawn with --png only. The page's charts are plain
    Vega-Lite dicts: rendering loads no altair (0.5 s to import)."""
    out = tmp_path / "spike"
    shutil.copytree(analysed(tmp_path_factory, "spike"), out)
    code = (
        "import sys; from logscope.api import AnalyzeOptions, render; "
        f"render({str(out)!r}, AnalyzeOptions()); print('altair' in sys.modules, 'vl_convert' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.stdout.split() == ["False", "True"], (
        res.stderr
    )  # vl_convert: its version names the bundle cache
    assert not (out / "timeline.png").exists()
    res = subprocess.run(
        [sys.executable, "-m", "logscope", "report", str(out), "--png", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![timeline](timeline.png)" in (out / "summary.md").read_text()
    render(
        out, AnalyzeOptions()
    )  # rendered again without it: the picture goes, summary.md points to the page
    assert "The timeline is in report.html" in (out / "summary.md").read_text()


def test_compiled_templates_are_kept_beside_them_and_checked(tmp_path, monkeypatch):
    """Compiling report.html.j2 took ~0.3 s of every render: the compiled copy is kept (report_templates/
    __pycache__, as Python keeps .pyc files), used while the template's text is unchanged, and a damaged or
    stale copy only costs a compilation."""
    import jinja2

    from logscope.report import html

    folder = tmp_path / "templates"
    shutil.copytree(ROOT / "report_templates", folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(html.resources, "files", lambda _pkg: folder)
    monkeypatch.setattr(
        sys, "dont_write_bytecode", False
    )  # as an installed package runs (this shell sets it)
    compiles: list[str] = []
    real = jinja2.Environment.compile

    def counting(self, source, name=None, *a, **k):
        compiles.append(name)
        return real(self, source, name, *a, **k)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)

    def fresh() -> jinja2.Template:
        html.environment.cache_clear()
        return html.environment().get_template("report.html.j2")

    try:
        fresh()
        assert (
            compiles == ["report.html.j2"]
            and len(list((folder / "__pycache__").glob("__jinja2_*.cache"))) == 1
        )
        fresh()
        assert compiles == ["report.html.j2"]  # read back, not compiled
        [kept] = (folder / "__pycache__").glob("__jinja2_*.cache")
        kept.write_bytes(kept.read_bytes()[:40])  # cut short: compiled again, and written whole again
        fresh()
        assert compiles == ["report.html.j2"] * 2
        src = folder / "report.html.j2"
        src.write_text(src.read_text() + "\n{# changed #}\n")  # another text: compiled again
        fresh()
        assert compiles == ["report.html.j2"] * 3
        monkeypatch.setattr(sys, "dont_write_bytecode", True)  # PYTHONDONTWRITEBYTECODE: read, never written
        src.write_text(src.read_text() + "\n{# changed again #}\n")
        fresh()
        fresh()
        assert len(compiles) == 5 and len(list((folder / "__pycache__").glob("__jinja2_*.cache"))) == 1
        shutil.rmtree(folder / "__pycache__")
        (folder / "__pycache__").write_text(
            ""
        )  # no folder can be made there: compiled each time, still drawn
        assert fresh() is not None and fresh() is not None and len(compiles) == 7
    finally:
        html.environment.cache_clear()
