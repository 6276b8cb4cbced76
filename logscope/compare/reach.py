"""Where the one changed setting can act: a matched step where it cannot is no test of it.

A cap on the sequences run at once (``--max-num-seqs``) acts only where a run's running count reached the smaller
of its two values; the KV cache's size (``--gpu-memory-utilization``, a blocks override) only where a run preempted
or queued; a gateway setting only where the gateway acted (retried, answered 5xx, saw a caller hang up, cut a stream by its
read timeout after its 2xx: spike-read-timeout's proxy_read_timeout 8s cut 11 and answered no 5xx). At a step
where neither run gives that sign, a difference is the host's run-to-run noise or its load, never the setting's
doing: its rows are shown, not called better or worse (seqs-8 against seqs-64 read 'worse' for tokens/s at c=1–4,
where neither run ran more than 4 sequences). A fact missing in either run leaves the step judged as before, and
so does a change logscope cannot place (none, several, or a setting of another kind): ``acts`` is None and the
object says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # moves reads the facts through this module
    from .moves import Figures

CAPS = ("max_num_seqs", "max_running_requests")  # vLLM's, SGLang's
KV = ("gpu_memory_utilization", "num_gpu_blocks_override", "kv_cache_memory_bytes")
# the figures each kind of setting needs at a step, and what a non-zero one says the setting could act on
GATEWAY_ACTS = {
    "gateway_retries": "retries",
    "gateway_5xx": "5xx answers",
    "gateway_499": "callers hanging up",
    "gateway_cuts": "streams it cut",  # its own read timeout after its 2xx (requests.mid_stream read_timeout)
}


@dataclass
class Reach:
    setting: str | None  # the one changed setting (None: none, or several)
    kind: str | None  # cap | kv | gateway | None (one logscope cannot place)
    acts: (
        bool | None
    )  # False: cannot act at this step; True: may; None: unknown (the rule of the noise stands)
    facts: dict = field(default_factory=dict)  # {"a": {...}, "b": {...}, "setting": {"a": 8, "b": 64, ...}}
    missing: list[str] = field(default_factory=list)
    text: str = ""

    def doc(self) -> dict:
        return asdict(self)


def facts(w: pl.DataFrame, gateway_log: bool) -> dict[str, int | None]:
    """What a setting needs to act, over a range's windows: the most sequences running (summed over replicas:
    a cap per replica is never called idle where one replica may have reached it), and the gateway's own acts when its log is in the folder."""
    run = w["running_max"].drop_nulls() if w.height and "running_max" in w.columns else None
    out: dict[str, int | None] = {"running_max": int(run.max()) if run is not None and run.len() else None}  # type: ignore[arg-type]
    for col in GATEWAY_ACTS:
        got = w[col] if gateway_log and w.height and col in w.columns else None
        out[col] = int(got.fill_null(0).sum()) if got is not None else None
    return out


def _kind(row: dict) -> str | None:
    if row["layer"] == "gateway":
        return "gateway"
    if row["layer"] != "server":
        return None
    return "cap" if row["name"] in CAPS else ("kv" if row["name"] in KV else None)


def _values(f: Figures, keys: tuple[str, ...]) -> dict:
    got = {**f.values, **f.facts}
    return {k: got.get(k) for k in keys}


def reach(changed: list[dict], fa: Figures, fb: Figures) -> Reach:
    """Whether the one changed setting (settings.diff's counted rows) can act over these figures' range."""
    if len(changed) != 1:
        why = "no setting differs as far as the logs show" if not changed else "more than one setting differs"
        return Reach(None, None, None, text=f"{why}: the step is judged on the sampling noise alone")
    row = changed[0]
    source = row.get("source_a") or row.get("source_b")
    return across(row, {"a": row["a"], "b": row["b"]}, {"a": fa, "b": fb}, source)


def across(
    row: dict, setting: dict[str, object], figs: dict[str, Figures], source: str | None = None
) -> Reach:
    """Whether one setting, of ``setting[run]`` in each run (a pair's two, a sweep's three or more), can act over
    these figures' range: the same rule for a pair and a sweep (a cap: a run's running count reached the smallest
    value; the KV cache: a run preempted or queued; a gateway setting: the gateway acted in a run)."""
    name, kind = row["name"], _kind(row)
    where = {**setting, "source": source}
    if kind is None:
        return Reach(name, None, None, {"setting": where},
                     text=f"where {name} acts is not known to logscope: the step is judged on the sampling noise alone")  # fmt: skip
    keys = {"cap": ("running_max",), "kv": ("preemptions", "waiting_max"), "gateway": tuple(GATEWAY_ACTS)}[
        kind
    ]
    vals = {run: _values(f, keys) for run, f in figs.items()}
    facts = {**vals, "setting": where}
    missing = [f"{k} in {run.upper()}" for run, v in vals.items() for k in keys if v[k] is None]
    # one act seen is enough for a gateway setting: an analysis made before logscope counted the cuts has no
    # gateway_cuts, and its retries still say the gateway acted
    seen = kind == "gateway" and any((v[k] or 0) > 0 for v in vals.values() for k in keys)
    if missing and not seen:
        return Reach(name, kind, None, facts, missing,
                     f"whether {name} acts here is unknown ({', '.join(missing)} not in the logs)")  # fmt: skip

    def each(k: str, n=str) -> str:
        return ", ".join(f"{run.upper()} {n(v[k])}" for run, v in vals.items())

    if kind == "cap":
        try:
            cap = min(float(str(v)) for v in setting.values())
        except (TypeError, ValueError):
            return Reach(name, kind, None, facts, ["a numeric cap"], f"{name}'s values are not numbers")
        acts = max(v["running_max"] for v in vals.values()) >= cap
        said = (
            f"running max {each('running_max')}; {name} "
            + ", ".join(f"{run.upper()} {v}" for run, v in setting.items())
            + f", from the {source or 'server log'}"
        )
        least = "smaller" if len(setting) == 2 else "smallest"
        head = (
            f"a run's running count reached the {least} cap, {_n(cap)}"
            if acts
            else f"no run's running count reached the {least} cap, {_n(cap)}: the engine admitted every caller"
        )
        if not acts and len(setting) == 2:
            head = head.replace("no run's", "neither run's", 1)
    elif kind == "kv":
        acts = any(v[k] > 0 for v in vals.values() for k in keys)
        said = f"preemptions {each('preemptions')}; waiting max {each('waiting_max', _n)}"
        head = "a run preempted or queued" if acts else f"{_none(len(vals))} preempted or queued"
    else:
        acts = seen
        said = "; ".join(f"{w} {each(k, _n)}" for k, w in GATEWAY_ACTS.items())
        head = (
            "the gateway acted"
            if acts
            else "the gateway did not act (no retry, no 5xx, no caller hung up, no stream cut)"
        )
    verb = "can act" if acts else "cannot act"
    return Reach(name, kind, acts, facts, missing, f"{name} {verb} here: {head} ({said})")


def _none(n: int) -> str:
    return "neither run" if n == 2 else "no run"


def _n(x: float | int | None) -> str:
    return "unknown" if x is None else (f"{x:g}" if isinstance(x, float) else str(x))


def apply(sc: dict, r: Reach) -> None:
    """A step where the setting cannot act: its better / worse say so instead (the rows keep change and noise)."""
    sc["reach"] = r.doc()
    if r.acts is not False:
        return
    for row in sc["metrics"]:
        if row["direction"] in ("better", "worse"):
            row["direction"] = None
            row["noise"] = (
                f"{row['noise']}; not judged: {r.text}: a difference here is the host's run-to-run noise or load"
            )
