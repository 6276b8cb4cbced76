"""Correlation stage on the real lab recordings (../shared/fixtures/lab).

Every expected figure was counted from the raw files (the command is in the comment next to it) and
agrees with the folder's truth.json, written by the lab's independent script.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil

import polars as pl
import pytest

from conftest import LAB, need
from logscope import schemas
from logscope.api import AnalyzeOptions, correlate, ingest
from logscope.correlate import client_sources, correlate_tables, dumps, ingest_tables
from logscope.correlate.scale import scale_tables

# run: (logical requests, client attempts, gateway requests, gateway upstream attempts, vLLM requests,
#       amplification = vLLM requests / logical requests, gateway retries)
# logical:   grep -c '"kind": "request"' client-*.jsonl   (ladder: the 476 prompts of bench/ladder-c*.json)
# client:    grep -c attempt_send client-*.jsonl          (ladder: bench sends each prompt once)
# gateway:   grep -c 'POST /v1/completions' nginx-access.log
# upstream:  grep 'POST /v1/completions' nginx-access.log | grep -o 'ua="[^"]*"' | tr ',' '\n' | grep -c ':'
#            ("no live upstreams" entries name the group, without a port: no attempt was made)
# vLLM:      grep -c 'Received request cmpl-' vllm-server.log
# gw retries: ... | grep -o 'ua="[^"]*"' | awk -F, '{n=0; for(i=1;i<=NF;i++) if ($i ~ /:/) n++;
#            if (n>1) s+=n-1} END{print s}'
LAYERS = {
    "spike": (284, 284, 284, 297, 284, 1.0, 13),
    "retry-storm": (653, 1245, 1245, 930, 914, 1.4, 14),
    "crash": (550, 1166, 1166, 376, 351, 0.638, 11),
    "orphan": (320, 704, 704, 716, 704, 2.2, 12),
    "calm": (186, 186, 186, 186, 186, 1.0, 0),
    "v0-ladder": (267, 267, 267, 277, 267, 1.0, 10),
    "ladder": (476, 476, 476, 480, 476, 1.0, 4),
}
ID_RUNS = [r for r in LAYERS if r != "ladder"]  # the client sent X-Request-Id and nginx logged it

_CACHE: dict = {}


def run_lab(tmp_path_factory, run: str, **opts):
    """Ingest + correlate one lab folder once per session."""
    key = (run, tuple(sorted(opts.items())))
    if key not in _CACHE:
        src = need(LAB / run)
        out = tmp_path_factory.mktemp(run)
        ingest(src, out, AnalyzeOptions(**opts))
        summ = correlate(out, AnalyzeOptions(**opts))
        _CACHE[key] = (out, summ)
    return _CACHE[key]


@pytest.mark.parametrize("run", list(LAYERS))
def test_retry_multiplication_per_layer(tmp_path_factory, run):
    out, s = run_lab(tmp_path_factory, run)
    lr, ca, gr, ga, sr, amp, gw_retries = LAYERS[run]
    rm = s["retry_multiplication"]
    assert (
        rm["logical_requests"],
        rm["client_attempts"],
        rm["gateway_requests"],
        rm["gateway_attempts"],
        rm["server_requests"],
    ) == (lr, ca, gr, ga, sr)
    assert rm["amplification"] == amp  # truth.json amplification.vllm_received_per_logical_request
    assert s["flags"]["multi_layer_retries"]["gateway_retries"] == gw_retries
    req = pl.read_parquet(out / "requests.parquet")
    assert req.columns == list(schemas.TABLES["requests"])
    assert req.height == lr
    assert req["client_attempts"].sum() == ca and req["server_requests"].sum() == sr


@pytest.mark.parametrize("run", ID_RUNS)
def test_every_layer_matched_by_id(tmp_path_factory, run):
    _, s = run_lab(tmp_path_factory, run)
    _, _, gr, _, sr, _, _ = LAYERS[run]
    m = s["match"]
    assert m["client_gateway"]["exact"] == gr and m["client_gateway"]["with_attempt"] == gr
    assert m["client_gateway"]["inferred"] == 0
    assert m["gateway_server"]["exact"] == sr and m["gateway_server"]["inferred"] == 0
    assert m["gateway_server"]["unmatched_server_executions"] == 0
    assert m["server_executions_without_caller"] == 0


@pytest.mark.parametrize("run", list(LAYERS))
def test_clock_offsets_are_zero_on_the_lab(tmp_path_factory, run):
    """All lab clocks are one machine's: every estimate must be within 1 s of 0."""
    out, s = run_lab(tmp_path_factory, run)
    offs = pl.read_parquet(out / "clock_offsets.parquet")
    assert offs.columns == list(schemas.TABLES["clock_offsets"])
    server = offs.filter(pl.col("source") == "vllm-server.log").row(0, named=True)
    assert server["verified"] and server["reference"] == "nginx-access.log"
    assert server["n_matches"] == LAYERS[run][4]
    for o in offs.iter_rows(named=True):
        assert abs(o["offset_s"]) < 1.0, o
    if run != "ladder":
        assert s["clock_corrections_applied"] == {}
        return
    # vllm bench start_times are perf_counter values, anchored by the parser on the whole-second `date`
    # field (+-0.5 s): the id-matched sends measure each file's anchoring error to a few ms, and correct it
    bench = offs.filter(pl.col("source").str.starts_with("bench/"))
    assert bench.height == 7 and bench["verified"].all()
    assert (bench["offset_s"].abs() <= 0.6).all() and (bench["spread_s"] < 0.01).all()
    assert set(s["clock_corrections_applied"]) <= set(bench["source"])


