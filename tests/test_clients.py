"""Client-side formats: openai-python logging, lab client JSONL, generic schema, vllm bench, AIPerf, GuideLLM.

Expected values are counted from the raw files with grep (the command is next to each figure) and agree
with the lab's truth.json ``client`` section (scripts/truth.py, an independent count).
Files under tests/data/clients/ are real outputs of the real programs, see its README.md.
"""

from __future__ import annotations

import io
import itertools
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import logscope.parsers as parsers
from conftest import DATA, LAB, ingest_files, need
from logscope.ingest import IngestOptions, sources
from logscope.ingest import ingest as raw_ingest

CLIENTS = DATA / "clients"
MINE = {"openai_client", "client_jsonl", "vllm_bench", "aiperf", "guidellm"}

# run folder, file stem, and per run: logical requests, attempts, attempt timeouts, logical timeouts, outcomes.
#   logical:   grep -c '"kind": "request"' client-X.jsonl  ==  grep -c 'labclient.*done' client-X.log
#   attempts:  grep -c attempt_send client-X.jsonl          ==  grep -c 'Sending HTTP Request' client-X.log
#   attempt timeouts: attempt_send - attempt_response (jsonl) ==  grep -c 'timeout exception' client-X.log
#   logical timeouts: grep -c '"error": "APITimeoutError'   ==  grep -c 'err=APITimeoutError'
#   outcomes: grep -c '"kind": "request".*"status": 200' / 502 / '"error": "APIConnectionError' (and 'done status=200' ...)
RUNS = {
    "retry-storm": ("client-storm", 653, 1245, 454, 80, {"200": 457, "502": 116, "APITimeoutError": 80}),
    "crash": ("client-crash", 550, 1166, 0, 0, {"200": 343, "502": 199, "APIConnectionError": 8}),
    "orphan": ("client-orphan", 320, 704, 570, 186, {"200": 134, "APITimeoutError": 186}),
    "spike": ("client-spike", 284, 284, 0, 0, {"200": 284}),
    "calm": ("client-calm", 186, 186, 0, 0, {"200": 186}),
    "v0-ladder": ("client-v0-ladder", 267, 267, 0, 0, {"200": 267}),
}
_CACHE: dict[str, object] = {}


@pytest.fixture(scope="module")
def lab_runs(tmp_path_factory):
    """Each lab run's client-X.log and client-X.jsonl ingested together, once."""
    need(LAB)

    def get(run: str):
        if run not in _CACHE:
            stem = RUNS[run][0]
            _CACHE[run] = ingest_files(
                tmp_path_factory.mktemp(run), LAB / run / f"{stem}.log", LAB / run / f"{stem}.jsonl"
            )
        return _CACHE[run]

    return get


def _by_source(res, table: str, suffix: str) -> pl.DataFrame:
    df = res.table(table)
    return df.filter(pl.col("source").str.ends_with(suffix))


def _outcomes(req: pl.DataFrame) -> dict[str, int]:
    o = req.select(pl.coalesce(pl.col("status").cast(pl.String), pl.col("error")).alias("o"))["o"]
    return dict(sorted(o.value_counts().rows()))


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("suffix", [".log", ".jsonl"])
def test_lab_client_counts(lab_runs, run, suffix):
    _, logical, attempts, att_timeouts, log_timeouts, outcomes = RUNS[run]
    res = lab_runs(run)
    req = _by_source(res, "client_requests", suffix)
    att = _by_source(res, "client_attempts", suffix)
    assert req.height == logical
    assert req["logical_request_id"].n_unique() == logical
    assert att.height == attempts
    assert (
        att.height - req.height == attempts - logical
    )  # retries (truth.json: 592 storm, 616 crash, 384 orphan)
    assert int(att["timed_out"].sum()) == att_timeouts
    assert int(req["timed_out"].sum()) == log_timeouts
    assert _outcomes(req) == outcomes
    assert int(req["attempts"].sum()) == attempts
    files = res.files.filter(pl.col("path").str.ends_with(suffix))
    assert files["format"].item() == ("openai_client" if suffix == ".log" else "client_jsonl")
    assert files["lines_unrecognized"].item() == 0  # every line of both files is understood


