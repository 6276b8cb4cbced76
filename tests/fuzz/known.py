"""Failures the fuzzer finds whose fix belongs to another branch of issue #30 (robust: impossible dates,
CR line ends, absurd numbers and timestamps, path oddities, parsers' silent loss; cli: options and the
output folder). A failure matching one is reported apart, as known, and does not fail the CI run; each
has its reproducer in test_reproducers.py, marked xfail. When the fix lands, the entry stops matching
(the runner says so) and can go."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    id: str
    prop: str  # the harness property that fails
    detail: str  # a regex on the failure's detail
    owner: str  # the branch whose scope it is
    reason: str

    def matches(self, prop: str, detail: str) -> bool:
        return prop == self.prop and re.search(self.detail, detail) is not None


# Empty: every failure listed here has its fix on main, and its reproducer is a plain regression test in
# test_reproducers.py (the last, a folder name not UTF-8 as the replica's name, fixed with seed 2026 case 22). A
# failure of another branch's scope found again goes here, with its reproducer, until that fix lands.
KNOWN: list[Known] = []


def classify(prop: str, detail: str) -> Known | None:
    return next((k for k in KNOWN if k.matches(prop, detail)), None)