def test_orphaned_work(tmp_path_factory):
    """orphan: nginx kept the upstream open (proxy_ignore_client_abort on) and vLLM never aborted."""
    out, s = run_lab(tmp_path_factory, "orphan")
    o = s["orphans"]
    # attempts that timed out: attempt_send without attempt_response in client-orphan.jsonl = 570;
    # grep -c 'Aborted request' vllm-server.log = 0. Of the 570, those that ended within the race window
    # (CANCEL_RACE_S after the caller left) finished before any abort could arrive: not running on
    truth = json.loads((LAB / "orphan" / "truth.json").read_text())["orphans"]["list"]

    def t(s_):
        return dt.datetime.fromisoformat(s_).timestamp()

    def after(x):  # generation after the caller left: nginx end - (client send + client timeout)
        return t(x["nginx_logged"]) - t(x["client_sent"]) - x["client_timeout_s"]

    # the race window: CANCEL_RACE_S (1 s); the ends are nginx's millisecond ones, so vLLM's whole-second stamps
    # add nothing to it (they did: 23 executions that ran 1-2 s on were said to finish in the race)
    ran_on = [x for x in truth if after(x) > 1.0]
    assert o["abandoned"] == 570 and o["count"] + o["finished_in_race"] == 570
    assert abs(o["count"] - len(ran_on)) <= 2 and o["aborted"] == 0 and o["cancellation_propagated"] is False
    assert o["count_by_match"] == {"exact": o["count"], "inferred": 0}
    assert o["callers_left"] == {"client": 570, "gateway": 0}
    assert o["end_source"] == {"gateway upstream time": o["count"]}
    # their full upstream time, and the generation after the caller left (the stage ends server work at the
    # upstream end, ~3 ms before msec, and takes the client's own give-up stamp: a few ms per attempt)
    assert o["server_s_of_orphaned_executions"] == pytest.approx(
        sum(x["upstream_time_s"] for x in ran_on), rel=0.002
    )
    assert o["generation_s_after_caller_left"] == pytest.approx(sum(after(x) for x in ran_on), rel=0.002)
    req = pl.read_parquet(out / "requests.parquet")
    assert req["orphaned_executions"].sum() == o["count"]
    assert req["orphan_s"].sum() == pytest.approx(o["generation_s_after_caller_left"], abs=0.01)
    # retries sent while an earlier attempt of the same client_rid was still running upstream:
    # nginx lines that reached an upstream, sorted by (client_rid, start = msec - rt), counted when
    # start < the latest end (msec) of the earlier lines of that rid -> 359
    assert s["flags"]["duplicate_concurrent_retries"] == 359
    win = pl.read_parquet(out / "windows.parquet")
    assert win["orphaned"].max() > 0


