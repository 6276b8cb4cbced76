"""Which servers died in each run, and whether they came back: analyze's server_lifecycle (summary.json), read
as it stands. A whole-run figure of a run whose server was down for part of it holds the outage; crash against
kill-norestart, or traced-1r against traced-2r-kill, said nothing of the deaths behind their success shares.

A run whose analysis has no server_lifecycle, or no server log, has its deaths unknown (named), never none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..report.fmt import hms
from .runs import Run

# the words analyze's report uses for how a server died (report.views)
KIND_WORDS = {
    "silent": "killed without a trace",
    "kernel_oom": "killed by the kernel OOM killer",
    "oom_killed": "OOMKilled",
    "gpu_xid": "after a GPU fault",
    "oom": "died out of memory",
    "engine_dead": "died (its engine process gone)",
    "engine_timeout": "died (its engine timed out)",
}


@dataclass
class Death:
    replica: str | None
    ts: str | None
    kinds: list[str]
    at_startup: bool
    ready: str | None  # when a server in its place was ready again (None: not before the logs end)
    downtime_s: float | None
    another_server: bool  # what started in its place is another server (other arguments), not a restart

    def words(self) -> str:
        how = ", ".join(KIND_WORDS.get(k, k) for k in self.kinds) or "died"
        who = self.replica or "the server"
        when = "at start-up, before serving any request" if self.at_startup else f"at {hms(self.ts)}"
        if self.ready is None:
            back = "not back before the logs end"
        elif self.another_server:
            back = f"another server in its place ready at {hms(self.ready)}"
        else:
            # the server log's stamps are whole seconds: so is the downtime
            down = f", down {round(self.downtime_s)} s" if self.downtime_s is not None else ""
            back = f"ready again at {hms(self.ready)}{down}"
        return f"{who} {how} {when} ({back})"


@dataclass
class Lifecycle:
    deaths: list[Death] | None  # None: unknown
    missing: str | None = None  # what is missing when unknown
    starts: int | None = None
    restarted: list[str] = field(default_factory=list)

    def text(self) -> str:
        if self.deaths is None:
            return f"unknown ({self.missing})"
        if not self.deaths:
            return "no server died"
        return "; ".join(d.words() for d in self.deaths)


def read(run: Run) -> Lifecycle:
    life = run.doc("summary").get("server_lifecycle")
    if not isinstance(life, dict):
        return Lifecycle(None, "the analysis has no server_lifecycle")
    if run.table("server_events").height == 0:
        return Lifecycle(None, "no server log")
    deaths = [
        Death(
            replica=d.get("replica"),
            ts=d.get("ts"),
            kinds=list(d.get("kinds") or []),
            at_startup=bool(d.get("at_startup")),
            ready=d.get("ready"),
            downtime_s=d.get("downtime_s"),
            another_server=(d.get("same_server") or {}).get("state") == "two servers",
        )
        for d in life.get("deaths") or []
    ]
    return Lifecycle(deaths, starts=life.get("starts"))


def shown(life: Lifecycle) -> dict:
    """compare.json's lifecycle of one run."""
    return {
        "deaths": None if life.deaths is None else len(life.deaths),
        "back": None if life.deaths is None else sum(d.ready is not None for d in life.deaths),
        "starts": life.starts,
        "missing": life.missing,
        "text": life.text(),
        "each": None
        if life.deaths is None
        else [
            {
                "replica": d.replica,
                "ts": d.ts,
                "kinds": d.kinds,
                "at_startup": d.at_startup,
                "ready": d.ready,
                "downtime_s": d.downtime_s,
            }
            for d in life.deaths
        ],
    }


def line(a: Lifecycle, b: Lifecycle) -> str | None:
    """The verdict's line when a server died in either run; None when none did (or nothing is known)."""
    if not (a.deaths or b.deaths):
        return None
    return f"A server died: in A, {a.text()}; in B, {b.text()}. A run's whole-run figures include its outage."
