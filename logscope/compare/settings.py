"""What each run was configured with, and how the two differ: the vLLM server (its startup lines), the
client (its own records) and, from logscope.compare.gateway, the gateway.

A setting the logs do not show is ``None`` (unknown), never a default: a vLLM default depends on the version,
so a key missing from 'non-default args' says only that it was not given. Two unknowns, or one, are not a
change; they are listed so that a reader knows what could not be checked.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import polars as pl

from ..scalars import int_value
from .runs import Run

# the non-default args dict, read as Python literals where it is one, else key by key
_ARG = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|\[[^\]]*\]|\{[^}]*\}|[^,}]+)")
_ARGS_AT = re.compile(r"non-default args: (\{.*\})", re.S)
_NAMESPACE = re.compile(r"args: Namespace\((.*)\)", re.S)
_NS_ARG = re.compile(r"\b(\w+)=('(?:[^'\\]|\\.)*'|\[[^\]]*\]|[^,)]+)")
_ENGINE = re.compile(r"Initializing an? (V[01] )?LLM engine \(v?([^)]*)\) with config:")
# effective values from the engine's 'with config:' line (simple scalars only)
ENGINE_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enable_prefix_caching",
               "enable_chunked_prefill", "max_seq_len", "dtype", "kv_cache_dtype", "quantization", "enforce_eager",
               "served_model_name", "model")  # fmt: skip
_ENGINE_VAL = {k: re.compile(rf"(?:^|[ ,(]){k}=('[^']*'|[^,\s)]+)") for k in ENGINE_KEYS}
# the names a reader knows them by; args keys map onto these
ALIASES = {
    "max_seq_len": "max_model_len",
    "model_tag": None,
    "num_gpu_blocks_override": "num_gpu_blocks_override",
}
# first in the table, in this order; the rest of the args after them by name
SERVER_ORDER = ("server", "replicas", "version", "engine", "model", "served_model_name", "max_num_seqs", "max_model_len",
                "max_num_batched_tokens", "gpu_memory_utilization", "block_size", "num_gpu_blocks_override",
                "kv_cache_tokens", "enable_chunked_prefill", "enable_prefix_caching", "tensor_parallel_size",
                "pipeline_parallel_size", "data_parallel_size", "dtype", "kv_cache_dtype", "quantization")  # fmt: skip
# consequences of other settings: they differ when those do, so they are not counted as a change of their own
DERIVED = {
    "kv_cache_tokens": "the KV cache's size follows from gpu_memory_utilization, the blocks override, "
    "block size, model and device"
}
# not settings of the serving: where the server listened, what it logged
IGNORED_ARGS = {"host", "port", "enable_log_requests", "disable_log_requests", "model_tag", "uvicorn_log_level",
                "disable_log_stats", "api_key", "ssl_keyfile", "ssl_certfile"}  # fmt: skip


def _literal(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {"True": True, "False": False, "None": None}.get(text, text.strip("'"))


def _value(v: Any) -> Any:
    """A setting as JSON: lists of one item as the item (served_model_name ['tiny'] = 'tiny')."""
    if isinstance(v, list | tuple) and len(v) == 1:
        v = v[0]
    if isinstance(v, list | tuple):
        return [_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _value(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
        return v  # 0.3 stays 0.3, 1.0 stays 1.0 (as logged)
    return v if v is None or isinstance(v, bool | int | float | str) else str(v)


def parse_args(text: str) -> dict:
    """The 'non-default args: {...}' dict (or an argparse Namespace) of a config line."""
    m = _ARGS_AT.search(text)
    if m:
        whole = _literal(m.group(1))
        if isinstance(whole, dict):
            return {str(k): v for k, v in whole.items()}
        return {k: _literal(v) for k, v in _ARG.findall(m.group(1))}
    m = _NAMESPACE.search(text)
    return {k: _literal(v) for k, v in _NS_ARG.findall(m.group(1))} if m else {}


def parse_engine(text: str) -> dict:
    """Engine generation, version and the effective settings of an 'Initializing ... LLM engine' line."""
    m = _ENGINE.search(text)
    if not m:
        return {}
    out: dict = {"engine": (m.group(1) or "V0 ").strip(), "engine_version": m.group(2)}
    for k, rx in _ENGINE_VAL.items():
        v = rx.search(text)
        if v:
            out[k] = _literal(v.group(1))
    if isinstance(out.get("dtype"), str):
        out["dtype"] = out["dtype"].removeprefix("torch.")
    return out


def _last(ev: pl.DataFrame, kind: str) -> pl.DataFrame:
    return ev.filter(pl.col("kind") == kind).sort(["ts", "seq"], nulls_last=False)


ENGINE_KINDS = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI"}


def engine_kind(run: Run) -> str | None:
    """Which serving engine the run's server logs are of (vLLM, SGLang), as their parsers tagged them."""
    for name in ("server_stats", "server_requests"):
        t = run.table(name)
        if "engine_kind" in t.columns:
            seen = t["engine_kind"].drop_nulls()
            if seen.len():
                k = str(seen.value_counts(sort=True).row(0)[0])
                return ENGINE_KINDS.get(k, k)
    ev = run.table("server_events")
    return "vLLM" if ev.height and (ev["kind"] == "version").any() else None


