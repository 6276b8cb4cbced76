"""Was cancellation propagated? One object, read by every output: the attempts whose callers left (client
timeout, gateway 499, gateway upstream timeout), how many the server aborted, how many finished in the race
before an abort could arrive, how many ran on for nobody (orphaned) and for how long, and the verdict.

The counts are correlate's (``correlation.json`` ``orphans``, one row per server execution); the verdict
is decided here by two named thresholds (``thresholds.py``): at most ``cancel_ran_on_max_share`` of the
abandoned attempts ran on -> ``propagated``; at most ``cancel_aborted_min_share`` of them were aborted ->
``not propagated``; in between -> ``partly``. A finish within the race window is no missing cancellation.
"""

from __future__ import annotations

from .thresholds import Thresholds

VERDICTS = ("propagated", "partly", "not propagated")


def analyse(orphans: dict | None, th: Thresholds) -> dict | None:
    """The cancellation object from correlation.json's ``orphans`` section; None without a correlation."""
    if not orphans or orphans.get("abandoned") is None:
        return None
    abandoned = int(orphans["abandoned"])
    aborted = int(orphans.get("aborted") or 0)
    raced = int(orphans.get("finished_in_race") or 0)
    ran_on = int(orphans.get("count") or 0)
    out = {
        "abandoned": abandoned,
        "aborted": aborted,
        "finished_in_race": raced,
        "ran_on": ran_on,
        "ran_on_s": orphans.get("generation_s_after_caller_left"),
        "ran_on_median_s": orphans.get("median_s_after_caller_left"),
        "ran_on_share": (ran_on / abandoned) if abandoned else None,
        "aborted_share": (aborted / abandoned) if abandoned else None,
        "callers_left": orphans.get("callers_left"),
        "race_s": orphans.get("race_s"),
        "thresholds": {
            "cancel_ran_on_max_share": th.cancel_ran_on_max_share,
            "cancel_aborted_min_share": th.cancel_aborted_min_share,
        },
    }
    out["verdict"] = _verdict(out, th)
    out["text"] = text(out)
    return out


def _verdict(c: dict, th: Thresholds) -> str | None:
    if not c["abandoned"]:
        return None  # no caller left before its answer: nothing to propagate
    if c["ran_on_share"] <= th.cancel_ran_on_max_share:
        return "propagated"
    if c["aborted_share"] <= th.cancel_aborted_min_share:
        return "not propagated"
    return "partly"


def text(c: dict | None) -> str | None:
    """The one sentence every output says about it."""
    if c is None:
        return None
    if not c["abandoned"]:
        return "no caller left before its answer: cancellation was not put to the test"
    parts = [f"vLLM aborted {c['aborted']}"]
    if c["finished_in_race"]:
        parts.append(
            f"{c['finished_in_race']} finished within {c['race_s']:g} s of the caller leaving (a race)"
        )
    ran = f"{c['ran_on']} ran on for nobody"
    if c["ran_on"] and c.get("ran_on_s") is not None:
        ran += f" ({c['ran_on_s']:,.0f} s of generation after their callers left)"
    parts.append(ran)
    return (
        f"cancellation {c['verdict']}: of {c['abandoned']} attempts abandoned by their callers, "
        + ", ".join(parts)
    )