def test_cancellation_propagated(tmp_path_factory):
    """retry-storm: 454 client give-ups (nginx 499), 3 gateway read timeouts, all aborted by vLLM."""
    _, s = run_lab(tmp_path_factory, "retry-storm")
    o = s["orphans"]
    # grep -c 'status=499' nginx-access.log = 454; grep -c 'upstream timed out' nginx-error.log = 3;
    # grep -c 'Aborted request' vllm-server.log = 457
    assert o["count"] == 0 and o["cancellation_propagated"] is True
    assert o["callers_left"] == {"client": 454, "gateway": 3}
    assert o["aborted_by_caller"] == {"client": 454, "gateway": 3}
    assert s["flags"]["duplicate_concurrent_retries"] == 0


@pytest.mark.parametrize("run", ["spike", "crash", "calm", "v0-ladder"])
def test_no_orphans_where_no_caller_left(tmp_path_factory, run):
    _, s = run_lab(tmp_path_factory, run)
    assert s["orphans"]["count"] == 0 and s["orphans"]["callers_left"] == {"client": 0, "gateway": 0}


def test_retry_flags(tmp_path_factory):
    _, s = run_lab(tmp_path_factory, "retry-storm")
    f = s["flags"]
    assert f["multi_layer_retries"]["layers"] == ["client", "gateway"]
    # retries: grep -c '"retry_count": "[123]"' client-storm.jsonl = 592 (truth.json client.retries)
    assert f["multi_layer_retries"]["client_retries"] == 592
    # openai 3.57 backs off 0.5 * 2**n s minus up to 25 % jitter: retry k waits 0.375..0.5 * 2**(k-1)
    assert f["fixed_interval"]["flag"] is False
    assert f["retries_without_backoff"]["count"] == 0
    for r in f["retry_delays"]["by_retry"]:
        base = 0.5 * 2 ** (r["retry"] - 1)
        assert 0.75 * base - 0.01 <= r["median_s"] <= base + 0.05, r


def test_windows(tmp_path_factory):
    out, s = run_lab(tmp_path_factory, "retry-storm")
    w = pl.read_parquet(out / "windows.parquet")
    assert w.columns == list(schemas.TABLES["windows"])
    width = s["window_s"]
    assert width in (1.0, 2.0, 5.0) and (w["window_s"] == width).all()
    steps = w["ts"].diff().drop_nulls().dt.total_microseconds().unique().to_list()
    assert steps == [int(width * 1e6)]  # contiguous: empty windows are kept
    assert (w["arrivals"] == 0).any() and w["ttft_p50"].is_null().any()
    # sums over windows give back the layer totals (see LAYERS); 499: grep -c status=499 = 454;
    # 5xx: grep 'POST /v1/completions' nginx-access.log | grep -c 'status=5' = 334
    assert w["arrivals"].sum() == 653 and w["client_attempts"].sum() == 1245
    assert w["client_retries"].sum() == 592 and w["gateway_retries"].sum() == 14
    assert w["server_requests"].sum() == 914 and w["server_aborts"].sum() == 457
    assert w["gateway_499"].sum() == 454 and w["gateway_5xx"].sum() == 334 and w["timeouts"].sum() == 454
    # preemptions from vllm:num_preemptions_total (truth.json preemptions.total = 540)
    assert w["preemptions"].sum() == 540
    assert w["running_max"].max() == 26  # max 'Running: N reqs' in the stats lines (truth max_running)


def test_window_option(tmp_path_factory):
    out, _ = run_lab(tmp_path_factory, "calm")
    tabs = ingest_tables.read_tables(out)
    res = correlate_tables(tabs, window="10s")
    assert res.summary["window_s"] == 10.0
    assert res.windows["ts"].diff().drop_nulls().dt.total_seconds().unique().to_list() == [10]
    assert res.windows["arrivals"].sum() == 186


