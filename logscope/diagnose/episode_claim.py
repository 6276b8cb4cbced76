"""The claim of an episode's class (``claims.Claim``): the rule ``episodes`` decided it by and the facts that rule
read, with what was missing when it decided nothing."""

from __future__ import annotations

from .claims import REQUIRED, Claim, Fact
from .load_words import short
from .records import Episode
from .stretches import REQUEST_SIGNALS
from .thresholds import Thresholds

CLASS_STATE = {"crash": "crash", "sustained": "sustained", "spike": "one-off", "recurring": "recurring"}
RULE_WORDS = {
    "stopped": "still abnormal when its server was stopped",
    "ends_abnormal": "still abnormal when the logs end",
    "load_end": "no recovery while the load lasted",
    "load_fell": "it ended only when its load fell",
    "load_paused": "it ended when its load paused",
    "drained": "it began after the last arrival and drained with no new load",
}

# a class decided by 'ends_abnormal' saw no recovery because the logs stop inside it, not a regime shown to last:
# the verdict and every title of it carry this qualifier (vllm-public 03, public-2 s01: queues draining to the end)
AS_FAR = "as far as the logs show"


def cut_by_end(e: Episode | dict) -> bool:
    """Sustained only in that the logs (or the range) end while it is still abnormal."""
    return e["class"] == "sustained" and (e.get("decided_by") or {}).get("rule") == "ends_abnormal"


def claim(e: Episode, th: Thresholds) -> Claim:
    """The claim of an episode's class: the rule that decided it and the facts that rule read."""
    d = dict(e.get("decided_by") or {})
    state = CLASS_STATE.get(e["class"], e["class"])
    facts = [
        Fact("episode", e["episode_id"]),
        Fact("signal", e["signal"]),
        Fact("replica", e["replica"]),
        Fact("start", (e["start"])),
        Fact("end", (e["end"])),
        # a request signal recovered on the requests after it, a server signal on its stats samples
        Fact("recovered", e["recovered"], "requests" if e["signal"] in REQUEST_SIGNALS else "server_stats"),
        Fact("rule", d.get("rule")),
        Fact("rule_words", RULE_WORDS.get(d.get("rule", ""))),
    ]
    for k in ("arrival_rate_before", "arrival_rate_during", "arrival_rate_after"):
        facts.append(Fact(k, d.get(k, e[k]), "requests", unit="/s"))
    if short(e):  # no rate over less than a second: the requests started in it, and its span
        n = (e["details"].get("requests_during") or {}).get("requests")
        facts.append(Fact("arrivals_during", n, "requests", unit=f"requests within {e['duration_s']:.1f} s"))
    facts += [
        # a latency stretch of the requests: the requests under the SLO after it, at its load, though arrivals fell
        Fact("arrival_rate_kept", d.get("arrival_rate_kept"), "requests", unit="/s"),
        Fact("last_arrival", (d.get("last_arrival")), "requests"),
        Fact("stopped_at", (d.get("stopped_at")), "engine_log"),
        Fact("samples_after", d.get("samples_after"), "server_stats"),
        Fact(
            "samples",
            e["count"] if e["signal"] in ("kv_pressure", "queue", "stall") else None,
            "server_stats",
        ),
        Fact("spikes", d.get("spikes")),
        Fact("spacing_s", d.get("spacing_s"), unit="s between starts"),
        Fact("spacing_min_s", d.get("spacing_min_s"), unit="s between starts"),
        Fact("spacing_max_s", d.get("spacing_max_s"), unit="s between starts"),
        Fact("regular", d.get("regular")),
        Fact("came_after", d.get("came_after"), "requests"),
        Fact("beats_recovered", d.get("beats_recovered")),
        Fact("beats_steady", d.get("beats_steady"), "requests"),
        Fact("beats_after_surge", d.get("beats_after_surge"), "requests"),
        Fact("beats_total", d.get("beats_total")),
        Fact("beats_phase", d.get("beats_phase"), "requests"),
        Fact("death_kinds", d.get("death_kinds"), "engine_log"),
        Fact("death_ts", (d.get("death_ts")), "engine_log"),
        Fact("ready_ts", (d.get("ready_ts")), "engine_log"),
    ]
    missing = []
    if state == "one-off" and d.get("rule") == "drained":
        missing.append("arrivals after it: whether it recurs under load was not put to the test")
    elif state == "one-off" and e["arrival_rate_after"] is None:
        missing.append("the load after it (no request log): recovered, at an unknown load")
    return Claim(
        f"episode.{e['episode_id']}",
        "episode_class",
        f"{e['episode_id']} ({e['signal']}): one-off or sustained",
        state,
        [f for f in facts if f.value is not None or f.name in REQUIRED.get(("episode_class", state), ())],
        {
            "recovery_load_ratio": th.recovery_load_ratio,
            "load_end_tolerance_s": th.load_end_tolerance_s,
            "recurring_min": th.recurring_min,
        },
        missing,
    )
