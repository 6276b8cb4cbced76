"""--max-memory: when the whole input would not fit, analyze looks at the range around the worst minute
that does (logscope.resources.budget), and says so in every output. On the real retry-storm recording."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import polars as pl
import pytest
from typer.testing import CliRunner

from conftest import LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze, ingest
from logscope.cli import app
from logscope.correlate.client_sources import kept_client_sources
from logscope.errors import ExitCode, LogscopeError
from logscope.resources import budget, memory, time_range

SCHEMA = json.loads((ROOT / "logscope" / "summary.schema.json").read_text())


def _surge() -> tuple[datetime, datetime]:
    """The storm's 7 req/s phase, from the manifest: client start + the first phase's length, + the second's."""
    man = json.loads((need(LAB / "retry-storm") / "manifest.json").read_text())
    ev = next(e for e in man["events"] if e["event"] == "client_start")
    calm, surge = (float(s) for s in re.findall(r"(\d+)s ", ev["phases"])[:2])
    t0 = datetime.fromtimestamp(ev["t"], UTC) + timedelta(seconds=calm)
    return t0, t0 + timedelta(seconds=surge)


def _whole(out: Path) -> int:
    """The estimate analyze compares with its budget: of the client sources correlation keeps."""
    return budget.whole_need(out, kept_client_sources(out, sample=budget.PICK_SAMPLE)[0])


def _floor(out: Path) -> int:
    """The estimate with no records: what the later stages take for the folder's replicas alone."""
    return budget.need(0, replicas=budget.replicas(out))


def _too_small_for_slices(out: Path) -> int:
    """A budget that the whole input does not fit even correlated in time slices: analyze takes a range."""
    rec = budget.records_bytes(out, kept_client_sources(out, sample=budget.PICK_SAMPLE)[0])
    return _floor(out) + (budget.need(rec, sliced=True, replicas=budget.replicas(out)) - _floor(out)) // 2


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("storm_tables")
    ingest(need(LAB / "retry-storm"), out)
    return out


def test_sizes_are_read_with_their_units():
    assert memory.parse_size("4G") == 4 * 2**30
    assert memory.parse_size("512M") == 512 * 2**20
    assert memory.parse_size("1.5GiB") == int(1.5 * 2**30)
    assert memory.parse_size("2048") == 2048
    assert memory.parse_size("none") is None
    with pytest.raises(ValueError, match="not a size"):
        memory.parse_size("lots")
    free = memory.available_bytes()
    if Path("/proc/meminfo").exists():
        assert free is not None and free > 0


