"""The event lexicon (parsers/_lexicon.py): deaths, OOM, preemptions and timeouts found by their words whatever the
line's prefix, on real excerpts of each engine's versions (tests/data/vllm-deaths/README.md, tests/data/sglang/
README.md and public-2's INDEX.md name their threads)."""

from __future__ import annotations

import polars as pl
import pytest

from conftest import DATA, PUBLIC2, ingest_files, need
from logscope.parsers import _lexicon as lexicon
from logscope.parsers.base import ParseContext

DEATHS = DATA / "vllm-deaths"
SG = DATA / "sglang"


def _events(tmp_path, path):
    res = ingest_files(tmp_path, path)
    f = res.files.row(0, named=True)
    assert f["lines_unrecognized"] == 0, f
    return res.table("server_events").filter(pl.col("kind") != "http_access")


@pytest.mark.parametrize(
    "name",
    [
        "13673-v0.7.3-enginecore-hit-an-exception.log",  # V1 0.7.3, 'core.py:291]' without brackets
        "17227-v0.8.4-enginecore-hit-an-exception-keyerror.log",  # V1 0.8.4, '[core.py:387]'
    ],
)
def test_enginecore_hit_an_exception_is_a_death(tmp_path, name):
    ev = _events(tmp_path, DEATHS / name)
    assert ev["kind"].to_list() == ["engine_dead"]
    assert ev["fatal"].to_list() == [True]
    assert ev["message"][0].startswith("EngineCore hit an exception: Traceback")


@pytest.mark.parametrize(
    ("name", "deaths"),
    [
        (
            "rocm-3956-v0.6-worker-died-exit-code-15.log",
            1,
        ),  # V0 0.6 on ROCm, 'multiproc_worker_utils.py:120]'
        ("ascend-612-v0.8.4-workers-died-exit-code-15.log", 1),  # V0 0.8.4: four lines of one record
    ],
)
def test_worker_death_says_its_signal(tmp_path, name, deaths):
    ev = _events(tmp_path, DEATHS / name)
    died = ev.filter(pl.col("exit_code").is_not_null())
    assert died.height == deaths
    assert died["kind"].to_list() == ["engine_dead"] and died["fatal"].to_list() == [True]
    assert died["exit_code"].to_list() == [-15] and died["signal"].to_list() == ["SIGTERM"]
    assert "died, exit code: -15" in died["message"][0]
    # the V0 launcher's last words after the workers died are a death too, not a plain error
    last = ev.sort("line_no").tail(1)
    assert last["kind"].to_list() == ["engine_dead"], last["message"].to_list()


@pytest.mark.parametrize(
    "path",
    [
        DEATHS / "lmcache-2306-v1-enginedeaderror-output-handler.log",  # V1 0.1x, APIServer prefix
        PUBLIC2 / "n17-v1-0.10-apiserver-enginedeaderror-double-spaced-paste.log",  # vllm-ascend 0.10
    ],
)
def test_enginedeaderror_in_the_output_handler(tmp_path, path):
    ev = _events(tmp_path, need(path))
    dead = ev.filter(pl.col("kind") == "engine_dead")
    assert dead.height == 1 and dead["fatal"].to_list() == [True]
    assert "EngineDeadError: EngineCore encountered an issue" in dead["detail"][0]


def test_oom_that_killed_the_engine_is_fatal(tmp_path):
    """V0 0.8 MQLLMEngine: one line, an OOM while loading a LoRA, wrapped in MQEngineDeadError (vllm#15039); the
    same MQEngineDeadError without the OOM (LMCache#411, V0 0.7) is the death alone."""
    ev = _events(tmp_path, need(PUBLIC2 / "n03-v0-0.8-lora-runtime-oom-mqenginedeaderror.log"))
    assert ev.select("kind", "fatal").rows() == [("oom", True)]
    ev = _events(tmp_path / "b", DEATHS / "411-mqenginedeaderror-stream.log")
    assert ev.select("kind", "fatal").rows() == [("engine_dead", True)]


def test_sglang_decode_oom_is_a_retraction(tmp_path):
    """SGLang's older retraction words (2025-03, every TP rank of a TP16 deployment; 2025-05, inside a debug paste
    whose annotations are the author's): each a preemption with the requests it retracted, none a death."""
    ev = _events(tmp_path, SG / "4184-decode-out-of-memory-retracted-tp-ranks.log")
    assert ev.height == 11 and set(ev["kind"]) == {"preemption"}
    assert set(ev["preemption_mode"]) == {"RETRACT"} and ev["requests_affected"].sum() == 11
    assert not ev["fatal"].any()
    res = ingest_files(tmp_path / "b", SG / "6731-debug-paste-decode-oom-retract.log")
    ev = res.table("server_events")
    assert ev.select("kind", "requests_affected").rows() == [("preemption", 1)]


def test_kv_load_failure_reschedules_requests(tmp_path):
    """V1 with LMCache: 'Recovered from KV load failure: 215 request(s) rescheduled' (public-2 n19)."""
    ev = _events(
        tmp_path, need(PUBLIC2 / "n19-v1-lmcache-kv-load-failure-215-rescheduled-kv100-waiting-47-to-233.log")
    )
    pre = ev.filter(pl.col("kind") == "preemption")
    assert pre.select("preemption_mode", "requests_affected").rows() == [("RESCHEDULE", 215)]


@pytest.mark.parametrize(
    ("path", "kinds"),
    [
        (DEATHS / "17227-v0.8.4-enginecore-hit-an-exception-keyerror.log", {"engine_dead"}),
        (DEATHS / "ascend-612-v0.8.4-workers-died-exit-code-15.log", {"engine_dead"}),
        (SG / "4184-decode-out-of-memory-retracted-tp-ranks.log", {"preemption"}),
        (SG / "soft-thinking-10-watchdog-timeout.log", {"engine_timeout", "engine_dead"}),
    ],
)
def test_no_parser_needed(path, kinds):
    """A wrapper no parser knows: the lexicon alone, on the lines as they are, finds each event with the time
    written on its line."""
    lines = pl.DataFrame({"line": path.read_text().splitlines()}).with_row_index("line_no", 1)
    lines = lines.with_columns(pl.col("line_no").cast(pl.Int64))
    ctx = ParseContext(source=path.name, replica="", year=2025)
    res = lexicon.Fallback(None).parse_chunk(lines, ctx, {})
    ev = res.tables["server_events"]
    assert set(ev["kind"]) == kinds
    assert ev["ts"].null_count() == 0 and ev["replica"].unique().to_list() == [path.name.split(".")[0]]
    # only the lines holding the words are counted read (one event a line); the rest stay unrecognised
    assert int(res.recognized.sum()) == ev.height


def test_documents_are_not_read_for_events(tmp_path):
    """A README beside the logs quotes their errors: it is no log (its name says so), and no event comes of it."""
    res = ingest_files(tmp_path, need(PUBLIC2.parent / "vllm-public" / "INDEX.md"))
    assert res.files["format"].to_list() == ["unknown"] and res.files["lines_parsed"].to_list() == [0]
    assert res.table("server_events").height == 0
