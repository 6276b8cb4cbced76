"""Server logs that share a folder: one server or several.

A file in a sub-folder takes the folder's name as its replica (``ingest._replica``): a pod's folder holds its
server's log, rotated (``vllm.log.1``, ``vllm.log``) or collected before and after a restart (``kubectl logs
--previous``), and all of them are that one server. Two servers collected into one folder must not merge, though:
their deaths, KV pressure and preemptions would read as one server's. The evidence is in the files' start-up
banners: the address a server listens on, as its format reads it (``FileState.listen``: vLLM's
``_vllm_banner.listen_address``). A restart or a rotation keeps its address; two servers of one host cannot
share one. Nor can one server write two logs at once: two files (of one address, or naming none) whose times
overlap while both are written are two servers (pods of one deployment, each on 0.0.0.0:8000); files one after
the other (a restart, a rotation) are one. Without an address or times, a file stays the folder's server."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import inputs, sources
from .streams import FileState

# a line's time: RFC 3339 (kubectl --timestamps, a runtime's record) or vLLM's own 'INFO 12-06 03:19:28'; compared
# without the year (vLLM writes none), so a folder's files are taken to be of one year
_TIME = re.compile(
    r"\b20\d\d-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)|\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) "
    r"(\d\d):(\d\d):(\d\d)\b"
)
TAIL_BYTES = 64 * 1024  # a log's last lines, for the time it ends
OVERLAP_S = 60  # more than this in common: two servers (a restart's old and new lines meet within seconds)


def _seconds(line: str) -> int | None:
    """The line's time in seconds from the start of its year (months taken as 31 days: only order matters)."""
    m = _TIME.search(line)
    if not m:
        return None
    g = [int(x) for x in m.groups() if x is not None]
    return (((g[0] * 31 + g[1]) * 24 + g[2]) * 60 + g[3]) * 60 + g[4]


def _tail(f: inputs.InputFile) -> list[str]:
    if f.compression is None and f.envelope is None:  # a plain file: its last bytes alone
        with open(f.path, "rb") as fh:
            fh.seek(max(0, f.size - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace").split("\n")[1:]
    return sources.tail_lines(f.quiet(), TAIL_BYTES)["line"].to_list()


def _span(files: list[FileState]) -> tuple[int, int] | None:
    """First and last time of a set of files (a rotated set: the oldest's head, the live file's tail)."""
    files = sorted(files, key=lambda st: -st.f.rotation)
    head, _ = sources.head(files[0].f.quiet())
    first = next((t for t in map(_seconds, head) if t is not None), None)
    last = next((t for t in map(_seconds, reversed(_tail(files[-1].f))) if t is not None), None)
    return (first, last) if first is not None and last is not None and first <= last else None


def _stem(stream_key: str) -> str:
    name = Path(stream_key).name
    return re.sub(r"\.(log|txt|jsonl|json)$", "", name) or name


@dataclass
class _Server:
    """Files found to be one server: its address (None: none named) and the times its files span."""

    keys: list[str]
    addr: str | None
    end: int | None


def _fits(srv: _Server, addr: str | None, span: tuple[int, int] | None) -> bool:
    """Whether a set of files may be ``srv``'s: no other address, and not written while ``srv`` was."""
    if srv.addr and addr and srv.addr != addr:
        return False
    return span is None or srv.end is None or span[0] > srv.end - OVERLAP_S


def _servers(sets: dict[str, list[FileState]]) -> list[_Server]:
    """The sets of files as servers, each set in time order joining a server it fits (of its address first, then
    the one that ended last), else starting one."""
    addr = {k: next((s.listen for s in v if s.listen), None) for k, v in sets.items()}
    spans = {k: _span(v) for k, v in sets.items()}
    out: list[_Server] = []
    for key in sorted(sets, key=lambda k: (spans[k] is None, spans[k] or (0, 0), k)):
        span, a = spans[key], addr[key]
        fits = [srv for srv in out if _fits(srv, a, span)]
        if not fits:
            out.append(_Server([key], a, span[1] if span else None))
            continue
        srv = max(fits, key=lambda v: (v.addr == a and a is not None, v.end or 0))
        srv.keys.append(key)
        srv.addr = srv.addr or a
        if span:
            srv.end = max(srv.end or span[1], span[1])
    return out


def split_shared(states: list[FileState], root: Path, named: str | None = None) -> None:
    """Server logs named by one sub-folder that are several servers (``_servers``: by their addresses and times)
    become one replica each, FOLDER/STEM (the shortest stem of its files: the live log's, not that of kubectl's
    --previous log saved beside it), so a reader tells which file is which. A rotated set is never split (its older
    files hold no banner); one server's files (a restart, a rotation) stay the folder's replica. A replica the user
    ``named`` (--replica) holds every server log."""
    if named:
        return
    groups: dict[tuple[Path, str], list[FileState]] = {}
    for st in states:
        parent = st.f.path.parent
        if (
            st.kind == "server"
            and st.copy_of is None  # a copy is its original's (below): the same lines, the same times
            and st.replica == inputs.path_text(parent.name)
            and inputs.resolved(parent) != inputs.resolved(root)
        ):
            groups.setdefault((parent, st.replica), []).append(st)
    for (_, folder), members in groups.items():
        sets: dict[str, list[FileState]] = {}
        for st in sorted(members, key=lambda s: s.f.rel):
            sets.setdefault(st.f.stream_key, []).append(st)
        if len(sets) < 2:
            continue
        servers = _servers(sets)
        if len(servers) < 2:
            continue
        names = [
            f"{folder}/{min((_stem(k) for k in srv.keys), key=lambda n: (len(n), n))}" for srv in servers
        ]
        if len(set(names)) < len(names):  # 'vllm.log' and 'vllm.txt': their whole names
            names = [f"{folder}/{Path(min(srv.keys)).name}" for srv in servers]
        said = ", ".join(
            f"{n} ({srv.addr or 'no address named'})" for n, srv in zip(names, servers, strict=True)
        )
        for name, srv in zip(names, servers, strict=True):
            for key in srv.keys:
                for st in sets[key]:
                    st.replica = name
                    st.f.messages.append(
                        f"replica {name}: its folder holds the logs of {len(servers)} servers, told apart by "
                        f"the addresses their start-up banners name and by their times overlapping: {said}"
                    )
    of = {st.f.rel: st.replica for st in states}
    for st in states:
        if st.copy_of is not None and st.kind == "server":
            st.replica = of.get(st.copy_of, st.replica)
