"""report.html opened in a real browser (headless Chromium): charts drawn, no error, no network.

Chromium runs the page with a virtual-time budget and dumps the DOM after the scripts ran. The
page's own error hook (window.onerror, unhandled rejections, console.error, CSP violations) writes
what it caught into ``<html data-logscope-errors>``; Chromium's NetLog lists every request the
page made (browser-internal ones, such as component updates, have no page origin and are left out).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import DATA, LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.report.html import CSP

CHROMIUM = Path("/usr/bin/chromium")
# 'run@budget': analysed under a 1-byte memory budget, so that logscope picks the worst minute and the
# report shows the whole input's overview chart
RUNS = ("spike", "retry-storm", "ladder", "crash", "orphan", "calm", "retry-storm@budget")

pytestmark = [
    pytest.mark.slow,  # headless Chromium
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="/usr/bin/chromium is not installed here (CI installs it: apt-get install chromium)",
    ),
]


def analysed(tmp_path_factory, run: str) -> Path:
    """Same session-wide folder as test_report.py: each lab run is analysed once per session (lab2/… are the
    gzipped recordings of tests/data/lab2)."""
    out = tmp_path_factory.getbasetemp() / "lab-reports" / run.replace("/", "-")
    if not (out / "report.html").exists():
        name, _, budget = run.partition("@")
        src = DATA / name if name.startswith("lab2/") else LAB / name
        analyze(
            need(src),
            out,
            AnalyzeOptions(command_line=f"logscope analyze {name}", max_memory=1 if budget else "auto"),
        )
    return out


def open_in_chromium(page: Path) -> tuple[str, str, list[str]]:
    """(DOM after the scripts ran, Chromium's stderr, URLs the page itself requested)."""
    with tempfile.TemporaryDirectory() as profile:
        netlog = Path(profile) / "net.json"
        cmd = [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}/u",
            "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}", "--virtual-time-budget=15000",
            "--dump-dom", page.resolve().as_uri(),
        ]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return res.stdout, res.stderr, page_requests(netlog)


def page_requests(netlog: Path) -> list[str]:
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for ev in log["events"]:
        p = ev.get("params") or {}
        # the begin event carries the url; "not an origin" initiates the browser's own requests
        if ev["type"] == start and "url" in p and p.get("initiator") != "not an origin":
            urls.append(p["url"])
    return [u for u in urls if not u.startswith(("file:", "data:"))]


