"""The report on the real lab runs: summary.json (schema, same bytes twice, exact figures), summary.md
and report.html (verdict present, self-contained, nothing loaded from the network, log text escaped).

The lab runs are analysed once per test session (``analysed``): the whole pipeline, as
``logscope analyze`` runs it.
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import jinja2.meta
import jsonschema
import polars as pl
import pytest
from markupsafe import escape

from conftest import LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze, ingest
from logscope.diagnose.thresholds import Thresholds
from logscope.report import charts, context, panels, render, section_charts
from logscope.report.html import CSP, environment, script_json
from logscope.report.load import load
from logscope.report.markdown import environment as md_environment
from logscope.report.markdown import md
from logscope.report.summary import build

RUNS = ("spike", "retry-storm", "ladder", "crash", "orphan", "calm")
SCHEMA = json.loads((ROOT / "logscope" / "summary.schema.json").read_text())


def analysed(tmp_path_factory, run: str) -> Path:
    """The lab run analysed into a session-wide folder (each run is analysed once per session)."""
    out = tmp_path_factory.getbasetemp() / "lab-reports" / run
    if not (out / "report.html").exists():
        analyze(need(LAB / run), out, AnalyzeOptions(command_line=f"logscope analyze {run}"))
    return out


@pytest.fixture(params=RUNS)
def run_out(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, analysed(tmp_path_factory, request.param)


def title_of(view: dict) -> str:
    t = view["title"]
    return t if isinstance(t, str) else t["text"]


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ summary.json


def test_summary_validates_against_the_schema(run_out):
    _, out = run_out
    validator = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(summary_of(out))]
    assert errors == []


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_same_inputs_give_the_same_bytes(tmp_path, tmp_path_factory):
    """Two full analyses of one folder, into two folders: summary.json byte for byte the same."""
    first = analysed(tmp_path_factory, "spike")
    analyze(need(LAB / "spike"), tmp_path / "again", AnalyzeOptions(command_line="logscope analyze spike"))
    assert (tmp_path / "again" / "summary.json").read_bytes() == (first / "summary.json").read_bytes()


def test_rendering_again_gives_the_same_bytes(run_out, tmp_path):
    run, out = run_out
    copy = tmp_path / run
    shutil.copytree(out, copy)
    render(copy, AnalyzeOptions(command_line=f"logscope analyze {run}"))
    for name in ("summary.json", "summary.md", "report.html"):
        assert (copy / name).read_bytes() == (out / name).read_bytes(), name


def test_summary_has_no_wall_clock_time(run_out):
    _, out = run_out
    text = (out / "summary.json").read_text()
    assert "generated_at" not in text and "ingested_at" not in text


# Expected figures: truth.json of each run, counted from the raw files by the lab's own independent
# script (client: `"kind": "request"` records and `attempt_send` records of client-*.jsonl; vLLM:
# `grep -c 'Received request cmpl-'` and `grep -c 'Aborted request'` in vllm-server.log; orphans:
# attempts whose caller gave up and that vLLM never aborted). README.md of the lab gives the same
# numbers for retry-storm (653 / 1,245 / 914 / 457), crash (550 / 1,166) and orphan (320 / 704 / 570; of
# the 570 abandoned attempts, 39 finished within 1 s of their caller leaving by nginx's clock: 531 ran on).
EXPECTED_RETRIES = {
    "spike": dict(
        logical_requests=284, client_attempts=284, server_requests=284, server_aborts=0, orphaned_requests=0
    ),
    "retry-storm": dict(
        logical_requests=653,
        client_attempts=1245,
        server_requests=914,
        server_aborts=457,
        orphaned_requests=0,
        cancellation_propagated=True,
    ),
    "crash": dict(logical_requests=550, client_attempts=1166, server_requests=351, server_aborts=0),
    "orphan": dict(
        logical_requests=320,
        client_attempts=704,
        server_requests=704,
        server_aborts=0,
        orphaned_requests=531,
        cancellation_propagated=False,
    ),
    "calm": dict(
        logical_requests=186, client_attempts=186, server_requests=186, server_aborts=0, orphaned_requests=0
    ),
    "ladder": dict(logical_requests=476, server_requests=476, server_aborts=0),
}


def test_retry_figures_match_the_lab_truth(run_out):
    run, out = run_out
    r = summary_of(out)["retries"]
    assert {k: r[k] for k in EXPECTED_RETRIES[run]} == EXPECTED_RETRIES[run]


def test_retry_figures_reach_the_page(tmp_path_factory):
    page = (analysed(tmp_path_factory, "retry-storm") / "report.html").read_text()
    for figure in ("653", "1,245", "914", "457"):
        assert f'<td class="num">{figure}' in page, figure
    assert "<strong>1.4</strong>" in page  # amplification 914 / 653


# Lines per run: `find <run> -type f -print0 | xargs -0 wc -l` counts newlines; each file without
# a final newline (13 per run, 27 in ladder: `tail -c1` is not empty) holds one more line.
EXPECTED_LINES = {"spike": 11516 + 13, "retry-storm": 24021 + 13, "ladder": 13313 + 27, "crash": 21814 + 13,
                  "orphan": 24494 + 13, "calm": 38915 + 13}  # fmt: skip


def test_input_lines_are_all_accounted_for(run_out):
    run, out = run_out
    inp = summary_of(out)["inputs"]
    assert inp["lines_total"] == EXPECTED_LINES[run]
    assert inp["lines_parsed"] + inp["lines_unrecognized"] == inp["lines_total"]
    files = sum(1 for p in (LAB / run).rglob("*") if p.is_file())
    assert len(inp["files"]) == files


def test_spike_episode_and_findings(tmp_path_factory):
    """The lab's spike: one preemption episode 08:26:26-08:26:49, +136 preemptions (README, truth.json)."""
    s = summary_of(analysed(tmp_path_factory, "spike"))
    [e] = s["episodes"]
    assert (e["id"], e["class"], e["signal"], e["count"]) == ("E1", "spike", "preemptions", 136)
    assert e["start"].startswith("2026-11-29T08:26:26") and e["end"].startswith("2026-11-29T08:26:49")
    assert [f["rank"] for f in s["findings"]] == sorted(f["rank"] for f in s["findings"])
    assert s["findings"][0]["episode"] == "E1"


