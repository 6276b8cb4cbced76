"""Sentences the report prints above its tables: the KV arithmetic and the server's life, in words.

Each function takes the summary dict's section (numbers from diagnosis.json) and returns plain
strings; the templates escape them. A missing figure drops the sentence, never prints 'None'.
"""

from __future__ import annotations

from typing import Any

from .fmt import duration, fnum, hms, pct


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def capacity_lines(cap: dict | None) -> list[str]:
    if not cap:
        return []
    per = cap.get("per_replica") or {}
    if len(per) < 2:
        return _capacity(cap)
    out = [
        f"{len(per)} replicas, each with its own cache and config. {cap['replica']}, the one that came "
        "closest to its limits:"
    ]
    out += _capacity(cap)
    for name, c in per.items():
        if name != cap["replica"]:
            out.append(f"{name}: " + _capacity_brief(c))
    return out


def _capacity_brief(c: dict) -> str:
    """One replica's capacity in one sentence."""
    bits = [f"KV cache {fnum(c['kv_tokens'])} tokens" if c.get("kv_tokens") else "KV cache size not logged"]
    hold, obs = _get(c, "concurrency_kv_can_hold", "at_p50"), _get(c, "tokens_per_request_observed", "p50")
    if hold and obs:
        bits.append(f"holds about {fnum(hold, 1)} requests of {fnum(obs, 0)} tokens")
    if c.get("max_num_seqs"):
        bits.append(f"max_num_seqs {fnum(c['max_num_seqs'])}")
    seen = [
        f"running up to {fnum(c['running_observed_max'])}"
        if c.get("running_observed_max") is not None
        else "",
        f"KV usage up to {pct(c['kv_observed_max'])}" if c.get("kv_observed_max") is not None else "",
    ]
    seen = [x for x in seen if x]
    return ", ".join(bits) + ("; observed: " + ", ".join(seen) if seen else "") + "."


def _capacity(cap: dict) -> list[str]:
    out = []
    kv, blocks, bs = (
        cap.get("kv_tokens"),
        cap.get("gpu_blocks") or cap.get("cpu_blocks"),
        cap.get("block_size"),
    )
    if kv:
        size = f" = {fnum(blocks)} blocks × {fnum(bs)} tokens" if blocks and bs else ""
        out.append(f"KV cache: {fnum(kv)} tokens{size}.")
        if cap.get("kv_memory_gib"):
            # vLLM logs the memory it may give the cache before a block override applies: not the cache's size
            over = cap.get("num_gpu_blocks_override")
            out.append(
                f"Memory budget vLLM logged for the KV cache: {fnum(cap['kv_memory_gib'])} GiB"
                + (
                    f" (the cache itself is smaller: --num-gpu-blocks-override {fnum(over)} fixed its block count)."
                    if over
                    else "."
                )
            )
    if cap.get("max_concurrency_startup") and cap.get("max_concurrency_tokens"):
        out.append(
            f"vLLM's own startup arithmetic: {fnum(cap['max_concurrency_startup'])} requests of "
            f"{fnum(cap['max_concurrency_tokens'])} tokens fit at once."
        )
    obs = _get(cap, "tokens_per_request_observed", "p50")
    hold = _get(cap, "concurrency_kv_can_hold", "at_p50")
    if obs and hold:
        out.append(
            f"Requests here used {fnum(obs, 0)} tokens (p50, prompt + output): the cache holds about "
            f"{fnum(hold, 1)} of them at once."
        )
    reserved, hold_r = (
        _get(cap, "tokens_per_request_reserved", "p50"),
        _get(cap, "concurrency_kv_can_hold", "at_reserved_p50"),
    )
    if reserved and hold_r:
        out.append(f"At their full reservation (prompt + max_tokens, p50 {fnum(reserved, 0)} tokens): "
                   f"{fnum(hold_r, 1)} at once.")  # fmt: skip
    if cap.get("max_num_seqs"):
        out.append(f"max_num_seqs admits up to {fnum(cap['max_num_seqs'])} running requests.")
    seen = [
        f"running up to {fnum(cap['running_observed_max'])}"
        if cap.get("running_observed_max") is not None
        else "",
        f"waiting up to {fnum(cap['waiting_observed_max'])}"
        if cap.get("waiting_observed_max") is not None
        else "",
        f"KV usage up to {pct(cap['kv_observed_max'])}" if cap.get("kv_observed_max") is not None else "",
    ]
    seen = [s for s in seen if s]
    if seen:
        out.append("Observed: " + ", ".join(seen) + ".")
    if cap.get("note"):
        out.append(str(cap["note"]) + ".")
    return out


