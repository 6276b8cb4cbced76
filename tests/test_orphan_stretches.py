"""The orphaned-work finding says where its executions fall (#37 item 9: no part of the page contradicts another).
abort-ignored's finding counted 55 executions for callers that had left while its episodes held orphans stretches of
47 and 6: two true figures that read as a contradiction. The finding's evidence now names each stretch, its episodes
and what falls outside any, adding up to its title's count; checked on abort-ignored and orphan (lab)."""

from __future__ import annotations

import re

import pytest

from conftest import LAB, need

PART = re.compile(r"(\d[\d,]*) (\d\d:\d\d:\d\d–\d\d:\d\d:\d\d) \(beside ([E\d, ]+)\)")


@pytest.mark.parametrize("run", ["abort-ignored", "orphan"])
def test_the_orphan_findings_parts_add_up_to_its_count(analyzed, run):
    _, _, diag = analyzed(need(LAB / run))
    f = next(f for f in diag["findings"] if f["title"].startswith("Orphaned work: "))
    total = int(re.search(r"Orphaned work: (\d+)", f["title"]).group(1))
    parts = PART.findall(f["evidence"])
    assert parts, f["evidence"]
    rest = re.search(r", (\d+) outside any stretch", f["evidence"])
    assert sum(int(n) for n, _, _ in parts) + (int(rest.group(1)) if rest else 0) == total
    # each part is a stretch the episodes hold, with that count
    held = {}
    for e in diag["episodes"]:
        for c in [e] if e["signal"] == "orphans" else e["details"].get("companions") or []:
            if c["signal"] == "orphans":
                held.setdefault(c["count"], set()).add(e["episode_id"])
    for n, _, eps in parts:
        assert int(n) in held and set(eps.split(", ")) == held[int(n)]
