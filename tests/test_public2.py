"""public-2 (tests/data/fixtures/public-2): 38 real excerpts from public bug reports logscope was never shown, each
*fully read*: every line parsed, and every fact its truth.json gives found in the tables (tests/truth.py says how
each fact is read). The same measure prints the count: ``python tests/truth.py tests/data/fixtures/public-2``."""

from __future__ import annotations

import json

import pytest

from conftest import PUBLIC2, need
from truth import measure

# files not fully read yet, each with why (the test fails when one of them is, so the list never goes stale)
NOT_YET: dict[str, str] = {}


@pytest.fixture(scope="module")
def measured():
    return measure(need(PUBLIC2))


def test_every_file_has_facts():
    truth = json.loads((need(PUBLIC2) / "truth.json").read_text())
    logs = {p.name for p in PUBLIC2.glob("*.log")}
    assert logs == {k for k in truth if not k.startswith("_")} and logs  # 38 this round


@pytest.mark.parametrize("name", sorted(p.name for p in PUBLIC2.glob("*.log")))
def test_fully_read(measured, name):
    _, _, missing = measured
    if name in NOT_YET:
        assert missing[name], f"{name} is fully read now: take it off NOT_YET"
        pytest.xfail(NOT_YET[name])
    assert missing[name] == [], missing[name]
