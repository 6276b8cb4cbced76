"""logscope.jsontext: the layout of diagnosis.json (outer levels a member per line, the rest on one line)."""

from __future__ import annotations

import json

import pytest

from conftest import LAB, need
from logscope import jsontext


def test_values_and_layout_of_a_real_diagnosis(tmp_path):
    """The spike run's diagnosis: the text reads back as the same values json.dumps gives, keys sorted,
    non-ASCII kept, each episode's fields a line apiece and everything below them on one line."""
    from logscope.api import analyze

    analyze(need(LAB / "spike"), tmp_path)
    text = (tmp_path / "diagnosis.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert text == jsontext.dumps(doc, depth=3)  # what diagnose writes
    assert json.loads(jsontext.dumps(doc, depth=3)) == json.loads(json.dumps(doc)) == doc
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and text.endswith("}\n")
    keys = [ln[2:].split('"')[0] for ln in lines if ln.startswith(' "')]
    assert keys == sorted(doc) and len(keys) == len(doc)
    ep = doc["episodes"][0]
    details = [ln for ln in lines if ln.startswith('   "details": {')]
    assert len(details) == len(doc["episodes"]) and json.loads(
        "{" + details[0].strip().rstrip(",") + "}"
    ) == {"details": ep["details"]}
    assert f'   "signal": "{ep["signal"]}",' in lines
    assert jsontext.dumps({"é": ["ü", {"b": 1, "a": [2, {}]}], "n": None}, depth=2) == (
        '{\n "n": null,\n "é": [\n  "ü",\n  {"a": [2, {}], "b": 1}\n ]\n}\n'
    )


@pytest.mark.parametrize("obj", [[], {}, 1.5, "x", None, {"a": []}, [[]], {1: "int key"}])
def test_small_values(obj):
    assert json.loads(jsontext.dumps(obj)) == json.loads(json.dumps(obj))


# json.dumps where it writes no JSON file of logscope's: the page's inline data, OTLP JSON lines (one record a
# line, a format of its own), a chart spec piped to vl-convert, a span attribute kept as text in a column
NOT_A_FILE = {"report/html.py", "traces_export.py", "report/__init__.py", "_spans.py"}


def test_every_json_file_is_written_by_one_writer():
    """No module but jsontext encodes a JSON file: the others call ``jsontext.write`` with their file's layout."""
    import ast

    from conftest import ROOT

    found = {}
    for p in [*(ROOT / "logscope").rglob("*.py"), *(ROOT / "parsers").glob("*.py")]:
        rel = str(p.relative_to(ROOT / p.relative_to(ROOT).parts[0]))
        calls = [
            n.lineno
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("dump", "dumps")
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "json"
        ]
        if calls and rel != "jsontext.py":
            found[rel] = calls
    assert set(found) == NOT_A_FILE, found
    src = (ROOT / "logscope" / "report" / "__init__.py").read_text(encoding="utf-8")
    assert src.count("json.dumps(") == 1 and "json.dumps(spec)" in src  # the chart spec, not summary.json


def test_the_layouts_of_the_files(tmp_path):
    """summary.json's layout refuses NaN (other programs read it; NaN is no JSON) and keeps the order built;
    correlation.json's sorts its keys; a file written reads back as the values, UTF-8 kept."""
    doc = {"z": 1, "é": [1.5, None], "a": {"b": "ü"}}
    p = jsontext.write(tmp_path / "s.json", doc, jsontext.SUMMARY)
    text = p.read_text(encoding="utf-8")
    assert json.loads(text) == doc and text.endswith("}\n") and text.index('"z"') < text.index('"a"')
    assert text == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"  # the bytes summary.json always had
    with pytest.raises(ValueError):
        jsontext.SUMMARY.dumps({"x": float("nan")})
    assert jsontext.CORRELATION.dumps(doc).index('"a"') < jsontext.CORRELATION.dumps(doc).index('"z"')
    assert json.loads(jsontext.DIAGNOSIS.dumps({"x": float("nan")}))["x"] != 0  # NaN read back as NaN