def test_figures_are_shown_by_their_key(tmp_path_factory):
    """A figure under a key naming a share is a fraction: the page shows 100.0 %, not 1 (the spike's 284
    requests all generated their max_tokens of 256; its episode's requests all succeeded)."""
    out = analysed(tmp_path_factory, "spike")
    s = summary_of(out)
    assert s["output_lengths"]["overall"]["share_hit_max_tokens"] == 1.0
    assert s["episodes"][0]["metrics"]["success_share"] == 1.0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>share hit max tokens</th><td>100.0 %</td>" in html
    assert '<th>success_share</th><td class="num">100.0 %</td>' in html
    assert "<th>requests</th><td>284</td>" in html  # other figures as they were
    # the crash run's cold-start tables: pids as the log wrote them (7682, not 7,682), its KV usage 79.3 % as
    # a share, its times on one line each
    crash = analysed(tmp_path_factory, "crash")
    cold = summary_of(crash)["cold_start"]
    assert [r["pid"] for r in cold["server_starts"]] == [7682, 8600] and cold["windows"][0]["kv_max"] == 0.793
    page = (crash / "report.html").read_text(encoding="utf-8")
    section = page[page.index('<h2 id="cold-start"') : page.index('<h2 id="appendix"')]
    assert "<td>7682</td>" in section and "7,682" not in section
    assert "<td>79.3 %</td>" in section
    assert '<td><span class="nowrap">08:33:31</span></td>' in section


def test_calm_has_no_episode(tmp_path_factory):
    s = summary_of(analysed(tmp_path_factory, "calm"))
    assert s["episodes"] == []
    assert all(f["severity"] in ("info", "low") for f in s["findings"])


