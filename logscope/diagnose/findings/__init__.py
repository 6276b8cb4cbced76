"""Findings: symptom, evidence, likely cause and the ONE change to test next.

The cause → change table this follows:

* OOM → weights, KV allocation, activations, request lengths → a smaller active batch
  (``--max-num-seqs``), a shorter ``--max-model-len``, a supported quantization.
* latency rising without errors → KV usage, preemptions, waiting → fewer admitted requests (a lower
  ``--max-num-seqs``) or measured capacity (run the ladder).
* slow first token → queue, prefill, tokenization, network → fix the slow stage (chunked prefill).
* load growing after timeouts → retries and work still running → bounded retries with jittered
  backoff at ONE layer, and cancellation (client disconnects reaching vLLM:
  ``proxy_ignore_client_abort off``).
* retries at several layers → retries at one layer only.

Never a bare 'increase memory'. Severity: critical (the server died), high (a sustained regime,
work done for nobody, retries multiplying load), medium (spikes, SLO breaches), low (latent
problems), info (context). A calm run gets one info finding and nothing above it.

One module per family: ``pressure`` (KV pressure, preemption, queue), ``crash`` (deaths, stalls),
``latency`` (slow first tokens and responses, cold starts), ``errors`` (failures, dead upstreams),
``retries`` (retries, orphaned work), ``ladder``, ``events`` (single server events), ``calm``; ``record``
holds the finding record and the phrases they share. Here: the order of findings and one finding for
many like episodes (``REPEATS``).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from .. import capacity
from ..claims import Claim, Fact, Registry
from ..context import Context
from ..records import Episode, Finding
from ..severity import Severity
from .aborts import abort_findings
from .batch_oom import batch_oom_findings
from .calm import calm_findings
from .clocks import clock_gap_findings
from .crash import KV_DEATH, death_finding, stall_finding, stop_findings
from .decode import slow_decode_findings
from .engine_words import in_engine_words
from .errors import error_finding, gateway_error_findings, unknown_model_findings
from .events import KV_REFUSED, event_findings
from .gateway import failed_findings, gateway_down_findings
from .gateway_stop import gateway_stop_findings
from .impact import by_impact, cost, measure, unknown_impact
from .kv_admitted import admitted, admitted_finding
from .kv_load import kv_load_findings, leads
from .ladder import ladder_finding
from .latency import cold_start_findings, slow_e2e_finding, slow_first_token_finding
from .load_tests import load_test_findings
from .overload import capacity_findings
from .platform import build as _platform
from .pressure import ends_on_one_line, pressure_finding
from .record import stands_for
from .retries import traffic_findings
from .stream_failed import stream_failed_findings
from .untimed import untimed_findings

SEVERITY = ("critical", "high", "medium", "low", "info")


# Inside one severity, the finding whose change helps most comes first: a dead server before
# anything else, then work done for nobody, then retries (they feed the overload), then capacity (a
# ladder's measured boundary before the pressure of its steps).
KIND_ORDER = (
    "crash",
    "platform",
    "startup",
    "stall",
    "orphans",
    "retries",
    "ladder",
    "capacity",
    "pressure",
    "errors",
    "latency",
    "other",
)


def replica_count(ctx: Context, eps: list[Episode]) -> int:
    """How many replicas the folder holds: those of its server logs' stats lines and of its episodes (the
    findings' titles and the verdict's headline name the replica when there are several)."""
    logs = ctx.server["replica"].drop_nulls().unique().to_list() if "replica" in ctx.server.columns else []
    return len({r for r in logs if r} | {e["replica"] for e in eps if e.get("replica")})


def build(
    ctx: Context,
    eps: list[Episode],
    ladder_rows: list[dict],
    ladder: dict | None,
    cap: dict,
    traffic: dict,
    cold: dict,
    reg: Registry,
) -> list[Finding]:
    out: list[Finding] = []
    per_replica: list[tuple[str, Finding]] = []  # (replica, finding) of one replica's episodes
    several = replica_count(ctx, eps) > 1  # a folder of several servers: each finding names its own
    for ep, group in _one_per_pattern(eps):
        found = _episode(ctx, ep, ladder, cap)
        if ep["class"] == "recurring":
            # one pattern per signal, whichever replicas it beats on: in a folder of several, the title names them
            names = list(dict.fromkeys(e["replica"] for e in group if e.get("replica"))) if several else []
            for f in found:
                if f["kind"] == "pressure":  # its impact is counted over every beat (beat_impact)
                    f.beats = [(e["start"], e["end"]) for e in group]
                if f["kind"] != "pressure":  # pressure titles name the pattern themselves
                    f["title"] = f"{f['title']} — the first of {ep['why']}"
                if names:
                    f["title"] = f"{_replicas(names, metrics_only(ctx))}: {f['title']}"
        elif len(group) > 1:
            ids = named([e["episode_id"] for e in group])
            what = (
                ep["class"]
                if ep["class"] == ep["signal"]
                else f"{ep['class']} {ep['signal'].replace('_', ' ')}"
            )
            on = f" on {ep['replica']}" if ep["replica"] else ""
            for f in found:
                stands_for(
                    f,
                    len(group),
                    "like it",
                    f"{what} episodes{on}",
                    group[0]["start"],
                    group[-1]["start"],
                    f" ({ids})",
                )
        if several and ep.get("replica") and ep["class"] != "recurring":
            per_replica += [(ep["replica"], f) for f in found]
        else:
            out += found
    out += _across_replicas(per_replica, metrics_only(ctx) if per_replica else frozenset())
    out += stop_findings(ctx, eps)
    out += slow_decode_findings(ctx)
    out += traffic_findings(ctx, eps, traffic, reg)
    if ladder is not None:
        out.append(
            _ladder_ranked(
                ladder_finding(ladder, ladder_rows, reg, cap.get("max_num_seqs")), ladder, ladder_rows, out
            )
        )
    out += clock_gap_findings(ctx, reg)
    out += capacity_findings(ctx, cap, reg, ladder)
    out += event_findings(ctx)
    out += batch_oom_findings(ctx)
    out += kv_load_findings(ctx)
    out += gateway_error_findings(ctx)
    out += gateway_down_findings(ctx, reg)
    out += gateway_stop_findings(ctx, reg)
    out += stream_failed_findings(ctx, reg)  # an access log's 200 whose stream broke off (LiteLLM)
    out += unknown_model_findings(ctx)
    out += abort_findings(ctx)
    out += cold_start_findings(ctx, cold, REPEATS)
    plat = _platform(ctx)  # the kernel's, Kubernetes' and the GPUs' findings (issue #40)
    out += plat
    out += load_test_findings(ctx)
    out += untimed_findings(ctx)  # records no time places: counted and said, never 'nothing recognised'
    _one_sample(ctx, out, eps)
    if not plat and not any(f["severity"] in ("critical", "high", "medium") for f in out):
        out += failed_findings(ctx, reg)
    if not plat and not any(f["severity"] in ("critical", "high", "medium") for f in out):
        out += calm_findings(ctx, eps, cap, reg)
    # a start-up death its KV check caused says the refusal itself: the check's own finding would say it twice
    if any(f["kind"] == "crash" and f["title"].endswith(KV_DEATH) for f in out):
        out = [f for f in out if f["title"] != KV_REFUSED]
    _rank(ctx, out, ladder, ladder_rows, frozenset(e["episode_id"] for e in eps if e["open_end"]))
    in_engine_words(ctx, out, eps)  # an SGLang server's next test names SGLang's flags, not vLLM's
    _claims(out, reg)
    return out


def _claims(out: list[Finding], reg: Registry) -> None:
    """The claims the findings state beside their episodes': each severity's decision, each 'observed'."""
    for f in out:  # the rule that set its severity, rendered in every output (severity.Severity)
        if f.severity_by is not None and f.severity_by.level == f["severity"]:
            reg.add(f.severity_by.claim(f.finding_id or "", f.title))
    for f in out:  # a death's own facts (its raised error, its start-up) beside its episode's class
        if f["kind"] == "crash" and f.facts and (c := reg.get(f.claim_id)) is not None:
            have = {x.name for x in c.facts}
            c.facts += [x for x in f.facts if x.name not in have]
    for f in out:  # a finding that reports what was seen (a count, a time) states an 'observed' claim of it
        if f.claim_id is None and f.facts:
            f.claim_id = reg.add(
                Claim(f"finding.{f.finding_id}", "observed", f.title, "observed", f.facts)
            ).id


def _rank(
    ctx: Context,
    out: list[Finding],
    ladder: dict | None,
    rows: list[dict],
    open_ids: frozenset[str] = frozenset(),
) -> None:
    """What each finding cost the callers, its severity by that impact, then the order and the ids (``open_ids``:
    the episodes still on when the observation stops, whose length the impact rule does not know)."""
    measure(ctx, out)
    by_impact(ctx, out, ladder is not None, open_ids)
    unknown_impact(out)  # no record of the callers: the class alone does not make it high
    if ladder is not None:  # the ladder's finding is as severe as the pressure it covers, after its impact
        for f in out:
            if f["kind"] == "ladder":
                _ladder_ranked(f, ladder, rows, out, final=True)
    order = {s: i for i, s in enumerate(SEVERITY)}
    kind = {k: i for i, k in enumerate(KIND_ORDER)}
    far = datetime.max
    # severity first (a death before anything), then what the callers felt (failed and slowed requests),
    # then the kind whose change helps most, then time
    out.sort(
        key=lambda f: (
            order[f["severity"]],
            -cost(f),
            kind[f["kind"]],
            f["start"].replace(tzinfo=None) if f["start"] else far,
            f["title"],
        )
    )
    _overload_leads(out)
    leads(out, ctx.th.merge_gap_s)  # a KV connector's failed load before the pressure it caused
    for i, f in enumerate(out, 1):
        f["finding_id"], f["rank"] = f"F{i}", i


SYMPTOMS = ("pressure", "latency", "errors")  # what a load above capacity shows inside its arrival period


def _overload_leads(out: list[Finding]) -> None:
    """Load above capacity for the whole arrival period (claim capacity.overload) is the cause of the pressure,
    slow answers and errors inside that period (overload-long: 3,645 preemptions and 953 waiting at 6.0/s offered,
    2.8/s completed): it leads them, as severe as the worst of them, so the verdict says it first. Findings of
    another kind (a death, orphaned work) keep their place."""
    cap = next((f for f in out if f.claim_id == "capacity.overload"), None)
    if cap is None or cap["start"] is None or cap["end"] is None:
        return
    inside = [
        f
        for f in out
        if f["kind"] in SYMPTOMS
        and f["start"] is not None
        and f["start"] <= cap["end"]
        and (f["end"] or f["start"]) >= cap["start"]
    ]
    if not inside:
        return
    cap["severity"] = min([cap["severity"], *(f["severity"] for f in inside)], key=SEVERITY.index)
    first = min(out.index(f) for f in inside)
    if out.index(cap) > first:
        out.remove(cap)
        out.insert(first, cap)


def _ladder_ranked(
    f: Finding, ladder: dict, rows: list[dict], found: list[Finding], final: bool = False
) -> Finding:
    """On a ladder, the pressure episodes are the steps above capacity: the boundary is what the run measured,
    so its finding covers the steps that broke (from the first one to the end) and is as severe as the
    worst pressure finding inside them; ranked by the same cost, it then leads them."""
    nxt = ladder.get("broke_first_at_next_step")
    if nxt is None:
        return f
    pf = ladder.get("pressure_from_step")  # pressure beside the SLO may begin at the boundary step or below
    first = min(nxt["step"], pf["step"]) if pf else nxt["step"]
    broke = [r for r in rows if r["step"] >= first]
    f["start"], f["end"] = broke[0]["ts_start"], broke[-1]["ts_end"]
    inside = [
        g
        for g in found
        if g["kind"] == "pressure"
        and g["start"] is not None
        and f["start"] is not None
        and f["end"] is not None
        and f["start"] <= g["start"] <= f["end"]
    ]
    if inside:
        worst = min(inside, key=lambda g: SEVERITY.index(g["severity"]))
        f["severity"] = worst["severity"]
        if final:  # said once, after the pressure findings' own severity by their impact
            f["evidence"] += (
                f"; severity {f['severity']} as the worst pressure in its steps: {worst['title']}"
            )
    return f


def _one_sample(ctx: Context, out: list[Finding], eps: list[Episode]) -> None:
    """A level seen on one stats sample (a 0-second KV blip) is no regime, whatever its class says: its
    finding is low, so it never outranks the episodes the users felt."""
    blips = {
        e["episode_id"]
        for e in eps
        if e["class"] != "crash" and e["duration_s"] == 0 and e["signal"] in ("kv_pressure", "queue", "stall")
    }
    last = {e["episode_id"] for e in eps if e["episode_id"] in blips and ends_on_one_line(ctx, e)}
    for f in out:
        if f.get("episode_id") in last:
            # the logs end on it: it was not seen to pass (05: KV 99 %, 115 waiting on the last line), so it is no
            # blip to set aside and 'nothing alarming' cannot stand beside it; how long it lasted is unknown
            if f["severity"] in ("critical", "high"):
                f.severity_by = Severity(
                    "medium",
                    "logs_end",
                    f"one stats line, the last: {f['severity']} by its class, not seen to last",
                    (Fact("duration_s", 0.0, None, None, "seconds"),),
                )
                f["severity"] = "medium"
        elif f.get("episode_id") in blips and f["severity"] in ("critical", "high", "medium"):
            f["severity"] = "low"
            f["title"] += " (one sample)"
            f.severity_by = Severity(
                "low",
                "one_sample",
                "a level seen on one stats sample (0 s): no regime",
                (Fact("duration_s", 0.0, None, None, "seconds"),),
            )


# ------------------------------------------------------------------ per episode

REPEATS = 3  # more episodes than this of one class, signal and replica are one finding (a crash loop...)
REPEATS_NAMED = 6


def named(items: list[str]) -> str:
    """The first REPEATS_NAMED of ``items``, comma-separated, with '…' when there are more."""
    return ", ".join(items[:REPEATS_NAMED]) + (", …" if len(items) > REPEATS_NAMED else "")


def _replicas(names: list[str], targets: frozenset[str] = frozenset()) -> str:
    """What a title says a finding is on: 'replica-0', or '2 replicas (replica-0, replica-2)'. A metrics target
    tied to no server log (``targets``: metrics_only) is no replica: it is named as a target (a 2-replica folder
    read '4 replicas (metrics-a.prom, vllm-server-a, …)')."""
    reps = [n for n in names if n not in targets]
    tgt = [n for n in names if n in targets]
    said = []
    if reps:
        said.append(reps[0] if len(reps) == 1 else f"{len(reps)} replicas ({named(reps)})")
    if tgt:
        what = "a metrics target" if len(tgt) == 1 else f"{len(tgt)} metrics targets"
        said.append(f"{what} tied to no server log ({named(tgt)})")
    return " and ".join(said)


def metrics_only(ctx: Context) -> frozenset[str]:
    """The 'replicas' that are Prometheus targets no server log was tied to (ingest.metric_stats.map_replicas
    names a target after its log when the log's listen address or series say which): every row of theirs is a
    metrics sample, and no server event names them."""
    st = ctx.inputs.stats
    if not st.height or not {"replica", "origin"} <= set(st.columns):
        return frozenset()
    by = st.group_by("replica").agg((pl.col("origin") == "prometheus").all().alias("_p"))
    prom = {r for r, p in by.iter_rows() if p and r}
    ev = ctx.inputs.events
    logged = set(ev["replica"].drop_nulls().unique().to_list()) if "replica" in ev.columns else set()
    return frozenset(prom - logged)


def pattern_key(e: Episode) -> tuple:
    """Episodes one finding may stand for: a recurring pattern is one per signal, others share class,
    signal and replica (the verdict's crash loop uses the same key)."""
    return (e["signal"],) if e["class"] == "recurring" else (e["class"], e["signal"], e["replica"])


def _across_replicas(
    found: list[tuple[str, Finding]], targets: frozenset[str] = frozenset()
) -> list[Finding]:
    """Findings of one replica's episodes in a folder of several: the title names the replica, and the
    findings that would say the same of several replicas (the same kind of trouble at the same times: a
    node or a rollout taking them down together) are one finding naming them all."""
    groups: dict[tuple, list[tuple[str, Finding]]] = {}
    for replica, f in found:
        groups.setdefault((f["severity"], f["kind"], f["title"]), []).append((replica, f))
    out = []
    for (_, _, title), members in groups.items():
        replica, f = members[0]
        names = [r for r, _ in members]
        f["title"] = f"{_replicas(names, targets)}: {title}"
        if len(members) > 1:
            f["evidence"] = (
                f"the same on {_replicas(names, targets)} (episodes "
                if targets & set(names)
                else f"the same on {len(names)} replicas ({', '.join(names)}: episodes "
            ) + f"{', '.join(g['episode_id'] for _, g in members)}); on {replica}: {f['evidence']}"
            f["start"] = min(g["start"] for _, g in members if g["start"]) if f["start"] else f["start"]
            f["end"] = max((g["end"] for _, g in members if g["end"]), default=f["end"])
        out.append(f)
    return out


def _one_per_pattern(eps: list[Episode]) -> list[tuple[Episode, list[Episode]]]:
    """The episodes that get findings, each with the episodes it stands for: every episode on its own,
    except a recurring pattern (one finding per signal) and more than REPEATS episodes of one class,
    signal and replica (hundreds of restarts or pressure spells in a day-long incident are one finding
    naming them all, not hundreds)."""
    eps = [e for e in eps if e["class"] != "context"]  # a one-sample blip is context, no finding
    groups: dict[tuple, list[Episode]] = {}
    for e in eps:
        groups.setdefault(pattern_key(e), []).append(e)
    out = []
    for e in eps:
        g = groups[pattern_key(e)]
        if e["class"] != "recurring" and len(g) <= REPEATS:
            out.append((e, [e]))
        elif e is g[0]:
            out.append((e, g))
    return out


def _episode(ctx: Context, ep: Episode, ladder: dict | None, cap: dict) -> list[Finding]:
    sig = ep["signal"]
    cap = capacity.for_replica(cap, ep["replica"])  # this replica's cache and config
    if sig == "crash":
        return [death_finding(ctx, ep, cap)]
    if sig == "stall":
        return [stall_finding(ctx, ep)]
    if sig in ("preemptions", "kv_pressure", "queue"):
        facts = admitted(ctx, ep)  # a full cache with no request waiting, preempted or slowed is no pressure
        return [admitted_finding(ctx, ep, facts) if facts else pressure_finding(ctx, ep, ladder, cap)]
    if sig == "ttft":
        return [slow_first_token_finding(ctx, ep)]
    if sig == "e2e":
        return [slow_e2e_finding(ctx, ep)]
    if sig == "errors":
        return [error_finding(ctx, ep)]
    return []  # retries / orphans are reported once for the run (traffic_findings)
