"""logscope on a Dask cluster (``analyze --cluster ADDRESS``): the session every stage that runs tasks shares.

Only this package imports ``distributed`` (the optional extra ``logscope[dask]``), and only when a cluster is
asked for: the base install never loads it. A session connects to a scheduler (or starts a ``LocalCluster`` for
``local[:N]``) and, before any work, checks with one small call per worker that every worker runs this very
logscope (its version and the digest of its code) and sees the input and the output folder as this process
does: a worker on other storage would write parts nobody assembles. Each problem is a ``LogscopeError`` with
exit code ``EXIT``. The tasks themselves are in ``tasks.py`` (ingest) and ``correlate.py`` (slices).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import LogscopeError

ENV = "LOGSCOPE_CLUSTER"  # the address when --cluster is not given
EXIT = 6  # the CLI's exit code for a cluster that cannot run the analysis (cli.ExitCode.CLUSTER)
WORKERS_TIMEOUT_S = 60  # a scheduler with no worker yet: how long to wait for the first
PROBE = ".logscope-probe-"  # the files each worker writes into OUT, which this process must then see
HINT = (
    "start one: `dask scheduler` on one machine, `dask worker ADDRESS --nworkers N` on each (logscope "
    "installed there, DIR and OUT on storage they all mount at the same path); or --cluster local:N"
)
_current: Session | Opening | None = None
# Dask's nanny sets these before it spawns a worker; glibc then never raises its mmap threshold, and each
# chunk's decoded text is mapped and unmapped afresh: 1.9x the page faults and +7 % CPU for the same tasks
# (docs/performance.md item 39). A local cluster's workers start without it.
UNSET = ("MALLOC_TRIM_THRESHOLD_",)


@dataclass
class Session:
    client: Any  # distributed.Client
    address: str
    workers: int
    threads: int  # tasks the cluster runs at once
    dashboard: str | None
    local: Any = None  # the LocalCluster started for ``local[:N]``, closed with the session
    environ: dict[str, str | None] = field(
        default_factory=dict
    )  # this process's variables a nanny set, as before
    notes: list[str] = field(default_factory=list)  # what the checks found that slows, not stops, the work


class Opening:
    """A session opened and checked in a thread of its own while this process goes on: the start of a local
    cluster, ``distributed``'s import and the workers' check (~1.6 s, docs/performance.md item 40) overlap the
    detection, which needs no cluster. ``result()`` waits for it and raises what went wrong there (an
    unreachable scheduler, a worker that cannot see DIR): the first task waits for it, so nothing runs on a
    cluster that failed its check. ``ready`` is called with the session once it is open and checked."""

    def __init__(
        self, address: str, root: Path, out: Path, ready: Callable[[Session], None] | None = None
    ) -> None:
        self.address = address
        self._session: Session | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._open, args=(root, out, ready), name="logscope-cluster-open", daemon=True
        )
        self._thread.start()

    def _open(self, root: Path, out: Path, ready: Callable[[Session], None] | None) -> None:
        try:
            s = started(self.address, root, out)
            self._session = s
            if ready is not None:
                ready(s)
        except BaseException as e:  # noqa: BLE001 - handed to the thread that needs the session
            self._error = e

    def result(self) -> Session:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._session is not None
        return self._session

    def close(self) -> None:
        self._thread.join()  # a cluster half-started is closed by its opener; one opened, here
        if self._session is not None:
            close(self._session)
            self._session = None


def current() -> Session:
    if _current is None:
        raise LogscopeError("no Dask cluster session is open", code=EXIT, hint="give --cluster ADDRESS")
    return _current.result() if isinstance(_current, Opening) else _current


def require() -> None:
    """distributed is installed, else a clear error (it is an optional extra)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise LogscopeError(
            "--cluster needs Dask's distributed, which is not installed",
            hint="pip install 'logscope[dask]'",
            code=2,
        ) from None


@contextmanager
def opening(
    address: str, root: str | Path, out: str | Path, ready: Callable[[Session], None] | None = None
) -> Iterator[Session | Opening]:
    """The current session on ``address`` while this block runs, opened and checked in the background
    (``Opening``); one already open or opening on the same address is reused (the CLI opens it before the API
    runs), and ``ready`` is then not called."""
    global _current
    if _current is not None and _current.address == address:
        yield _current
        return
    o = Opening(address, Path(root).resolve(), Path(out).resolve(), ready)
    _current = o
    try:
        yield o
    finally:
        _current = None
        o.close()


@contextmanager
def session(address: str, root: str | Path, out: str | Path) -> Iterator[Session]:
    """A checked session on ``address`` ('local', 'local:N', or a scheduler's address), open when this returns;
    one already open on the same address is reused."""
    global _current
    if _current is not None and _current.address == address:
        yield current()
        return
    s = started(address, Path(root).resolve(), Path(out).resolve())
    try:
        _current = s
        yield s
    finally:
        _current = None
        close(s)


START_TRIES = 2  # a cluster that failed to start or to be checked is started again once, then exit 6


