"""analyze --cluster (logscope.cluster): on a LocalCluster of two worker processes, and on a scheduler and workers
started as the README says, the ingest's and the correlation's tasks give every table and summary.json exactly
as in-process; a worker killed mid-ingest changes nothing; a task's error comes back as itself; a cluster that
cannot run the analysis is said before any work."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, ROOT, need

distributed = pytest.importorskip("distributed", reason="the cluster tests need the 'dask' extra")

from logscope import cluster  # noqa: E402
from logscope.api import AnalyzeOptions, analyze, ingest  # noqa: E402
from logscope.cluster import tasks  # noqa: E402
from logscope.errors import LogscopeError  # noqa: E402
from logscope.ingest import IngestOptions, sources  # noqa: E402
from logscope.ingest.streams import FileState  # noqa: E402

SPIKE = ROOT / "samples" / "spike"  # a lab run kept in the repository: every layer, 0.8 MB
# small slices and pieces, so that both run as several tasks on a folder this small
CUT = {"slice_rows": 300, "chunk_bytes": 32768}
# this process's environment before any local cluster: Dask's nanny sets its workers' variables here too
# while the module's LocalCluster runs (put back when it closes)
ENV0 = dict(os.environ)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """One LocalCluster(n_workers=2, processes=True) for the module, as the current session."""
    with cluster.session("local:2", SPIKE, tmp_path_factory.mktemp("probe")) as s:
        assert s.workers == 2
        yield s


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in sorted(out.glob("*.parquet"))}


def _same_tables(a: Path, b: Path, at_least: int = 18) -> None:
    """Every table equal."""
    ta, tb = _tables(a), _tables(b)
    assert ta.keys() == tb.keys() and len(ta) >= at_least
    for name in ta:
        x, y = ta[name], tb[name]
        if (
            name == "files"
        ):  # each file's notes as a set: a unit read again after a lost worker may say them in
            x, y = (t.with_columns(pl.col("messages").list.sort()) for t in (x, y))  # another order
        differ = [c for c in x.columns if c not in y.columns or not x[c].equals(y[c])]
        assert x.shape == y.shape and not differ, (name, differ)


def _summary(out: Path) -> dict:
    d = json.loads((out / "summary.json").read_text())
    d["generated_by"].pop("command_line", None)  # the one field that names how it was run
    return d


def _segments(monkeypatch, n: int) -> None:
    """Cut every vLLM log into ``n`` pieces, in-process and on the cluster (IngestOptions.segments)."""
    monkeypatch.setattr(
        AnalyzeOptions,
        "ingest_options",
        lambda self, real=AnalyzeOptions.ingest_options: IngestOptions(
            **{**real(self).__dict__, "segments": n}
        ),
    )


def test_the_same_tables_and_summary_as_in_process(tmp_path, local, monkeypatch):
    """The vLLM log in pieces, server_requests' passes and the correlation's slices, as tasks: every table and
    summary.json equal."""
    from logscope.ingest import derive

    _segments(monkeypatch, 3)
    monkeypatch.setattr(derive, "ONE_PASS_MAX", 100)  # the spike's request events in passes of ~100
    monkeypatch.setattr(derive, "ROWS_PER_PASS", 100)
    analyze(SPIKE, tmp_path / "here", AnalyzeOptions(**CUT))
    stats: list = []
    from logscope.cluster import ingest as on_cluster

    real = on_cluster.ingest
    monkeypatch.setattr(on_cluster, "ingest", lambda *a, **k: real(*a, **k, stats=stats))
    analyze(SPIKE, tmp_path / "there", AnalyzeOptions(**CUT, cluster="local:2"))
    kinds = [t["kind"] for t in stats]
    cut = Counter(t["format"] for t in stats if t["kind"] == "piece")
    # the vLLM log (row counters) and, on a cluster, the gateway's logs (independent chunks) in pieces
    assert cut["vllm_server"] == 3 and cut["nginx_access"] >= 2, cut
    assert kinds.count("settle") == len(cut) and kinds.count("whole") >= 3
    events = (
        pl.scan_parquet(tmp_path / "there" / "server_request_events.parquet")
        .select(pl.len())
        .collect()
        .item()
    )
    assert kinds.count("derive") == -(-events // 100) > 3  # a task a pass (a bucket each; none empty here)
    from logscope.ingest import PARSED_TABLES

    assert sorted(t["file"] for t in stats if t["kind"] == "table") == sorted(PARSED_TABLES)  # a task a table
    _same_tables(tmp_path / "here", tmp_path / "there")
    corr = json.loads((tmp_path / "there" / "correlation.json").read_text())
    assert corr["slices"]["count"] == 3  # three slices, three tasks
    assert _summary(tmp_path / "here") == _summary(tmp_path / "there")
    assert not (tmp_path / "there" / "_parts").exists()


def test_local_workers_share_the_cores(local):
    """Each local worker's polars pool is its share of the cores, as its threads run (set after the worker's
    process started, it said 1 and ran 2: each task 1.3x slower), and its glibc keeps its own mmap threshold
    (Dask's MALLOC_TRIM_THRESHOLD_ is not set); the check then finds no host oversubscribed, and names one that
    is; this process's environment is as before once the session closes."""
    from logscope.ingest.options import cores

    share = max(1, cores() // 2)
    assert set(local.client.run(cluster.polars_threads).values()) == {share}
    assert set(local.client.run(pl.thread_pool_size).values()) == {share}
    spawned = local.client.run(lambda: Path("/proc/self/environ").read_bytes().split(b"\0"))
    for env in spawned.values():
        assert f"POLARS_MAX_THREADS={share}".encode() in env  # set before the process started
        if "MALLOC_TRIM_THRESHOLD_" not in ENV0:
            assert not any(v.startswith(b"MALLOC_TRIM_THRESHOLD_=") for v in env)
    assert local.notes == []
    # nor Dask's profiler, which samples the task threads' stacks holding the GIL (this process keeps its own)
    import dask

    profiling = local.client.run(lambda: __import__("dask").config.get("distributed.worker.profile.enabled"))
    assert (
        set(profiling.values()) == {False} and dask.config.get("distributed.worker.profile.enabled") is True
    )
    seen = [{"host": "gpu-7", "cores": 8, "polars_threads": 8}] * 4
    (note,) = cluster.oversubscribed(seen)
    assert (
        note.startswith("host gpu-7: 4 workers x 8 polars threads on 8 cores")
        and "POLARS_MAX_THREADS=2" in note
    )
    assert cluster.oversubscribed([{"host": "a", "cores": 8, "polars_threads": 2}] * 4) == []


def test_a_local_cluster_leaves_this_process_as_it_was(monkeypatch):
    """Dask's nanny sets the workers' variables in the process that starts them, here: put back at close."""
    from logscope.ingest.options import cores

    monkeypatch.delenv("POLARS_MAX_THREADS", raising=False)
    s = cluster.connect("local:1")
    try:
        assert os.environ.get("POLARS_MAX_THREADS") == str(cores())  # the nanny's doing
        assert s.threads == cores()  # one worker runs as many tasks at once as there are cores
    finally:
        cluster.close(s)
    assert "POLARS_MAX_THREADS" not in os.environ


def test_a_worker_killed_mid_ingest(tmp_path, local, monkeypatch):
    run = need(LAB / "retry-storm")
    # the same chunks: the client tables' row order follows where chunks end (in-process too)
    ingest(run, tmp_path / "here", AnalyzeOptions(chunk_bytes=32768))
    _segments(monkeypatch, 4)
    pids = local.client.run(os.getpid)
    seen: list[str] = []

    def progress(msg: str, frac: float) -> None:
        if not seen:  # the first unit done: kill a worker while the others run or wait
            os.kill(next(iter(pids.values())), signal.SIGKILL)
        seen.append(msg)

    from logscope.cluster import ingest as on_cluster

    on_cluster.ingest(run, tmp_path / "there", AnalyzeOptions(chunk_bytes=32768).ingest_options(), progress)
    assert len(seen) > 5  # units finished after the kill
    assert set(local.client.run(os.getpid).values()) != set(pids.values())  # a worker was replaced
    _same_tables(tmp_path / "here", tmp_path / "there", at_least=12)  # the ingest's tables
    local.client.wait_for_workers(2, timeout=60)


def test_a_task_error_comes_back_as_itself(tmp_path, local):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(SPIKE / "vllm-server.log", d)
    st = FileState(sources.discover(d)[0], "vllm_server", "server", 1.0, "r")
    (tmp_path / "parts").write_text("a file where the parts folder goes")  # the part cannot be written
    args = (0, [st], IngestOptions(), (2026, "test", None), tmp_path / "parts")
    # the output's failure (exit 5, issue #44), never taken for the parser's: the same here and on a worker
    with pytest.raises(LogscopeError) as here:
        tasks.whole(*args)
    with pytest.raises(LogscopeError) as there:
        local.client.submit(tasks.whole, *args, pure=False).result()
    assert here.value.code == there.value.code == 5 and "Not a directory" in here.value.what

    def said(e: BaseException) -> str:  # the part's folder is named per run
        return re.sub(r"\d{5}-[0-9a-f]{12}", "<part>", str(e))

    assert type(there.value) is type(here.value) and said(there.value) == said(here.value)
    assert "tasks.py" in "".join(__import__("traceback").format_tb(there.value.__traceback__))
    # a LogscopeError keeps its hint and exit code on the way back
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with pytest.raises(LogscopeError) as e:
        local.client.submit(_fails, pure=False).result()
    assert (e.value.what, e.value.hint, e.value.code) == ("no such thing", "look elsewhere", 4)


def _fails():
    raise LogscopeError("no such thing", hint="look elsewhere", code=4)


def test_another_logscope_on_the_workers(tmp_path, local, monkeypatch):
    monkeypatch.setattr(cluster, "code_digest", lambda: "0123456789abcdef")
    with pytest.raises(LogscopeError) as e:
        cluster.check(local, SPIKE, tmp_path / "out")
    assert (
        e.value.code == cluster.EXIT
        and "runs logscope" in e.value.what
        and "0123456789abcdef" in e.value.what
    )
    assert not list((tmp_path / "out").glob(f"{cluster.PROBE}*"))  # the probes are cleaned up


def test_what_a_worker_sees(tmp_path):
    """The per-worker check: a missing input, a file of another size, an output it cannot write."""
    f = sources.discover(SPIKE)[0]
    ok = cluster.view(str(SPIKE), str(tmp_path), "t", [(f.rel, f.size)])
    assert ok["problems"] == [] and (tmp_path / ok["probe"]).exists()
    (tmp_path / "a-file").write_text("")
    bad = cluster.view(str(tmp_path / "nowhere"), str(tmp_path / "a-file" / "out"), "t", [])
    assert "cannot see the input" in bad["problems"][0] and "cannot write" in bad["problems"][1]
    other = cluster.view(str(SPIKE), str(tmp_path), "t", [(f.rel, f.size + 1)])
    assert "not " + f"{f.size + 1:,}" in other["problems"][0]


def test_an_unreachable_scheduler():
    import dask

    t0 = time.monotonic()
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}), pytest.raises(LogscopeError) as e:
        cluster.connect("tcp://127.0.0.1:9")  # the discard port: nothing listens
    assert e.value.code == cluster.EXIT and "cannot reach the Dask scheduler" in e.value.what
    assert time.monotonic() - t0 < 30


