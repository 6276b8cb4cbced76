"""Verdicts stable under changes that should not change them, on every lab recording: every clock shifted
by one offset; the same server's calm hour before laid beside as its rotated logs, and after as its current
ones; a calm replica beside it; a --since/--until range narrowed around each episode, keeping it whole and a
baseline before it. Each transform must leave every episode's class unchanged (tests/metamorphic.py builds the
transformed folders from the real files)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, correlate, diagnose, ingest
from metamorphic import calm_hour_after, calm_hour_before, calm_replica_beside, copy_shifted

RUNS = (
    "calm",
    "crash",
    "ladder",
    "orphan",
    "retry-storm",
    "spike",
    "v0-ladder",
    # recorded like the others (../shared/fixtures/lab), and this round's (#37)
    "calm-b",
    "spike-b",
    "storm-b",
    "ladder-b",
    "abort-ignored",
    "killed-debug",
    "seqs-64",
    "seqs-32",
    "seqs-16",
    "seqs-8",
    "overload-long",
    "enginecore-kill",
    "kv-short",
    "traced-1r",
    "gateway-queue",  # a queue in nginx's rate limit in front of an idle engine (#37 item 3)
    "kv-blip",  # one stats line at KV 93.8 % between calm ones: context, not a finding (#37 item 8)
    "frontend-bound",  # callers' TTFT p95 hovering at the 2 s SLO under 48 streams (flipped, fixed: below)
    "traced-2r-kill",  # two replicas, one killed, their /metrics tied to each log by its address (known, below)
    "ladder-gaveup",  # a ladder whose callers gave up at its top step: 'censored' there, the boundary below (evid21)
    "two-servers-one-port",  # two servers of other limits on one port and log, graceful stops, calm (lab7)
    "kill-norestart",  # the only replica SIGKILLed, never back: a death read from the refused connects (refused.py)
    "kv-short-refused",  # vLLM refusing to start on a KV cache below one max-length request, no traffic (#37)
    "ladder-gaveup-3s",  # ladder-gaveup's ladder with a 3 s client timeout (evid21)
    "oom-cgroup",  # the engine killed by its cgroup's OOM killer, nginx answering 502 (kernel.log beside)
    "traced-ladder",  # one traced replica under a 1-32 stream ladder, spans joined to requests (#38)
    "traced-ladder-kill",  # traced-ladder's replica SIGKILLed in its c=16 step, the unsent span batch lost (#38)
)
WINDOWED = (
    "errors",
    "retries",
)  # request signals counted per window (stretches._request_stretches; TTFT and e2e are the requests', slow.py)
SHIFT = timedelta(days=1, hours=3, minutes=17, seconds=13)  # not a multiple of any window

# Was known (#37, fixed): abort-ignored (0.9 req/s, callers timing out every few seconds) held its errors at their
# per-window floor (3 failed in a 2 s window), and a calm hour before widened the windows (2 s to 10 s) and took its
# errors spike away. The errors signal is now built from the failed requests themselves (diagnose/failures.py), each
# once, in stretches of failures within merge_gap_s judged against the SLO's success share: no window width in it.


# Found when kv-short and traced-1r joined (#37), both fixed: a calm replica's requests beside kv-short carried the
# fleet's arrivals past its last request, so its drained queue read 'sustained' again (the last arrival is now the
# episode's replica's); a calm hour before traced-1r turned its cancellation 'propagated' into 'not observed' (the
# rotated nginx log's layout was the stream's and the incident's own log went unread; each file brings its layouts).


# Was known (evidence6, fixed by evid7): a calm hour before frontend-bound widened the correlate windows from 2 s to
# 10 s (their width is the span / 120) and its 4 'recurring' TTFT spikes (p95 2.2-12.7 s in 2 s windows, around the
# 2 s SLO) became one 70 s 'spike'. TTFT and e2e are now built from the answered requests themselves (diagnose/slow.py:
# the slow ones within merge_gap_s of each other, kept when the p95 of those started in them is above the SLO).
# Was known (evidence6, fixed in evid8): a calm log that also says 'Starting vLLM server on http://127.0.0.1:8001'
# made traced-2r-kill's 127.0.0.1:8001 target claimed by two logs, weighed against every log, and left untied (10 ->
# 19 episodes). Only the claimants are weighed now: by time (the calm hour before), then by series (the calm replica
# beside: correlation 0.97 vs 0.20), in ingest.metric_claims.
_CALM_BEFORE: dict = {}
# Found when the calm hour after joined, fixed: kv-short's drained backlog read 'sustained' with the calm run laid
# 13 minutes after it (its 'last arrival' was then the calm run's); arrivals after the recovery window are another load.
# Found when kill-norestart joined (lab7), fixed: it read no death (its headline was the retries, 'sustained'); a
# calm run laid after it (a server started in the same log) made the kill a silent death, and a calm replica beside it
# carried arrivals past the retries' end ('spike'). A death is now read from the refused connects (diagnose/refused.py)
# and timed by the killed process's own last line (lifecycle._silent), whatever follows it.
_CALM_AFTER: dict = {}
# Joined in evid28, no flip: kv-short-refused, ladder-gaveup-3s, oom-cgroup, traced-ladder, traced-ladder-kill (every
# claim's state was compared too, and the layouts of test_metamorphic_layout all at once). Not asserted, and kept:
# traced-ladder-kill's crash (no restart) lasts to the folder's last line, so a calm replica beside (11:16:00 ->
# 11:17:18) or a restart after it (-> 11:25:49) lengthens E1 and its e2e clock gap reads 'censored' (16 of 203
# callers cut) instead of 'unknown' (a 2.2 s range, under twice the callers' p95): either way the gap is not known.
_REPLICA: dict = {}


def _runs(marks: dict | None = None) -> list:
    marks = marks or {}
    return [pytest.param(r, marks=marks[r]) if r in marks else r for r in RUNS]


def _diagnosed(folder, out, **opts) -> dict:
    o = AnalyzeOptions(**opts)
    ingest(folder, out, o)
    correlate(out, o)
    return diagnose(out, o)


def _t(x: str | datetime) -> datetime:
    return x if isinstance(x, datetime) else datetime.fromisoformat(x.replace("Z", "+00:00"))


def _classes(diag: dict, lo: datetime | None = None, hi: datetime | None = None) -> list[tuple[str, str]]:
    """(signal, class) of every episode, by start; with lo/hi only those starting inside."""
    eps = sorted(diag["episodes"], key=lambda e: _t(e["start"]))
    return [
        (e["signal"], e["class"])
        for e in eps
        if (lo is None or _t(e["start"]) >= lo) and (hi is None or _t(e["start"]) <= hi)
    ]


def _lead(diag: dict) -> tuple:
    """What the verdict leads with: finding 1's kind and severity, and its episode's signal and class."""
    f = diag["findings"][0]
    ep = next((e for e in diag["episodes"] if e["episode_id"] == f["episode_id"]), None)
    return f["kind"], f["severity"], ep and (ep["signal"], ep["class"])


def _states(diag: dict) -> dict[str, str]:
    """The states of the claims a transform must not move: the verdict's, cancellation's, the ladder's boundary
    and steps', and 'nothing alarming'."""
    keep = ("verdict", "cancellation", "calm", "ladder.")
    return {c["id"]: c["state"] for c in diag["claims"] if c["id"].startswith(keep)}


