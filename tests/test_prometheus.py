"""Prometheus inputs (promtool dump, query_range JSON, exposition text) and the server_stats rows
derived from them. Expected figures come from the lab's truth.json or from grep/awk over the raw
files (the command is in a comment next to each figure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import logscope.parsers as parsers
from conftest import DATA, LAB, PUBLIC, ingest_files, need
from logscope.ingest import metric_stats, sources
from logscope.parsers import prometheus_query_range, prometheus_text, prometheus_tsdb_dump
from logscope.parsers.base import ParseContext

MINE = (prometheus_tsdb_dump, prometheus_query_range, prometheus_text)
RUNS = ["ladder", "spike", "retry-storm", "crash", "orphan", "calm", "v0-ladder"]
PROM = DATA / "prometheus"


def _expected_format(path: Path) -> str | None:
    if path.parent.name != "prometheus":
        return None
    if path.name == "tsdb-dump.txt":
        return "prometheus_tsdb_dump"
    if path.name.startswith("query_range-") and path.name != "query_range-window.json":
        return "prometheus_query_range"
    return None  # query_range-window.json (the lab's own note), prometheus.log, prometheus.yml


def _scores(path: Path) -> dict[str, float]:
    f = sources.discover(path)[0]
    head, _ = sources.head(f)
    return {m.NAME: m.detect(head) for m in MINE}


@pytest.mark.parametrize("run", RUNS)
def test_detection_in_lab_folders(run):
    files = [p for p in need(LAB / run).rglob("*") if p.is_file()]
    claimed = {}
    for p in files:
        sc = _scores(p)
        best = max(sc, key=sc.get)
        claimed[p.relative_to(LAB / run).as_posix()] = best if sc[best] >= parsers.MIN_CONFIDENCE else None
        if sc[best] >= parsers.MIN_CONFIDENCE:
            assert parsers.detect(sources.head(sources.discover(p)[0])[0])[0].NAME == best
    expected = {p.relative_to(LAB / run).as_posix(): _expected_format(p) for p in files}
    assert claimed == expected
    # every lab run has one dump and 11 query_range answers (ls prometheus/query_range-*.json | grep -vc window)
    assert sum(v == "prometheus_query_range" for v in claimed.values()) == 11
    assert sum(v == "prometheus_tsdb_dump" for v in claimed.values()) == 1


def test_public_fixtures_are_not_claimed():
    for p in need(PUBLIC).rglob("*"):
        if p.is_file() and p.suffix not in (".png", ".parquet"):
            sc = _scores(p)
            assert max(sc.values()) < parsers.MIN_CONFIDENCE, (p, sc)


def test_other_formats_test_data_is_not_claimed():
    # the lab recordings (pairs, lab2) hold real Prometheus exports of their own, as the lab fixtures do
    own = (PROM, DATA / "pairs", DATA / "lab2")
    for p in DATA.rglob("*"):
        # the DCGM exporter's scrapes of tests/data/platform are exposition text: prometheus_text's (issue #40)
        dcgm = p.parent.name == "platform" and p.name.startswith("dcgm-")
        if (
            p.is_file()
            and not any(o in p.parents for o in own)
            and p.suffix not in (".png", ".parquet")
            and not dcgm
        ):
            sc = _scores(p)
            assert max(sc.values()) < parsers.MIN_CONFIDENCE, (p, sc)


def test_own_examples_detected():
    for name, fmt in [
        ("curl-metrics-1scrape.txt", "prometheus_text"),
        ("curl-metrics-2scrapes.txt", "prometheus_text"),
        ("federate-2scrapes.txt", "prometheus_text"),
        ("scrape-loop-metrics.prom.log", "prometheus_text"),
        ("query_range-error.json", "prometheus_query_range"),
        ("README.md", None),
        ("exporter.py", None),
    ]:
        sc = _scores(PROM / name)
        best = max(sc, key=sc.get)
        assert (best if sc[best] >= parsers.MIN_CONFIDENCE else None) == fmt, name


def _lines(path: Path) -> pl.DataFrame:
    lines = path.read_text().split("\n")
    if lines[-1] == "":
        lines.pop()
    return pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String}
    )


def test_dump_sample_counts():
    path = need(LAB / "ladder/prometheus/tsdb-dump.txt")
    res = prometheus_tsdb_dump.parse_chunk(_lines(path), ParseContext(source="d", replica="x"), {})
    m = res.tables["server_metrics"]
    assert int(res.recognized.sum()) == m.height == 9625  # wc -l tsdb-dump.txt
    counts = dict(m.group_by("name").len().iter_rows())
    # grep -c '^{__name__="vllm:<name>"' ladder/prometheus/tsdb-dump.txt
    assert counts["vllm:num_preemptions_total"] == 125
    assert counts["vllm:num_requests_running"] == 125
    assert counts["vllm:request_num_preemptions_bucket"] == 1000  # histogram buckets are kept
    assert counts["vllm:prompt_tokens_by_source_total"] == 375
    last = m.filter(pl.col("name") == "vllm:num_preemptions_total").sort("ts").row(-1, named=True)
    # tail -1 of grep num_preemptions_total: ... model_name="tiny"} 456 1795940595963
    assert last["value"] == 456 and last["ts"] == datetime(2026, 11, 29, 8, 23, 15, 963000, tzinfo=UTC)
    assert last["replica"] == "127.0.0.1:8001" and last["labels"] == "engine=0,model_name=tiny"
    # the labels are read once per series (cut -d'}' -f1 | sort -u | wc -l -> 77), the rows stay in file order:
    # head -1 ... reason="max_num_queued_reqs"} 0 1795940338037; tail -1 ..._sum", engine="0", ...} 1851.04... 1795940595963
    assert m.select(pl.struct("name", "labels", "replica").n_unique()).item() == 77
    first, end = m.row(0, named=True), m.row(-1, named=True)
    assert (first["name"], first["labels"], first["value"]) == (
        "vllm:admission_rejections_total",
        "model_name=tiny,reason=max_num_queued_reqs",
        0.0,
    )
    assert first["ts"] == datetime(2026, 11, 29, 8, 18, 58, 37000, tzinfo=UTC)
    assert (end["name"], end["value"]) == ("vllm:time_to_first_token_seconds_sum", 1851.0435106754303)


def test_dump_nan_staleness_markers_counted():
    path = need(LAB / "v0-ladder/prometheus/tsdb-dump.txt")
    state: dict = {}
    ctx = ParseContext(source="d", replica="x")
    res = prometheus_tsdb_dump.parse_chunk(_lines(path), ctx, state)
    assert int(res.recognized.sum()) == 17279  # wc -l
    assert int(res.tables["server_metrics"]["value"].is_nan().sum()) == 252  # grep -c ' NaN '
    assert prometheus_tsdb_dump.finish(ctx, state).messages[0].startswith("252 samples are NaN")


def test_query_range_sample_counts():
    path = need(LAB / "ladder/prometheus/query_range-request_success_total.json")
    res = prometheus_query_range.parse_document(path.read_text(), ParseContext(source="q", replica="x"))
    m = res.tables["server_metrics"]
    # grep -o '\[[0-9.]*,"[^"]*"\]' <file> | wc -l -> 645; grep -o '"metric":' | wc -l -> 5 series
    assert m.height == 645 and res.lines_parsed == 1
    assert m.group_by("labels").len().sort("labels").to_dicts() == [
        {"labels": f"engine=0,finished_reason={r},model_name=tiny", "len": 129}
        for r in ("abort", "error", "length", "repetition", "stop")
    ]
    assert set(m["replica"]) == {"127.0.0.1:8001"} and set(m["name"]) == {"vllm:request_success_total"}
    # first pair of the file: [1795940338.037,"0"]
    assert m["ts"].min() == datetime(2026, 11, 29, 8, 18, 58, 37000, tzinfo=UTC)


def test_query_range_empty_and_error_answers():
    empty = need(LAB / "v0-ladder/prometheus/query_range-vllm_kv_cache_usage_perc.json")
    res = prometheus_query_range.parse_document(empty.read_text(), ParseContext(source="q", replica="x"))
    assert res.lines_parsed == 1 and "server_metrics" not in res.tables and "no series" in res.messages[0]
    res = prometheus_query_range.parse_document(
        (PROM / "query_range-error.json").read_text(), ParseContext(source="q", replica="x")
    )
    assert res.lines_parsed == 1 and not res.tables
    assert res.messages == [
        "Prometheus answered status=error (bad_data: 1:33: parse error: missing unit "
        "character in duration): no samples"
    ]


MTIME = datetime(2026, 11, 29, 9, 51, 14, tzinfo=UTC)


def _text(name: str, state: dict | None = None, chunk: slice | None = None):
    lines = _lines(PROM / name)
    if chunk is not None:
        lines = lines[chunk]
    ctx = ParseContext(source=name, replica="exp", file_mtime=MTIME)
    return prometheus_text.parse_chunk(lines, ctx, {} if state is None else state)


def test_text_one_scrape_without_timestamps():
    res = _text("curl-metrics-1scrape.txt")
    m = res.tables["server_metrics"]
    assert int(res.recognized.sum()) == 27  # wc -l: every line is HELP/TYPE or a sample
    assert m.height == 13  # grep -vc '^#'
    assert set(m["ts"]) == {MTIME} and set(m["replica"]) == {"exp"}
    assert res.messages == [] and any("modification time" in a for a in res.assumptions)
    running = m.filter(pl.col("name") == "vllm:num_requests_running").row(0, named=True)
    assert running["value"] == 3.0 and running["labels"] == "engine=0,model_name=tiny"
    le = m.filter(pl.col("name") == "vllm:time_to_first_token_seconds_bucket")["labels"].to_list()
    assert le[-1] == "engine=0,le=+Inf,model_name=tiny" and len(le) == 5  # grep -c _bucket


def test_text_two_untimestamped_scrapes_are_flagged_even_across_chunks():
    res = _text("curl-metrics-2scrapes.txt")
    assert res.tables["server_metrics"].height == 26  # grep -vc '^#'
    assert res.messages and res.messages[0].startswith("2 scrapes without timestamps")
    state: dict = {}
    first = _text("curl-metrics-2scrapes.txt", state, slice(0, 27))  # the first scrape is lines 1-27
    second = _text("curl-metrics-2scrapes.txt", state, slice(27, None))
    assert first.messages == [] and second.messages[0].startswith("2 scrapes without timestamps")


def test_text_federate_timestamps():
    res = _text("federate-2scrapes.txt")
    m = res.tables["server_metrics"]
    assert int(res.recognized.sum()) == 44 and m.height == 26  # wc -l; grep -vc '^#'
    # grep -o ' [0-9]*$' federate-2scrapes.txt | sort | uniq -c -> 13 x 1795945886534, 13 x 1795945892534
    assert dict(m.group_by("ts").len().iter_rows()) == {
        datetime(2026, 11, 29, 9, 51, 26, 534000, tzinfo=UTC): 13,
        datetime(2026, 11, 29, 9, 51, 32, 534000, tzinfo=UTC): 13,
    }
    assert set(m["replica"]) == {"127.0.0.1:19301"}  # instance label; job/instance not in labels
    assert (
        set(m["labels"]) >= {"engine=0,model_name=tiny"}
        and not m["labels"].str.contains("job=|instance=").any()
    )


def _derived(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "server_stats.parquet").filter(pl.col("origin") == "prometheus").sort("ts")


def test_text_end_to_end(tmp_path):
    res = ingest_files(tmp_path, PROM / "federate-2scrapes.txt")
    s = _derived(res.out_dir)
    assert s.height == 2 and s["era"].to_list() == ["prometheus"] * 2
    # grep num_preemptions_total / generation_tokens_total federate-2scrapes.txt: 91 -> 190, 2240 -> 3008 in 6 s
    assert s["preemptions"].to_list() == [None, 99]
    assert s["gen_tps"].to_list() == [None, 128.0] and s["interval_s"].to_list() == [None, 6.0]
    assert s["running"].to_list() == [8, 8] and s["kv_usage"].to_list() == [1.0, 1.0]
    (tmp_path / "b").mkdir()
    res = ingest_files(tmp_path / "b", PROM / "curl-metrics-2scrapes.txt")
    s = _derived(res.out_dir)
    # both scrapes sit at the copy's mtime: one row, from the last scrape (running 8.0, kv 1.0)
    assert s.height == 1 and s["running"].to_list() == [8] and s["kv_usage"].to_list() == [1.0]
    msgs = res.files.filter(pl.col("format") == "prometheus_text")["messages"][0]
    assert any("cannot be" in x for x in msgs)


LOOP = "scrape-loop-metrics.prom.log"
LOOP_TIMES = [
    datetime.fromtimestamp(t, UTC)
    for t in (
        1796213202.936,
        1796213204.983,
        1796213207.023,
        1796213209.059,
        1796213211.126,
        1796213213.155,
        1796213215.190,
    )
]


@pytest.mark.parametrize("cuts", [[], [25, 35], [31]])  # whole, and chunks cut inside the hand-made curl
def test_text_scrape_loop_comments_stamp_each_scrape(cuts):
    # grep -n '^#' scrape-loop-metrics.prom.log: 9 '# scrape_ts=<epoch> iso=...' comments, 2 '# scrape_failed';
    # lines 30-42 are a curl appended by hand (no comment) inside the 12:06:47 scrape's segment
    lines = _lines(PROM / LOOP)
    ctx = ParseContext(source=LOOP, replica="exp", file_mtime=MTIME)
    state: dict = {}
    bounds = [0, *cuts, lines.height]
    res = [
        prometheus_text.parse_chunk(lines[a:b], ctx, state) for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    m = pl.concat([r.tables["server_metrics"] for r in res])
    assert sum(int(r.recognized.sum()) for r in res) == 80  # wc -l
    # 7 scrapes answered, 8 series each, at their comment's epoch time; the hand-made curl's 13 samples: no time
    assert dict(m.group_by("ts").len().iter_rows()) == {**{t: 8 for t in LOOP_TIMES}, None: 13}
    assert m.filter(pl.col("ts").is_null() & (pl.col("name") == "vllm:num_requests_running"))[
        "value"
    ].to_list() == [6.0]
    end = prometheus_text.finish(ctx, state)
    assert end.messages[0].startswith("1 scrape(s) without a '# scrape_ts' comment")
    assert end.messages[1].startswith("2 scrape(s) failed")


def test_text_scrape_loop_end_to_end(tmp_path):
    res = ingest_files(tmp_path, PROM / LOOP)
    s = _derived(res.out_dir)
    # one stats row per stamped scrape (before: every sample at the file's mtime, one row)
    assert s["ts"].to_list() == LOOP_TIMES
    # grep num_requests_running / num_preemptions_total: running 0,2,4,6,8,8,8; the total 0,0,0,0,1,6,15
    assert s["running"].to_list() == [0, 2, 4, 6, 8, 8, 8] and s["preemptions"].to_list() == [
        None,
        0,
        0,
        0,
        1,
        5,
        9,
    ]
    f = res.files.filter(pl.col("format") == "prometheus_text").row(0, named=True)
    assert f["lines_unrecognized"] == 0 and len(f["messages"]) == 2


def _truth(run: str) -> dict:
    return json.loads((need(LAB / run) / "truth.json").read_text())["preemptions"]


def _ingest_run(tmp_path: Path, run: str, pattern: str = "*") -> pl.DataFrame:
    files = sorted(p for p in (need(LAB / run) / "prometheus").glob(pattern) if p.is_file())
    return _derived(ingest_files(tmp_path, *files).out_dir)


@pytest.mark.parametrize("run", RUNS)
def test_preemption_totals_and_maxima(tmp_path, run):
    s = _ingest_run(tmp_path, run)  # the whole prometheus/ folder: dump and query_range overlap
    truth = _truth(run)
    assert s["preemptions"].sum() == truth["total"]  # 456, 136, 540, 0, 937, 0, 232
    # the dump wins over the query_range answers: one row per dump scrape
    # (grep -c '^{__name__="vllm:num_preemptions_total"' tsdb-dump.txt, minus the NaN marker in calm/v0-ladder)
    scrapes = {
        "ladder": 125,
        "spike": 87,
        "retry-storm": 94,
        "crash": 62,
        "orphan": 79,
        "calm": 95,
        "v0-ladder": 69,
    }
    assert s.height == scrapes[run] and set(s["source"]) == {"tsdb-dump.txt"}
    mx = truth["max_from_metrics"]
    if run == "calm":
        # truth.json's maxima (8 running, KV 0.5676) come from the lab's own scraper (metrics.prom.log,
        # not in the folder); Prometheus' samples never reach them:
        # grep '"vllm:num_requests_running"' calm/prometheus/tsdb-dump.txt | awk '{print $(NF-1)}' | sort -n | tail -1 -> 6
        # same for kv_cache_usage_perc -> 0.4774774774774775 (README: "at most 6 running")
        mx = {"running": 6, "waiting": 0, "kv_cache_usage_perc": 0.4774774774774775}
    assert (s["running"].max(), s["waiting"].max()) == (mx["running"], mx["waiting"])
    if run == "v0-ladder":
        # V0 CPU backend: gpu_cache_usage_perc is 0 throughout (truth: 0) while 23 requests run, and the
        # CPU gauge is not exported (grep -c cpu_cache tsdb-dump.txt -> 0): KV usage is unknown
        assert s["gpu_kv_usage"].max() == mx["kv_cache_usage_perc"] == 0
        assert s["kv_usage"].null_count() == s.height and s["kv_device"].null_count() == s.height
    else:
        assert s["kv_usage"].max() == mx["kv_cache_usage_perc"]


def _between(s: pl.DataFrame, a: str, b: str, pad_s: float = 0) -> int:
    pad = timedelta(seconds=pad_s)
    lo, hi = datetime.fromisoformat(a) - pad, datetime.fromisoformat(b) + pad
    return int(s.filter(pl.col("ts").is_between(lo, hi))["preemptions"].sum())


def test_ladder_episodes(tmp_path):
    s = _ingest_run(tmp_path, "ladder")
    episodes = _truth("ladder")["episodes"]
    assert [_between(s, a, b) for a, b, _ in episodes] == [n for _, _, n in episodes] == [58, 153, 245]


@pytest.mark.parametrize("run", ["spike", "retry-storm", "orphan", "v0-ladder"])
def test_single_episode_runs(tmp_path, run):
    s = _ingest_run(tmp_path, run, "tsdb-dump.txt")
    [(a, b, n)] = _truth(run)["episodes"]
    # truth's windows come from another scraper: Prometheus scrapes ~0.4 s apart from it, so widen by
    # one 2 s scrape interval (v0-ladder: +3 at 09:37:14.911 and +4 at 09:38:22.911 fall just outside)
    assert _between(s, a, b, pad_s=2.0) == n
    if run == "v0-ladder":
        assert _between(s, a, b) == n - 3 - 4


def test_crash_gap_and_counter_reset(tmp_path):
    s = _ingest_run(tmp_path, "crash")
    # awk over the dump's num_preemptions_total timestamps: largest step 1795941334132 - 1795941263244 ms
    assert s["interval_s"].max() == pytest.approx(70.888)
    after = s.filter(pl.col("interval_s") > 60).row(0, named=True)
    assert after["ts"] == datetime(2026, 11, 29, 8, 35, 34, 132000, tzinfo=UTC)
    # generation_tokens_total drops 37413 -> 0 across the restart (awk: 'v<p' on dump line 24 of that
    # metric): the delta is the new value 0, never negative
    assert after["gen_tps"] == 0.0 and s["gen_tps"].min() >= 0
    # awk '{v=$(NF-1); if (NR>1) d+=(v>=p? v-p : v); p=v} END{print d}' over the metric's lines -> 88357
    tokens = s.select((pl.col("gen_tps") * pl.col("interval_s")).sum()).item()
    assert tokens == pytest.approx(88357, abs=1e-6)


def test_crash_query_range_alone_fills_the_gap(tmp_path):
    # documented limit: query_range repeats the last sample over the 5 min lookback, so without the
    # dump the 69 s outage is not a gap (101 steps, grep -o '\[[0-9.]*,"' | wc -l)
    s = _ingest_run(tmp_path, "crash", "query_range-*.json")
    assert s.height == 101 and s["interval_s"].max() == 2.0


def test_append_is_idempotent_and_keeps_other_rows(tmp_path):
    res = ingest_files(tmp_path, need(LAB / "spike/prometheus/tsdb-dump.txt"))
    p = res.out_dir / "server_stats.parquet"
    derived = pl.read_parquet(p)
    # stand-ins for log rows: the same rows relabelled origin='log' must come back unchanged
    logs = derived.with_columns(pl.lit("log").alias("origin"), pl.lit("v1").alias("era"))
    logs.write_parquet(p)
    metric_stats.append_derived_stats(res.out_dir)
    metric_stats.append_derived_stats(res.out_dir)
    after = pl.read_parquet(p)
    assert after.filter(pl.col("origin") == "log").equals(logs)
    assert after.filter(pl.col("origin") == "prometheus").height == 87


# stats rows sorted at a time: all in one batch; 149 | 60 + 86 (a batch of two series after one); one each
@pytest.mark.parametrize("batch", [150_000, 150, 1])
def test_stats_intervals_in_batches_equal_a_whole_sort(tmp_path, monkeypatch, batch):
    """derive computes interval_s a batch of (replica, origin) series at a time; the table must be what one
    sort of the whole table gives: ordered by (replica, origin, ts, seq), each row's interval the time since
    the previous row of its series. Two lab runs as two replicas, each with its log and its Prometheus dump."""
    from logscope.ingest import IngestOptions, derive, ingest

    monkeypatch.setattr(derive, "STATS_BATCH_ROWS", batch)

    src = tmp_path / "in"
    for run in ("spike", "crash"):
        (src / run / "prometheus").mkdir(parents=True)
        (src / run / "vllm-server.log").write_bytes((need(LAB / run) / "vllm-server.log").read_bytes())
        dump = LAB / run / "prometheus" / "tsdb-dump.txt"
        (src / run / "prometheus" / dump.name).write_bytes(dump.read_bytes())
    ingest(src, tmp_path / "out", IngestOptions())
    s = pl.read_parquet(tmp_path / "out" / "server_stats.parquet")
    series = s.select("replica", "origin").unique()
    # both runs scraped instance 127.0.0.1:8001, each at its own time: the dumps' scrapes are each run's log's
    # (ingest.metric_claims), a log and a Prometheus series per run
    assert series.height == 4 and set(series["origin"]) == {"log", "prometheus"}
    assert set(series.filter(pl.col("origin") == "prometheus")["replica"]) == {"spike", "crash"}
    whole = (
        s.drop("interval_s")
        .sort(["replica", "origin", "ts", "seq"], maintain_order=True)
        .with_columns(
            (pl.col("ts").diff().over(["replica", "origin"]).dt.total_microseconds() / 1e6).alias(
                "interval_s"
            )
        )
    )
    assert s.equals(whole.select(s.columns))
    assert s["interval_s"].null_count() == series.height  # the first row of each series only
