"""Server lifecycle from the server log: starts, readiness, deaths (explicit or silent) and restarts,
plus the cold-start window after each start.

A death is either **explicit** (OOM, engine death or engine timeout records that are not the
harmless traceback of a graceful shutdown) or **silent**: the log of one process simply stops and a
new startup banner with a new pid follows, with no shutdown in between, while requests were
flowing (the lab's SIGKILL). The silent death time is the last line the old process wrote, so log
times (whole seconds) bound it to within a second or two.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from .. import clock
from ..correlate.exprs import group_first
from ..scalars import time_value
from .figures import between, epoch_us
from .same_server import SameServer
from .same_server import of as same_server_of
from .thresholds import Thresholds

DEATH_KINDS = ("oom", "engine_dead", "engine_timeout")
SHUTDOWN_ERROR = "shutdown_error"  # the parser's name of an engine death logged after a '[shutdown]' line
# Functions and messages of engine start-up: a death inside one of them happened before serving.
STARTUP_HINT = re.compile(
    r"failed to start|initialization failed|load_model|load_weights|process_weights|repack|"
    r"profile_run|determine_available_memory|initialize_kv_cache|capture_model|warming up|"
    # V0's start-up: its workers' init_device, its RPC server dying before the API server's readiness probe
    # (ROCm #3956: an NCCL error raised in init_device, then 'RPCServer process died before responding to
    # readiness probe', in an excerpt with no start line)
    r"init_device|before responding to readiness probe"
)
# Functions only a serving engine runs (its busy loop, a request's handler): a death inside one came after start-up.
# Not execute_model alone (V0's profile_run runs it while starting: STARTUP_HINT is read first), nor the API
# server's output_handler (V1 starts it before any request).
SERVING_HINT = re.compile(
    r"run_busy_loop|_process_engine_step|run_engine_loop|chat_completion|create_completion|_process_request"
)
TIMEOUT_HINT = re.compile(r"TimeoutError|timed out")
START_KINDS = ("version", "server_start")  # the banner, then uvicorn's 'Started server process [pid]'
READY_KINDS = ("server_ready", "server_listen")


@dataclass
class Death:
    replica: str
    ts: datetime  # best estimate of when it died
    kinds: list[str]  # oom / engine_dead / engine_timeout / silent
    pid: int | None
    message: str | None
    last_line_ts: datetime | None  # last line of the dead process
    restart_ts: datetime | None = None  # new banner
    ready_ts: datetime | None = None  # new instance ready
    new_pid: int | None = None
    # died before serving anything (start-up failure); None: nothing in the logs says (``startup_basis``)
    at_startup: bool | None = False
    startup_basis: str = ""  # the fact at_startup rests on, or what was missing when it is None
    notes: list[str] = field(default_factory=list)
    engine: str | None = None  # the engine_kind of its records ('vllm', 'sglang', 'tgi'); None: not said
    same_server: SameServer | None = (
        None  # the start after it: this server restarted, or another (same_server)
    )

    @property
    def downtime_s(self) -> float | None:
        if self.ready_ts is None:
            return None
        return (self.ready_ts - self.ts).total_seconds()


@dataclass
class Lifecycle:
    starts: list[dict]  # replica, ts, pid, ready_ts, version
    deaths: list[Death]
    shutdowns: list[dict]  # replica, ts
    shutdown_noise: int  # death-looking records inside a graceful shutdown
    cold: list[dict]  # replica, start, end, first_request


def activity(stats: pl.DataFrame, events: list[pl.DataFrame], sreq: pl.DataFrame) -> pl.DataFrame:
    """Every time a server logged anything (replica, ts), and whether a request or a busy stats line was
    among it (busy). One row per distinct time: what is read of it is whether a span holds any, and the first
    after a time (vLLM stamps whole seconds: 6.4 M lines of the 5 GB bench folder are 0.8 M rows)."""
    parts = [
        stats.filter(pl.col("origin") == "log").select(
            pl.col("replica").fill_null(""), "ts", (pl.col("running").fill_null(0) > 0).alias("busy")
        ),
        *[
            ev.filter(~pl.col("ts_inferred").fill_null(False)).select(
                pl.col("replica").fill_null(""), "ts", pl.lit(False).alias("busy")
            )
            for ev in events
        ],
    ]
    for c in ("received_ts", "added_ts", "aborted_ts", "failed_ts", "finished_ts"):
        parts.append(
            sreq.select(pl.col("replica").fill_null(""), pl.col(c).alias("ts"), pl.lit(True).alias("busy"))
        )
    act = pl.concat(parts).filter(pl.col("ts").is_not_null()).sort(["replica", "ts", "busy"])
    return act.filter(group_first("replica", "ts", "busy"))


def analyse(
    stats: pl.DataFrame,
    events: pl.DataFrame,
    access: pl.DataFrame,
    sreq: pl.DataFrame,
    requests: pl.DataFrame,
    th: Thresholds,
) -> Lifecycle:
    """``events``: the server events but the access lines, which come apart in ``access`` (they only tell
    that the server was up)."""
    ev = (
        events.filter(pl.col("ts").is_not_null())
        .with_columns(pl.col("replica").fill_null(""))
        .sort(["replica", "ts", "seq"])
    )
    act = activity(stats, [events, access], sreq)
    req = (
        requests["ts_start"].drop_nulls().sort() if requests.height else pl.Series([], dtype=act.schema["ts"])
    )
    starts, shutdowns, cold = [], [], []
    deaths: list[Death] = []
    noise = 0
    for (replica,), g in ev.group_by("replica", maintain_order=True):
        a = act.filter(pl.col("replica") == replica)  # sorted by ts
        busy_ts = a.filter(pl.col("busy"))["ts"]  # sorted, distinct
        busy = busy_ts.to_physical().to_list()  # epoch µs, for bisect
        ready = g.filter(pl.col("kind").is_in(READY_KINDS)).sort(["ts", "seq"])
        stops = g.filter(pl.col("kind") == "server_stop").sort(["ts", "seq"])
        # '[shutdown] ... triggered' and uvicorn's 'Shutting down' are one shutdown
        first = stops.filter(((pl.col("ts").diff().dt.total_seconds()) > th.shutdown_grace_s).fill_null(True))
        start_rows = _starts(g.filter(pl.col("kind").is_in(START_KINDS)), busy)
        got = sreq.filter(pl.col("replica").fill_null("") == replica)["received_ts"].drop_nulls().sort()
        stop_ts = first["ts"].to_list()
        shutdowns += [_stop(replica, t, stop_ts, start_rows, g, got.to_physical().to_list()) for t in stop_ts]
        keys = [(s["ts"], s["seq"]) for s in start_rows]  # sorted (_starts walks the markers in this order)
        for i, s in enumerate(start_rows):
            # the next start: a bisect, as a crash loop has a thousand starts (a scan of them each was quadratic)
            j = bisect.bisect_right(keys, keys[i], lo=i)
            limit = start_rows[j]["ts"] if j < len(start_rows) else None
            rd = between(ready, "ts", s["ts"], limit or datetime.max.replace(tzinfo=s["ts"].tzinfo))
            s["ready_ts"] = rd["ts"].min() if rd.height else None
        starts += [
            {
                "replica": replica,
                "ts": s["ts"],
                "pid": s["pid"],
                "ready_ts": s["ready_ts"],
                "version": s["version"],
            }
            for s in start_rows
        ]
        # the parser calls an engine death logged after a '[shutdown]' line 'shutdown_error' (vLLM's graceful stop
        # prints one): it is that harmless traceback only inside a stop (after it, by time and line); before any
        # stop ('[shutdown] MPClient: engine core exited unexpectedly' when the EngineCore was killed) it is a death
        dead = g.filter(pl.col("kind").is_in([*DEATH_KINDS, SHUTDOWN_ERROR]))
        in_shutdown = _in_shutdown(dead, stops, th.shutdown_grace_s)
        noise += int(in_shutdown.sum()) if dead.height else 0
        dead = dead.filter(~in_shutdown) if dead.height else dead
        mine = _explicit(replica, dead, start_rows, busy, th, g)
        mine += _silent(replica, start_rows, stops, deaths + mine, a, g)
        for d in mine:  # why the start after it is read as this server restarted, or another server
            d.same_server = same_server_of(g, replica, d.ts, d.restart_ts)
        deaths += mine
        cold += _cold(replica, start_rows, busy_ts, req, th)
    deaths.sort(key=lambda d: (d.ts, d.replica))
    shutdowns = _after_death(shutdowns, deaths, th.merge_gap_s)
    return Lifecycle(starts, deaths, shutdowns, noise, cold)


def _stop(
    replica: str, t: datetime, stops: list[datetime], start_rows: list[dict], g: pl.DataFrame, got: list[int]
) -> dict:
    """A graceful stop at ``t`` and the start after it in the same stream: this server again or another one
    (same_server, as after a death: a port handed to a server of other limits reads as a redeploy, not a
    restart), with the requests the stream received in each life (``got``: sorted epoch µs), so that neither
    side's load is read as the other's."""
    i = bisect.bisect_right(start_rows, t, key=lambda s: s["ts"])  # the starts at or before t
    lo = start_rows[i - 1]["ts"] if i else None
    out = {"replica": replica, "ts": t, "received_before": _busy_in(got, lo, t, "both")}
    nxt = start_rows[i] if i < len(start_rows) else None
    if nxt is None:
        return out | {"restart": None, "new_pid": None, "same_server": None, "received_after": None}
    # the next life ends at its own stop or the start after it, whichever first
    ends = [x for x in stops if x > nxt["ts"]][:1] + [s["ts"] for s in start_rows[i + 1 : i + 2]]
    hi = min(ends) if ends else datetime.max.replace(tzinfo=t.tzinfo)
    return out | {
        "restart": nxt["ts"],
        "new_pid": nxt["pid"],
        "same_server": same_server_of(g, replica, t, nxt["ts"]),
        "received_after": _busy_in(got, nxt["ts"], hi, "both"),
    }


def _after_death(shutdowns: list[dict], deaths: list[Death], gap_s: float) -> list[dict]:
    """The stops that are no graceful shutdown: an API server shutting down within ``gap_s`` after its engine
    died (vLLM's 'Shutting down FastAPI HTTP server' after an EngineDeadError) is that death's end, said in its
    notes, not a stop of its own."""
    out = []
    for s in shutdowns:
        d = next(
            (
                d
                for d in deaths
                if d.replica == s["replica"]
                and "silent" not in d.kinds
                and 0 <= (s["ts"] - d.ts).total_seconds() <= gap_s
            ),
            None,
        )
        if d is None:
            out.append(s)
        else:
            d.notes.append(f"the API server shut down at {clock.hms(s['ts'])}, after the death")
    return out


def _busy_in(busy: list[int], lo: datetime | None, hi: datetime, closed: str) -> int:
    """Busy samples in (lo, hi) / [lo, hi] ('open' / 'both'); ``busy`` is sorted epoch µs; lo None = no bound.
    (bisect on a list: a polars search_sorted call costs ~50 µs, and starts are checked pairwise.)"""
    if closed == "open":
        i = 0 if lo is None else bisect.bisect_right(busy, epoch_us(lo))
        return max(0, bisect.bisect_left(busy, epoch_us(hi)) - i)
    i = 0 if lo is None else bisect.bisect_left(busy, epoch_us(lo))
    return max(0, bisect.bisect_right(busy, epoch_us(hi)) - i)


def _starts(markers: pl.DataFrame, busy: list[int]) -> list[dict]:
    """One start per startup sequence: markers (banner, 'Started server process') with no traffic
    between them belong to the same start; the start is timed by its first marker."""
    out: list[dict] = []
    for r in markers.sort(["ts", "seq"]).iter_rows(named=True):
        if out:
            cur = out[-1]
            served = _busy_in(busy, cur["last"], r["ts"], "open")
            same_pid = r["pid"] is None or cur["pid"] is None or r["pid"] == cur["pid"]
            if not served and same_pid:
                cur["last"] = r["ts"]
                cur["pid"] = cur["pid"] or r["pid"]
                cur["version"] = cur["version"] or r["version"]
                continue
        out.append(
            {"ts": r["ts"], "seq": r["seq"], "pid": r["pid"], "version": r["version"], "last": r["ts"]}
        )
    return out


def _in_shutdown(dead: pl.DataFrame, stops: pl.DataFrame, grace: float) -> pl.Series:
    """Death records logged inside a graceful shutdown (at most ``grace`` after a stop that came BEFORE them):
    the harmless traceback of the stop. Order is (time, line): vLLM stamps whole seconds, and an EngineDeadError
    followed in the same second by 'Shutting down FastAPI HTTP server' (the API server stopping because its
    engine died) is a death, not the stop's noise."""
    if dead.height == 0:
        return pl.Series([], dtype=pl.Boolean)
    if stops.height == 0:
        return pl.Series([False] * dead.height)
    marks = pl.concat(
        [
            dead.select(
                "ts",
                "seq",
                pl.int_range(pl.len()).alias("_i"),
                pl.lit(None, dead.schema["ts"]).alias("_stop"),
            ),
            stops.select("ts", "seq", pl.lit(None, pl.Int64).alias("_i"), pl.col("ts").alias("_stop")),
        ],
        how="vertical_relaxed",
    ).sort(["ts", "seq", "_i"], nulls_last=True)  # a stop on the same line as a death comes after it
    marks = marks.with_columns(pl.col("_stop").forward_fill().alias("_last_stop")).filter(
        pl.col("_i").is_not_null()
    )
    inside = ((marks["ts"] - marks["_last_stop"]).dt.total_seconds() <= grace).fill_null(False)
    # back in ``dead``'s order (sorted by (ts, seq) already)
    return inside.gather(marks["_i"].arg_sort())


def _next_start(start_rows: list[dict], t: datetime) -> dict | None:
    """The first start at or after ``t`` (``start_rows`` are in time order)."""
    i = bisect.bisect_left(start_rows, t, key=lambda s: s["ts"])
    return start_rows[i] if i < len(start_rows) else None


def _at_startup(
    cur: dict | None, served: int, t0: datetime, text: str, g: pl.DataFrame, th: Thresholds
) -> tuple[bool | None, str]:
    """Whether a death came before serving, and the fact that says so. No: requests or busy stats before it, or a
    readiness line. Yes: a start with neither before it, or a start-up step named in its records or in the lines
    around it (an excerpt often holds no start line: ROCm #3956's init_device). Unknown (None) where none of these
    is in the logs (public-2 n11: six lines of an RPC timeout's traceback, nothing before them)."""
    if served:
        return False, f"{served} busy sample(s) or request(s) before it"
    ready = g.filter(pl.col("kind").is_in(READY_KINDS) & (pl.col("ts") <= t0))
    if cur is not None and cur["ready_ts"] is not None and cur["ready_ts"] <= t0:
        return False, f"ready at {clock.hms(cur['ready_ts'])}"
    if cur is None and ready.height:
        return False, f"a readiness line at {clock.hms(time_value(ready['ts'].max()))}"
    if cur is not None:
        return True, f"started at {clock.hms(cur['ts'])}, neither ready nor serving before it"
    near = g.filter(pl.col("ts") <= t0 + timedelta(seconds=th.merge_gap_s)).tail(5000)  # an excerpt: bounded
    lines = "\n".join([text, *near["message"].drop_nulls(), *near["detail"].drop_nulls()])
    if (m := STARTUP_HINT.search(lines)) is not None:
        return (
            True,
            f"its records name a start-up step ('{m.group(0)}'), with no readiness line or request before it",
        )
    if (m := SERVING_HINT.search(lines)) is not None:
        return False, f"its records name a step of a serving engine ('{m.group(0)}')"
    return None, (
        "the logs hold no start line, no readiness line, no request and no start-up step (loading, profiling, "
        "graph capture) before it"
    )


def _explicit(
    replica: str, dead: pl.DataFrame, start_rows: list[dict], busy: list[int], th: Thresholds, g: pl.DataFrame
) -> list[Death]:
    if dead.height == 0:
        return []
    out: list[Death] = []
    d = dead.with_columns(
        ((pl.col("ts").diff().dt.total_seconds() > th.merge_gap_s).fill_null(True)).cum_sum().alias("_g")
    )
    for _, grp in d.group_by("_g", maintain_order=True):
        t0 = time_value(grp["ts"].min())
        kinds = sorted({"engine_dead" if k == SHUTDOWN_ERROR else k for k in grp["kind"].to_list()})
        first = grp.row(0, named=True)
        i = bisect.bisect_right(start_rows, t0, key=lambda s: s["ts"])  # the last start at or before t0
        cur = start_rows[i - 1] if i else None
        served = _busy_in(busy, cur["ts"] if cur is not None else None, t0, "both")
        text = "\n".join(t for t in grp["message"].to_list() + grp["detail"].to_list() if t)
        at_startup, basis = _at_startup(cur, served, t0, text, g, th)
        if "engine_timeout" not in kinds and TIMEOUT_HINT.search(text):
            kinds = sorted([*kinds, "engine_timeout"])
        death = Death(
            replica, t0, kinds, first["pid"], first["message"], t0, at_startup=at_startup, startup_basis=basis
        )
        if (
            "engine_kind" in grp.columns
        ):  # whose death it is, for its headline (a TGI shard is no vLLM engine)
            death.engine = next(iter(grp["engine_kind"].drop_nulls()), None)
        nxt = _next_start(start_rows, t0 + timedelta(microseconds=1))
        if nxt is not None:
            death.restart_ts, death.ready_ts, death.new_pid = nxt["ts"], nxt["ready_ts"], nxt["pid"]
        out.append(death)
    return out


def _first_line(ev: pl.DataFrame, pid: int | None, other: int | None, lo: datetime, hi: datetime) -> datetime:
    """The new process's first line between two starts: its start marker ('Starting vLLM server on') comes after
    tens of seconds of loading, whose lines are not the old process's last. Told apart by the API server's pid, when
    the lines carry one and the two differ (a container's restart may reuse it)."""
    if pid is None or pid == other or "pid" not in ev.columns:
        return hi
    own = between(ev.filter(pl.col("pid") == pid), "ts", lo, hi)
    return time_value(own["ts"].min()) if own.height else hi


def _silent(
    replica: str,
    start_rows: list[dict],
    stops: pl.DataFrame,
    known: list[Death],
    act: pl.DataFrame,
    ev: pl.DataFrame,
) -> list[Death]:
    """A new banner while the previous instance was serving, with no shutdown and no explicit death between."""
    out = []
    died = sorted(d.ts for d in known if d.replica == replica)
    for prev, cur in zip(start_rows, start_rows[1:], strict=False):
        lo, hi = prev["ts"], cur["ts"]
        if between(stops, "ts", lo, hi).height:
            continue
        i = bisect.bisect_left(died, lo)
        if i < len(died) and died[i] <= hi:  # a known death in [lo, hi]
            continue
        cut = _first_line(ev, cur["pid"], prev["pid"], lo, hi)
        before = between(act, "ts", lo, cut, closed="left")
        if not before["busy"].any():
            continue
        last = time_value(before["ts"].max())
        out.append(
            Death(
                replica,
                last,
                ["silent"],
                prev["pid"],
                None,
                last,
                restart_ts=hi,
                ready_ts=cur["ready_ts"],
                new_pid=cur["pid"],
                notes=[
                    f"the log of pid {prev['pid']} stops at {clock.hms(last)} and a new server "
                    f"(pid {cur['pid']}) starts at {clock.hms(hi)} with no shutdown in between"
                ],
            )
        )
    return out


def _cold(
    replica: str, start_rows: list[dict], busy: pl.Series, requests: pl.Series, th: Thresholds
) -> list[dict]:
    """After each start: the first request that follows readiness (this replica's busy lines, or any
    logical request), and cold_start_s from it. ``busy`` and ``requests``: sorted times (the folder's
    requests are sorted once, not once per replica; a million of them as Python ints held 45 MB)."""
    out: list[dict] = []
    if not start_rows:
        return out
    t = pl.Series([s["ready_ts"] or s["ts"] for s in start_rows]).cast(requests.dtype)
    after = [(ts, ts.search_sorted(t, side="left").to_list()) for ts in (busy, requests)]  # one call each
    for k, s in enumerate(start_rows):
        firsts = [ts[idx[k]] for ts, idx in after if idx[k] < ts.len()]
        if not firsts:
            continue
        first = min(firsts)
        out.append(
            {
                "replica": replica,
                "server_start": s["ts"],
                "ready": s["ready_ts"],
                "first_request": first,
                "start": first,
                "end": first + timedelta(seconds=th.cold_start_s),
            }
        )
    return out
