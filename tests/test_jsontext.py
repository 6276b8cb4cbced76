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