@pytest.mark.parametrize("run", ["retry-storm", "crash", "orphan", "spike"])
def test_log_grouping_matches_jsonl_attempt_by_attempt(lab_runs, run):
    """The .log has no ids: the attempts rebuilt from thread names + retries_taken must be the jsonl's."""
    res = lab_runs(run)
    log = _by_source(res, "client_attempts", ".log")
    js = _by_source(res, "client_attempts", ".jsonl")
    assert log["grouping"].unique().to_list() == ["inferred"]
    assert log["grouping_confidence"].unique().to_list() == [
        1.0
    ]  # one request per thread at a time, 0,1,2.. no gaps
    assert js["grouping"].unique().to_list() == ["exact"]
    j = log.join(js, on=["logical_request_id", "attempt"], how="full", suffix="_j", coalesce=True)
    assert j.height == log.height == js.height
    assert j.filter(pl.col("status").ne_missing(pl.col("status_j"))).height == 0
    assert j.filter(pl.col("timed_out") != pl.col("timed_out_j")).height == 0
    # send times agree within the time between the openai 'Building' line and the httpx request hook
    dt = j.select(
        ((pl.col("ts_start") - pl.col("ts_start_j")).dt.total_microseconds().abs() / 1e6).max()
    ).item()
    assert dt < 0.2
    # the jsonl's request_id is the rid sent as X-Request-Id
    assert (js["request_id"] == js["logical_request_id"]).all()


def test_storm_attempt_details(lab_runs):
    """storm-r-00213: 4 attempts, each a 5 s ReadTimeout, then APITimeoutError (lab README sample)."""
    res = lab_runs("retry-storm")
    for suffix in (".log", ".jsonl"):
        a = _by_source(res, "client_attempts", suffix).filter(pl.col("logical_request_id") == "storm-r-00213")
        assert a["attempt"].to_list() == [1, 2, 3, 4]
        assert a["timed_out"].to_list() == [True] * 4
        assert a["status"].null_count() == 4
        r = _by_source(res, "client_requests", suffix).filter(pl.col("logical_request_id") == "storm-r-00213")
        assert r["error"].item() == "APITimeoutError"
        assert r["e2e_s"].item() == pytest.approx(23.014, abs=0.01)  # latency=23.014 in both files
    log = _by_source(res, "client_attempts", ".log").filter(pl.col("logical_request_id") == "storm-r-00213")
    # 2026-11-29T08:30:22.376 Building ... retries_taken=0 / 08:30:27.389 Encountered a timeout exception
    assert log["ts_start"][0] == datetime(2026, 11, 29, 8, 30, 22, 376000, tzinfo=UTC)
    assert log["ts_end"][0] == datetime(2026, 11, 29, 8, 30, 27, 389000, tzinfo=UTC)
    assert log["error"][0] == "ReadTimeout"


def test_crash_cut_streams(lab_runs):
    """The 8 streams cut by the kill: HTTP 200 on the attempt, APIConnectionError on the request."""
    res = lab_runs("crash")
    for suffix in (".log", ".jsonl"):
        a = _by_source(res, "client_attempts", suffix).filter(pl.col("error") == "APIConnectionError")
        assert a.height == 8
        assert a["status"].to_list() == [200] * 8
        assert sorted(a["logical_request_id"].to_list())[0] == "crash-w00-00149"


# phases: the lab README / jsonl phase_start records; per-phase logical requests from truth.json
SPIKE_PHASES = [
    ("0", "08:25:05.593", "08:26:20.595", 2.0),
    ("1", "08:26:20.595", "08:26:38.596", 48.0),
    ("2", "08:26:38.596", "08:27:53.596", 2.0),
]


