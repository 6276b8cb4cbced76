"""Whether a death followed by a new start in the same log stream is one server restarted or another server.

``lifecycle`` calls a second banner in one replica's stream a restart (lab crash: pid 7682 killed at 08:34:22, pid
8600 ready at 08:35:31, both in vllm-server.log) and held nothing of why: a stream reused by another server (a
replaced pod's logs collected under one name, a port taken over on another host) read the same. Each start prints
what identifies it: the address it listens on ('Starting vLLM server on http://127.0.0.1:8001'), its version and
model (the banner), its limits (the non-default args). The start before the death and the one after are compared on
them: all known and equal is one server restarted; any known on both sides and different is two servers; the
address, version or model missing on either side leaves it unknown and names what was missing (a redeploy of another
model on the same host and port is the case this tells apart). The limits print only where not the default: compared
where both sides print them, and one printed on one side only is named, not taken as equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import polars as pl

ADDRESS = re.compile(r"\bon (https?://\S+)")
MODEL = re.compile(r"\bmodel\s+(\S+)")
# the args a start prints: non-default args' "'model': '…'" (V1) or Namespace's "model='…'" (V0); not 'model_tag'
MODEL_ARG = re.compile(r"""(?:'model'\s*:\s*|\bmodel=)'([^']+)'""")
# (fact, event kind, how it is read from that event's row)
READS = ("address", "version", "model", "max_num_seqs", "max_model_len")
NEEDED = ("address", "version", "model")  # what "one server restarted" cannot do without
_SAID = {
    "address": "no 'Starting vLLM server on' line",
    "version": "no banner version",
    "model": "no banner model",
}


@dataclass(frozen=True)
class SameServer:
    state: str  # 'one server restarted', 'two servers', 'unknown'
    stream: str  # the log stream both starts are in
    before: dict  # what the start before the death printed of itself (None where it printed nothing)
    after: dict  # what the start after it printed
    differs: tuple[str, ...]  # facts known on both sides and different
    missing: tuple[str, ...]  # facts the decision needed and did not have

    def words(self) -> str:
        """Why the start after the death is read as it is, in the finding's evidence."""
        known = [
            f"{k} {self.before[k]}"
            for k in READS
            if self.before.get(k) is not None and self.before.get(k) == self.after.get(k)
        ]
        one_side = [
            f"{k} {self.before[k] if self.before.get(k) is not None else self.after[k]} "
            + ("before only" if self.before.get(k) is not None else "after only")
            for k in READS
            if (self.before.get(k) is None) != (self.after.get(k) is None) and k not in NEEDED
        ]
        also = f"; printed on one side only: {', '.join(one_side)}" if one_side else ""
        if self.state == "two servers":
            changed = ", ".join(f"{k} {self.before[k]} → {self.after[k]}" for k in self.differs)
            return (
                f"the start after it is another server, not a restart: the same log stream ({self.stream}) but "
                f"{changed}"
            )
        if self.state == "unknown":
            return (
                f"one server restarted or two: unknown ({'; '.join(self.missing)}); the same log stream "
                f"({self.stream})" + (f", {', '.join(known)} before and after" if known else "") + also
            )
        return (
            f"one server restarted: the same log stream ({self.stream}), {', '.join(known)} before and after"
            + also
        )

    def to_dict(self) -> dict:
        return {
            "state": self.state,
            "stream": self.stream,
            "before": self.before,
            "after": self.after,
            "differs": list(self.differs),
            "missing": list(self.missing),
            "words": self.words(),
        }


def _facts(ev: pl.DataFrame, lo: datetime | None, hi: datetime | None, last: bool) -> dict:
    """What one start printed of itself between ``lo`` and ``hi``: the last such line before a death
    (``last``), else the first after a restart."""
    rows = ev
    if lo is not None:
        rows = rows.filter(pl.col("ts") >= lo)
    if hi is not None:
        rows = rows.filter(pl.col("ts") <= hi)
    rows = rows.sort(["ts", "seq"], descending=last)

    def first(kind: str, col: str, pat: re.Pattern | None = None):
        for v in rows.filter(pl.col("kind") == kind)[col].to_list():
            if v is None:
                continue
            m = pat.search(v) if pat is not None else None
            if pat is None or m is not None:
                return m.group(1).rstrip(".,") if m is not None else v
        return None

    return {
        "address": first("server_listen", "message", ADDRESS),
        "version": first("version", "version"),
        "model": first("version", "detail", MODEL) or first("config", "message", MODEL_ARG),
        "max_num_seqs": first("config", "max_num_seqs"),
        "max_model_len": first("config", "max_model_len"),
    }


def of(events: pl.DataFrame, replica: str, died: datetime, restart: datetime | None) -> SameServer | None:
    """The comparison of the start before a death with the first after it, in one replica's stream; None without
    a start after it."""
    if restart is None or not events.height:
        return None
    cols = ("ts", "seq", "kind", "message", "detail", "version", "max_num_seqs", "max_model_len")
    ev = events.filter(
        (pl.col("replica").fill_null("") == (replica or ""))
        & pl.col("kind").is_in(["server_listen", "version", "config"])
    ).select(cols)
    # after: from the death on, not from the start marker: a start whose banner is lost is timed by a later marker
    # ('Starting vLLM server on'), and its args line comes before that
    after = _facts(ev.filter(pl.col("ts") > died), None, None, last=False)
    before = _facts(ev, None, died, last=True)
    differs = tuple(k for k in READS if None not in (before[k], after[k]) and before[k] != after[k])
    missing = tuple(
        f"{_SAID[k]} {side}"
        for k in NEEDED
        for side, f in (("before the death", before), ("after the restart", after))
        if f[k] is None
    )
    state = "two servers" if differs else "unknown" if missing else "one server restarted"
    return SameServer(state, replica, before, after, differs, missing)