@pytest.fixture(scope="module")
def base(lab_diagnosed) -> dict[str, dict]:
    return lab_diagnosed  # conftest's, once a session: tests/test_metamorphic_layout.py compares with it too


@pytest.mark.parametrize("run", RUNS)
def test_every_clock_shifted(run, base, tmp_path):
    """One offset on every clock of the folder (a day, hours, and 13 s off every window's grid): the same
    classes, the episodes shifted by the same offset."""
    copy_shifted(LAB / run, tmp_path / "in", SHIFT)
    got = _diagnosed(tmp_path / "in", tmp_path / "out")
    assert _classes(got) == _classes(base[run])
    assert _lead(got) == _lead(base[run])
    assert _states(got) == _states(base[run])
    # a per-window signal starts on its window's edge, which the 13 s moves on the grid: within one window
    w = timedelta(seconds=base[run]["observed"]["window_s"] or 0)
    for g, b in zip(got["episodes"], base[run]["episodes"], strict=True):
        moved = abs(_t(g["start"]) - SHIFT - _t(b["start"]))
        assert moved == timedelta(0) or (b["signal"] in WINDOWED and moved < w), (b["episode_id"], moved)


@pytest.mark.parametrize("run", _runs(_CALM_BEFORE)[1:])
def test_calm_hour_before(run, base, tmp_path):
    """The same server's calm run ten minutes before the incident, as the rotated logs before it: more calm
    time in the span changes no class (the rule 'a large share of the observed span' did)."""
    lo = calm_hour_before(LAB / run, need(LAB / "calm"), tmp_path / "in")
    got = _diagnosed(tmp_path / "in", tmp_path / "out")
    assert _classes(got, lo=lo - timedelta(minutes=5)) == _classes(base[run])
    assert _lead(got) == _lead(base[run])  # the headline does not move with calm time
    assert _states(got) == _states(base[run])