class _Dom(HTMLParser):
    """Chart containers and what was drawn in each (svg marks)."""

    def __init__(self) -> None:
        super().__init__()
        self.root: dict[str, str] = {}
        self.csp: list[str] = []
        self.charts: dict[str, dict] = {}
        self._stack: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        if tag == "html":
            self.root = {k: v or "" for k, v in attrs}
        if tag == "meta" and (d.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(d.get("content") or "")
        current = next((c for c in reversed(self._stack) if c), None)
        if d.get("data-chart"):
            current = d["id"]
            self.charts[current] = {"rendered": d.get("data-rendered"), "svg": 0, "marks": 0, "text": 0}
        if current:
            c = self.charts[current]
            c["svg"] += tag == "svg"
            c["marks"] += tag in ("path", "line", "rect")
            c["text"] += tag == "text"
        if tag not in ("meta", "br", "img", "input", "link", "hr", "col", "source", "wbr"):
            self._stack.append(d["id"] if d.get("data-chart") else None)

    def handle_endtag(self, tag):
        if self._stack and tag not in ("meta", "br", "img", "input", "link", "hr"):
            self._stack.pop()


@pytest.fixture(scope="module", params=RUNS)
def opened(request, tmp_path_factory):
    out = analysed(tmp_path_factory, request.param)
    dom, stderr, urls = open_in_chromium(out / "report.html")
    parsed = _Dom()
    parsed.feed(dom)
    return out, dom, stderr, urls, parsed


def test_no_error_and_every_chart_drawn(opened):
    out, dom, stderr, urls, d = opened
    assert json.loads(d.root["data-logscope-errors"]) == []
    assert d.root["data-logscope-charts"] == "done"
    assert d.charts, "the page has no chart container"
    for cid, c in d.charts.items():
        assert c["rendered"] == "svg", cid
        assert c["svg"] >= 1 and c["marks"] >= 10 and c["text"] >= 3, (cid, c)
    assert "chart-timeline" in d.charts
    assert ("chart-overview" in d.charts) == out.name.endswith("@budget")


def test_no_console_message(opened):
    """Vega warnings and errors go to the console: none is expected from a well-formed spec."""
    _, _, stderr, _, _ = opened
    console = [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]
    assert console == []


def test_no_network_request_and_csp_present(opened):
    _, _, _, urls, d = opened
    assert urls == []
    assert d.csp == [CSP]


def test_verdict_is_shown(opened):
    out, dom, _, _, _ = opened
    for line in json.loads((out / "summary.json").read_text())["verdict"]:
        assert f"<li>{html.escape(line, quote=False)}</li>" in dom  # as Chromium serialises text


def test_network_check_would_see_a_request(tmp_path):
    """The NetLog check is not blind: a page that fetches an address is caught."""
    page = tmp_path / "fetching.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    _, _, urls = open_in_chromium(page)
    assert urls == ["http://127.0.0.1:9/x.png"]


def test_error_hook_would_see_an_error(tmp_path_factory, tmp_path):
    """The page's error hook is not blind: a script error in a copy of a real report is recorded."""
    page = (analysed(tmp_path_factory, "calm") / "report.html").read_text()
    broken = tmp_path / "broken.html"
    head, tail = page.rsplit("</body>", 1)  # the last one: the Vega bundle holds the string too
    broken.write_text(head + "<script>undefinedFunction();</script></body>" + tail)
    dom, _, _ = open_in_chromium(broken)
    d = _Dom()
    d.feed(dom)
    errors = json.loads(d.root["data-logscope-errors"])
    assert len(errors) == 1 and "undefinedFunction" in errors[0]


# ------------------------------------------------------------------ the page's layout at three widths

WIDTHS = (1024, 1440, 1920)
LAYOUT_RUNS = ("spike", "crash", "ladder", "retry-storm", "lab2/sigterm-overload")
# run in the page once its charts are drawn: the boxes of every chart card, its drawing, each legend and the
# plot it belongs to, and each label drawn in a plot, written into <html data-measure> for --dump-dom
MEASURE = """<script>
(function () {
  function box(e) { var r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  function plotOf(e) {
    var cell = e.parentElement && e.parentElement.closest("g.role-scope");
    var bg = cell && cell.querySelector(":scope > g > path.background");
    return bg ? box(bg) : null;
  }
  function measure() {
    if (document.documentElement.getAttribute("data-logscope-charts") !== "done") { setTimeout(measure, 50); return; }
    var charts = [];
    document.querySelectorAll(".chart").forEach(function (card) {
      var svg = card.querySelector("svg.marks");
      if (!svg) return;
      var c = {id: card.id, card: box(card), svg: box(svg), scroll: card.scrollWidth - card.clientWidth,
               legends: [], labels: []};
      svg.querySelectorAll("g.role-legend").forEach(function (lg) {
        c.legends.push({box: box(lg), plot: plotOf(lg), text: lg.getAttribute("aria-label")});
      });
      svg.querySelectorAll("g.role-mark text").forEach(function (t) {
        if (t.textContent) c.labels.push({box: box(t), plot: plotOf(t.parentElement), text: t.textContent});
      });
      svg.querySelectorAll("g.role-axis").forEach(function (ax) {
        var ticks = [];
        ax.querySelectorAll("g.role-axis-label text").forEach(function (t) { ticks.push(t.textContent); });
        c.labels.push({axis: ax.getAttribute("aria-label") || "", ticks: ticks});
      });
      charts.push(c);
    });
    document.documentElement.setAttribute("data-measure", JSON.stringify(
      {width: window.innerWidth, page: document.documentElement.scrollWidth, charts: charts}));
  }
  measure();
})();
</script>"""


def measured(out: Path, width: int, tmp_path: Path) -> dict:
    page = (out / "report.html").read_text(encoding="utf-8")
    head, tail = page.rsplit("</body>", 1)
    probe = tmp_path / f"measured-{width}.html"
    probe.write_text(head + MEASURE + "</body>" + tail, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}/u", f"--window-size={width},3000", "--virtual-time-budget=15000",
               "--dump-dom", probe.resolve().as_uri()]  # fmt: skip
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    d = _Dom()
    d.feed(dom)
    assert "data-measure" in d.root, "the page's charts were not drawn in time"
    return json.loads(d.root["data-measure"])