def started(address: str, root: Path, out: Path) -> Session:
    """A session on ``address``, connected and checked (``connect``, ``check``). A worker that dies while the
    cluster starts (a local cluster's nanny then fails: 'Nanny failed to start') or while it is checked is no
    error of the analysis: the whole start is run again, once, and said in the session's notes; a second
    failure is exit ``EXIT`` with what went wrong, never an internal error."""
    failures: list[str] = []
    for _ in range(START_TRIES):
        try:
            s = connect(address)
        except LogscopeError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever killed the start, it is the cluster's
            failures.append(f"{type(e).__name__}: {e}")
            continue
        try:
            check(s, root, out)
        except LogscopeError:
            close(s)
            raise
        except Exception as e:  # noqa: BLE001 - a worker lost while checked: start again
            close(s)
            failures.append(f"{type(e).__name__}: {e}")
            continue
        s.notes += [f"the cluster was started again: the first start failed ({f})" for f in failures]
        return s
    raise LogscopeError(
        f"the Dask cluster {address} could not be started and checked ({START_TRIES} tries; a worker died or "
        f"failed while it started): {failures[-1]}",
        hint="run again (a worker killed at start, by the OOM killer or a deploy, is often transient), start the "
        "workers by hand to see why one fails, or analyse without --cluster",
        code=EXIT,
    )


