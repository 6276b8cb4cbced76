"""Recurring episodes: ``recurring_min`` or more spikes of one signal become one pattern (``mark``); the reason
gives their spacing and the load at each beat (``beats``). A sustained episode of that signal on a replica of the
pattern, sustained only because its log ends inside it (no longer than the pattern's longest spike), is its last
spike, cut short.
"""

from __future__ import annotations

from . import beats
from .beats import regular, spacing_words
from .episode_class import hms
from .records import Episode
from .thresholds import Thresholds

RECURRING_SHOWN = 8  # start times named in a recurring pattern's reason (then '… n more …' and the last)


def _cut_short(e: Episode, longest_s: float) -> bool:
    """Sustained only because its replica's samples stop inside it: no longer than the pattern's spikes."""
    return e["class"] == "sustained" and not e["recovered"] and e["duration_s"] <= longest_s


def mark(eps: list[Episode], th: Thresholds) -> None:
    by_sig: dict[str, list[Episode]] = {}
    for e in eps:
        if e["class"] == "spike":
            by_sig.setdefault(e["signal"], []).append(e)
    for sig, group_ in by_sig.items():
        # a spike of the pattern that its log's end cut short is one more of them, not a regime of its own (the
        # 1 GB bench folder's last ladder copy was a 'Sustained' finding above the pattern it repeats); its
        # reason keeps 'still abnormal when the logs end'
        on = {e["replica"] for e in group_}
        longest = max(e["duration_s"] for e in group_)
        group_ = sorted(
            group_ + [e for e in eps if e["signal"] == sig and e["replica"] in on and _cut_short(e, longest)],
            key=lambda e: e["start"],
        )
        # spikes starting together on several replicas are one time, not a rhythm (their spacing would be 0 s)
        starts = sorted({e["start"] for e in group_})
        if len(starts) < th.recurring_min or len(starts) == len([e for e in group_ if e["class"] != "spike"]):
            continue
        beat = beats.of(group_)
        if (
            beat.one_offs()
        ):  # each after a surge of its own load: the load recurred, each spike is its one-off
            continue
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
        gaps.sort()
        med = gaps[len(gaps) // 2]
        # a long incident can hold hundreds: name the first few and the last
        shown = (
            [hms(s) for s in starts]
            if len(starts) <= RECURRING_SHOWN + 1
            else (
                [hms(s) for s in starts[:RECURRING_SHOWN]]
                + [f"… {len(starts) - RECURRING_SHOWN - 1} more …", hms(starts[-1])]
            )
        )
        noun = sig.removesuffix("s").replace("_", " ").replace("ttft", "TTFT").replace("kv ", "KV ")
        # spikes of several replicas at the same times: so many spikes, at so many times
        times = f" at {len(starts)} times" if len(starts) < len(group_) else ""
        why = f"{len(group_)} {noun} spikes{times}, starting {spacing_words(gaps, th)}, {beat.words()}"
        first = min(group_, key=lambda e: e["start"])
        for e in group_:
            e["class"] = "recurring"
            e["why"] = why
            kept = (e.get("decided_by") or {}).get(
                "arrival_rate_kept"
            )  # why a beat counts as recovered, kept
            e["decided_by"] = {
                "rule": "recurring",
                "spikes": len(group_),
                "spacing_s": med,
                "spacing_min_s": gaps[0],
                "spacing_max_s": gaps[-1],
                "regular": regular(gaps, th),
                # the facts 'recurring' rests on beside the spacing: the load at each beat, each one's recovery
                "beats_recovered": beat.recovered,
                "beats_steady": beat.steady,
                "beats_after_surge": beat.surge,
                "beats_total": sum(beat.counts),
                "beats_phase": beat.phase,
            }
            if kept is not None:
                e["decided_by"]["arrival_rate_kept"] = kept
            # the start times once, on the first; the others point to it (a day can hold hundreds of them)
            where = f" ({', '.join(shown)})" if e is first else f", the first {hms(starts[0])}"
            e["reason"] = f"{why}{where}; this one: {e['reason']}"
