"""Requests for a model the server does not serve (HTTP 404 'The model `X` does not exist.'): client errors,
counted by model, on a real public excerpt (tests/data/vllm-404/README.md)."""

from __future__ import annotations

import shutil

from conftest import DATA
from logscope.api import diagnose, ingest


def test_unknown_model_is_a_client_error_by_model(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(DATA / "vllm-404" / "16361-model-does-not-exist.log", src)
    ingest(src, tmp_path / "out")
    d = diagnose(tmp_path / "out")
    found = [f for f in d["findings"] if "does not serve" in f["title"]]
    assert len(found) == 1
    f = found[0]
    # two 'does not exist' error lines (chat), one 404 access line left in the excerpt: 2 requests
    assert f["kind"] == "errors" and f["title"].startswith(
        "2 request(s) asked for a model the server does not serve"
    )
    assert "`/mnt/e/models/ISTA-DASLab_Mistral-Small-3.1-24B-Instruct-2503-GPTQ-4b-128g` (2)" in f["title"]
    assert "2 'does not exist' error line(s), 1 404 answer(s)" in f["evidence"]
    # every request the excerpt shows answered failed: no mere footnote
    assert f["severity"] == "medium"
    assert "03:53:16" in f["start"] and "03:53:16" in f["end"]