def connect(address: str) -> Session:
    require()
    import logging

    import dask
    from distributed import Client, LocalCluster

    from ..ingest.options import cores

    local, environ = None, {}
    try:
        if address == "local" or address.startswith("local:"):
            n = _local_workers(address)
            # set before a worker's process starts (the nanny's ``env`` comes too late for polars: each worker
            # then had two polars threads and two executors, and two workers ran each task 1.3x slower); the
            # nanny sets them in this process too, where polars is already running: restored by ``close``
            spawn = {k: None for k in UNSET} | worker_env(n)
            environ = {k: os.environ.get(k) for k in spawn}
            # and without Dask's statistical profiler, which samples every task thread's stack each 10 ms while
            # holding the GIL: -2.7 % of local:1's ingest (the dashboard's profile page stays empty)
            with dask.config.set(
                {
                    **{f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in spawn.items()},
                    "distributed.worker.profile.enabled": False,
                }
            ):
                # as Dask's own default: the cores shared out, so local:1 runs as many tasks at once as there
                # are cores, as the in-process ingest runs streams
                local = LocalCluster(
                    n_workers=n,
                    threads_per_worker=max(1, cores() // n),
                    processes=True,
                    dashboard_address=":0",
                    silence_logs=logging.ERROR,
                )
            client = Client(local)
        else:  # waits for it Dask's connect timeout (30 s; DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT)
            client = Client(address)
    except (OSError, TimeoutError) as e:
        if local is not None:
            local.close()
        _restore(environ)
        raise LogscopeError(
            f"cannot reach the Dask scheduler at {address}: {e}", hint=HINT, code=EXIT
        ) from None
    except (
        Exception
    ):  # a worker that died while the local cluster started ('Nanny failed to start'): ``started``
        if local is not None:
            local.close()
        _restore(environ)
        raise
    try:
        client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
    except (OSError, TimeoutError):
        client.close()
        if local is not None:
            local.close()
        _restore(environ)
        raise LogscopeError(
            f"the Dask scheduler at {address} has no worker (none joined in {WORKERS_TIMEOUT_S} s)",
            hint=HINT,
            code=EXIT,
        ) from None
    workers = client.scheduler_info(n_workers=-1)["workers"]
    threads = sum(w.get("nthreads", 1) for w in workers.values())
    services = client.scheduler_info(n_workers=0).get("services", {})
    return Session(
        client,
        address,
        len(workers),
        threads,
        client.dashboard_link if "dashboard" in services else None,
        local,
        environ,
    )


def worker_env(n: int) -> dict[str, str]:
    """The environment of ``n`` local workers: each one's polars pool gets its share of the cores (a worker's
    polars takes every core by default: two workers on two cores then ran each task 1.6x slower than one,
    docs/performance.md items 38 and 39). A POLARS_MAX_THREADS the user set is kept."""
    from ..ingest.options import cores

    if os.environ.get("POLARS_MAX_THREADS"):
        return {}
    return {"POLARS_MAX_THREADS": str(max(1, cores() // n))}


def _local_workers(address: str) -> int:
    from ..ingest.options import cores

    if address == "local":
        return cores()
    try:
        n = int(address.split(":", 1)[1])
    except ValueError:
        n = 0
    if n < 1:
        raise LogscopeError(
            f"--cluster {address}: give local or local:N, N a number of worker processes", code=2
        )
    return n


def close(s: Session) -> None:
    s.client.close()
    if s.local is not None:
        s.local.close()
    _restore(s.environ)


def _restore(environ: dict[str, str | None]) -> None:
    for k, v in environ.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# ------------------------------------------------------------------ what every worker must share with this process


@functools.cache
def code_digest() -> str:
    """logscope's and the parsers' sources, with the versions that shape the tables (polars, pyarrow)."""
    import polars as pl
    import pyarrow as pa

    import logscope.parsers as parsers

    h = hashlib.sha256(f"{__version__} polars {pl.__version__} pyarrow {pa.__version__}".encode())
    for pkg in (Path(__file__).parents[1], Path(parsers.__file__).parent):
        for p in sorted(pkg.rglob("*.py")):
            h.update(p.relative_to(pkg).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def view(root: str, out: str, token: str, samples: list[tuple[str, int]]) -> dict:
    """Run on each worker: its logscope, and what it sees of the input (``samples``: files and their sizes as
    this process sees them) and of the output folder (a probe file written there)."""
    problems = []
    r = Path(root)
    if not r.exists():
        problems.append(f"cannot see the input {root}")
    else:
        for rel, size in samples:
            p = r if r.is_file() else r / rel
            try:
                seen = p.stat().st_size
            except OSError as e:
                problems.append(f"cannot read the input file {p}: {e.strerror}")
                continue
            if seen != size:
                problems.append(f"sees {p} with {seen:,} bytes, not {size:,} (another copy of the input?)")
    probe = f"{PROBE}{token}-{platform.node()}-{os.getpid()}"
    try:
        (Path(out) / probe).write_text("written by a logscope worker: deleted after the check\n")
    except OSError as e:
        problems.append(f"cannot write to the output folder {out}: {e.strerror or e}")
        probe = ""
    from ..ingest.options import cores

    return {
        "version": __version__,
        "code": code_digest(),
        "python": platform.python_version(),
        "problems": problems,
        "probe": probe,
        "host": platform.node(),
        "cores": cores(),
        "polars_threads": polars_threads(),
    }


def polars_threads() -> int:
    """The threads of this process's polars pool as they run. ``pl.thread_pool_size()`` reads
    POLARS_MAX_THREADS anew: a worker whose nanny set it after polars had started said 1 and ran 2."""
    import polars as pl

    try:
        names = [(t / "comm").read_text().strip() for t in Path("/proc/self/task").iterdir()]
    except OSError:
        return pl.thread_pool_size()
    running = sum(1 for n in names if n.startswith("polars-") and n[7:].isdigit())
    return max(running, pl.thread_pool_size())


def check(s: Session, root: Path, out: Path) -> None:
    """Every worker runs this logscope and sees ``root`` and ``out`` as this process does; else a
    ``LogscopeError`` that names the worker, before any work starts."""
    from ..ingest import sources

    out.mkdir(parents=True, exist_ok=True)
    found = [f for f in sources.discover(root) if f.size >= 0 and not f.skipped]  # rows of what is not read
    samples = [
        (f.rel, f.size)
        for f in {
            id(f): f for f in (found[:1] + found[-1:] + sorted(found, key=lambda f: -f.size)[:1])
        }.values()
    ]
    token = uuid.uuid4().hex[:8]
    try:
        seen = s.client.run(view, str(root), str(out), token, samples)
    except (ImportError, AttributeError) as e:
        raise LogscopeError(
            f"a worker of {s.address} cannot run logscope: {type(e).__name__}: {e}",
            hint="install the same logscope on every worker (pip install 'logscope[dask]')",
            code=EXIT,
        ) from None
    try:
        mine = (__version__, code_digest())
        for worker, w in sorted(seen.items()):
            if (w["version"], w["code"]) != mine:
                raise LogscopeError(
                    f"worker {worker} runs logscope {w['version']} (code {w['code']}, Python {w['python']}), "
                    f"this client {mine[0]} (code {mine[1]}, Python {platform.python_version()})",
                    hint="install the same logscope (and polars, pyarrow) on the client and every worker",
                    code=EXIT,
                )
            if w["problems"]:
                raise LogscopeError(f"worker {worker}: {'; '.join(w['problems'])}", hint=HINT, code=EXIT)
            if not (out / w["probe"]).exists():
                raise LogscopeError(
                    f"worker {worker} writes to another {out} than this client's: its probe file is "
                    "not seen here",
                    hint="OUT must be on storage the client and every worker share, at the same path",
                    code=EXIT,
                )
    finally:
        for p in out.glob(f"{PROBE}{token}-*"):
            p.unlink(missing_ok=True)
    s.notes += oversubscribed(list(seen.values()))


def oversubscribed(seen: list[dict]) -> list[str]:
    """Hosts whose workers' polars pools together ask for more threads than the host has cores: each task then
    runs slower by about that ratio (polars takes every core in each worker unless POLARS_MAX_THREADS says)."""
    hosts: dict[str, list[dict]] = {}
    for w in seen:
        hosts.setdefault(w.get("host", "?"), []).append(w)
    notes = []
    for host, ws in sorted(hosts.items()):
        asked, have = sum(w.get("polars_threads", 1) for w in ws), ws[0].get("cores", 1)
        if asked > have:
            notes.append(
                f"host {host}: {len(ws)} workers x {ws[0].get('polars_threads')} polars threads on {have} "
                f"cores; start them with POLARS_MAX_THREADS={max(1, have // len(ws))} (each task runs "
                f"slower when the pools share cores)"
            )
    return notes