def engine_name(runs: list[Run]) -> str | None:
    """The one engine whose records the runs' server figures came from ('SGLang'); None when the runs' engines
    differ or none is known, and the figures are said to be the engine's."""
    known = {k for k in (engine_kind(r) for r in runs) if k}
    return known.pop() if len(known) == 1 else None


def server(run: Run) -> tuple[dict, dict, list[str]]:
    """(settings, where each came from, notes) of the run's vLLM server: the last start's when it restarted."""
    ev = run.table("server_events")
    vals: dict[str, Any] = {}
    src: dict[str, str] = {}
    notes: list[str] = []
    kind = engine_kind(run)
    if kind is not None:
        vals["server"], src["server"] = kind, "server log"
    if kind not in (None, "vLLM"):
        return vals, src, [f"{kind}'s startup settings are not read: only the engine is named"]
    if ev.height == 0:
        return vals, src, ["no vLLM server log: the server's settings are unknown"]

    def put(key: str, v: Any, where: str) -> None:
        if v is not None:
            vals[key], src[key] = _value(v), where

    # replicas: the log streams that printed a startup banner (a restart in one stream is still one replica)
    banners = ev.filter(pl.col("kind") == "version")["replica"].drop_nulls()
    put("replicas", banners.n_unique() if banners.len() else None, "server logs (streams with a banner)")
    ver = _last(ev, "version")["version"].drop_nulls()
    put("version", ver[-1] if ver.len() else None, "banner")
    for text in _last(ev, "engine_config")["detail"].drop_nulls().to_list()[-1:]:
        eng = parse_engine(text)
        put("engine", eng.pop("engine", None), "engine config line")
        v = eng.pop("engine_version", None)
        if "version" not in vals:
            put("version", v, "engine config line")
        for k, x in eng.items():
            put(ALIASES.get(k) or k, x, "engine config line")
    configs = _last(ev, "config")
    texts = [t for t in configs["detail"].fill_null(configs["message"]).to_list() if t]
    moved = varied(run)
    if moved:
        notes.append(f"{_varied_words(moved)}: the last start's are used")
    for k, x in (parse_args(texts[-1]) if texts else {}).items():
        if k in IGNORED_ARGS:
            continue
        put(ALIASES.get(k) or k, x, "non-default args")
    cap = ev.filter(pl.col("kind") == "capacity").sort(["ts", "seq"], nulls_last=False)
    kv = cap["kv_tokens"].drop_nulls()
    put("kv_cache_tokens", int(kv[-1]) if kv.len() else None, "KV cache size line")
    if "block_size" not in vals:
        bs = cap["block_size"].drop_nulls()
        put("block_size", int(bs[-1]) if bs.len() else None, "KV blocks line")
    return vals, src, notes


