"""A death at start-up, before any request was served, is told a next test that follows from what it holds (its
signal, the error its start-up raised), never 'a lower --max-num-seqs / --max-batch-size to tell a load-driven death
from a software fault': with no request served, load cannot be the cause (diagnose.findings.startup_death).

TGI #1627: shard 0 'signaled to shutdown with signal 4' (SIGILL) 9 s after it started: an instruction this CPU lacks,
so the build or image against the CPU. vLLM #28910 and GPUStack #2723: 'Exception: WorkerProc initialization failed
…' raised at start-up: the error is quoted and what it names is the test. vllm-public 39 (a start-up CUDA OOM) and
47 (max_model_len's KV check) already said memory settings / a shorter --max-model-len, and still do."""

from __future__ import annotations

import pytest

from conftest import DATA, PUBLIC

UNSEEN = DATA / "unseen"
LOAD_WORDS = ("load-driven", "--max-num-seqs", "--max-batch-size")
WORKERPROC = "Exception: WorkerProc initialization failed due to an exception in a background process."
CASES = {  # sample: (the engine's signal, the raised error quoted, words of its next test)
    UNSEEN / "tgi-1627-v1.4-launcher-shard-signal-4-cannot-start.log": (
        "SIGILL",
        "Error: ShardCannotStart",
        "Compare the image's build target with this host's CPU",
    ),
    UNSEEN / "vllm-28910-v0.11-startup-workerproc-failed-process-enginecore-dp0.log": (
        None,
        WORKERPROC,
        f"Fix what the start-up's error names ({WORKERPROC}",
    ),
    UNSEEN / "gpustack-2723-v0.10-startup-workerproc-failed-process-enginecore-0-bare.log": (
        None,
        WORKERPROC,
        f"Fix what the start-up's error names ({WORKERPROC}",
    ),
}


@pytest.mark.parametrize("src", sorted(CASES), ids=lambda p: p.name[:20])
def test_a_startup_death_is_not_told_to_lower_the_load(analyzed, rendered, src):
    signal, error, test = CASES[src]
    raw = src.read_text(errors="replace")
    assert error in raw and (signal is None or "with signal 4" in raw)  # what the engine printed
    out, s, _ = analyzed(src)
    [d] = s["server_lifecycle"]["deaths"]
    assert d["at_startup"] and d["ready"] is None
    [f] = [f for f in s["findings"] if f["kind"] == "crash"]
    assert f["title"].startswith("Engine died at start-up, before serving any request, at ")
    assert f["next_test"].startswith(test) and "no request was served" in f["next_test"]
    assert not any(w in f["next_test"] for w in LOAD_WORDS)
    if signal == "SIGILL":
        assert f["cause"].startswith("an instruction the CPU lacks (SIGILL)")
        assert "who killed it" not in f["evidence"]  # the CPU ended it: no killer to look for
    else:
        assert f["cause"] == f"the start-up raised an error: {error[:-1]}. See stack trace for root cause."
    # the verdict's next test is the finding's, everywhere it is rendered
    assert s["verdict"][2] == f"First thing to test: {f['next_test']}"
    seen = rendered(out, s)
    for name, text in seen.items():
        assert test in text and "load-driven" not in text, name
    for name in ("summary.md", "report.html"):
        assert f["cause"] in seen[name], name


@pytest.mark.parametrize(
    "name, said",
    [
        ("39-v1-startup-cuda-driver-oom-enginecore-failed.log", "Start with a shorter --max-model-len"),
        ("47-v0-0.6.4-startup-0.31x-131072-maxseqlen-valueerror.log", "Start with a shorter --max-model-len"),
    ],
)
def test_startup_memory_deaths_keep_their_memory_advice(analyzed, name, said):
    _, s, _ = analyzed(PUBLIC / name)
    assert s["verdict"][2].startswith(f"First thing to test: {said}")
    assert not any(w in s["verdict"][2] for w in LOAD_WORDS)