def inside(a: list[float], b: list[float], slack: float = 1.0) -> bool:
    return a[0] >= b[0] - slack and a[1] >= b[1] - slack and a[2] <= b[2] + slack and a[3] <= b[3] + slack


def overlap(a: list[float], b: list[float]) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1


@pytest.fixture(
    scope="module", params=[(r, w) for r in LAYOUT_RUNS for w in WIDTHS], ids=lambda p: f"{p[0]}@{p[1]}"
)
def layout(request, tmp_path_factory):
    run, width = request.param
    out = analysed(tmp_path_factory, run)
    return run, width, measured(out, width, tmp_path_factory.mktemp("layout"))


def test_every_legend_fits_its_chart_and_stays_off_the_plot(layout):
    """At 1024 px every chart legend was cut off, and error markers were drawn over the legend: each legend's box
    lies inside its drawing and its card, and outside the plot it belongs to."""
    run, width, m = layout
    assert m["width"] == width
    legends = 0
    for c in m["charts"]:
        for lg in c["legends"]:
            legends += 1
            assert inside(lg["box"], c["svg"]) and inside(lg["box"], c["card"]), (c["id"], lg["text"])
            assert lg["plot"] is None or not overlap(lg["box"], lg["plot"]), (c["id"], lg["text"])
    assert legends >= 8  # the timeline's panels have theirs (outcomes, arrivals, queue, KV, tokens, …)


def test_no_chart_overflows_its_card_and_the_timeline_fills_it(layout):
    """The timeline card overflowed the page in a long overload: no card scrolls sideways, the page does not,
    and the timeline is drawn as wide as its card allows (within the room its axes take)."""
    run, width, m = layout
    assert m["page"] <= width
    for c in m["charts"]:
        assert c["scroll"] <= 0 and inside(c["svg"], c["card"]), c["id"]
    tl = next(c for c in m["charts"] if c["id"] == "chart-timeline")
    card_w, svg_w = tl["card"][2] - tl["card"][0], tl["svg"][2] - tl["svg"][0]
    assert card_w - 40 <= svg_w <= card_w, (card_w, svg_w)


def test_labels_stay_in_their_plot_and_counts_have_whole_ticks(layout):
    """The episode label overlapped the axis title; count panels showed 0.2, 0.4: every label drawn in a plot
    (phases, server events, episodes, SLO) lies within that plot's width, and no axis label of a count panel
    has a fraction (the timeline's count axes, the only fractional ones being shares, seconds and ratios)."""
    run, width, m = layout
    counts = 0
    for c in m["charts"]:
        for lb in c["labels"]:
            if "axis" in lb:  # a count axis is titled 'per … window' (or counts requests, retries)
                if re.match(r"Y-axis titled '(per |retries|requests)", lb["axis"]):
                    counts += 1
                    assert lb["ticks"] and not any("." in t for t in lb["ticks"]), (c["id"], lb)
            elif lb["plot"] is not None:
                assert lb["box"][0] >= lb["plot"][0] - 1 and lb["box"][2] <= lb["plot"][2] + 1, (
                    c["id"],
                    lb["text"],
                )
    assert counts >= 3
    # SI ticks share a prefix: zero was drawn '0k' beside '0.5k' on the token throughput panel
    ticks = [t for c in m["charts"] for lb in c["labels"] if "axis" in lb for t in lb["ticks"]]
    assert "0" in ticks and not [t for t in ticks if re.fullmatch(r"0[a-zA-Zµ]+", t)], sorted(set(ticks))