@pytest.mark.parametrize("run", _runs(_CALM_AFTER)[1:])
def test_calm_hour_after(run, base, tmp_path):
    """The same server's calm run ten minutes after the incident, its logs the current files and the incident's
    rotated before them: calm time after an incident changes no class, no headline and no claim's state."""
    hi = calm_hour_after(LAB / run, need(LAB / "calm"), tmp_path / "in")
    got = _diagnosed(tmp_path / "in", tmp_path / "out")
    assert _classes(got, hi=hi + timedelta(minutes=5)) == _classes(base[run])
    assert _lead(got) == _lead(base[run])
    assert _states(got) == _states(base[run])


@pytest.mark.parametrize("run", _runs(_REPLICA)[1:])
def test_calm_replica_beside(run, base, tmp_path):
    """A second replica's calm server log over the same minutes: the incident's classes stay."""
    calm_replica_beside(LAB / run, need(LAB / "calm"), tmp_path / "in")
    got = _diagnosed(tmp_path / "in", tmp_path / "out")
    assert _classes(got) == _classes(base[run])
    assert _lead(got)[:2] == _lead(base[run])[:2]


@pytest.mark.parametrize("after_s", [12, 30])
@pytest.mark.parametrize("run", [r for r in RUNS if r != "calm"])
def test_range_around_each_episode(run, after_s, base, tmp_path):
    """--since/--until around each episode, holding it whole and its baseline lookback (and the lead-in)
    before it, the tables re-correlated and re-diagnosed as `logscope report OUT --since --until` does: the
    episode keeps its class."""
    diag = base[run]
    th = diag["thresholds"]
    out = tmp_path / "out"
    ingest(LAB / run, out, AnalyzeOptions())
    for e in diag["episodes"]:
        if e["class"] == "recurring":  # a range around one beat of a pattern holds one spike: it is one there
            continue
        pad = timedelta(seconds=th["baseline_lookback_s"] + th["merge_gap_s"] + 5)
        start, end = _t(e["start"]), _t(e["end"])
        opts = AnalyzeOptions(since=start - pad, until=end + timedelta(seconds=after_s))
        correlate(out, opts)
        got = diagnose(out, opts)
        same = [
            g
            for g in got["episodes"]
            if g["signal"] == e["signal"] and _t(g["start"]) <= end and _t(g["end"]) >= start
        ]
        assert same, f"{run} {e['episode_id']} ({e['signal']}) vanished in its range"
        assert {g["class"] for g in same} == {e["class"]}, (run, e["episode_id"], [g["why"] for g in same])