def episodes_shown(summary: dict, limit: int) -> dict:
    """The episodes a page lists: all when they are few, else every episode a finding links to plus the
    earliest others up to ``limit``, in time order; ``hidden`` says how many are left to the tables."""
    eps = summary.get("episodes") or []
    if len(eps) <= limit:
        return {"rows": eps, "hidden": 0, "total": len(eps)}
    linked = {f.get("episode") for f in summary.get("findings") or []}
    room = max(0, limit - sum(1 for e in eps if e.get("id") in linked))
    rows = []
    for e in eps:
        if e.get("id") in linked:
            rows.append(e)
        elif room:
            rows.append(e)
            room -= 1
    return {"rows": rows, "hidden": len(eps) - len(rows), "total": len(eps)}


def output_lengths_view(lengths: dict | None, shown: dict) -> dict | None:
    """summary.json's output_lengths for the page: ``main`` (every figure but the per-episode rows), and
    ``per_episode``, the rows of the episodes the page lists (``shown``, from episodes_shown), with ``note``
    counting the rest; the page folds them away (the 1 GB bench folder's page listed 590 rows of 256 / 256)."""
    if not lengths:
        return lengths
    rows = lengths.get("per_episode") or []
    ids = {e.get("id") for e in shown["rows"]}
    kept = [r for r in rows if r.get("episode_id") in ids] if shown["hidden"] else rows
    note = f"{len(rows) - len(kept)} more in summary.json" if len(rows) > len(kept) else ""
    return {
        "main": {k: v for k, v in lengths.items() if k != "per_episode"},
        "per_episode": kept,
        "note": note,
    }


def cold_start_view(cold: dict | None, limit: int) -> dict | None:
    """summary.json's cold_start with its per-start lists cut to ``limit`` rows (and a count of the rest)."""
    if not cold:
        return cold
    out = dict(cold)
    for key in ("windows", "server_starts"):
        rows = cold.get(key)
        if isinstance(rows, list) and len(rows) > limit:
            out[key] = rows[:limit]
            out[f"{key}_not_shown"] = f"{len(rows) - limit} more in summary.json"
    return out


def _s(a: Any, b: Any) -> float | None:
    """Seconds from ISO time ``a`` to ``b``."""
    from datetime import datetime

    try:
        return (
            datetime.fromisoformat(str(b).replace("Z", "+00:00"))
            - datetime.fromisoformat(str(a).replace("Z", "+00:00"))
        ).total_seconds()
    except ValueError:
        return None


def _latency(p95: Any) -> str:
    return f"{fnum(p95)} s" if isinstance(p95, int | float) else "–"


