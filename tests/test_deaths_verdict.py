"""Every way an engine dies, as real logs word it, reaches ``logscope analyze``'s verdict as a death (issue #37 item 7
depends on it): the lexicon's event (parsers/_lexicon.py), the lifecycle's death, the crash episode and the
verdict's first line, read from summary.json and summary.md (one object renders both)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import DATA, PUBLIC2, need
from logscope.api import AnalyzeOptions, analyze

DEATHS = DATA / "vllm-deaths"
CASES = {
    # V1 0.7.3 and 0.8.4: the engine core's 'EngineCore hit an exception'
    "v0.7.3 EngineCore hit an exception": DEATHS / "13673-v0.7.3-enginecore-hit-an-exception.log",
    "v0.8.4 EngineCore hit an exception": DEATHS / "17227-v0.8.4-enginecore-hit-an-exception-keyerror.log",
    # V0's multiprocessing executor: a worker killed with SIGTERM (0.6 on ROCm, 0.8.4 on Ascend)
    "v0.6 worker died -15": DEATHS / "rocm-3956-v0.6-worker-died-exit-code-15.log",
    "v0.8.4 workers died -15": DEATHS / "ascend-612-v0.8.4-workers-died-exit-code-15.log",
    # V0 0.8 MQLLMEngine: MQEngineDeadError after an OOM while loading a LoRA
    "MQEngineDeadError after a LoRA OOM": PUBLIC2 / "n03-v0-0.8-lora-runtime-oom-mqenginedeaderror.log",
    # V1: EngineDeadError in the API server's output handler
    "EngineDeadError in the output handler": DEATHS / "lmcache-2306-v1-enginedeaderror-output-handler.log",
    "EngineDeadError, double-spaced paste": PUBLIC2
    / "n17-v1-0.10-apiserver-enginedeaderror-double-spaced-paste.log",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_death_reaches_the_verdict(tmp_path, case):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(need(CASES[case]), src / CASES[case].name)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    deaths = s["server_lifecycle"]["deaths"]
    assert deaths, s["verdict"]
    assert set(deaths[0]["kinds"]) <= {"engine_dead", "oom", "engine_timeout"}
    assert any(e["class"] == "crash" for e in s["episodes"])
    assert "died" in s["verdict"][0]
    md = (tmp_path / "out" / "summary.md").read_text().replace("\\_", "_")  # markdown escapes '_'
    assert s["verdict"][0] in md