def varied(run: Run) -> dict[str, list]:
    """The serving arguments that took other values between the starts of one server log stream, each with its
    values in order (two-servers-one-port: max_num_seqs [64, 16]). Where it listened (IGNORED_ARGS) is no such
    change: traced-2r-kill's two replicas on two ports read 'the server started 3 times with different
    arguments'."""
    ev = _last(run.table("server_events"), "config")
    seen: dict[str, list] = {}
    for _, grp in ev.group_by("replica", maintain_order=True):
        for t in grp["detail"].fill_null(grp["message"]).to_list():
            for k, v in parse_args(t or "").items():
                if k in IGNORED_ARGS:
                    continue
                vals = seen.setdefault(f"{grp['replica'][0]}\0{ALIASES.get(k) or k}", [])
                if not vals or normalized(_value(vals[-1])) != normalized(_value(v)):
                    vals.append(_value(v))
    return {k.split("\0")[1]: v for k, v in seen.items() if len(v) > 1}


def _varied_words(moved: dict[str, list]) -> str:
    said = "; ".join(f"{k} {', then '.join(str(x) for x in v)}" for k, v in moved.items())
    return f"the server's arguments changed between its starts ({said})"


def varied_line(label: str, run: Run) -> str | None:
    """The verdict's line for a run whose server ran with other settings before its last start."""
    moved = varied(run)
    if not moved:
        return None
    return (
        f"In {label}, {_varied_words(moved)}: the settings compared are its last start's, and its whole-run figures "
        "mix both."
    )


def client(run: Run) -> tuple[dict, dict, list[str]]:
    """The client's retry and timeout settings where its records state them, and what its attempts show."""
    vals: dict[str, Any] = {}
    src: dict[str, str] = {}
    cr = run.table("client_requests")
    for col, key in (
        ("max_retries", "client_max_retries"),
        ("timeout_s", "client_timeout_s"),
        ("stream", "client_stream"),
    ):
        if col in cr.columns:
            seen = sorted(cr[col].drop_nulls().unique().to_list())
            if seen:
                vals[key], src[key] = (seen[0] if len(seen) == 1 else seen), "client records"
    ca = run.table("client_attempts")
    if ca.height and "attempt" in ca.columns and ca["attempt"].drop_nulls().len():
        vals["client_attempts_max_seen"] = int_value(ca["attempt"].max())
        src["client_attempts_max_seen"] = "client attempts (observed, not a setting)"
    return vals, src, []


OBSERVED = {"client_attempts_max_seen"}  # shown, never counted as a change: the load decides them
# where a program listened, as the server's host and port (IGNORED_ARGS): shown, never counted as a change (calm
# against calm-b counted nginx's 8083 -> 8081 among '5 settings differ')
PLACES = {"gateway_listener": "where the gateway listened, not how it serves"}


def _ordered(keys: set[str], first: tuple[str, ...]) -> list[str]:
    return [k for k in first if k in keys] + sorted(k for k in keys if k not in first)


def diff(layer: str, a: tuple[dict, dict], b: tuple[dict, dict], first: tuple[str, ...] = ()) -> list[dict]:
    """One row per setting known on either side: same | changed | unknown (on one side or both)."""
    (va, sa), (vb, sb) = a, b
    rows = []
    for k in _ordered(set(va) | set(vb), first):
        x, y = va.get(k), vb.get(k)
        if x is None or y is None:
            status = "unknown"
        else:
            status = "same" if normalized(x) == normalized(y) else "changed"
        counted = status == "changed" and k not in DERIVED and k not in OBSERVED and k not in PLACES
        why = DERIVED.get(k) or PLACES.get(k) or ("observed, not a setting" if k in OBSERVED else None)
        rows.append(
            {
                "layer": layer,
                "name": k,
                "a": x,
                "b": y,
                "status": status,
                "counted": counted,
                "source_a": sa.get(k),
                "source_b": sb.get(k),
                "note": why,
            }
        )
    return rows


def normalized(v: Any) -> Any:
    if isinstance(v, float) and v == int(v):
        return int(v)
    if isinstance(v, str):
        return v.strip()
    return v