def cold_start_rows(cold: dict | None, limit: int) -> dict | None:
    """The cold-start section in a few sentences and a short table, one row per server start (summary.json's
    cold_start has every figure; the page folds them away): ``lines``, ``rows``, ``hidden`` (starts not listed)."""
    if not cold:
        return None
    starts = cold.get("server_starts") or []
    windows = {(w.get("replica"), w.get("server_start")): w for w in cold.get("windows") or []}
    rows = []
    for st in starts[:limit]:
        w = windows.get((st.get("replica"), st.get("ts"))) or {}
        load = _s(st["ts"], st["ready"]) if st.get("ts") and st.get("ready") else None
        wait = _s(st.get("ready") or st.get("ts"), w["first_request"]) if w.get("first_request") else None
        rows.append(
            {
                "replica": st.get("replica") or "server",
                "pid": st.get("pid"),
                "version": st.get("version"),
                "started": st.get("ts"),
                "ready": st.get("ready"),
                "loading": load,
                "first_request": w.get("first_request"),
                "idle_before_first": wait,
                "requests": w.get("requests"),
                "ttft_p95": w.get("ttft_p95"),
                "e2e_p95": w.get("e2e_p95"),
                "success_share": w.get("success_share"),
            }
        )
    lines = []
    loads = [r["loading"] for r in rows if r["loading"] is not None]
    n = len(starts)
    if 0 < len(loads) <= 3:
        lines.append(f"From start to ready: {' and '.join(duration(x) for x in loads)}.")
    elif loads:
        lines.append(f"From start to ready: {duration(min(loads))} to {duration(max(loads))}.")
    seconds = cold.get("seconds")
    warm = cold.get("warm") or {}
    if seconds and rows:
        lines.append(
            f"Cold = the first {fnum(seconds)} s after the first request that followed each start "
            "(the table's requests, TTFT and e2e are those of that window)."
        )
    if warm.get("requests"):
        lines.append(
            f"Warm (every other request): {fnum(warm['requests'])} requests, TTFT p95 "
            f"{_latency(warm.get('ttft_p95'))}, e2e p95 {_latency(warm.get('e2e_p95'))}, success "
            f"{pct(warm.get('success_share'))}."
        )
        # the figures side by side; whether a cold start hurt is the findings' to say
        cmp = []
        for key, name in (("ttft_p95", "TTFT p95"), ("e2e_p95", "e2e p95")):
            cold_v = [r[key] for r in rows if isinstance(r[key], int | float)]
            w = warm.get(key)
            if cold_v and isinstance(w, int | float) and w > 0:
                cmp.append(
                    f"{name} up to {_latency(max(cold_v))} against {_latency(w)} "
                    f"({fnum(max(cold_v) / w, 1)}×)"
                )
        if cmp:
            lines.append("Cold windows against warm: " + "; ".join(cmp) + ".")
    return {"lines": lines, "rows": rows, "hidden": max(0, n - limit)}


def lifecycle_lines(life: dict | None, limit: int | None = None) -> list[str]:
    if not life:
        return []
    out = []
    starts = life.get("starts")
    if isinstance(starts, int):
        out.append(f"{starts} server start(s) in the logs.")
    deaths = life.get("deaths") or []
    names = {
        "silent": "killed without a trace (its log stops)",
        "kernel_oom": "killed by the kernel OOM killer",
        "oom_killed": "OOMKilled (the container's memory limit)",
        "gpu_xid": "after a GPU fault (an NVIDIA Xid in the kernel log)",
        "oom": "OOM",
        "engine_dead": "engine died",
        "engine_timeout": "engine timed out",
    }
    if limit is not None and len(deaths) > limit:
        out.append(
            f"{len(deaths)} death(s); the first {limit} listed below, all in summary.json "
            "(server_lifecycle.deaths)."
        )
        deaths = deaths[:limit]
    for d in deaths:
        kinds = ", ".join(names.get(k, k) for k in d.get("kinds") or []) or "death"
        ready = f", ready again at {hms(d['ready'])}" if d.get("ready") else ", not seen ready again"
        if d.get("ready") and (d.get("same_server") or {}).get("state") == "two servers":
            ready = f", another server in its log stream ready at {hms(d['ready'])}"
        down = f" (down {duration(d['downtime_s'])})" if d.get("downtime_s") is not None else ""
        out.append(f"{d.get('replica') or 'server'}: {kinds} at {hms(d.get('ts'))}{ready}{down}.")
    stops = life.get("graceful_shutdowns") or []
    if stops:
        out.append(
            f"{len(stops)} graceful shutdown record(s) (SIGTERM); their tracebacks are not counted as deaths."
        )
    return out + stop_lines(life, limit)