def test_the_room_left_under_cgroup_limits(tmp_path):
    """The tightest memory limit of the process's cgroup and of those above it counts, less what is used
    there apart from the inactive page cache (the kernel drops that before it kills)."""
    v1 = tmp_path / "memory"
    for d, limit, usage, cache in (
        (v1, 2**63 - 4096, 9 * 2**30, 0),
        (v1 / "slice", 3 * 2**30, 2 * 2**30, 2**30),
        (v1 / "slice" / "job", 2 * 2**30, 1536 * 2**20, 1024 * 2**20),
    ):
        d.mkdir(parents=True, exist_ok=True)
        (d / "memory.limit_in_bytes").write_text(f"{limit}\n")
        (d / "memory.usage_in_bytes").write_text(f"{usage}\n")
        (d / "memory.stat").write_text(f"cache 5\ninactive_file 1\ntotal_inactive_file {cache}\n")
    v2 = tmp_path / "unified"
    (v2 / "svc").mkdir(parents=True)
    (v2 / "svc" / "memory.max").write_text("max\n")
    (v2 / "svc" / "memory.current").write_text("1000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("9:name=systemd:/\n4:memory:/slice/job\n2:cpuacct:/\n0::/svc\n")
    files = {
        "v1": [(str(v1), "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")],
        "v2": [(str(v2), "memory.max", "memory.current", "inactive_file")],
    }
    # job: 2 GiB - (1.5 GiB used - 1 GiB inactive cache) = 1.5 GiB; slice: 3 - (2 - 1) = 2 GiB; root and
    # the v2 group: no limit
    assert sorted(memory._cgroup_room(str(proc), files)) == [1536 * 2**20, 2 * 2**30]
    assert memory._cgroup_room(str(tmp_path / "absent"), files) == []


def test_the_estimate_is_the_sum_of_its_minutes(tables):
    """The whole need and the per-minute profile count the same records; trouble sits in the surge."""
    whole = budget.whole_need(tables)
    prof, untimed = budget.profile(tables)
    n = budget.replicas(tables)
    assert whole > _floor(tables)
    assert budget.need(prof["bytes"].sum() + untimed, replicas=n) == pytest.approx(whole, rel=1e-6)
    # correlation keeps one view of the storm's client (its JSON lines or its DEBUG log): the estimate that
    # decides counts that one; every view counted is the cheap upper bound tried first
    kept, dropped = kept_client_sources(tables, sample=budget.PICK_SAMPLE)
    assert (
        len(kept) == 1 and len(dropped) == 1 and (kept, dropped) == kept_client_sources(tables)
    )  # as correlation
    prof_kept, untimed_kept = budget.profile(tables, kept)
    assert budget.need(prof_kept["bytes"].sum() + untimed_kept, replicas=n) == pytest.approx(
        _whole(tables), rel=1e-6
    )
    assert _floor(tables) < _whole(tables) < whole
    # every minute with a record is there: the server's start (08:28) before the first request too
    ga = pl.read_parquet(tables / "gateway_attempts.parquet")
    assert set(ga["ts_start"].dt.truncate("1m")) < set(prof["minute"])
    assert prof["minute"].min() == pl.read_parquet(tables / "server_events.parquet")["ts"].min().replace(
        second=0
    )
    worst = prof.sort("trouble", descending=True)["minute"][0]
    lo, hi = _surge()
    assert lo.replace(second=0, microsecond=0) <= worst <= hi  # the overload, by the manifest
    failed = ga.filter(
        (pl.col("status") >= 500) | (pl.col("upstream_status") >= 500) | pl.col("error").is_not_null()
    )
    assert prof["trouble"].sum() >= failed.height > 0


def test_pressure_without_failures_is_trouble(tmp_path):
    """The spike run's overload fails nothing the gateway sees; its queue, preemptions and full KV cache
    on the vLLM stats lines make the surge's minute the worst (manifest: c=48 from client start + 75 s)."""
    man = json.loads((need(LAB / "spike") / "manifest.json").read_text())
    ev = next(e for e in man["events"] if e["event"] == "client_start")
    calm, surge = (float(x) for x in re.findall(r"(\d+)s c=", ev["phases"])[:2])
    lo = datetime.fromtimestamp(ev["t"], UTC) + timedelta(seconds=calm)
    ingest(ROOT / "samples" / "spike", tmp_path)
    prof, _ = budget.profile(tmp_path)
    worst = prof.sort("trouble", descending=True).row(0, named=True)
    assert worst["minute"] <= lo + timedelta(seconds=surge) and lo < worst["minute"] + timedelta(minutes=1)
    stats = pl.read_parquet(tmp_path / "server_stats.parquet").filter(
        pl.col("ts").dt.truncate("1m") == worst["minute"]
    )
    signs = stats.filter(
        (pl.col("waiting") >= 1) | (pl.col("preemptions") >= 1) | (pl.col("kv_usage") >= 0.9)
    )
    assert signs.height > worst["trouble"] / 2  # most of that minute's trouble signs are the stats lines


def test_a_range_is_chosen_only_past_the_budget(tables):
    whole = _whole(tables)
    assert budget.choose(tables, None) is None
    assert budget.choose(tables, whole) is None
    half = _floor(tables) + (whole - _floor(tables)) // 2
    n = budget.replicas(tables)
    c = budget.choose(tables, half)
    assert c is not None and c.range.chosen["reason"].startswith("the whole input would need")
    assert c.range_bytes <= half < c.whole_bytes == whole
    assert c.range.since <= c.anchor <= c.range.until
    prof, _ = budget.profile(tables, kept_client_sources(tables)[0])
    inside = prof.filter(pl.col("minute").is_between(c.range.since, c.range.until))
    assert inside["trouble"].max() == prof["trouble"].max() == c.anchor_trouble
    assert 0 < inside.height < prof.height
    # grown while it fits: one more neighbouring minute on either side would not
    before = prof.filter(pl.col("minute") < c.range.since).tail(1)
    after = prof.filter(pl.col("minute") > c.range.until).head(1)
    nxt = pl.concat([before, after])
    assert nxt.height  # the range is not the whole run
    for b in nxt["bytes"]:
        assert budget.need(inside["bytes"].sum() + b, replicas=n) > half
    # how much of the trouble it holds, and where the rest is: further ranges that fit, apart from it and
    # from each other, the first around the worst minute left out
    assert (c.trouble_in, c.trouble_total) == (inside["trouble"].sum(), prof["trouble"].sum())
    assert 1 <= len(c.others) <= budget.OTHERS
    spans = [(c.range.since, c.range.until)]
    for o in c.others:
        lo, hi = datetime.fromisoformat(o["since"]), datetime.fromisoformat(o["until"])
        assert all(hi < a or lo > b for a, b in spans)
        spans.append((lo, hi))
        part = prof.filter(pl.col("minute").is_between(lo, hi))
        assert o["trouble"] == part["trouble"].sum()
        assert (
            budget.need(part["bytes"].sum(), replicas=n) <= half or part.height == 1
        )  # fits, or one minute alone
    left_out = prof.filter(~pl.col("minute").is_between(c.range.since, c.range.until))
    worst_out = left_out.sort("trouble", descending=True)["minute"][0]
    assert (
        datetime.fromisoformat(c.others[0]["since"])
        <= worst_out
        <= datetime.fromisoformat(c.others[0]["until"])
    )
    # a budget below even one minute still gives that minute, and says it does not fit
    tiny = budget.choose(tables, 1)
    assert tiny.range.until - tiny.range.since < timedelta(minutes=1)
    assert "still needs" in tiny.range.chosen["reason"]


def test_analyze_names_the_range_it_chose(tmp_path, tables):
    whole = _whole(tables)
    half = _too_small_for_slices(tables)
    out = tmp_path / "out"
    analyze(need(LAB / "retry-storm"), out, AnalyzeOptions(max_memory=half))
    s = json.loads((out / "summary.json").read_text())
    jsonschema.validate(s, SCHEMA)
    rng = s["span"]["range"]
    assert rng["chosen"]["budget_bytes"] == half and rng["chosen"]["whole_bytes"] == whole
    for doc in ("correlation.json", "diagnosis.json"):
        assert json.loads((out / doc).read_text())["range"]["chosen"] == rng["chosen"]
    c = budget.choose(tables, half)
    assert datetime.fromisoformat(rng["since"]) == c.range.since  # whole minutes, to the millisecond
    assert datetime.fromisoformat(rng["until"]) == c.range.until.replace(microsecond=999000)
    assert s["span"]["inputs_start"] < rng["since"]
    # the coverage stays whole: every file of the run, every line counted
    files = pl.read_parquet(tables / "files.parquet")
    inp = s["inputs"]
    assert inp["lines_total"] == files["lines_total"].sum() == inp["lines_parsed"] + inp["lines_unrecognized"]
    assert inp["lines_parsed"] == files["lines_parsed"].sum()
    md = (out / "summary.md").read_text()
    assert "range chosen to fit memory" in md and "**Part of the logs analysed:**" in md
    html = (out / "report.html").read_text()
    assert 'class="range-note"' in html and "chosen to fit memory" in html
    # the whole input's trouble, binned, with the range shaded: every trouble sign is in a bin
    ov = rng["chosen"]["overview"]
    assert ov["bin_s"] == 60 and sum(b["trouble"] for b in ov["bins"]) == rng["chosen"]["trouble_total"] > 0
    assert 'id="spec-overview"' in html
    for o in rng["chosen"]["others"]:
        assert f"--since {o['since']} --until {o['until']}" in html and f"--since {o['since']}" in md
    # the records outside the range were not correlated
    req = pl.read_parquet(out / "requests.parquet")
    assert 0 < req.height < pl.read_parquet(tables / "client_requests.parquet").height


def test_a_notebook_gives_max_memory_as_the_command_line_does(tmp_path, tables):
    """``AnalyzeOptions(max_memory="<size>")`` is read as ``--max-memory`` reads it: analyze chooses the range it
    chooses for those bytes. Before, the text reached the budget's arithmetic (TypeError: str / int, after ingest);
    a text that is no size is the command line's usage error, before anything is read."""
    budget_bytes = (_too_small_for_slices(tables) // 1024) * 1024
    opts = AnalyzeOptions(max_memory=f"{budget_bytes // 1024}K")
    assert memory.budget_of(opts.max_memory) == opts.ingest_options().memory_budget == budget_bytes
    assert memory.budget_of("none") is None and memory.budget_of(None) is None
    out = tmp_path / "out"
    analyze(need(LAB / "retry-storm"), out, opts)
    rng = json.loads((out / "summary.json").read_text())["span"]["range"]
    c = budget.choose(tables, budget_bytes)
    assert rng["chosen"]["budget_bytes"] == budget_bytes and rng["chosen"]["whole_bytes"] == _whole(tables)
    assert datetime.fromisoformat(rng["since"]) == c.range.since
    with pytest.raises(LogscopeError, match="max_memory: 'plenty' is not a size") as e:
        analyze(need(LAB / "retry-storm"), tmp_path / "bad", AnalyzeOptions(max_memory="plenty"))
    assert e.value.code == ExitCode.USAGE and not (tmp_path / "bad").exists()


def test_no_limit_and_a_given_range_win(tmp_path, tables):
    whole = _whole(tables)
    out = tmp_path / "none"
    analyze(need(LAB / "retry-storm"), out, AnalyzeOptions(max_memory=None))
    assert "range" not in json.loads((out / "summary.json").read_text())["span"]
    assert (
        "spec-overview" not in (out / "report.html").read_text()
        and "range-note" not in (out / "report.html").read_text().split("</style>")[-1]
    )
    out = tmp_path / "given"
    rng = time_range.make("2026-11-29T08:29:00Z", "2026-11-29T08:32:00Z")
    analyze(
        need(LAB / "retry-storm"),
        out,
        AnalyzeOptions(max_memory=whole // 2, since=rng.since, until=rng.until),
    )
    assert "chosen" not in json.loads((out / "summary.json").read_text())["span"]["range"]


def test_the_cli_takes_sizes_and_says_when_it_chose(tmp_path, tables):
    r = CliRunner().invoke(
        app, ["analyze", str(need(LAB / "retry-storm")), "-o", str(tmp_path / "a"), "--max-memory", "plenty"]
    )
    assert r.exit_code == 2 and "--max-memory" in r.output
    half = _too_small_for_slices(tables)
    r = CliRunner().invoke(
        app,
        [
            "analyze",
            str(need(LAB / "retry-storm")),
            "-o",
            str(tmp_path / "b"),
            "--max-memory",
            str(half),
            "--fail-on",
            "crash",
        ],
    )
    assert r.exit_code == 0, r.output  # the storm has no crash
    assert "--fail-on saw only the range chosen to fit memory" in r.output
    assert "logscope: note: the whole input would need" in r.output
    s = json.loads((tmp_path / "b" / "summary.json").read_text())
    o = s["span"]["range"]["chosen"]["others"][0]
    assert f"logscope report {tmp_path / 'b'} --since {o['since']} --until {o['until']}" in " ".join(
        r.output.split()
    )
    # `report --whole` analyses what analyze would: everything when it fits ...
    r = CliRunner().invoke(app, ["report", str(tmp_path / "b"), "--whole", "-q"])
    assert r.exit_code == 0, r.output
    assert "range" not in json.loads((tmp_path / "b" / "summary.json").read_text())["span"]
    # ... and the same range when it does not
    r = CliRunner().invoke(app, ["report", str(tmp_path / "b"), "--whole", "--max-memory", str(half)])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["span"]["range"] == s["span"]["range"]
    assert "logscope: note: the whole input would need" in r.output


def _analyze_spike_apart(out: Path, unset: str, extra: dict, *args: str) -> subprocess.CompletedProcess:
    """`logscope analyze` of the lab's spike in a fresh process, as the CLI runs, without the environment variable
    ``unset`` (the allocator setting under test) and with ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != unset} | extra
    cmd = [sys.executable, "-m", "logscope", "analyze", str(need(LAB / "spike")), "-o", str(out), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


@pytest.mark.slow  # a child process
def test_allocator_returns_memory_only_when_tight(tmp_path):
    """The CLI asks polars' jemalloc to purge freed pages (a stage after a large one otherwise starts from its
    peak) when the folder is large for the budget, before polars is loaded, and never over the user's own."""
    (tmp_path / "a.log").write_bytes(b"x" * 1000)
    (tmp_path / "b.log.gz").write_bytes(b"x" * 1000)
    assert memory.input_bytes(tmp_path) == 1000 + 8 * 1000
    assert memory.tight(tmp_path, 2 * memory.NEED_BASE) and not memory.tight(tmp_path, 4 * memory.NEED_BASE)
    assert not memory.tight(tmp_path, None)
    assert not memory.tune_allocator(tmp_path, 1)  # polars is loaded in this process: too late
    # the slices' estimate counts on the freed pages handed back only when they are (set before polars loads)
    base = budget.need(0, sliced=True)
    assert budget.need(1000, sliced=True) == base + int((budget.RAMP + budget.SLICED_FACTOR) * 1000)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(
            memory.ALLOCATOR_ENV, "dirty_decay_ms:500,muzzy_decay_ms:1000," + memory.RETURN_FREED
        )  # as polars
        assert budget.need(1000, sliced=True) == base + int(
            (budget.RAMP + budget.SLICED_FACTOR_RETURNING) * 1000
        )

    def child(extra: dict, *args: str) -> subprocess.CompletedProcess:
        return _analyze_spike_apart(tmp_path / "out", memory.ALLOCATOR_ENV, extra, *args)

    freed, apart = "polars' allocator returns freed memory promptly", "ingest runs in a process of its own"
    r = child({}, "--max-memory", "600M", "-v")
    assert r.returncode == 0, r.stderr
    assert f"memory is tight: {freed} ({memory.ALLOCATOR_ENV}=" in r.stderr and apart in r.stderr
    r = child({}, "--max-memory", "none", "-v")
    assert r.returncode == 0 and "memory is tight" not in r.stderr
    # the user's own allocator setting is kept; ingest still runs apart (it depends on no setting)
    r = child({memory.ALLOCATOR_ENV: "dirty_decay_ms:1000"}, "--max-memory", "600M", "-v")
    assert r.returncode == 0 and freed not in r.stderr and apart in r.stderr
    # polars writes its defaults into the variable when it loads: a child of such a process has made no choice
    r = child({memory.ALLOCATOR_ENV: "dirty_decay_ms:500,muzzy_decay_ms:1000"}, "--max-memory", "600M", "-v")
    assert r.returncode == 0 and freed in r.stderr


def test_glibc_maps_large_buffers_apart_only_when_tight(tmp_path):
    """glibc's mmap threshold (the compiled scanner's buffers, Python's) is fixed when memory is tight, in this
    process and in those it starts (the ingest's own), never over a value already set: run in fresh processes,
    as the CLI runs it, with the verbose note that says so."""
    (tmp_path / "a.log").write_bytes(b"x" * 1000)
    probe = (
        "import os, sys; from pathlib import Path; from logscope.resources import memory as m; "
        "print(m.tune_glibc(Path(sys.argv[1]), int(sys.argv[2])), m.tune_glibc(Path(sys.argv[1]), int(sys.argv[2])), "
        "os.environ.get(m.GLIBC_ENV))"
    )

    def run(budget: int, extra: dict) -> str:
        env = {k: v for k, v in os.environ.items() if k != memory.GLIBC_ENV} | extra
        r = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path), str(budget)], env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    # tight: set once (the second call finds it set); then a child started now inherits it
    assert run(2 * memory.NEED_BASE, {}) == f"True False {memory.GLIBC_MMAP}"
    assert run(4 * memory.NEED_BASE, {}) == "False False None"  # not tight: glibc's own behaviour
    assert (
        run(2 * memory.NEED_BASE, {memory.GLIBC_ENV: "4096"}) == "False False 4096"
    )  # the user's value kept
    r = _analyze_spike_apart(tmp_path / "o", memory.GLIBC_ENV, {}, "-v", "--max-memory", "600M")
    assert r.returncode == 0, r.stderr
    assert f"mapped apart and handed back whole ({memory.GLIBC_ENV}={memory.GLIBC_MMAP})" in r.stderr


