"""Several deaths in one log stream: one server's crash loop, or deaths of different servers. The verdict called
any two like deaths on one replica 'a crash loop'; each death's ``same_server`` (lifecycle, diagnose.same_server)
says whether the start after it is this server restarted or another server, and the loop is claimed only as far as
those say one server. A stream holding lab crash's server up to its kill, then traced-2r-kill's server b (another
address), read '2 server deaths ... (a crash loop)'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .. import clock


@dataclass(frozen=True)
class DeathRun:
    """Like deaths on one replica's stream, with what each start between two of them was."""

    replica: str
    times: tuple[datetime, ...]  # the deaths, in time order
    another: tuple[
        tuple[datetime, str], ...
    ]  # (death, 'address a → b'): the start after it is another server
    unknown: tuple[str, ...]  # why the start after a death is not known to be the same server or another

    @property
    def state(self) -> str:
        """'one server' (a crash loop), 'several servers' or 'unknown' (a start after a death not identified)."""
        return "several servers" if self.another else "unknown" if self.unknown else "one server"

    def words(self) -> str:
        """The headline's lead: how many deaths, from when to when, and whether they are one server's loop."""
        first, last = self.times[0], self.times[-1]
        span = f"{len(self.times)} server deaths on {self.replica or 'one replica'} from {clock.hms(first)} to {clock.hms_after(first, last)}"
        if self.state == "one server":
            return f"{span} (a crash loop)"
        if self.state == "unknown":
            return (
                f"{span} (a crash loop if each start after a death is the same server back: unknown, "
                f"{'; '.join(self.unknown)})"
            )
        t, changed = self.another[0]
        return (
            f"{span}, of {len(self.another) + 1} different servers, not one crash loop (the start after the death at "
            f"{clock.hms(t)} is another server: {changed})"
        )


def of(ctx, like: list) -> DeathRun:
    """The run of ``like`` crash episodes (one replica, time order), read from each death's ``same_server``."""
    another, unknown = [], []
    for e in like[:-1]:  # the last death's next start, if any, has no death after it to link
        d = ctx.deaths.get((e["start"], e["replica"] or None))
        same = d.same_server if d is not None else None
        if same is None:
            unknown.append(f"no start logged after the death at {clock.hms(e['start'])}")
        elif same.state == "two servers":
            changed = ", ".join(f"{k} {same.before[k]} → {same.after[k]}" for k in same.differs)
            another.append((e["start"], changed))
        elif same.state == "unknown":
            unknown.append(f"after the death at {clock.hms(e['start'])}: {'; '.join(same.missing)}")
    return DeathRun(like[0]["replica"] or "", tuple(e["start"] for e in like), tuple(another), tuple(unknown))
