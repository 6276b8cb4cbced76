"""Which layers of the retries table the folder shows. A layer with no log is "not observed", with what is
missing, never a count of 0: a vLLM-only folder once read "client attempts 0, gateway requests 0" as if the
callers had sent nothing. summary.json's ``retries.not_observed`` holds the reasons; every output renders it."""

from __future__ import annotations

from typing import Any

from .load import Loaded

# the table's rows each layer carries
CLIENT_KEYS = ("client_attempts", "client_retries")
GATEWAY_KEYS = ("gateway_requests", "gateway_attempts", "gateway_retries")
SERVER_KEYS = ("server_requests", "server_aborts")


def engine(ld: Loaded) -> str | None:
    """Whose records the server rows are ('vLLM', 'TGI', 'SGLang', 'vLLM and SGLang'): the request rows' engine,
    else the servers' stats and events; None when no server record names one (the rows then say 'server'). A TGI
    folder's table read 'vLLM requests received' of its router's Success lines."""
    from ..diagnose.verdict import ENGINE_NAMES

    for name in ("server_requests", "server_stats", "server_events"):
        df = ld.table(name, ("engine_kind",))
        kinds = sorted({k for k in df["engine_kind"].drop_nulls() if k in ENGINE_NAMES}) if df.height else []
        if kinds:
            return " and ".join(ENGINE_NAMES[k] for k in kinds)
    return None


def _files(ld: Loaded, kind: str, fmt: str | None = None) -> list[str]:
    df = ld.table("files", ("path", "kind", "format"))
    if not df.height:
        return []
    rows = df.select("path", "kind", "format").iter_rows()
    return sorted({str(p) for p, k, f in rows if k == kind and fmt in (None, f)})


def _named(files: list[str]) -> str:
    more = f" and {len(files) - 3} more" if len(files) > 3 else ""
    return ", ".join(files[:3]) + more


def missing(ld: Loaded, counts: dict[str, Any], traces: dict | None) -> dict[str, str]:
    """{row key: why it is not observed} for the rows of the layers the folder has no record of. ``counts``:
    the table's counts as summary.json gives them; ``traces``: summary.json's traces (an engine span is the
    engine's record of an attempt even where vLLM's log holds no request line)."""
    srcs = ld.doc("correlation").get("sources")
    srcs = srcs if isinstance(srcs, dict) else {}
    client = bool(srcs.get("client")) or bool(counts.get("client_attempts"))
    gateway = bool(srcs.get("gateway")) or bool(counts.get("gateway_requests"))
    server = bool(srcs.get("server")) or bool(counts.get("server_requests"))
    why: dict[str, str] = {}
    if not client:
        why.update(dict.fromkeys(CLIENT_KEYS, "no client log or client spans in the folder"))
    if not gateway:
        gw = _files(ld, "gateway")
        text = (
            f"the gateway's files ({_named(gw)}) hold no access lines"
            if gw
            else "no gateway access log in the folder"
        )
        why.update(dict.fromkeys(GATEWAY_KEYS, text))
    if not server:
        sv = _files(ld, "server")
        sg = _files(ld, "server", "sglang_server")
        tg = _files(ld, "server", "tgi_router")
        text = (
            f"TGI's log ({_named(tg)}) holds no request's Success line (its router writes one for each request it "
            "answers, at INFO)"
            if tg and tg == sv
            else f"SGLang's log ({_named(sg)}) holds no request-log lines (SGLang writes them with --log-requests)"
            if sg and sg == sv
            else f"the servers' logs ({_named(sv)}) hold no request-log lines (vLLM writes them with "
            "--enable-log-requests, SGLang with --log-requests)"
            if sg
            else f"vLLM's log ({_named(sv)}) holds no request-log lines (vLLM writes them with --enable-log-requests)"
            if sv
            else "no vLLM or SGLang log in the folder"
        )
        reached = (traces or {}).get("attempts_with_engine")
        if reached:
            text += f"; {reached:,} client attempts have an engine span (see Traces)"
        why.update(dict.fromkeys(SERVER_KEYS, text))
    if not (client or gateway):
        # the logical requests are then the server's own executions: 1 per request by construction
        callers = "no caller's record (no client or gateway log in the folder)"
        why["amplification"] = callers
        why["orphaned_requests"] = callers
        why["orphan_s"] = callers
        if not server:
            why["logical_requests"] = callers
    elif not server:
        why["amplification"] = why["server_requests"]
        why["orphaned_requests"] = why["server_requests"]
        why["orphan_s"] = why["server_requests"]
    return why


def other_calls(o: dict | None) -> dict | None:
    """correlation.json's gateway requests that are no inference call, with the sentence every output prints
    under the retries table: the counts above leave them out, and a reader must not take 0 for an empty log."""
    if not o or not o.get("requests"):
        return None
    n, k = o["requests"], o.get("attempts") or 0
    calls = ", ".join(f"{c['call']}: {c['requests']:,}" for c in o.get("calls") or [])
    if o.get("more_calls"):
        calls += f" and {o['more_calls']:,} other path(s)"
    verb = "is" if n == 1 else "are"
    text = (
        f"{n:,} gateway request{'s' if n != 1 else ''} that {verb} no inference call ({calls}), with {k:,} "
        f"upstream attempt{'s' if k != 1 else ''}, {verb} not counted in the retries table"
    )
    return {**o, "text": text}
