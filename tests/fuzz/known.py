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


KNOWN: list[Known] = [
    Known("non-utf8-name", "exit", r"UnicodeEncodeError: .*surrogates not allowed", "robust (path oddities)",
          "a file or folder name that is not UTF-8 (bytes ff fe) ends in exit 70; "
          "test_reproducers.py::test_a_file_name_that_is_not_utf8"),
    Known("nginx-one-line-regex", "memory", r"memory allocation of \d+ bytes failed at parsers/_nginx_format\.py",
          "robust (CR line endings, glued lines)",
          "a whole nginx log in one line (lone CRs): the layout inferred from its key=value pairs compiles to a "
          "regex that allocates GBs; test_reproducers.py::test_an_nginx_log_with_cr_line_ends"),
    Known("impossible-date-head", "exit", r"ValueError: (day is out of range for month|month must be in 1\.\.12|"
          r"year -?\d+ is out of range)", "robust (impossible dates)",
          "a date such as 2026-02-30 in a file's first lines raises in ingest's reference-year search "
          "(ingest._full_stamps); test_reproducers.py::test_an_impossible_date_in_the_head"),
    Known("inf-metric-value", "exit", r"InvalidOperationError: conversion from `f64` to `i64` failed",
          "robust (huge numbers)",
          "'inf' for a sample value or timestamp of a promtool dump makes ingest's derived stats cast inf to an "
          "integer (metric_stats._derive); test_reproducers.py::test_inf_in_a_tsdb_dump"),
    Known("epoch-zero-span-png", "timeout", r"at logscope/report/__init__\.py:\d+ in draw", "robust (absurd timestamps)",
          "a Prometheus answer whose timestamps read 0 (1e-400) makes a span from 1970: 20,787 windows, and a "
          "3 KB input takes 85-100 s (mostly drawing timeline.png) instead of ~10 s: past the timeout on a loaded "
          "machine; test_reproducers.py::test_an_epoch_zero_prometheus_time"),
]


def classify(prop: str, detail: str) -> Known | None:
    return next((k for k in KNOWN if k.matches(prop, detail)), None)