def test_v0_names_preempted_requests(tmp_path_factory):
    out, _ = run_lab(tmp_path_factory, "v0-ladder")
    req = pl.read_parquet(out / "requests.parquet")
    # grep -c 'is preempted by PreemptionMode' vllm-server.log = 5 warnings, 5 different requests
    assert req["preempted"].sum() == 5 and req["preempted"].null_count() == 267 - 5
    v1 = pl.read_parquet(run_lab(tmp_path_factory, "spike")[0] / "requests.parquet")
    assert v1["preempted"].null_count() == v1.height  # V1 never names a preempted request


def test_json_is_deterministic(tmp_path_factory):
    out, s = run_lab(tmp_path_factory, "crash")
    text = (out / "correlation.json").read_text()
    assert text == dumps(s)
    assert correlate(out) == s and (out / "correlation.json").read_text() == text


def _shifted(tmp_path_factory, run: str, seconds: int):
    """The run's tables with every vLLM-log timestamp moved by ``seconds`` (a server clock off by that)."""
    out, _ = run_lab(tmp_path_factory, run)
    dst = tmp_path_factory.mktemp(f"{run}-shift")
    for p in out.glob("*.parquet"):
        shutil.copy(p, dst / p.name)
    for name in ("server_requests", "server_request_events", "server_stats", "server_events"):
        df = pl.read_parquet(dst / f"{name}.parquet")
        ts = [c for c, t in df.schema.items() if t == schemas.TS]
        mine = pl.col("source") == "vllm-server.log"
        df = df.with_columns(
            [pl.when(mine).then(pl.col(c) + dt.timedelta(seconds=seconds)).otherwise(pl.col(c)) for c in ts]
        )
        df.write_parquet(dst / f"{name}.parquet")
    return out, dst


def test_clock_shift_is_found_and_corrected(tmp_path_factory):
    out, dst = _shifted(tmp_path_factory, "retry-storm", 7 * 60)
    s = correlate(dst)
    off = {o["source"]: o for o in s["clock_offsets"]}["vllm-server.log"]
    assert off["verified"] and abs(off["offset_s"] + 420) < 1.0
    base = json.loads((out / "correlation.json").read_text())
    assert s["match"] == base["match"] and s["orphans"]["aborted"] == 457
    assert s["retry_multiplication"] == base["retry_multiplication"]
    cols = [
        "logical_request_id",
        "server_requests",
        "server_aborted",
        "gateway_attempts",
        "orphaned_executions",
    ]
    a = pl.read_parquet(out / "requests.parquet").select(cols)
    b = pl.read_parquet(dst / "requests.parquet").select(cols)
    assert a.equals(b)
    w = pl.read_parquet(dst / "windows.parquet")
    assert w["server_requests"].sum() == 914 and w["running_max"].max() == 26