def test_ladder_section(tmp_path_factory):
    s = summary_of(analysed(tmp_path_factory, "ladder"))
    assert s["ladder"] is not None and len(s["ladder"]["steps"]) >= 3
    assert s["ladder"]["working_boundary"]["step"] in [st["step"] for st in s["ladder"]["steps"]]
    page = (analysed(tmp_path_factory, "ladder") / "report.html").read_text()
    assert 'data-chart="spec-ladder"' in page and "Working boundary" in page
    # the step table's shares as percentages, on the page and in the ticket: step 4 (c=8) ran at KV 86.5 %
    st = s["ladder"]["steps"][3]
    assert (st["concurrency"], st["kv_max"], st["success_share"]) == (8, 0.865, 1.0)
    assert '<td class="num">86.5 %</td>' in page and '<td class="num">100.0 %</td>' in page
    md = (analysed(tmp_path_factory, "ladder") / "summary.md").read_text()
    # (each latency with its clock: the bench client's own per-request figures here; none of step 4's requests
    # was set aside as cold start)
    assert (
        "| 4 | 8 | 40 | met | – | 0 | 0.0 % | 0 | 4.56 | 8 | 0.1 | 0.12 | client | 1.75 | 2.05 | client | 100.0 % | "
        "1,166.45 | 86.5 % |" in md  # the step's verdict first
    )


# ------------------------------------------------------------------ summary.md and report.html


def test_verdict_is_in_the_page_and_the_markdown(run_out):
    _, out = run_out
    verdict = summary_of(out)["verdict"]
    page = (out / "report.html").read_text()
    mdtext = (out / "summary.md").read_text()
    assert len(verdict) == 3
    for line in verdict:
        assert f"<li>{escape(line)}</li>" in page
        assert md(line) in mdtext
    # no picture unless asked (--png): drawing it was most of a small folder's analyze
    assert "The timeline is in report.html" in mdtext and "timeline.png)" not in mdtext
    assert not (out / "timeline.png").exists()


