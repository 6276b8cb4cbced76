"""Server logs that share a folder: one server or several.

A file in a sub-folder takes the folder's name as its replica (``ingest._replica``): a pod's folder holds its
server's log, rotated (``vllm.log.1``, ``vllm.log``) or collected before and after a restart (``kubectl logs
--previous``), and all of them are that one server. Two servers collected into one folder must not merge, though:
their deaths, KV pressure and preemptions would read as one server's. The evidence is in the files' start-up
banners: the address a vLLM server listens on (its non-default args, its ``args: Namespace(...)``, its 'Starting
vLLM ... server on http://HOST:PORT'). A restart or a rotation keeps its address; two servers of one host cannot
share one. Files without a banner in their head are never split from the folder on a guess."""

from __future__ import annotations

import re
from pathlib import Path

from . import inputs
from .streams import FileState

# vllm/entrypoints/utils.py (0.9+: only the arguments given), vllm/entrypoints/openai/api_server.py (older: all)
_DICT_ARGS = re.compile(r"non-default args: \{(?P<args>.{0,4000})")
_DICT_HOST = re.compile(r"'host': '(?P<host>[^']{1,255})'")
_DICT_PORT = re.compile(r"'port': (?P<port>\d{1,5})\b")
_NS_ARGS = re.compile(r"\bargs: Namespace\((?P<args>.{0,8000})")
_NS_HOST = re.compile(r"\bhost=(?:'(?P<host>[^']{1,255})'|None)")
_NS_PORT = re.compile(r"\bport=(?P<port>\d{1,5})\b")
_STARTING = re.compile(
    r"Starting vLLM (?:API )?server(?: \d+)? on https?://(?P<host>[^\s/]{1,255}):(?P<port>\d{1,5})"
)
_DEFAULT_PORT = "8000"  # vLLM's --port default
_ANY_HOST = "0.0.0.0"  # --host unset: every interface


def listen_address(lines: list[str]) -> str | None:
    """HOST:PORT the first start-up banner in ``lines`` names (None: no banner seen)."""
    for ln in lines:
        m = _DICT_ARGS.search(ln)
        if m:
            host, port = _DICT_HOST.search(m["args"]), _DICT_PORT.search(m["args"])
            return f"{host['host'] if host else _ANY_HOST}:{port['port'] if port else _DEFAULT_PORT}"
        m = _NS_ARGS.search(ln)
        if m:
            host, port = _NS_HOST.search(m["args"]), _NS_PORT.search(m["args"])
            return f"{(host['host'] or _ANY_HOST) if host else _ANY_HOST}:{port['port'] if port else _DEFAULT_PORT}"
        m = _STARTING.search(ln)
        if m:
            return f"{m['host']}:{m['port']}"
    return None


def _stem(stream_key: str) -> str:
    name = Path(stream_key).name
    return re.sub(r"\.(log|txt|jsonl|json)$", "", name) or name


def split_shared(states: list[FileState], root: Path) -> None:
    """Server logs named by one sub-folder whose banners name different listen addresses are that many servers:
    each address's files become one replica, FOLDER/STEM, so a reader tells which file
    is which; a file without a banner keeps its own stem. Files of one address (a restart, a rotated set, a pod's
    --previous log) stay one replica."""
    groups: dict[tuple[Path, str], list[FileState]] = {}
    for st in states:
        parent = st.f.path.parent
        if (
            st.kind == "server"
            and st.replica == inputs.path_text(parent.name)
            and inputs.resolved(parent) != inputs.resolved(root)
        ):
            groups.setdefault((parent, st.replica), []).append(st)
    for members in groups.values():
        sets: dict[str, list[FileState]] = {}
        for st in sorted(members, key=lambda s: s.f.rel):
            sets.setdefault(st.f.stream_key, []).append(st)
        # a rotated set's older files hold no banner: the set's address is the one any of its files names
        addr = {k: next((s.listen for s in v if s.listen), None) for k, v in sets.items()}
        known = sorted({a for a in addr.values() if a})
        if len(known) < 2:
            continue
        # one address's files are named by their shortest stem: the live log's, not 'vllm-previous' (kubectl's
        # --previous log, saved beside it)
        named: dict[str, str] = {}
        for key, a in sorted(addr.items(), key=lambda ka: (len(_stem(ka[0])), ka[0])):
            if a:
                named.setdefault(a, _stem(key))
        folder = members[0].replica
        for key, a in addr.items():
            name = f"{folder}/{named[a] if a else _stem(key)}"
            for st in sets[key]:
                st.replica = name
                st.f.messages.append(
                    f"replica {name}: its folder holds the logs of {len(known)} servers (listening on "
                    f"{', '.join(known)}), "
                    + (f"this one's banner names {a}" if a else "this one names no address in its head")
                )
