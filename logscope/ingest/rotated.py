"""A rotated set's pieces read in its one format.

logrotate (and a kubelet, a collector) cuts a log wherever a line ends: inside a multi-line record (a client's
table, a pretty-printed JSON access record, vllm bench's result block), so a piece may hold no line its format is
detected by. The pieces of one set (``vllm.log.2``, ``vllm.log.1``, ``vllm.log``: one ``stream_key``) are one
program's log: a piece no format claims is read in the format its set's other pieces were detected in, and said so.
A piece detected in a format of its own keeps it (two programs' output under one name is read as it is).
"""

from __future__ import annotations

from logscope import parsers
from logscope.ingest.streams import FileState


def adopt(states: list[FileState]) -> None:
    """Give each unknown piece of a rotated set its set's format and replica (those of its surest piece)."""
    sets: dict[str, list[FileState]] = {}
    for st in states:
        sets.setdefault(st.f.stream_key, []).append(st)
    for members in sets.values():
        known = [m for m in members if m.format != "unknown"]
        if len(members) < 2 or not known or len(known) == len(members):
            continue
        best = max(known, key=lambda m: (m.confidence, m.f.rotation))
        mod = parsers.BY_NAME.get(best.format)
        if mod is None:
            continue
        for st in members:
            if st.format != "unknown" or st.binary:
                continue
            st.format, st.kind, st.replica = best.format, mod.KIND, best.replica
            st.f.envelope_time = st.f.envelope is not None and bool(getattr(mod, "CONTAINER_TIME", False))
            st.f.messages = [m for m in st.f.messages if not m.startswith("unknown format")]
            st.f.messages.append(
                f"read as {best.format}, the format of its rotated set ({best.f.rel}); this piece alone matched "
                f"no format (best detection score {st.confidence:.2f}): a rotation cut its records"
            )