class _Loads(HTMLParser):
    """Every attribute that can make a browser fetch something, and the CSP meta."""

    FETCHING = {"src", "href", "srcset", "action", "data", "poster", "formaction", "background", "xlink:href"}

    def __init__(self) -> None:
        super().__init__()
        self.fetches: list[tuple[str, str, str]] = []
        self.csp: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        d = dict(attrs)
        if tag == "meta" and (d.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(d.get("content") or "")
        for k, v in attrs:
            if k in self.FETCHING and v is not None and not (v.startswith("#") or v.startswith("data:")):
                self.fetches.append((tag, k, v))


def test_page_is_self_contained(run_out):
    _, out = run_out
    page = (out / "report.html").read_text()
    p = _Loads()
    p.feed(page)
    assert p.fetches == []  # no <script src>, <link href>, <img src=http...>: only #anchors and data:
    assert p.csp == [CSP]
    assert "link" not in p.tags and "iframe" not in p.tags
    assert "@import" not in page and "url(http" not in page
    assert page.count("window.vegaEmbed=") == 1  # Vega, Vega-Lite and Vega-Embed inlined once
    assert len(page.encode()) < 3_000_000


def test_findings_link_to_their_episodes(tmp_path_factory):
    page = (analysed(tmp_path_factory, "spike") / "report.html").read_text()
    assert 'href="#E1"' in page and '<tr id="E1">' in page


def test_timeline_is_stacked_on_one_time_axis(tmp_path_factory):
    out = analysed(tmp_path_factory, "spike")
    ctx = context(load(out), summary_of(out), AnalyzeOptions())
    spec = ctx["charts"]["timeline"]
    assert spec["resolve"]["scale"]["x"] == "shared"
    titles = [title_of(v) for v in spec["vconcat"]]
    assert titles[:3] == [
        "Client load phases and server starts, stops and deaths",
        "Episodes (shaded on every panel below)",
        "Outcomes as callers saw them (requests by how they ended)",
    ]
    for panel in (
        "Arrivals",
        "Running and waiting at the server",
        "KV-cache usage",
        "Token throughput (server)",
        "Preemptions",
        "End-to-end latency",
    ):
        assert panel in titles
    # no error at any layer in the spike: said in a note, not drawn as flat lines
    assert "Errors at the gateway and the server" not in titles
    assert any(
        n.startswith("Errors at the gateway and the server: zero throughout (gateway 5xx")
        for n in ctx["timeline_notes"]
    )
    # every panel below the lanes shades the load phases and the episode (class-coloured): its first layers
    assert all(
        [lay["data"]["name"] for lay in v["layer"][:2]] == ["phase-bands", "episode-bands"]
        for v in spec["vconcat"][2:]
    )
    # windows, not raw rows: the timeline's data stays small
    rows = sum(len(d) for d in spec.get("datasets", {}).values())
    assert rows < 5000


def test_missing_stages_say_not_available(tmp_path):
    """Only ingest ran: every section still renders and says why it is empty."""
    out = tmp_path / "out"
    ingest(need(LAB / "spike"), out, AnalyzeOptions())
    render(out, AnalyzeOptions())
    s = summary_of(out)
    assert s["verdict"][0].startswith("No verdict: the diagnosis did not run (diagnosis.json is missing")
    assert s["not_available"]["timeline"] == "windows.parquet is missing (written by the correlation stage)"
    assert s["episodes"] == [] and s["ladder"] is None
    page = (out / "report.html").read_text()
    assert "Timeline not available: windows.parquet is missing" in page
    jsonschema.validate(s, SCHEMA)


def test_prompts_are_never_copied(tmp_path_factory):
    """V0 logs print the prompt in 'Received request ... prompt: ...'; without --include-prompts it is nowhere."""
    out = analysed(tmp_path_factory, "v0-ladder")
    # the first words of the first logged prompt (grep -m1 "prompt: '" v0-ladder/vllm-server.log)
    words = "work code such of with as may the copy license program"
    assert words in (LAB / "v0-ladder" / "vllm-server.log").read_text()
    for name in ("summary.json", "summary.md", "report.html"):
        assert words not in (out / name).read_text(), name


def test_templates_name_only_context_fields(tmp_path_factory):
    out = analysed(tmp_path_factory, "spike")
    ctx = context(load(out), build(load(out), AnalyzeOptions()), AnalyzeOptions())
    extra = {"specs", "csp", "css", "vega_bundle"}  # added by render_html
    for env, name in ((environment(), "report.html.j2"), (md_environment(), "summary.md.j2")):
        source = env.loader.get_source(env, name)[0]
        names = jinja2.meta.find_undeclared_variables(env.parse(source))
        assert names <= set(ctx) | extra, name


def test_every_chart_validates_against_the_vega_lite_schema(run_out, monkeypatch):
    """A run skips the Vega-Lite schema check (vl.VALIDATE): here every chart of every lab run passes it."""
    from logscope.report import vl

    _, out = run_out
    monkeypatch.setattr(vl, "VALIDATE", True)
    ld = load(out)
    specs = context(ld, build(ld, AnalyzeOptions()), AnalyzeOptions())["charts"]
    assert specs["timeline"] is not None
    with pytest.raises(jsonschema.ValidationError, match="no-such-mark"):  # the check is on
        vl.finish(
            {
                "data": {"values": [{"x": 1}]},
                "mark": "no-such-mark",
                "encoding": {"x": {"field": "x", "type": "quantitative"}},
            }
        )


@pytest.mark.slow  # a child process
def test_timeline_picture_is_drawn_by_a_child_process(tmp_path_factory, tmp_path, monkeypatch):
    """vl-convert holds the GIL while drawing, so timeline.png is drawn by a child process; when none
    can be started the picture is drawn in this one, the same bytes."""
    import subprocess

    import vl_convert

    from logscope.report import _Painter, _png_spec

    out = tmp_path / "spike"
    shutil.copytree(analysed(tmp_path_factory, "spike"), out)
    render(out, AnalyzeOptions(png=True))  # asked for: drawn, and summary.md shows it
    assert "![timeline](timeline.png)" in (out / "summary.md").read_text()
    ld = load(out)
    ctx = context(ld, summary_of(out), AnalyzeOptions())
    spec = _png_spec(ctx["charts"]["timeline"], ctx["timeline_notes"], ctx["s"])
    # a picture pasted into a ticket names its incident: the folder, the date (lab README: recorded on 2026-11-29)
    # and the span of its logs (the server's start at 08:24:14 to its SIGTERM's last line at 08:27:59)
    assert spec["title"]["text"] == "logscope timeline · spike"
    assert spec["title"]["subtitle"] == "2026-11-29 08:24:14 – 08:27:59 UTC (3.8 min)"
    painter = _Painter()
    assert painter.child is not None
    drawn = painter.draw(spec)
    assert painter.child.returncode == 0
    assert drawn == vl_convert.vegalite_to_png(spec, scale=1.5) == (out / "timeline.png").read_bytes()

    def no_child(*a, **k):
        raise OSError("no fork here")

    idle = _Painter()  # a report that fails before its timeline stops the waiting child
    idle.close()
    assert idle.child.returncode is not None
    monkeypatch.setattr(subprocess, "Popen", no_child)
    painter = _Painter()
    assert painter.child is None and painter.draw(spec) == drawn


def test_retry_timing_counts_each_retry_once(tmp_path_factory):
    """retry-storm: 1,245 attempts for 653 logical requests = 592 retries (truth.json), each with one
    wait, though the client log and its JSONL both describe them."""
    page = (analysed(tmp_path_factory, "retry-storm") / "report.html").read_text()
    assert "592 retries; median wait" in page


def test_many_windows_are_merged_keeping_sums_and_maxima(tmp_path_factory, monkeypatch):

    w = load(analysed(tmp_path_factory, "spike")).table("windows").sort("ts")
    monkeypatch.setattr(charts, "MAX_WINDOWS", 20)
    merged = charts.coarsen(w)
    assert w.height > 20 >= merged.height
    for col in ("arrivals", "completions", "server_requests", "preemptions"):
        assert merged[col].sum() == w[col].sum(), col
    for col in ("running_max", "waiting_max", "kv_max", "e2e_p95"):
        assert merged[col].max() == w[col].max(), col


# ------------------------------------------------------------------ escaping helpers


def test_tables_are_read_when_asked_and_damage_is_named(tmp_path_factory, tmp_path, monkeypatch):
    """The report reads a table when something needs it (correlation.json gives the retry counts, so the
    gateway attempts are never read), and of the request tables only the columns it uses; a damaged
    windows.parquet is named where the timeline would be."""
    out = tmp_path / "spike"
    shutil.copytree(analysed(tmp_path_factory, "spike"), out)
    ld = load(out)
    assert ld.tables == {} and ld.why("windows") == ""
    build(ld, AnalyzeOptions())
    section_charts.retry_gap_chart(ld), section_charts.output_length_chart(ld)
    read = {k.split(":")[0]: k for k in ld.tables}
    assert "gateway_attempts" not in read and "windows" in ld.tables
    assert {"client_attempts", "requests"}.isdisjoint(ld.tables)  # never whole: the columns used, below
    assert "client_attempts" not in read  # the retry chart reads its columns for itself, and lets them go
    assert ld.tables[read["requests"]].columns == ["max_tokens", "output_tokens"]
    assert ld.tables[read["requests"]].height == pl.read_parquet(out / "requests.parquet").height > 0
    data = (out / "windows.parquet").read_bytes()
    (out / "windows.parquet").write_bytes(data[:4] + b"\0" * 200 + data[204:])  # pages gone, footer kept
    (out / "ladder.parquet").write_bytes(b"not parquet")
    ld = load(out)
    assert ld.why("ladder").startswith("ladder.parquet could not be read")
    assert ld.why("windows").startswith("windows.parquet could not be read")
    render(out, AnalyzeOptions())
    assert "Timeline not available: windows.parquet could not be read" in (out / "report.html").read_text()


def test_script_json_cannot_close_the_script_element():
    payload = {"id": "</script><script>alert(1)</script>", "x": "<!-- & \u2028"}
    text = str(script_json(payload))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == payload


def test_markdown_escaping_keeps_log_text_literal():
    assert md("<script>alert(1)</script>") == "\\<script\\>alert(1)\\</script\\>"
    assert md("a | b\nc") == "a \\| b c"
    assert md("# not a heading") == "\\# not a heading"
    assert md(None) == "–"


def test_many_episodes_share_one_row_per_class(tmp_path_factory, monkeypatch):
    """Past MAX_EPISODE_ROWS the lane has one row per class (179 episodes of a 1 GB folder made the chart
    3,600 px tall); every episode stays a bar with its label as tooltip, and panels shade merged bands."""

    out = analysed(
        tmp_path_factory, "ladder"
    )  # E1, E2, E3 sustained (each ends with its step), all preemptions
    summary = summary_of(out)
    assert [(e["id"], e["class"]) for e in summary["episodes"]] == [
        ("E1", "sustained"),
        ("E2", "sustained"),
        ("E3", "sustained"),
    ]
    monkeypatch.setattr(charts, "MAX_EPISODE_ROWS", 2)
    spec = context(load(out), summary, AnalyzeOptions())["charts"]["timeline"]
    lane = next(v for v in spec["vconcat"] if title_of(v).startswith("Episodes"))
    assert lane["title"].startswith("Episodes: 3, one row per class")
    assert lane["encoding"]["y"]["field"] == "cls" and lane["height"] == 1 * 22
    bars = spec["datasets"][lane["data"]["name"]]
    assert [b["label"] for b in bars] == [
        "E1 · sustained · preemptions",
        "E2 · sustained · preemptions",
        "E3 · sustained · preemptions",
    ]


def test_shading_bands_merge_overlapping_episodes_of_a_class(tmp_path_factory):
    import polars as pl

    eps = panels.episode_frame(summary_of(analysed(tmp_path_factory, "ladder"))["episodes"], 1000)
    bands = panels.episode_bands(eps)
    assert bands.height == 3  # E1, E2 and E3 do not touch: one band each
    # stretch E1 over E2: the two become one band from E1's start to E2's end
    e2_end = eps.filter(pl.col("id") == "E2")["end"].item()
    stretched = eps.with_columns(
        pl.when(pl.col("id") == "E1").then(e2_end - 1).otherwise(pl.col("end")).alias("end")
    )
    merged = panels.episode_bands(stretched).sort("start")
    assert merged.select("cls", "start", "end").rows() == [
        ("sustained", eps["start"][0], e2_end),
        ("sustained", eps["start"][2], eps["end"][2]),
    ]


def test_vega_bundle_is_cached_by_vl_convert_version(tmp_path, monkeypatch):
    import vl_convert

    from logscope.report import html

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = html._bundle_path()
    assert path == tmp_path / "cache" / "logscope" / f"vega-bundle-vl-convert-{vl_convert.__version__}.js"
    first = html._javascript_bundle()
    assert path.read_text(encoding="utf-8") == first and "vega" in first
    calls = []
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda: calls.append(1) or "")
    assert html._javascript_bundle() == first and not calls  # read back, not rebuilt
    # an unusable cache (a file where the folder should be) only costs the rebuild
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda: "/* vega */")
    assert html._javascript_bundle() == "/* vega */"