def test_a_rotated_log_shares_its_clock_offset(tmp_path_factory):
    """The storm's vLLM and nginx access logs each rotated in two (vllm-server.log.1 ends right after a request
    was received), the server's clock 7 minutes fast: both files of the vLLM log get one estimate, from its 914
    requests matched against both files of nginx's log, and every request is joined as in the plain run (the
    older file had matched nothing in nginx's newest one and was left 7 minutes off)."""
    base_out, base = run_lab(tmp_path_factory, "retry-storm")
    src = tmp_path_factory.mktemp("rotated-in")
    for f in need(LAB / "retry-storm").iterdir():
        if f.suffix in (".log", ".jsonl", ".conf"):
            shutil.copy(f, src / f.name)
    for name, mark in (("vllm-server.log", b"Received request"), ("nginx-access.log", b"")):
        lines = (src / name).read_bytes().split(b"\n")[:-1]
        cut = next(i for i in range(len(lines) // 2, len(lines)) if mark in lines[i]) + 1
        (src / f"{name}.1").write_bytes(b"\n".join(lines[:cut]) + b"\n")
        (src / name).write_bytes(b"\n".join(lines[cut:]) + b"\n")
    out = tmp_path_factory.mktemp("rotated")
    ingest(src, out, AnalyzeOptions())
    for name in ("server_requests", "server_request_events", "server_stats", "server_events"):
        df = pl.read_parquet(out / f"{name}.parquet")
        ts = [c for c, t in df.schema.items() if t == schemas.TS]
        mine = pl.col("source").str.starts_with("vllm-server.log")
        df.with_columns(
            [pl.when(mine).then(pl.col(c) + dt.timedelta(minutes=7)).otherwise(pl.col(c)) for c in ts]
        ).write_parquet(out / f"{name}.parquet")
    s = correlate(out)
    off = {o["source"]: o for o in s["clock_offsets"]}
    for f in ("vllm-server.log", "vllm-server.log.1"):
        assert off[f]["verified"] and off[f]["n_matches"] == 914 and abs(off[f]["offset_s"] + 420) < 1.0, f
        assert off[f]["reference"] == "nginx-access.log"
    assert off["nginx-access.log.1"]["offset_s"] == 0.0
    assert s["match"] == base["match"] and s["retry_multiplication"] == base["retry_multiplication"]


def test_zone_move_is_found(tmp_path):
    """vLLM logs carry no zone: read as Europe/Paris (UTC+1 in November) they land an hour early.
    nginx stamps carry +00:00 and the client JSONL epoch seconds, so only the server moves."""
    src = tmp_path / "in"
    src.mkdir()
    for f in ("nginx-access.log", "client-calm.jsonl", "vllm-server.log"):
        shutil.copy(need(LAB / "calm" / f), src / f)
    out = tmp_path / "out"
    opts = AnalyzeOptions(tz="Europe/Paris")
    ingest(src, out, opts)
    s = correlate(out, opts)
    off = {o["source"]: o for o in s["clock_offsets"]}["vllm-server.log"]
    assert off["verified"] and abs(off["offset_s"] - 3600) < 1.0
    assert s["match"]["gateway_server"]["exact"] == 186 and s["match"]["client_gateway"]["exact"] == 186
    assert s["retry_multiplication"]["amplification"] == 1.0


def test_scaled_tables_keep_the_shape(tmp_path_factory):
    """The benchmark tiles a real run: three copies give three times every count, same ratios."""
    out, s = run_lab(tmp_path_factory, "orphan")
    big = correlate_tables(scale_tables(ingest_tables.read_tables(out), 3)).summary
    rm, rm1 = big["retry_multiplication"], s["retry_multiplication"]
    for k in (
        "logical_requests",
        "client_attempts",
        "gateway_requests",
        "gateway_attempts",
        "server_requests",
    ):
        assert rm[k] == 3 * rm1[k]
    assert (
        rm["amplification"] == rm1["amplification"]
        and big["orphans"]["count"] + big["orphans"]["finished_in_race"] == 3 * 570
    )


def test_empty_folder_correlates(tmp_path):
    """No table has a row: the stage still writes every output, empty and conforming."""
    for name in ingest_tables.INPUTS:
        schemas.empty(name).write_parquet(tmp_path / f"{name}.parquet")
    s = correlate(tmp_path)
    assert s["retry_multiplication"]["logical_requests"] == 0
    for name in ("requests", "windows", "clock_offsets"):
        assert pl.read_parquet(tmp_path / f"{name}.parquet").columns == list(schemas.TABLES[name])


def test_width_choice():
    from logscope.correlate.windows import choose_width, parse_width

    assert [choose_width(s) for s in (60, 240, 1200, 3600, 86400)] == [1.0, 2.0, 10.0, 30.0, 900.0]
    assert parse_width("10s") == 10 and parse_width("500ms") == 0.5 and parse_width("2m") == 120
    with pytest.raises(ValueError):
        parse_width("ten")


def test_no_python_loop_over_rows():
    """Joins are polars joins: no iter_rows / map_elements / apply over request rows in the stage."""
    import logscope.correlate as pkg

    root = pkg.__file__.rsplit("/", 1)[0]
    for name in (
        "frames",
        "link",
        "assemble",
        "windows",
        "clock",
        "summary",
        "abandon",
        "reach",
        "run_columns",
    ):
        text = open(f"{root}/{name}.py").read()
        assert not re.search(r"map_elements|\.apply\(|map_rows|map_batches", text), name


def _anonymous_client(tabs: dict) -> dict:
    """The same recording as if the client logged no X-Request-Id and nginx no client_rid: the client's
    logical ids are replaced by opaque ones, so only times (and retry numbers) can join client and gateway."""
    anon = "anon-" + pl.col("logical_request_id").hash().cast(pl.String)
    t = dict(tabs)
    t["client_attempts"] = tabs["client_attempts"].with_columns(
        pl.lit(None, pl.String).alias("request_id"), anon.alias("logical_request_id")
    )
    t["client_requests"] = tabs["client_requests"].with_columns(anon.alias("logical_request_id"))
    t["gateway_attempts"] = tabs["gateway_attempts"].with_columns(
        pl.lit(None, pl.String).alias("client_request_id")
    )
    return t


@pytest.mark.parametrize("run", ["retry-storm", "orphan"])
def test_time_matching_without_client_ids(tmp_path_factory, run):
    out, s = run_lab(tmp_path_factory, run)
    tabs = ingest_tables.read_tables(out)
    res = correlate_tables(_anonymous_client(tabs))
    m = res.summary["match"]["client_gateway"]
    assert m["exact"] == 0  # a time match is never counted as exact
    assert m["inferred"] >= 0.99 * LAYERS[run][2]
    # the id run is the answer key: per logical request, the same gateway and vLLM counts
    key = s["retry_multiplication"]["logical_requests"]
    anon = "anon-" + pl.col("logical_request_id").hash().cast(pl.String)
    truth = pl.read_parquet(out / "requests.parquet").select(
        anon.alias("logical_request_id"), "server_requests"
    )
    got = res.requests.select("logical_request_id", "server_requests", "match")
    j = truth.join(got, on="logical_request_id")
    assert j.height == key and (j["match"] != "exact").all()
    assert (j["server_requests"] == j["server_requests_right"]).mean() >= 0.99
    assert res.summary["orphans"]["count"] == s["orphans"]["count"]


@pytest.mark.parametrize("run", ["retry-storm", "orphan"])
def test_time_matching_without_gateway_ids(tmp_path_factory, run):
    """nginx without $request_id: vLLM's whole-second Received lines are paired with attempts by time."""
    out, s = run_lab(tmp_path_factory, run)
    tabs = ingest_tables.read_tables(out)
    tabs["gateway_attempts"] = tabs["gateway_attempts"].with_columns(
        pl.lit(None, pl.String).alias("request_id")
    )
    res = correlate_tables(tabs)
    m = res.summary["match"]["gateway_server"]
    assert m["exact"] == 0 and m["inferred"] >= LAYERS[run][4] - 1
    truth = pl.read_parquet(out / "requests.parquet").select("logical_request_id", "server_requests")
    j = truth.join(res.requests.select("logical_request_id", "server_requests"), on="logical_request_id")
    assert (j["server_requests"] == j["server_requests_right"]).mean() >= 0.99
    assert res.summary["retry_multiplication"]["amplification"] == s["retry_multiplication"]["amplification"]


@pytest.mark.parametrize(
    "run, expected",
    [
        # truth.json client.outcomes: 200 / APITimeoutError / 502 ... and gateway.status_200_truncated
        ("retry-storm", {"ok": 457, "timeout": 80, "error": 116}),
        ("crash", {"ok": 343, "truncated": 8, "error": 199}),  # 8 streams cut by the SIGKILL, logged 200
        ("orphan", {"ok": 134, "timeout": 186}),
    ],
)
def test_outcomes(tmp_path_factory, run, expected):
    out, _ = run_lab(tmp_path_factory, run)
    req = pl.read_parquet(out / "requests.parquet")
    assert dict(req["outcome"].value_counts().iter_rows()) == expected


def test_cut_streams_found_from_the_gateway_alone(tmp_path_factory):
    """Without the client log, the 8 cut streams are the 8 'upstream prematurely closed connection'
    lines (grep -c in nginx-error.log) paired with the shortest 200 responses of that second."""
    out, _ = run_lab(tmp_path_factory, "crash")
    tabs = ingest_tables.read_tables(out)
    tabs["client_attempts"] = schemas.empty("client_attempts")
    tabs["client_requests"] = schemas.empty("client_requests")
    res = correlate_tables(tabs)
    assert res.summary["retry_multiplication"]["by_origin"]["gateway"] == 550  # grouped by client_rid
    cut = res.requests.filter(pl.col("outcome") == "truncated")
    # the client's own verdict, unseen here: grep '"kind": "request"' client-crash.jsonl | grep APIConnectionError
    assert cut.height == 8
    assert sorted(cut["logical_request_id"]) == [
        "crash-w00-00149",
        "crash-w01-00145",
        "crash-w02-00151",
        "crash-w03-00147",
        "crash-w04-00146",
        "crash-w05-00150",
        "crash-w06-00152",
        "crash-w07-00148",
    ]


@pytest.mark.parametrize(
    "run, preemptions, starts",
    [
        # vllm:num_preemptions_total over the run (truth.json preemptions.total / v0 232 in the README);
        # starts: grep -c 'Started server process' vllm-server.log
        ("crash", 0, 2),
        ("v0-ladder", 232, 1),
        ("spike", 136, 1),
    ],
)
def test_server_state_per_window(tmp_path_factory, run, preemptions, starts):
    out, _ = run_lab(tmp_path_factory, run)
    w = pl.read_parquet(out / "windows.parquet")
    assert w["preemptions"].sum() == preemptions and w["server_restarts"].sum() == starts
    assert w["engine_deaths"].sum() == 0 and w["oom_events"].sum() == 0


@pytest.mark.parametrize("run", ["retry-storm", "orphan"])
def test_client_straight_to_vllm(tmp_path_factory, run):
    """Without the gateway log the client's ids never reach vLLM (nginx renamed them): vLLM's
    whole-second Received lines are paired with client sends by time, marked inferred."""
    out, s = run_lab(tmp_path_factory, run)
    tabs = ingest_tables.read_tables(out)
    tabs["gateway_attempts"] = schemas.empty("gateway_attempts")
    res = correlate_tables(tabs)
    m = res.summary["match"]["client_server"]
    assert m["exact"] == 0 and m["inferred"] >= 0.99 * LAYERS[run][4]
    truth = pl.read_parquet(out / "requests.parquet").select("logical_request_id", "server_requests")
    j = truth.join(res.requests.select("logical_request_id", "server_requests"), on="logical_request_id")
    assert (j["server_requests"] == j["server_requests_right"]).mean() >= 0.99
    o = res.summary["orphans"]
    # with no end known, an execution that finished in the race cannot be told from one that ran on
    assert abs(o["count"] - s["orphans"]["count"] - s["orphans"]["finished_in_race"]) <= 0.04 * LAYERS[run][4]
    if o["count"]:  # V1 logs no end and no gateway timed the upstream: the work after is unknown
        assert set(o["end_source"]) == {"unknown"}


def test_the_columns_left_unread_change_nothing(tmp_path_factory):
    """read_tables leaves out the columns the stage never reads (user agents, URLs, prompts: tens of MB
    each at a million requests): on the storm (ids, retries, orphans at every layer) correlating the whole
    tables gives the same requests, windows and figures."""
    from logscope import schemas

    out, _ = run_lab(tmp_path_factory, "retry-storm")
    slim = ingest_tables.read_tables(out)
    for name, cols in ingest_tables.UNUSED_COLUMNS.items():
        assert set(cols).isdisjoint(slim[name].columns)
        assert set(cols) <= set(schemas.schema(name))  # a renamed column must not go unnoticed
    whole = {n: schemas.conform(pl.read_parquet(out / f"{n}.parquet"), n) for n in ingest_tables.INPUTS}
    assert {n for n in ingest_tables.INPUTS if whole[n].height} >= {
        "server_requests",
        "gateway_attempts",
        "client_attempts",
    }
    a, b = correlate_tables(slim), correlate_tables(whole)
    assert a.requests.height == 653 and a.requests.equals(b.requests)
    assert a.windows.equals(b.windows)
    assert dumps(a.summary) == dumps(b.summary)


def test_a_client_seen_twice_is_used_once(tmp_path_factory, monkeypatch):
    """retry-storm holds its client twice, the lab client's JSONL records and its openai DEBUG log: the
    JSONL (X-Request-Ids, exact grouping) is kept and the log is named its copy, by its logical ids, also
    when only a few of them are looked up; with the ids gone, by its send times. Another run's client
    (crash: its send count within a quarter of this one's, so it is compared) stays a client of its own."""
    storm, _ = run_lab(tmp_path_factory, "retry-storm")
    crash, _ = run_lab(tmp_path_factory, "crash")

    def read(out, table, prefix):
        df = pl.read_parquet(out / f"{table}.parquet")
        return df.with_columns((pl.lit(prefix) + pl.col("source")).alias("source"))

    ca, cr = read(storm, "client_attempts", ""), read(storm, "client_requests", "")
    picked = client_sources.pick_client_sources(ca, cr)
    assert picked == (
        ["client-storm.jsonl"],
        {"client-storm.log": "same logical request ids as client-storm.jsonl"},
    )
    anon = (
        pl.lit(None, dtype=pl.String).alias("logical_request_id"),
        pl.lit(None, dtype=pl.String).alias("request_id"),
    )
    for sample in (5000, 7):  # 653 logical ids and 1,898 sends, all or 7 of them looked up
        monkeypatch.setattr(client_sources, "ID_SAMPLE", sample)
        assert client_sources.pick_client_sources(ca, cr) == picked
        kept, dropped = client_sources.pick_client_sources(ca.with_columns(anon), cr.with_columns(anon[0]))
        assert len(kept) == 1 and list(dropped) == [
            {"client-storm.jsonl", "client-storm.log"}.difference(kept).pop()
        ]
        assert re.fullmatch(
            rf"(9\d|100)% of its sends coincide \(within 30 ms\) with those of {kept[0]}",
            dropped[list(dropped)[0]],
        )

    two = [
        pl.concat([ca, read(crash, "client_attempts", "crash/")]),
        pl.concat([cr, read(crash, "client_requests", "crash/")]),
    ]
    assert (
        0.8 <= 1166 / 1245 <= 1.25
    )  # attempts of each run's client (LAYERS): within the ratio that is compared
    kept, dropped = client_sources.pick_client_sources(*two)
    assert sorted(kept) == ["client-storm.jsonl", "crash/client-crash.jsonl"] and dropped == {
        "client-storm.log": "same logical request ids as client-storm.jsonl",
        "crash/client-crash.log": "same logical request ids as crash/client-crash.jsonl",
    }


def test_gateway_requests_of_a_client_not_in_the_logs(tmp_path_factory):
    """Gateway requests carrying an X-Request-Id the client's log never names (another client behind the
    same gateway) are logical requests of their own, seen from the gateway. On the storm with five of its
    logical requests taken out of the client's records: those five come back, origin gateway, each with
    its gateway requests and vLLM executions; the other 648 stay the client's."""
    out, _ = run_lab(tmp_path_factory, "retry-storm")
    tabs = ingest_tables.read_tables(out)
    gone = tabs["client_requests"]["logical_request_id"].sort().gather_every(130, offset=7).to_list()
    assert len(gone) == 5
    for name in ("client_attempts", "client_requests"):
        tabs[name] = tabs[name].filter(~pl.col("logical_request_id").is_in(gone))
    req = correlate_tables(tabs).requests
    whole = pl.read_parquet(out / "requests.parquet")
    assert req.height == whole.height == 653
    mine = req.filter(pl.col("origin") == "gateway").sort("logical_request_id")
    assert mine["logical_request_id"].to_list() == sorted(gone)
    theirs = whole.filter(pl.col("logical_request_id").is_in(gone)).sort("logical_request_id")
    cols = ["gateway_requests", "gateway_attempts", "server_requests"]
    assert mine.select(cols).equals(theirs.select(cols)) and mine["client_attempts"].sum() == 0
    assert req.filter(pl.col("origin") == "client").height == 648