def test_a_fleets_note_names_each_batch_in_a_unit_it_reads_as_more_than_zero():
    """3,000 replica folders of 150 real lab vLLM lines (bench/generate.py's shape, 103.6 MB) under 300M: the note
    said their formats were "detected 0 MiB of heads at a time" (256 KiB), and that even so ~349 MiB is needed."""
    from logscope.ingest.sources import HEAD_BYTES
    from logscope.resources import shape

    limits = shape.ingest_limits(300 * 2**20, 3_000, 3_000 * min(34_538, HEAD_BYTES))
    assert limits.note is not None
    assert "detected 256 KiB of heads at a time" in limits.note and " 0 MiB" not in limits.note
    assert "past 1 MiB" in limits.note and "even so about 349 MiB is needed" in limits.note
    assert (memory.gib(2**30), memory.gib(300 * 2**20), memory.gib(3 * 2**10)) == (
        "1.0 GiB",
        "300 MiB",
        "3 KiB",
    )


def test_the_tables_are_written_one_at_a_time_under_a_budget(tmp_path, monkeypatch):
    """The parsed tables are written on every core at once (scanner10), each write holding its table's encoding;
    under --max-memory they are written one at a time. Read on the real retry-storm run: every table written
    either way, with the same rows."""
    from logscope.ingest import IngestOptions
    from logscope.ingest import ingest as ingest_tables
    from logscope.ingest.store import Store

    seen: list[int] = []
    real = Store.write_all

    def spy(self, names, out, workers=1):
        seen.append(workers)
        return real(self, names, out, workers)

    monkeypatch.setattr(Store, "write_all", spy)
    monkeypatch.setattr("logscope.ingest.cores", lambda: 2)
    rows = {}
    for name, budget_ in (("free", None), ("bounded", 200 * 2**20)):
        out = tmp_path / name
        ingest_tables(need(LAB / "retry-storm"), out, IngestOptions(memory_budget=budget_))
        rows[name] = {p.stem: pl.read_parquet(p).height for p in out.glob("*.parquet")}
    assert seen == [2, 1]
    assert rows["free"] == rows["bounded"] and rows["free"]["gateway_attempts"] > 0
