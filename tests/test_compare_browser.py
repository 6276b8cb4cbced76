"""compare.html opened in a real browser (headless Chromium), as tests/test_report_browser.py does for report.html:
every chart drawn, no script error, no network request; and at 1024, 1440 and 1920 px no word broken across lines
(the page broke words mid-word at 1024 px) and no table wider than the page or cut by its box (the per-step table
was cut off at that width).

Pages: a pair with matched steps but several changes (the V1 and V0 ladders), a pair whose steps match nothing (two
incidents), the one-change pair with its trade (max_num_seqs 64 → 8) and the real four-run sweep.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from test_report_browser import CHROMIUM, _Dom, open_in_chromium

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze, compare, sweep
from logscope.report.html import CSP

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed here (CI installs it: apt-get install chromium)",
)
PAGES = ("ladders", "incidents", "seqs", "sweep")
WIDTHS = (1024, 1440, 1920)


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("cmp-pages")
    runs: dict[str, Path] = {}

    def run(name: str, src: Path) -> Path:
        if name not in runs:
            analyze(need(src), base / name, AnalyzeOptions())
            runs[name] = base / name
        return runs[name]

    seqs = [run(n, LAB / n) for n in ("seqs-64", "seqs-32", "seqs-16", "seqs-8")]
    out = {
        "ladders": compare(run("ladder", LAB / "ladder"), run("v0", LAB / "v0-ladder"), base / "ladders"),
        "incidents": compare(run("spike", LAB / "spike"), run("crash", LAB / "crash"), base / "incidents"),
        "seqs": compare(seqs[0], seqs[-1], base / "seqs"),
        "sweep": sweep(seqs, base / "sweep"),
    }
    return {k: v["paths"]["compare_html"] for k, v in out.items()}


@pytest.mark.parametrize("name", PAGES)
def test_charts_drawn_no_error_no_network(pages, name):
    dom, stderr, urls = open_in_chromium(pages[name])
    d = _Dom()
    d.feed(dom)
    assert json.loads(d.root["data-logscope-errors"]) == []
    assert d.root["data-logscope-charts"] == "done"
    assert d.charts, "the page has no chart"
    for cid, c in d.charts.items():
        assert c["rendered"] == "svg" and c["svg"] >= 1 and c["marks"] >= 10, (cid, c)
    assert urls == [] and d.csp == [CSP]
    assert [ln for ln in stderr.splitlines() if ":CONSOLE" in ln] == []


# run in the page once its charts are drawn: every word of the page's text (outside the charts and folded
# sections) whose characters lie on more than one line (a word broken), and each table's box against its scroll
# box and the window, written into <html data-measure> for --dump-dom
MEASURE = """<script>
(function () {
  function measure() {
    if (document.documentElement.getAttribute("data-logscope-charts") !== "done") { setTimeout(measure, 50); return; }
    var broken = [], cut = [];
    var walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
    var node;
    while ((node = walker.nextNode())) {
      var el = node.parentElement;
      if (!el || el.closest(".chart") || el.closest("details:not([open])")) continue;
      // a word, or a hyphenated word's part: a line may end after a hyphen inside a word, as in print
      // ('one-/off'), never elsewhere inside a word, a figure ('5–7.5 s') or an option ('--max-num-seqs')
      var text = node.textContent, re = /-*[^\\s-]+-?/g, m;
      while ((m = re.exec(text))) {
        if (m[0].length < 2) continue;
        var r = document.createRange();
        r.setStart(node, m.index);
        r.setEnd(node, m.index + m[0].length);
        var tops = {};
        Array.prototype.forEach.call(r.getClientRects(), function (b) { if (b.width > 0) tops[Math.round(b.top)] = 1; });
        if (Object.keys(tops).length > 1) broken.push(m[0]);
      }
    }
    document.querySelectorAll("main table").forEach(function (t) {
      if (t.closest("details:not([open])")) return;
      var box = t.getBoundingClientRect(), wrap = t.parentElement;
      var scrolls = wrap.scrollWidth - wrap.clientWidth;
      if (box.right > window.innerWidth + 1 || scrolls > 1 || t.scrollWidth > t.clientWidth + 1)
        cut.push({cls: t.className, right: box.right, scrolls: scrolls});
    });
    document.documentElement.setAttribute("data-measure", JSON.stringify(
      {width: window.innerWidth, page: document.documentElement.scrollWidth, broken: broken, cut: cut}));
  }
  measure();
})();
</script>"""


def measured(page: Path, width: int, tmp: Path) -> dict:
    html = page.read_text(encoding="utf-8")
    head, tail = html.rsplit("</body>", 1)
    probe = tmp / f"measured-{width}.html"
    probe.write_text(head + MEASURE + "</body>" + tail, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}/u", f"--window-size={width},3000", "--virtual-time-budget=20000",
               "--dump-dom", probe.resolve().as_uri()]  # fmt: skip
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout
    d = _Dom()
    d.feed(dom)
    assert "data-measure" in d.root, "the page's charts were not drawn in time"
    return json.loads(d.root["data-measure"])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_no_word_broken_and_no_table_cut(pages, name, width, tmp_path):
    m = measured(pages[name], width, tmp_path)
    assert m["width"] == width and m["page"] <= width
    assert m["broken"] == [], m["broken"][:10]
    assert m["cut"] == []


def test_the_measure_sees_a_broken_word(pages, tmp_path):
    """The check is not blind: a cell squeezed to 3 em breaks its words, and is reported."""
    page = tmp_path / "squeezed.html"
    page.write_text(
        pages["ladders"].read_text(encoding="utf-8").replace("</style>", "td { width: 3em; max-width: 3em; "
        "overflow-wrap: anywhere !important; }</style>", 1),
        encoding="utf-8",
    )  # fmt: skip
    assert measured(page, 1024, tmp_path)["broken"]
