"""Every table of every fixture is the same, value for value, as the code before the compiled scanner (#42) made
it: tests/data/golden-tables.json holds each table's row count and digest (tests/golden.py says how they are
computed and how to recompute them after a documented, justified change)."""

from __future__ import annotations

import json

import pytest

import golden

WANT = json.loads(golden.GOLDEN.read_text())
FOLDERS = golden.folders()


def test_every_fixture_folder_has_its_digests():
    assert sorted(WANT) == sorted(FOLDERS)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_tables_equal_the_golden_ones(name, tmp_path):
    got = golden.table_digests(name, FOLDERS[name], tmp_path / "golden")
    want = WANT[name]
    assert sorted(got) == sorted(want)
    differ = {t: (got[t], want[t]) for t in want if got[t] != want[t]}
    assert not differ, f"{name}: tables differ from the golden ones (rows, digest) now / before: {differ}"