def test_timeline_picture_draws_only_the_lone_points(tmp_path_factory):
    """summary.md's PNG drops the invisible hover targets but keeps the dots of values standing alone
    between gaps (the crash run has 14 such values), and keeps the page's layout."""
    import struct

    import vl_convert

    from logscope.report import _static, charts

    out = analysed(tmp_path_factory, "crash")
    ld = load(out)
    assert panels.long_rows(charts.coarsen(ld.table("windows").sort("ts")))["lone"].sum() == 14
    spec = context(ld, summary_of(out), AnalyzeOptions())["charts"]["timeline"]
    static = _static(spec)
    hover = [
        lay
        for v in spec["vconcat"]
        for lay in v.get("layer", [])
        if lay["mark"]["type"] == "point" and "opacity" in lay["encoding"]
    ]
    kept = [
        lay
        for v in static["vconcat"]
        for lay in v.get("layer", [])
        if lay["mark"]["type"] == "point" and "opacity" in lay["encoding"]
    ]
    assert len(hover) == len(kept) > 0
    assert all(lay["transform"] == [{"filter": "datum.lone"}] for lay in kept)
    assert not any("transform" in lay for lay in hover)  # the page's own spec is untouched

    def size(png: bytes) -> tuple[int, int]:  # the IHDR chunk: width and height, big-endian
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        return struct.unpack(">II", png[16:24])

    assert size(vl_convert.vegalite_to_png(static)) == size(vl_convert.vegalite_to_png(spec))


