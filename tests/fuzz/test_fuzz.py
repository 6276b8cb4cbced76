"""The CI fuzz run: a fixed seed and a fixed budget of cases (30: 1.5 to 3 minutes on 2 cores, as loaded), each analysed in a
process of its own and checked by harness.py. Failures known to belong to another branch (known.py) are
reported apart and do not fail it; any other does, with the spec to replay it (``bench/fuzz.py --spec``).
A longer run: ``python bench/fuzz.py --runs 500 --seed 7``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mutations import LAB, corpus, draw_case

from conftest import need

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from fuzz import run, table  # noqa: E402

pytestmark = pytest.mark.slow  # fuzzing: mutated real logs through the whole CLI, each in a child process

CI_SEED = 2026
CI_RUNS = int(os.environ.get("LOGSCOPE_FUZZ_RUNS", "30"))


def test_fuzz_ci_budget(tmp_path):
    need(LAB)
    src = corpus()
    cases = [(f"seed {CI_SEED} case {i}", draw_case(CI_SEED, i, src)) for i in range(CI_RUNS)]
    log: list[str] = []
    res = run(cases, jobs=2, timeout=120, log=log.append)
    print("\n".join(log))
    print(table(res))
    assert sum(res["exits"].values()) == CI_RUNS
    assert not res["new"], json.dumps(res["new"], indent=1, ensure_ascii=True)