def test_a_session_opens_while_this_process_goes_on(tmp_path):
    """The block runs at once, the session opening in the background (the files are detected meanwhile); its
    failure is raised where the session is first asked for, and ``ready`` is called only with an open one."""
    import dask

    called = []
    t0 = time.monotonic()
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        with cluster.opening("tcp://127.0.0.1:9", SPIKE, tmp_path / "o", called.append) as o:
            assert time.monotonic() - t0 < 1.0 and isinstance(o, cluster.Opening)
            with pytest.raises(LogscopeError) as e:
                cluster.current()
    assert e.value.code == cluster.EXIT and "cannot reach the Dask scheduler" in e.value.what and called == []
    with cluster.opening("local:1", SPIKE, tmp_path / "o", called.append) as o:
        s = cluster.current()
        assert called == [s] and s.workers == 1
        with cluster.opening("local:1", SPIKE, tmp_path / "o") as again:  # the API inside the CLI's: the same
            assert again is o and cluster.current() is s
    assert s.client.status == "closed"


def _start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_scheduler_and_workers_started_as_documented(tmp_path):
    """`dask scheduler`, `dask worker ADDRESS --nworkers 2`, then the one command: the same report."""
    env = dict(ENV0, PYTHONPATH=os.pathsep.join([str(ROOT), ENV0.get("PYTHONPATH", "")]))
    dask = [sys.executable, "-m", "dask"]
    procs = [
        _start(
            [
                *dask,
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(tmp_path / "scheduler.json"),
            ],
            env,
            tmp_path / "scheduler.log",
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "scheduler.json").exists():
            assert time.monotonic() < deadline and procs[0].poll() is None, (
                tmp_path / "scheduler.log"
            ).read_text()
            time.sleep(0.2)
        time.sleep(0.2)
        address = json.loads((tmp_path / "scheduler.json").read_text())["address"]
        procs.append(
            _start(
                [
                    *dask,
                    "worker",
                    address,
                    "--nworkers",
                    "2",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--local-directory",
                    str(tmp_path / "dask"),
                ],
                env,
                tmp_path / "workers.log",
            )
        )
        analyze(SPIKE, tmp_path / "here", AnalyzeOptions())
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "logscope",
                "analyze",
                str(SPIKE),
                "-o",
                str(tmp_path / "there"),
                "--cluster",
                address,
                "-v",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"cluster {address}: 2 workers" in r.stderr
        if not ENV0.get("POLARS_MAX_THREADS"):  # two workers, each polars pool on every core: named
            assert re.search(
                r"cluster: host \S+: 2 workers x \d+ polars threads on \d+ cores; start them with "
                r"POLARS_MAX_THREADS=\d+",
                r.stderr,
            ), r.stderr[-2000:]
        _same_tables(tmp_path / "here", tmp_path / "there")
        assert _summary(tmp_path / "here") == _summary(tmp_path / "there")
    finally:
        _stop(procs)
    assert all(p.poll() is not None for p in procs)


def test_the_cli_exit_code_of_an_unreachable_scheduler(tmp_path):
    env = dict(
        ENV0,
        PYTHONPATH=str(ROOT),
        LOGSCOPE_CLUSTER="tcp://127.0.0.1:9",
        DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s",
    )
    r = subprocess.run(
        [sys.executable, "-m", "logscope", "analyze", str(SPIKE), "-o", str(tmp_path / "o")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 6 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in r.stderr
    assert not (tmp_path / "o" / "files.parquet").exists()  # no work started


def test_dask_is_imported_only_for_a_cluster():
    """Installed or not, dask stays unloaded unless --cluster is given: the base install stays light."""
    code = (
        "import sys, logscope.cli, logscope.api, logscope.correlate.slices, logscope.cluster.tasks; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed'}))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(ENV0, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == "[]"
