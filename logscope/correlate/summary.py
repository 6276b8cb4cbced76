"""correlation.json: match statistics, retry multiplication, retry flags, orphaned work, clocks, notes."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..scalars import int_or_none
from . import abandon, reach
from .assemble import END_SOURCES, Assembled
from .exprs import group_first, index_in_group, prev_in_group
from .frames import Frames
from .link import Links

NO_BACKOFF_S = 0.05  # a retry sent this soon after the previous attempt ended had no backoff
JITTER_MIN_S = 0.01  # retry delays of one retry number varying less than this: a fixed interval
MIN_FOR_PATTERN = 5


def r3(x) -> float | None:
    return None if x is None else round(float(x), 3)


def build(
    F: Frames,
    L: Links,
    A: Assembled,
    offsets: list[dict],
    shift: dict[str, float],
    width: float,
    wnotes: list[str],
    res: dict[str, float],
) -> dict:
    notes: list[str] = list(F.notes)
    for src, why in sorted(F.dropped_client_sources.items()):
        notes.append(f"client log {src} left out: {why} (it describes the same sends)")
    out: dict[str, Any] = {  # correlation.json
        "window_s": width,
        "clock_offsets": offsets,
        "clock_corrections_applied": {k: r3(v) for k, v in sorted(shift.items())},
        "match": _match(F, L, A),
        "retry_multiplication": _multiplication(F, L, A),
        "flags": _flags(F, A, notes),
        "orphans": _orphans(F, A, notes),
        "sources": {
            "client": sorted(F.client_sources),
            "gateway": sorted(F.gateway_requests["source"].unique().drop_nulls().to_list()),
            "server": sorted(F.server_requests["source"].unique().drop_nulls().to_list()),
        },
    }
    away = out["retry_multiplication"]["server_requests_elsewhere"]
    if away:
        notes.append(
            f"{away['requests']} vLLM requests on {', '.join(away['replicas']) or 'an unnamed replica'} match "
            "no caller in the folder (a replica serving other traffic): left out of server_requests and the "
            "amplification"
        )
    notes += _clock_notes(offsets, res)
    notes += _layer_notes(F, A, away["requests"] - away["logical_requests"] if away else 0)
    notes += wnotes
    out["notes"] = notes
    return out


def _match(F: Frames, L: Links, A: Assembled) -> dict:
    def kinds(df: pl.DataFrame) -> dict[str, int]:
        return {k: int((df["match"] == k).sum()) if df.height else 0 for k in ("exact", "inferred")}

    cg = kinds(L.gr_lr)
    cg["with_attempt"] = int(L.gr_lr["ca"].is_not_null().sum()) if L.gr_lr.height else 0
    cg["unmatched_client_attempts"] = (
        A.unmatched["client_attempts_without_gateway_request"] if F.gateway_requests.height else 0
    )
    cg["unmatched_gateway_requests"] = A.unmatched["gateway_requests_without_logical_request"]
    gs = kinds(L.sr_ga)
    gs["unmatched_server_executions"] = (
        int(F.server_requests.join(L.sr_ga, on="sr", how="anti").height) if F.gateway_requests.height else 0
    )
    gs["unmatched_gateway_requests"] = A.unmatched["gateway_requests_without_server_execution"]
    cs = kinds(L.sr_ca)
    req = A.requests
    return {
        "client_gateway": cg,
        "gateway_server": gs,
        "client_server": cs,
        "server_executions_without_caller": A.unmatched["server_executions_without_caller"],
        "logical_requests": {k: int((req["match"] == k).sum()) for k in ("exact", "inferred", "none")},
    }


def elsewhere(F: Frames, L: Links, A: Assembled) -> tuple[int, int, list[str]]:
    """(executions, logical requests made of them alone, replicas) of vLLM replicas no caller in the folder
    reached (none of their executions matched a client or gateway request): a replica serving other
    traffic, whose log was collected beside. They are no retries of these callers: the amplification leaves
    them out (a calm replica's log beside a spike once read as 1.59x)."""
    if "replica" not in F.server_requests.columns or not (L.sr_ga.height or L.sr_ca.height):
        return 0, 0, []
    sr = F.server_requests.select("sr", pl.col("replica").cast(pl.String).fill_null(""))
    matched = pl.concat([L.sr_ga.select("sr"), L.sr_ca.select("sr")]).unique()
    reached = sr.join(matched, on="sr").select("replica").unique()
    other = sr.join(reached, on="replica", how="anti")
    if not other.height:
        return 0, 0, []
    own = A.execs.select("sr", "lr").join(other.select("sr"), on="sr")
    n_lr = A.requests.filter(pl.col("origin") == "server").join(own.select("lr").unique(), on="lr").height
    return other.height, n_lr, sorted(other["replica"].unique().to_list())


def _multiplication(F: Frames, L: Links, A: Assembled) -> dict:
    req = A.requests
    gr = F.gateway_requests.filter(pl.col("inference"))
    n_other, n_lr_other, other = elsewhere(F, L, A)
    n_lr, n_ca, n_gr = req.height - n_lr_other, F.client_attempts.height, gr.height
    n_ga = int(gr["n_attempts"].sum() or 0) if n_gr else 0
    n_sr = F.server_requests.height - n_other

    def ratio(a, b):  # a layer with no row is a layer with no log (or no request lines): its ratio is unknown
        return r3(a / b) if a and b else None

    return {
        "logical_requests": n_lr,
        "client_attempts": n_ca,
        "gateway_requests": n_gr,
        "gateway_attempts": n_ga,
        "server_requests": n_sr,
        "amplification": ratio(n_sr, n_lr),
        "amplification_matched": ratio(int(req["server_requests"].sum() or 0) - n_lr_other, n_lr),
        "by_origin": {k: int((req["origin"] == k).sum()) for k in ("client", "gateway", "server")},
        "factors": {
            "client_attempts_per_logical_request": ratio(n_ca, n_lr),
            "gateway_requests_per_client_attempt": ratio(n_gr, n_ca),
            "gateway_attempts_per_gateway_request": ratio(n_ga, n_gr),
            "server_requests_per_gateway_attempt": ratio(n_sr, n_ga),
        },
        "max_server_requests_per_logical_request": (int_or_none(req["server_requests"].max()) or 0)
        if n_lr
        else 0,
        "server_requests_elsewhere": {"requests": n_other, "logical_requests": n_lr_other, "replicas": other}
        if n_other
        else None,
        "gateway_requests_other": _other_calls(F.gateway_requests.filter(~pl.col("inference"))),
    }


def _other_calls(gr: pl.DataFrame) -> dict | None:
    """The gateway's requests that are no inference call (GET /, /health, /metrics), left out of the counts above:
    public-2 g02's one GET / retried 3 times read "gateway requests 0" beside a finding of its 3 attempts."""
    if not gr.height:
        return None
    top = (
        gr.group_by("other_call")
        .agg(pl.len().alias("requests"))
        .sort(["requests", "other_call"], descending=[True, False])
    )
    return {
        "requests": gr.height,
        "attempts": int(gr["n_attempts"].sum() or 0),
        "calls": [{"call": c, "requests": int(n)} for c, n in top.head(3).iter_rows()],
        "more_calls": max(0, top.height - 3),
    }


def _flags(F: Frames, A: Assembled, notes: list[str]) -> dict:
    ca = F.client_attempts
    client_retries = int((ca["attempt"].fill_null(1) > 1).sum()) if ca.height else 0
    gr = F.gateway_requests.filter(pl.col("inference"))
    gw_retries = int((gr["n_attempts"] - 1).clip(0).sum() or 0) if gr.height else 0
    both = 0
    if A.gr_lr.height and client_retries and gw_retries:
        gw_multi = A.gr_lr.join(gr.filter(pl.col("n_attempts") > 1).select("gr"), on="gr")["lr"].unique()
        both = int(
            A.requests.filter(pl.col("lr").is_in(gw_multi.implode()) & (pl.col("client_attempts") > 1)).height
        )
    layers = [k for k, n in (("client", client_retries), ("gateway", gw_retries)) if n]
    dup = int(A.execs["duplicate"].sum()) if A.execs.height else 0
    return {
        "multi_layer_retries": {
            "layers": layers,
            "stacked": len(layers) > 1,
            "client_retries": client_retries,
            "gateway_retries": gw_retries,
            "requests_retried_by_both": both,
        },
        "retried_attempts": reach.retried(F),
        **_retry_delays(ca, notes),
        "duplicate_concurrent_retries": dup,
        "duplicate_concurrent_requests": int(A.requests["duplicate_concurrent"].sum())
        if A.requests.height
        else 0,
    }


def _retry_delays(ca: pl.DataFrame, notes: list[str]) -> dict:
    """Delays before client retries: the logged 'Retrying request in X seconds' when the parser kept it,
    else the gap between the previous attempt's end and the retry's send."""
    if ca.height == 0:
        return {"retries_without_backoff": None, "fixed_interval": None, "retry_delays": None}
    d = (
        ca.sort(["lr", "t0"])
        .with_columns(group_first("lr").alias("_first"))
        .with_columns(
            (pl.col("t0") - prev_in_group(pl.col("t1"))).alias("gap"),
            index_in_group().alias("k"),
        )
    )
    logged = "retry_delay_s" in ca.columns and ca["retry_delay_s"].is_not_null().any()
    col = "retry_delay_s" if logged else "gap"
    d = d.filter((pl.col("k") > 1) & pl.col(col).is_not_null())
    if d.height == 0:
        return {"retries_without_backoff": None, "fixed_interval": None, "retry_delays": None}
    by_k = (
        d.group_by("k")
        .agg(
            pl.len().alias("n"),
            pl.col(col).median().alias("median_s"),
            pl.col(col).std().alias("std_s"),
            pl.col(col).min().alias("min_s"),
            pl.col(col).max().alias("max_s"),
        )
        .sort("k")
    )
    fixed = by_k.filter((pl.col("n") >= MIN_FOR_PATTERN) & (pl.col("std_s") < JITTER_MIN_S))
    no_backoff = int((d[col] < NO_BACKOFF_S).sum())
    if not logged:
        notes.append(
            "retry delays are the gaps between an attempt's end and the next send (no logged delay kept)"
        )
    return {
        "retries_without_backoff": {
            "count": no_backoff,
            "share": r3(no_backoff / d.height),
            "flag": no_backoff > 0,
            "threshold_s": NO_BACKOFF_S,
        },
        "fixed_interval": {
            "flag": fixed.height > 0,
            "retry_numbers": [int(k) - 1 for k in fixed["k"]],
            "jitter_below_s": JITTER_MIN_S,
        },
        "retry_delays": {
            "source": "logged delay" if logged else "gap between attempts",
            "n": d.height,
            "median_s": r3(d[col].median()),
            "by_retry": [
                {
                    "retry": int(r["k"]) - 1,
                    "n": int(r["n"]),
                    "median_s": r3(r["median_s"]),
                    "std_s": r3(r["std_s"]),
                    "min_s": r3(r["min_s"]),
                    "max_s": r3(r["max_s"]),
                }
                for r in by_k.iter_rows(named=True)
            ],
        },
    }


def _orphans(F: Frames, A: Assembled, notes: list[str]) -> dict:
    ex, ab = A.execs, A.abandoned
    orph = ex.filter(pl.col("orphaned").fill_null(False))
    ran = ab.filter(pl.col("outcome") == "ran_on")
    ends = orph.group_by("end_source").len()
    end_counts = {
        END_SOURCES.get(r["end_source"], "unknown"): int(r["len"])
        for r in ends.iter_rows(named=True)
        if r["end_source"] is not None
    }
    unknown_end = int(orph["end"].is_null().sum())
    if unknown_end:
        end_counts["unknown"] = unknown_end
        notes.append(
            f"{unknown_end} orphaned executions have no known end (no gateway upstream time, no finish "
            "or abort line): their generation after the caller left is not counted"
        )
    acc = abandon.summary(ab, ex, F.server_requests.height > 0)
    by = (
        pl.when(pl.col("kind") == "gateway_upstream_timeout")
        .then(pl.lit("gateway"))
        .otherwise(pl.lit("client"))
    )
    who = ab.with_columns(by.alias("_by"))
    aborted = who.filter(pl.col("outcome") == "aborted")
    return {
        **acc,
        "count": ran.height,
        "count_by_match": {k: int((ran["match"] == k).sum()) for k in ("exact", "inferred")},
        "generation_s_after_caller_left": acc["ran_on_s"],
        "server_s_of_orphaned_executions": r3(orph["gen_s"].sum()) if orph.height else 0.0,
        "median_s_after_caller_left": acc["ran_on_median_s"],
        "callers_left": {k: int((who["_by"] == k).sum()) for k in ("client", "gateway")},
        "aborted_by_caller": {k: int((aborted["_by"] == k).sum()) for k in ("client", "gateway")},
        "cancellation_propagated": (acc["aborted"] > 0 and ran.height == 0) if acc["matched"] else None,
        "end_source": dict(sorted(end_counts.items())),
        "definition": (
            "attempts whose caller left (by_class: the client timed out on it; the client's log ended with it "
            "in flight; the gateway logged 499 for it; the gateway timed out on its upstream), each counted once, "
            "and what vLLM did with the execution running when the caller left: aborted it within race_s (plus "
            "its stamps' resolution), finished it before that (finished_in_race), or ran on (count: orphaned; "
            "generation_s_after_caller_left sums server end or late abort - caller left, the waste; "
            "server_s_of_orphaned_executions their whole server time); unmatched: no execution matched it, by "
            "why. abort_lines: vLLM abort lines in the input at all (null: no vLLM request line)"
        ),
    }


def _clock_notes(offsets: list[dict], res: dict[str, float]) -> list[str]:
    notes = []
    for o in offsets:
        if not o["verified"]:
            notes.append(
                f"clock of {o['source']} is unverified ({o['method']}): its times are used as logged"
            )
    if any(v >= 1 for v in res.values()):
        notes.append(
            "vLLM stamps have 1-second resolution: server clock offsets are estimated from intervals "
            "[S, S+1) and are good to the spread shown, not to the millisecond"
        )
    return notes


def _layer_notes(F: Frames, A: Assembled, away: int = 0) -> list[str]:
    notes = []
    ex = A.execs
    if ex.height and ex["finished"].is_null().all():
        notes.append(
            "vLLM logged no 'Finished request' line (V1 never does): server work ends at the gateway's "
            "upstream time for that attempt, else the client's end, else the abort line"
        )
    if ex.height and ex["preempted"].is_null().all():
        notes.append(
            "which requests were preempted cannot be told: vLLM V1 never names them (requests.preempted "
            "is null); V0 names only the sampled ones it warns about"
        )
    if F.gateway_requests.height == 0 and F.client_attempts.height:
        notes.append("no gateway log: client attempts are tied to vLLM requests directly")
    if F.client_attempts.height == 0 and F.client_requests.height == 0:
        notes.append(
            "no client log: logical requests are the gateway's (or vLLM's) requests; client retries "
            "with the same X-Request-Id are grouped into one logical request"
        )
    n_unm = A.unmatched["gateway_requests_without_logical_request"]
    if n_unm:
        notes.append(
            f"{n_unm} gateway requests fall inside the client log's span but match no client attempt by "
            "id or time: left out of the logical requests"
        )
    n_sr = A.unmatched["server_executions_without_caller"]
    n_sr = max(0, n_sr - away)  # those of a replica no caller reached are said apart (build)
    if n_sr:
        notes.append(
            f"{n_sr} vLLM requests fall inside the gateway/client logs' span but match none of their "
            "requests: counted in server_requests, not in any logical request"
        )
    return notes