def test_long_lists_are_cut_in_the_page_and_the_ticket(tmp_path_factory, tmp_path, monkeypatch):
    """A day-long incident can hold thousands of episodes and hundreds of restarts: the page and summary.md
    list a bounded number (every episode a finding names among them), summary.json keeps them all."""
    import logscope.report as report
    from logscope.api import diagnose
    from logscope.diagnose import findings
    from logscope.report import views

    out = tmp_path / "ladder"
    shutil.copytree(analysed(tmp_path_factory, "ladder"), out)
    monkeypatch.setattr(findings, "REPEATS", 1)  # E1 and E2 (two spikes) become one finding, on E1
    diagnose(
        out, AnalyzeOptions(thresholds=Thresholds(recovery_load_ratio=0))
    )  # any recovery counts: E1, E2 one-offs
    monkeypatch.setattr(report, "MAX_EPISODES_HTML", 2)
    monkeypatch.setattr(report, "MAX_EPISODES_MD", 1)
    render(out, AnalyzeOptions())
    s = summary_of(out)
    assert [e["id"] for e in s["episodes"]] == ["E1", "E2", "E3"]
    assert sorted(f["episode"] for f in s["findings"] if f.get("episode")) == ["E1", "E3"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<tr id="E1">' in html and '<tr id="E3">' in html and '<tr id="E2">' not in html
    assert "3 episodes: 2 listed (every one a finding names, then the earliest)" in html
    # the output lengths per episode: the listed episodes' rows (the 1 GB bench folder's page held 590)
    assert [r["episode_id"] for r in s["output_lengths"]["per_episode"]] == ["E1", "E2", "E3"]
    lengths = html[html.index('<h2 id="lengths"') : html.index('<h2 id="capacity"')]
    assert ">E1<" in lengths and ">E3<" in lengths and ">E2<" not in lengths
    assert "1 more in summary.json" in lengths
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert "3 episodes: 2 listed" in md and "| E2 |" not in md and "| E3 |" in md
    # without findings to keep, the earliest ones fill the room
    assert [
        e["id"] for e in views.episodes_shown({"episodes": s["episodes"], "findings": []}, 2)["rows"]
    ] == ["E1", "E2"]

    crash = summary_of(analysed(tmp_path_factory, "crash"))
    assert len(crash["cold_start"]["windows"]) == 2 and len(crash["server_lifecycle"]["deaths"]) == 1
    cut = views.cold_start_view(crash["cold_start"], 1)
    assert cut["windows"] == crash["cold_start"]["windows"][:1]
    assert cut["windows_not_shown"] == "1 more in summary.json"
    lines = views.lifecycle_lines(crash["server_lifecycle"], 0)
    assert lines[1] == "1 death(s); the first 0 listed below, all in summary.json (server_lifecycle.deaths)."
    assert not any(" at 08:34:22" in line for line in lines)  # the death itself is not listed
