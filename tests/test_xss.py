"""Log text is attacker-controlled: planted payloads must come out as text, never as markup or code.

Real lab files are copied with only field values replaced (request ids, client ids, user agents,
model names, error messages, prompts, request paths; plus file and folder names, which become
client and replica names), so every line keeps the exact format the real program printed. The
payloads: a script element, an attribute breakout with an event handler, and a template expression.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.report.html import vega_bundle
from logscope.report.markdown import md

P_SCRIPT = "<script>alert(1)</script>"
P_IMG = '"><img src=x onerror=alert(1)>'
P_TPL = "{{ 7*7 }}"
PROMPT_MARK = "prompt-marker-5b1e"
CHROMIUM = Path("/usr/bin/chromium")
CLIENT_LOG = f"client-{P_IMG}.log"  # a file name: the client name the report shows
V0_DIR = f"v0 {P_TPL}"  # a folder name: the replica name the report shows

Sub = tuple[str, str | Callable[[re.Match], str]]


def first_request_id(text: str) -> str:
    return re.search(r"Received request cmpl-([0-9a-f]{32})-0", text).group(1)


def plant(src: Path, dst: Path, subs: list[Sub]) -> None:
    """Copy src to dst replacing field values; each pattern must still match the real file."""
    text = src.read_text(encoding="utf-8")
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text)
        assert n, f"{pattern!r} no longer matches {src}: the fixture changed"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, encoding="utf-8")


def lit(s: str) -> Callable[[re.Match], str]:
    return lambda _m: s  # a literal replacement (no backslash processing)


def poisoned_folder(root: Path) -> Path:
    spike, v0, ladder = need(LAB / "spike"), need(LAB / "v0-ladder"), need(LAB / "ladder")
    rid = first_request_id((spike / "vllm-server.log").read_text())
    j = json.dumps  # JSON string literal of a payload, as a JSON writer escapes it
    # vLLM V1: a request id (all its lines), the served model name, a warning's message
    plant(spike / "vllm-server.log", root / "vllm-server.log", [
        (rid, lit(P_SCRIPT)),
        (r"'served_model_name': \['tiny'\]", lit(f"'served_model_name': ['{P_SCRIPT}']")),
        (r"detected: VLLM_ARGS_STR", lit(f"detected: {P_IMG} {P_TPL}")),
    ])  # fmt: skip
    # nginx access: nginx writes '"' in a variable as \x22; the request id, client id, user agent, path
    plant(spike / "nginx-access.log", root / "nginx-access.log", [
        (rid, lit(P_SCRIPT)),
        (r'client_rid="spike-w01-00002"', lit('client_rid="' + P_IMG.replace('"', "\\x22") + '"')),
        (r'ua_client="OpenAI/Python 3\.57\.0"', lit(f'ua_client="{P_TPL} {P_SCRIPT}"')),
        (r'"POST /v1/completions HTTP/1\.1" status=200 rt=1\.770',
         lit(f'"POST /v1/{P_SCRIPT} HTTP/1.1" status=200 rt=1.770')),
    ])  # fmt: skip
    plant(spike / "nginx-error.log", root / "nginx-error.log", [
        (r'host: "127\.0\.0\.1:8081"', lit(f'host: "{P_SCRIPT}"')),
        (r'request: "POST /v1/completions HTTP/1\.1"', lit(f'request: "POST /v1/{P_TPL} HTTP/1.1"')),
    ])  # fmt: skip
    shutil.copy(spike / "nginx.conf", root / "nginx.conf")
    # openai client log (file name too) and the client's JSONL records
    plant(spike / "client-spike.log", root / CLIENT_LOG, [
        (r"request spike-w00-00001 done status=200 err=None",
         lit(f"request {P_SCRIPT} done status=200 err={P_TPL}")),
    ])  # fmt: skip
    plant(spike / "client-spike.jsonl", root / "client-spike.jsonl", [
        (r'"rid": "spike-w00-00003"', lit(f'"rid": {j(P_IMG)}')),
        (r'"error": null', lit(f'"error": {j(P_SCRIPT + " " + P_TPL)}')),
    ])  # fmt: skip
    # Prometheus: the model_name label in the promtool dump and in the HTTP API answers
    plant(spike / "prometheus" / "tsdb-dump.txt", root / "prometheus" / "tsdb-dump.txt",
          [(r'model_name="tiny"', lit(f'model_name="{P_SCRIPT}"'))])  # fmt: skip
    for f in sorted((spike / "prometheus").glob("query_range-*.json")):
        plant(f, root / "prometheus" / f.name, [(r'"model_name":"tiny"', lit(f'"model_name":{j(P_SCRIPT)}'))])
    # vLLM V0 prints prompts: every prompt replaced (folder name = replica name)
    plant(v0 / "vllm-server.log", root / V0_DIR / "vllm-server.log", [
        (r"prompt: '[^']*'", lit(f"prompt: '{P_SCRIPT} {P_IMG} {P_TPL} {PROMPT_MARK}'")),
    ])  # fmt: skip
    # vllm bench serve JSON: model id, an error text, a generated text
    plant(ladder / "bench" / "ladder-c1.json", root / "bench" / "ladder-c1.json", [
        (r'"model_id": "tiny"', lit(f'"model_id": {j(P_SCRIPT)}')),
        (r'"errors": \[""', lit(f'"errors": [{j(P_IMG)}')),
        (r'"generated_texts": \["', lit(f'"generated_texts": [{j(P_TPL)[:-1]}')),
    ])  # fmt: skip
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = poisoned_folder(tmp_path_factory.mktemp("poisoned"))
    out = tmp_path_factory.mktemp("poisoned-out")
    analyze(root, out, AnalyzeOptions(command_line=f"logscope analyze {P_TPL} {P_SCRIPT}"))
    return out


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.scripts: list[dict] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers += [(tag, k) for k, _ in attrs if k.startswith("on")]
        if tag == "script":
            self.scripts.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def test_the_payloads_were_really_read(report):
    """The test is not vacuous: the planted files were parsed and payloads reached the outputs."""
    s = json.loads((report / "summary.json").read_text())
    formats = {f["path"]: f["format"] for f in s["inputs"]["files"]}
    assert formats[CLIENT_LOG] == "openai_client"
    assert formats["vllm-server.log"] == formats[f"{V0_DIR}/vllm-server.log"] == "vllm_server"
    assert formats["nginx-access.log"] == "nginx_access" and formats["nginx-error.log"] == "nginx_error"
    assert formats["prometheus/tsdb-dump.txt"] == "prometheus_tsdb_dump"
    assert formats["bench/ladder-c1.json"] == "vllm_bench"
    assert formats["client-spike.jsonl"] == "client_jsonl"
    page = (report / "report.html").read_text()
    # file and folder names are shown as text: escaped, and the template expression not evaluated
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert P_TPL in page and md(P_TPL) in (report / "summary.md").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the command line, in the appendix


def test_no_payload_is_markup_in_the_page(report):
    page = (report / "report.html").read_text()
    ours = page.replace(str(vega_bundle()), "")  # the bundle's own JS holds '<img' in a tooltip template
    assert ours != page
    assert "<script>alert" not in ours.lower() and "<img" not in ours.lower()
    p = _Markup()
    p.feed(page)
    assert p.handlers == []  # no onerror=/onload= attribute anywhere
    assert "img" not in p.tags
    # our scripts only: the error hook, the Vega bundle, the chart loop, and JSON chart specs
    code = [s for s in p.scripts if s.get("type") != "application/json"]
    specs = [s for s in p.scripts if s.get("type") == "application/json"]
    assert len(code) == 3 and all(s == {} for s in code)
    assert all(re.fullmatch(r"spec-[a-z_]+", s.get("id", "")) for s in specs)


def test_json_blocks_hold_payloads_only_as_escaped_strings(report):
    page = (report / "report.html").read_text()
    for block in re.findall(r'<script type="application/json" id="spec-[a-z_]+">(.*?)</script>', page, re.S):
        assert "<" not in block and ">" not in block
        json.loads(block)


def test_markdown_keeps_payloads_literal(report):
    text = (report / "summary.md").read_text()
    assert re.search(r"(?<!\\)<", text) is None  # every "<" is backslash-escaped: no HTML can open
    assert "\\<img src=x onerror=alert(1)\\>" in text  # the client log's name, backslash-escaped


def test_prompts_are_not_copied(report):
    for name in ("summary.json", "summary.md", "report.html"):
        assert PROMPT_MARK not in (report / name).read_text(), name


def test_template_expressions_are_not_evaluated(report):
    for name in ("summary.json", "summary.md", "report.html"):
        text = (report / name).read_text()
        assert "v0 49" not in text and "err=49" not in text, name


@pytest.mark.slow  # a child process
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed here (CI installs it)")
def test_nothing_injected_in_the_browser(report):
    with tempfile.TemporaryDirectory() as profile:
        res = subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom",
             (report / "report.html").as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    dom = res.stdout
    p = _Markup()
    p.feed(dom)
    assert "img" not in p.tags and p.handlers == []
    code = [s for s in p.scripts if s.get("type") != "application/json"]
    assert len(code) == 3
    root = re.search(r"<html[^>]*>", dom).group(0)
    assert 'data-logscope-errors="[]"' in root and 'data-logscope-charts="done"' in root
    assert f"client-{P_IMG}.log" in "".join(p.text)  # shown as plain text in the appendix


def test_words_kept_whole_are_escaped():
    """The generic tables keep short words on one line in a span of their own (report.html._whole): the word
    is still escaped (a replica or file name is attacker-controlled)."""
    from logscope.report.html import _whole

    word = "<svg/onload=alert(1)>"  # no blank: it takes the short-word path
    assert str(_whole(word)) == '<span class="nowrap">&lt;svg/onload=alert(1)&gt;</span>'
    assert _whole("replica-0") == '<span class="nowrap">replica-0</span>'
    assert _whole("two words") is None and _whole(7682) is None
