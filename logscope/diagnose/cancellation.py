"""Was cancellation propagated? One claim, read by every output: the attempts whose callers left (client
timeout, gateway 499, gateway upstream timeout), how many the server aborted, how many finished in the race
before an abort could arrive, how many ran on for nobody (orphaned) and for how long, the gateway setting
that decides it where the folder's nginx.conf holds it, and the verdict.

The counts are correlate's (``correlation.json`` ``orphans``, one row per server execution); the verdict is
decided here (``_state``):

* no caller left: ``not observed`` (nothing was put to the test);
* callers left but the folder holds no vLLM request line (``abort_lines`` null): ``not observed``, and what vLLM did
  with those attempts (aborted, finished, ran on) is unknown, never 0 (public-2 c01-c03, g03 read 'vLLM aborted 0'
  beside 'vLLM aborts: not observed');
* vLLM aborted none of the abandoned attempts and the listeners the traffic went through have
  ``proxy_ignore_client_abort on``: ``not propagated by configuration`` (nginx keeps the upstream request
  open by design: it is the setting, not a fault, that keeps the work going);
* vLLM aborted none: ``not propagated`` when more than ``cancel_ran_on_max_share`` of them ran on, else
  ``not observed``: a finish within the race window is no evidence that an abort would have arrived;
* some aborted: at most ``cancel_ran_on_max_share`` ran on -> ``propagated``; at most
  ``cancel_aborted_min_share`` aborted -> ``not propagated``; in between -> ``partly``.
"""

from __future__ import annotations

import polars as pl

from .claims import Claim, Fact
from .thresholds import Thresholds

VERDICTS = (
    "propagated",
    "partly",
    "not propagated",
    "not propagated by configuration",
    "not observed",
)
DIRECTIVE = "proxy_ignore_client_abort"


def analyse(
    orphans: dict | None, th: Thresholds, conf: dict | None = None, callers_seen: bool = True
) -> dict | None:
    """The cancellation object from correlation.json's ``orphans`` section (None without a correlation), with
    the gateway configuration of the folder (``gateway_config.read``) when there is one. ``callers_seen``: the
    folder holds a caller's or a gateway's record of the attempts (where a caller leaving is seen); without one,
    0 abandoned is no fact."""
    if not orphans or orphans.get("abandoned") is None:
        return None
    abandoned = int(orphans["abandoned"])
    # no vLLM request line in the input (correlate.abandon.summary): no abort, finish or orphan could be seen
    engine_seen = "abort_lines" not in orphans or orphans["abort_lines"] is not None
    aborted = int(orphans.get("aborted") or 0) if engine_seen else None
    raced = int(orphans.get("finished_in_race") or 0) if engine_seen else None
    ran_on = int(orphans.get("count") or 0) if engine_seen else None
    out = {
        "abandoned": abandoned,
        "aborted": aborted,
        "finished_in_race": raced,
        "ran_on": ran_on,
        "ran_on_s": orphans.get("generation_s_after_caller_left") if engine_seen else None,
        "ran_on_median_s": orphans.get("median_s_after_caller_left") if engine_seen else None,
        "ran_on_share": (ran_on / abandoned) if abandoned and ran_on is not None else None,
        "aborted_share": (aborted / abandoned) if abandoned and aborted is not None else None,
        "callers_left": orphans.get("callers_left"),
        "race_s": orphans.get("race_s"),
        "gateway_setting": setting(conf),
        "callers_seen": callers_seen,
        "engine_seen": engine_seen,
        "thresholds": {
            "cancel_ran_on_max_share": th.cancel_ran_on_max_share,
            "cancel_aborted_min_share": th.cancel_aborted_min_share,
        },
    }
    out["verdict"] = _state(out, th)
    return out


def left_span(req: pl.DataFrame) -> tuple | None:
    """When callers were leaving: the first start to the last end of the requests that ended in a timeout or were
    in flight when their client stopped (the listeners of that time are the ones whose setting decides)."""
    if not req.height or "outcome" not in req.columns:
        return None
    left = req.filter(pl.col("outcome").is_in(["timeout", "unfinished"]))
    if not left.height:
        return None
    end = pl.col("ts_end").fill_null(pl.col("ts_start")) if "ts_end" in left.columns else pl.col("ts_start")
    lo, hi = left.select(pl.col("ts_start").min(), end.max()).row(0)
    return (lo, hi) if lo is not None and hi is not None else None


def setting(conf: dict | None) -> dict | None:
    """``proxy_ignore_client_abort`` of the listeners the traffic went through: {value: on|off|mixed, ports,
    set: whether nginx.conf sets it or it is nginx's default}; None when no configuration is in the folder."""
    if conf is None or not conf.get("ports"):
        return None
    vals = {p: conf["listeners"][p][DIRECTIVE] for p in conf["ports"]}
    on = sorted(p for p, v in vals.items() if v == "on")
    value = "on" if len(on) == len(vals) else "off" if not on else "mixed"
    return {
        "value": value,
        "ports": sorted(vals),
        "ports_on": on,
        "set": all(DIRECTIVE in conf["set"].get(p, []) for p in vals),
    }


def _state(c: dict, th: Thresholds) -> str:
    if not c["abandoned"] or not c.get("callers_seen", True) or not c.get("engine_seen", True):
        return "not observed"  # no caller left before its answer, or no engine record to tell what it did
    if not c["aborted"]:
        if (c.get("gateway_setting") or {}).get("value") == "on":
            return "not propagated by configuration"
        return "not propagated" if c["ran_on_share"] > th.cancel_ran_on_max_share else "not observed"
    if c["ran_on_share"] <= th.cancel_ran_on_max_share:
        return "propagated"
    if c["aborted_share"] <= th.cancel_aborted_min_share:
        return "not propagated"
    return "partly"


def claim(c: dict | None) -> Claim | None:
    """The cancellation claim of the object ``analyse`` made."""
    if c is None:
        return None
    gw = c.get("gateway_setting")
    facts = [
        Fact(
            "abandoned",
            c["abandoned"] if c.get("callers_seen", True) else None,
            "correlation",
            unit="attempts",
        ),
        Fact("aborted", c["aborted"], "engine_log", unit="attempts"),
        Fact("finished_in_race", c["finished_in_race"], "correlation", unit="attempts"),
        Fact("ran_on", c["ran_on"], "correlation", unit="attempts"),
        Fact("ran_on_s", c["ran_on_s"], "correlation", unit="s of generation"),
        Fact("race_s", c["race_s"], "correlation", unit="s window"),
        Fact(DIRECTIVE, gw["value"] if gw else None, "nginx_conf"),
        Fact("listeners", ", ".join(f":{p}" for p in gw["ports"]) if gw else None, "nginx_conf"),
    ]
    missing = []
    if c["verdict"] == "not observed":
        missing = (
            [
                "caller's or gateway's record of the attempts (no client or gateway log in the folder): whether "
                "a caller left is unknown"
            ]
            if not c.get("callers_seen", True)
            else ["an attempt abandoned by its caller"]
            if not c["abandoned"]
            else [
                "vLLM request line (its log with --enable-log-requests: 'Aborted request' lines): whether vLLM "
                "aborted the abandoned attempts is unknown"
            ]
            if not c.get("engine_seen", True)
            else ["an abort by vLLM (every abandoned attempt finished within the race window)"]
        )
    return Claim(
        "cancellation",
        "cancellation",
        "cancellation of attempts abandoned by their callers",
        c["verdict"],
        facts,
        dict(c["thresholds"]),
        missing,
    )