def _at(hms: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-29T{hms}+00:00")


def test_spike_phases(lab_runs):
    res = lab_runs("spike")
    for suffix in (".log", ".jsonl"):
        ph = _by_source(res, "client_phases", suffix).sort("ts_start")
        assert ph["mode"].to_list() == ["concurrency"] * 3
        assert ph.select("phase", "value").rows() == [(p, v) for p, _, _, v in SPIKE_PHASES]
        # the log's 'phase N start' line is stamped up to 1 ms after the jsonl's phase_start record; the log
        # ends a phase at the next start, the last at start + its 'duration=75.0s'; the jsonl has phase_end
        for (_, a, b, _), t0, t1 in zip(SPIKE_PHASES, ph["ts_start"], ph["ts_end"], strict=True):
            assert abs((t0 - _at(a)).total_seconds()) < 0.002
            assert abs((t1 - _at(b)).total_seconds()) < 0.002
        req = _by_source(res, "client_requests", suffix)
        counts = dict(
            req.group_by("phase")
            .agg(pl.len(), pl.col("concurrency").first())
            .select("phase", pl.struct("len", "concurrency"))
            .rows()
        )
        assert counts == {
            "0": {"len": 92, "concurrency": 2},
            "1": {"len": 104, "concurrency": 48},
            "2": {"len": 88, "concurrency": 2},
        }


@pytest.mark.parametrize(
    "run,jsonl_counts,log_counts",
    [
        # truth.json phases[].logical_requests (from the requests' 'phase' field)
        ("retry-storm", [64, 500, 89], [64, 499, 90]),
        ("orphan", [49, 187, 84], [49, 186, 85]),
        ("v0-ladder", [26, 64, 79, 98], [26, 64, 79, 98]),
    ],
)
def test_requests_per_phase(lab_runs, run, jsonl_counts, log_counts):
    """The log places a request by its first send time: storm-r-00564 and orphan-r-00236 were scheduled
    in phase 1 (jsonl 'phase': 1) but their 'Building HTTP request' line is 1-2 ms after phase 2 started."""
    res = lab_runs(run)
    for suffix, expected in ((".jsonl", jsonl_counts), (".log", log_counts)):
        req = _by_source(res, "client_requests", suffix)
        got = req.group_by("phase").len().sort("phase")["len"].to_list()
        assert got == expected


def test_log_chunk_boundaries_do_not_change_grouping(tmp_path):
    """Small chunks split attempts across parse_chunk calls: the result must be the same."""
    f = need(LAB / "retry-storm" / "client-storm.log")
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(f, src)
    shutil.copy(LAB / "retry-storm" / "client-storm.jsonl", src)
    res = raw_ingest(src, tmp_path / "out", IngestOptions(chunk_bytes=20_000))
    for suffix, n in ((".log", 1245), (".jsonl", 1245)):
        a = _by_source(res, "client_attempts", suffix)
        assert a.height == n
        assert a.select(pl.struct("logical_request_id", "attempt").n_unique()).item() == n
    assert _outcomes(_by_source(res, "client_requests", ".log")) == RUNS["retry-storm"][5]


def test_log_zone_from_tz(tmp_path):
    """Zoneless stamps are read in --tz: Paris is UTC+1 on 2026-11-29."""
    res = ingest_files(tmp_path, LAB / "calm" / "client-calm.log", tz="Europe/Paris")
    a = res.table("client_attempts").sort("line_no")
    # grep -m1 retries_taken=0 client-calm.log -> 2026-11-29T08:48:23.746
    assert a["ts_start"][0] == datetime(2026, 11, 29, 7, 48, 23, 746000, tzinfo=UTC)
    assert any("Europe/Paris" in x for x in res.files["assumptions"].item())


# ---------------------------------------------------------------- openai-python logs produced here
# Expected from grep over the files (tests/data/clients/README.md says how they were produced):
#   attempts = grep -c 'Sending HTTP Request'; retries = grep -c 'Retrying request';
#   logical = attempts - retries; APIConnectionError = grep -c 'Raising connection error';
#   APITimeoutError = grep -c 'Raising timeout error'; attempt timeouts = grep -c -E 'timeout exception|httpx.TimeoutException'
OPENAI_LOGS = {
    "openai-sdk-format.log": (6, 11, 2, {"200": 5, "APIConnectionError": 1}, 0.9),
    "openai-plain-format.log": (5, 8, 1, {"200": 4, "APIConnectionError": 1}, 0.9),
    "openai-v1-threads.log": (8, 15, 3, {"200": 6, "APIConnectionError": 1, "APITimeoutError": 1}, 0.8),
}


@pytest.mark.parametrize("name", list(OPENAI_LOGS))
def test_openai_logs_produced_here(tmp_path, name):
    logical, attempts, att_timeouts, outcomes, conf = OPENAI_LOGS[name]
    res = ingest_files(tmp_path, CLIENTS / name)
    files = res.files
    assert files["format"].item() == "openai_client"
    assert files["lines_unrecognized"].item() == 0  # httpcore DEBUG lines and tracebacks included
    req, att = res.table("client_requests"), res.table("client_attempts")
    assert (req.height, att.height) == (logical, attempts)
    assert int(att["timed_out"].sum()) == att_timeouts
    assert _outcomes(req) == outcomes
    # no thread name in the format (sdk, plain) -> sequential client assumed (0.9); old SDK without
    # retries_taken -> grouping by 'Retrying request' lines (0.8)
    assert att["grouping_confidence"].unique().to_list() == [conf]


def test_openai_v1_prompt_not_copied(tmp_path):
    """openai 1.x logs 'Request options: {... 'prompt': 'request 0' ...}' at DEBUG: never in the outputs."""
    res = ingest_files(tmp_path, CLIENTS / "openai-v1-threads.log")
    assert "'prompt': 'request 0'" in (CLIENTS / "openai-v1-threads.log").read_text()
    for t in ("client_attempts", "client_requests"):
        df = res.table(t)
        for c, dt in df.schema.items():
            if dt == pl.String:
                assert not df[c].drop_nulls().str.contains("request 0|'prompt'").any(), (t, c)
    # old SDK: 'Retrying request to /completions' gives the path; 'max_tokens': 8 from Request options
    att = res.table("client_attempts")
    assert att["url"].unique().to_list() == ["/completions"]
    assert att["max_tokens"].unique().to_list() == [8]
    # two worker threads [w00] [w01] interleave: still grouped per thread. By hand from the 'Request options'
    # and 'Retrying request' lines: w00 3 | 10,36,123 (Raising connection error) | 178 | 260,349,405 (Raising
    # timeout error); w01 5 | 16 | 34,180,262 | 267,344
    req = res.table("client_requests").sort("ts_start")
    assert req["attempts"].to_list() == [1, 1, 3, 1, 3, 1, 3, 2]


def test_openai_info_level_without_timestamps(tmp_path):
    """logging.basicConfig(level=INFO): only httpx 'HTTP Request' and openai 'Retrying request' lines, no time.

    The client made 6 calls and printed 'request 3: APIConnectionError' (make_outputs.sh, step 3b).
    grep -c 'HTTP Request' = 8 attempts with a response; 2 of the 5 'Retrying request' lines (lines 6 and
    12) follow a success or another Retrying line: attempts without response -> 10 visible attempts.
    The 4th call's last attempt (a dropped connection, 'Raising connection error' is DEBUG) left no line,
    so it cannot be told from the 5th call's 200 that follows: 5 logical requests found, not 6.
    """
    res = ingest_files(tmp_path, CLIENTS / "openai-info-bare.log")
    assert res.files["format"].item() == "openai_client"
    assert res.files["lines_unrecognized"].item() == 0
    att, req = res.table("client_attempts"), res.table("client_requests")
    assert (att.height, req.height) == (10, 5)
    assert req["attempts"].to_list() == [1, 1, 2, 3, 3]
    assert att["error"].value_counts().sort("error").rows() == [(None, 8), ("NoResponse", 2)]
    assert att["ts_start"].null_count() == 10
    assert att["grouping_confidence"].unique().to_list() == [0.54]  # INFO only 0.6 x no thread names 0.9
    assert any("without a timestamp" in a for a in res.files["assumptions"].item())


# ---------------------------------------------------------------- generic schema (docs/client-schema.md)
def test_generic_jsonl_and_csv(tmp_path):
    """generic-attempts.jsonl was written by the docs example (run_doc_example.py): 11 attempts, 6 calls."""
    f = CLIENTS / "generic-attempts.jsonl"
    res = ingest_files(tmp_path / "j", f)
    assert res.files["format"].item() == "client_jsonl"
    att, req = res.table("client_attempts"), res.table("client_requests")
    # grep -c . = 11 attempts; grep -o '"logical_request_id": "[0-9a-f]*"' | sort -u | wc -l = 6
    assert (att.height, req.height) == (11, 6)
    assert int(att["timed_out"].sum()) == 2  # grep -c '"timed_out": true'
    assert _outcomes(req) == {"200": 5, "RemoteDisconnected": 1}
    assert req["attempts"].sort().to_list() == [1, 1, 1, 2, 3, 3]
    assert (att["request_id"] == att["logical_request_id"] + "." + att["attempt"].cast(pl.String)).all()
    # the same records as CSV with the documented header (written by polars, as a team's pipeline would)
    recs = pl.read_ndjson(f)
    cols = [
        "ts_start",
        "ts_end",
        "request_id",
        "logical_request_id",
        "attempt",
        "status",
        "error",
        "timed_out",
        "prompt_tokens",
        "output_tokens",
        "max_tokens",
        "concurrency",
    ]
    csv = tmp_path / "attempts.csv"
    recs.select(cols).write_csv(csv)
    res2 = ingest_files(tmp_path / "c", csv)
    assert res2.files["format"].item() == "client_jsonl"
    assert res2.files["lines_unrecognized"].item() == 0
    att2 = res2.table("client_attempts")
    key = ["logical_request_id", "attempt", "status", "error", "timed_out", "ts_start", "ts_end"]
    assert att2.select(key).sort(key[:2]).equals(att.select(key).sort(key[:2]))


def test_attempt_records_decoded_with_their_keys_alone(tmp_path, monkeypatch):
    """The lab's attempt records are decoded with their own 8 keys (client_jsonl.ATTEMPT_KEYS): the tables are
    those of decoding every record with all keys; a record whose kind only a nested object names is decoded
    again with all keys."""
    import logscope.parsers.client_jsonl as cj

    storm = LAB / "retry-storm" / "client-storm.jsonl"
    need(storm)
    generic = CLIENTS / "generic-attempts.jsonl"
    # the docs example's generic records, each with a nested object that names an attempt kind
    nested = tmp_path / "nested" / "generic-attempts.jsonl"
    nested.parent.mkdir()
    nested.write_text(
        "".join(
            line[:-2] + ', "labels": {"kind": "attempt_send"}}\n'
            for line in generic.read_text().splitlines(keepends=True)
        )
    )
    fast = ingest_files(tmp_path / "fast", storm, nested)
    monkeypatch.setattr(cj, "_DECODER", cj.decoder("^$never"))
    assert not pl.Series(storm.read_text().splitlines()).str.contains("^$never").any()
    whole = ingest_files(tmp_path / "whole", storm, nested)
    plain = ingest_files(tmp_path / "plain", generic)
    for table in ("client_attempts", "client_requests", "client_phases"):
        assert fast.table(table).equals(whole.table(table))
    att = fast.table("client_attempts")
    # grep -c attempt_send client-storm.jsonl = 1245
    assert att.filter(pl.col("source").str.ends_with("client-storm.jsonl")).height == 1245
    mine = att.filter(pl.col("source").str.ends_with("generic-attempts.jsonl")).drop("source")
    assert mine.height == 11 and mine.equals(plain.table("client_attempts").drop("source"))
    assert fast.files["lines_unrecognized"].sum() == 0


def test_docs_example_runs_and_parses(tmp_path):
    """Run the Python block of docs/client-schema.md against a local test server, parse what it wrote."""
    sys.path.insert(0, str(CLIENTS))
    import fake_openai_server as srv
    from run_doc_example import example_namespace

    srv._COUNTER = itertools.count(1)  # the 502 pattern counts requests from 1
    old = dict(vars(srv.ARGS))
    for k, v in {"fail_every": 2, "slow_every": 0, "drop_every": 0, "tokens": 4, "token_delay": 0.0}.items():
        setattr(srv.ARGS, k, v)
    server = srv.serve(0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
        ns = example_namespace()
        out = io.StringIO()
        ids = [
            ns["call"](
                url,
                {"model": "tiny", "prompt": "x", "max_tokens": 4},
                out,
                retries=2,
                timeout=5.0,
                concurrency=1,
            )
            for _ in range(2)
        ]
    finally:
        server.shutdown()
        vars(srv.ARGS).update(old)
    path = tmp_path / "src" / "attempts.jsonl"
    path.parent.mkdir()
    path.write_text(out.getvalue())
    res = ingest_files(tmp_path, path)
    att = res.table("client_attempts").sort("ts_start")
    # every 2nd server request is a 502: call 1 = 200; call 2 = 502 then 200
    assert att["status"].to_list() == [200, 502, 200]
    assert att["logical_request_id"].to_list() == [ids[0], ids[1], ids[1]]
    assert res.table("client_requests").sort("ts_start")["attempts"].to_list() == [1, 2]
    assert att["output_tokens"].to_list() == [4, None, 4]


# ---------------------------------------------------------------- vllm bench serve (ladder)
LADDER = [1, 2, 4, 8, 16, 32, 64]
COMPLETED = [
    6,
    10,
    20,
    40,
    80,
    128,
    192,
]  # "completed" in each JSON = grep -c 'client_rid="ladder-cN-' nginx-access.log
# 'Mean TTFT (ms):' in bench-cN.log (README: 68 ms at c=1, 2.4 s at c=32, 8.1 s at c=64)
MEAN_TTFT_MS = [68.49, 268.95, 438.54, 86.39, 239.76, 2424.59, 8081.62]
# bench process start/end, lab README table (UTC)
WINDOWS = [
    ("08:19:03", "08:19:29"),
    ("08:19:32", "08:19:57"),
    ("08:20:00", "08:20:21"),
    ("08:20:24", "08:20:49"),
    ("08:20:52", "08:21:26"),
    ("08:21:29", "08:22:09"),
    ("08:22:12", "08:23:09"),
]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    bench = need(LAB / "ladder" / "bench")
    files = sorted(bench.iterdir())
    return ingest_files(tmp_path_factory.mktemp("ladder"), *files)


def _nginx_first_starts() -> dict[int, float]:
    """Receive time (msec - rt) of ladder-cN-0 in nginx-access.log: an independent wall clock."""
    text = need(LAB / "ladder" / "nginx-access.log").read_text()
    s = pl.Series(text.splitlines())
    g = s.str.extract_groups(r'msec=([\d.]+) .*client_rid="ladder-c(\d+)-0" .* rt=([\d.]+) ').struct.unnest()
    g = g.drop_nulls()
    return {int(c): float(m) - float(rt) for m, c, rt in g.rows()}


def test_ladder_steps(ladder):
    files = ladder.files
    assert files.filter(pl.col("path").str.ends_with(".json"))["format"].to_list() == ["vllm_bench"] * 7
    assert files.filter(pl.col("path").str.ends_with(".log"))["format"].to_list() == ["vllm_bench"] * 7
    req = ladder.table("client_requests")
    ph = ladder.table("client_phases").sort("value")
    assert ph["value"].to_list() == [float(c) for c in LADDER]
    assert ph["mode"].unique().to_list() == ["concurrency"]
    starts = _nginx_first_starts()
    for c, n, ttft, (w0, w1) in zip(LADDER, COMPLETED, MEAN_TTFT_MS, WINDOWS, strict=True):
        r = req.filter(pl.col("phase") == f"ladder-c{c}")
        assert r.height == n
        assert r["status"].to_list() == [200] * n  # "failed": 0, errors all ""
        assert r["concurrency"].unique().to_list() == [c]
        assert r["ttft_s"].mean() * 1000 == pytest.approx(ttft, abs=0.005)
        # ids as sent (request_id_prefix from the Namespace line of bench-cN.log), as nginx logged them
        assert sorted(r["logical_request_id"].to_list()) == sorted(f"ladder-c{c}-{i}" for i in range(n))
        first = r.filter(pl.col("logical_request_id") == f"ladder-c{c}-0")["ts_start"].item()
        assert abs(first.timestamp() - starts[c]) < 1.0  # anchoring: date + 0.5 s - duration, ±1 s
        p = ph.filter(pl.col("value") == c)
        day = "2026-11-29T"
        assert p["ts_start"].item() >= datetime.fromisoformat(day + w0 + "+00:00")
        # the end is date + 0.5 s: at most 1 s after the process exit (date has whole seconds)
        assert p["ts_end"].item() <= datetime.fromisoformat(day + w1 + "+00:00") + timedelta(seconds=1)
        assert p["anchoring"].item().startswith("anchored")
    # c=16: load 08:21:08-08:21:26 (README step window, Received lines in vllm-server.log)
    p16 = ph.filter(pl.col("value") == 16)
    assert (
        datetime(2026, 11, 29, 8, 21, 8, tzinfo=UTC)
        <= p16["ts_start"].item()
        <= datetime(2026, 11, 29, 8, 21, 11, tzinfo=UTC)
    )
    assert p16["ts_end"].item() == datetime(
        2026, 11, 29, 8, 21, 25, 500000, tzinfo=UTC
    )  # date 20261129-082125


def test_bench_stdout_lines(ladder):
    """bench-c16.log: 68 lines, of which 31 are nanobind leak noise at exit
    (grep -c -E 'nanobind|leaked|skipped remainder' = 30, + 'See https://nanobind...' = 31): read as
    the known noise they are, so every line is accounted."""
    f = ladder.files.filter(pl.col("path") == "bench-c16.log")
    assert (f["lines_total"].item(), f["lines_parsed"].item()) == (68, 68)


def test_bench_json_without_stdout(tmp_path):
    """Alone, the JSON has no request ids: synthetic ids, and the assumption says so."""
    res = ingest_files(tmp_path, LAB / "ladder" / "bench" / "ladder-c4.json")
    att = res.table("client_attempts")
    assert att["logical_request_id"][0] == "bench:ladder-c4:0"
    assert att["request_id"].null_count() == 20
    assert any("request_id_prefix unknown" in a for a in res.files["assumptions"].item())


# ---------------------------------------------------------------- AIPerf and GuideLLM (real runs here)
def test_aiperf_records(tmp_path):
    res = ingest_files(tmp_path, CLIENTS / "aiperf-profile_export.jsonl")
    assert res.files["format"].item() == "aiperf"
    assert res.files["lines_unrecognized"].item() == 0
    req = res.table("client_requests")
    assert req.height == 20  # grep -c . aiperf-profile_export.jsonl
    # grep -c '"was_cancelled":true' = 4; grep -c '"type":"TimeoutError"' = 2; grep -c '"code":502' = 2
    assert dict(req["error"].value_counts().rows()) == {
        None: 12,
        "RequestCancellationError": 4,
        "TimeoutError": 2,
        "Bad Gateway": 2,
    }
    assert dict(req["status"].value_counts().rows()) == {200: 12, 502: 2, None: 6}
    assert int(req["timed_out"].sum()) == 2
    first = pl.read_ndjson(CLIENTS / "aiperf-profile_export.jsonl").head(1).unnest("metadata")
    att = res.table("client_attempts")
    assert (att["request_id"] == att["logical_request_id"]).all()
    row = att.filter(pl.col("request_id") == first["x_request_id"].item())
    assert row["ts_start"].item() == datetime.fromtimestamp(
        first["request_start_ns"].item() // 1000 / 1e6, UTC
    )
    assert res.table("client_phases")["phase"].to_list() == ["profiling"]


def test_guidellm_report(tmp_path):
    res = ingest_files(tmp_path, CLIENTS / "guidellm-benchmarks.json")
    assert res.files["format"].item() == "guidellm"
    ph = res.table("client_phases").sort("ts_start")
    assert ph.select("phase", "mode", "value").rows() == [
        ("0:concurrent@1", "concurrency", 1.0),
        ("1:concurrent@3", "concurrency", 3.0),
    ]
    req = res.table("client_requests")
    # benchmark 0: 5 successful, 2 errored (ReadTimeout, 502), 1 incomplete; benchmark 1: 7 successful, 3 errored
    by = (
        req.group_by("phase")
        .agg(
            (pl.col("status") == 200).sum().alias("ok"),
            pl.col("timed_out").sum().alias("to"),
            (pl.col("status") == 502).sum().alias("bad"),
            pl.col("error").str.starts_with("cancelled").sum().alias("cx"),
        )
        .sort("phase")
    )
    assert by.rows() == [("0:concurrent@1", 5, 1, 1, 1), ("1:concurrent@3", 7, 2, 1, 0)]
    assert req["concurrency"].unique().sort().to_list() == [1, 3]
    text = (CLIENTS / "guidellm-benchmarks.json").read_text()
    for c, dt in req.schema.items():  # prompt / output text never copied
        if dt == pl.String:
            assert not req[c].drop_nulls().str.contains(" tok tok").any()
    assert " tok tok" in text


# ---------------------------------------------------------------- detection
def _files_of(root: Path):
    return [f for f in sources.discover(root) if not sources.head(f)[1]]


@pytest.mark.slow  # detection of every real file's head, each one alone and all at once
def test_detect_claims_only_own_files():
    expected = {"client-": None, "bench-c": "vllm_bench", "ladder-c": "vllm_bench"}
    lab = need(LAB)
    for f in _files_of(lab):
        mod, _, sc = parsers.detect(sources.head(f)[0])
        name = Path(f.rel).name
        if name.startswith("client-"):
            want = "openai_client" if name.endswith(".log") else "client_jsonl"
        else:
            want = next((v for k, v in expected.items() if k != "client-" and name.startswith(k)), None)
        if want:
            assert mod is not None and mod.NAME == want, f.rel
        else:
            assert all(sc[m] < parsers.MIN_CONFIDENCE for m in MINE), (f.rel, {m: sc[m] for m in MINE})
    own = {
        "aiperf-profile_export.jsonl": "aiperf",
        "guidellm-benchmarks.json": "guidellm",
        "generic-attempts.jsonl": "client_jsonl",
        "openai-sdk-format.log": "openai_client",
        "openai-plain-format.log": "openai_client",
        "openai-v1-threads.log": "openai_client",
        "openai-info-bare.log": "openai_client",
    }
    for name, want in own.items():
        mod, _, _ = parsers.detect(sources.head(sources.discover(CLIENTS / name)[0])[0])
        assert mod.NAME == want, name


def test_detect_public_fixtures_not_claimed(public):
    for f in _files_of(public):
        sc = parsers.scores(sources.head(f)[0])
        assert all(sc[m] < parsers.MIN_CONFIDENCE for m in MINE), (f.rel, {m: sc[m] for m in MINE})