def stop_lines(life: dict | None, limit: int | None = None) -> list[str]:
    """Each graceful stop with a start after it in its stream: this server again or another (same_server), and
    the requests each side received (report.html's lifecycle and summary.md's, one sentence each; the first
    ``limit``, all in summary.json)."""
    out: list[str] = []
    for s in (life or {}).get("graceful_shutdowns") or []:
        same = s.get("same_server")
        if not same or not s.get("restart"):
            continue
        got, then = s.get("received_before"), s.get("received_after")
        out.append(
            f"{s.get('replica') or 'server'}: stopped gracefully at {hms(s.get('ts'))}"
            f"{f' ({got} request(s) received since its start)' if got is not None else ''}; a start at "
            f"{hms(s['restart'])}: {same.get('words')}"
            f"{f' ({then} request(s) received after it)' if then is not None else ''}."
        )
    if limit is not None and len(out) > limit:
        more = len(out) - limit
        out = [
            *out[:limit],
            f"{more} more such stop(s) in summary.json (server_lifecycle.graceful_shutdowns).",
        ]
    return out


def read_notes(inputs: dict, limit: int) -> tuple[list[tuple[str, str]], int]:
    """(file, message) for what reading the files met (cut gzip, copies, unknown formats...), at most
    ``limit``, and how many more there are (the report's appendix lists them all)."""
    notes = [(f["path"], m) for f in inputs.get("files") or [] for m in f.get("messages") or []]
    return notes[:limit], max(0, len(notes) - limit)


NOT_READ = ("unknown", "empty", "binary", "unreadable", "skipped")


def input_counts(inputs: dict) -> dict:
    """What the folded input list's summary line counts: the files in no known format."""
    return {"unread": sum(1 for f in inputs.get("files") or [] if f.get("format") in NOT_READ)}


def _fact_words(f: dict) -> str:
    v = f.get("value")
    shown = (
        fnum(v)
        if isinstance(v, int | float) and not isinstance(v, bool)
        else str(v).lower()
        if isinstance(v, bool)
        else str(v)
    )
    where = ", ".join(x for x in (f.get("source"), (f.get("clock") or "") and f"{f['clock']} clock") if x)
    unit = (
        f" {f['unit']}" if f.get("unit") and f["unit"] not in ("s",) else " s" if f.get("unit") == "s" else ""
    )
    return f"{f['name']} {shown}{unit}" + (f" ({where})" if where else "")


def claims_view(summary: dict, limit: int) -> dict:
    """The claims as the pages list them: the verdict first, then the others in diagnosis order, each with its
    facts in words (value, unit, source, clock: null facts left out) and what was missing; the first ``limit``
    (every claim a finding names among them), ``hidden`` the rest (all are in summary.json)."""
    got = summary.get("claims") or []
    found = summary.get("findings") or []
    named = (
        {f.get("claim") for f in found}
        | {(f.get("severity_by") or {}).get("claim") for f in found}
        | {"verdict"}
    )
    first = sorted([c for c in got if c["id"] in named], key=lambda c: c["id"] != "verdict") + [
        c for c in got if c["id"] not in named
    ]
    rows = [
        {
            "id": c["id"],
            "state": c["state"],
            "sentence": c["sentence"],
            "facts": "; ".join(_fact_words(f) for f in c.get("facts") or [] if f.get("value") is not None),
            "missing": "; ".join(c.get("missing") or []),
        }
        for c in first[:limit]
    ]
    return {"rows": rows, "hidden": max(0, len(got) - limit), "by_id": {c["id"]: c for c in got}}
