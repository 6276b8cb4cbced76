"""Envoy's access lines are read by the compiled scanner (parsers/envoy_access.toml, issue #42): its text kind gives
the fields the regex it replaced gave (kept here as the oracle, its \\d as ASCII's digits, as the core reads them),
and its json kind picks the lines the parser reads as json_format objects, on the real Envoy logs and on lines
mutated from them."""

from __future__ import annotations

import functools

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import DATA, need
from logscope.parsers import _kinds, envoy_access

_TEXT = envoy_access._TEXT.replace(r"\d", "[0-9]")  # the regex stays for detection


def _equal(lines: list[str]) -> pl.DataFrame:
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String})
    want = frame.select(pl.col("line").str.extract_groups(_TEXT)).unnest("line")
    is_json = frame.get_column("line").str.contains(envoy_access._JSON)
    got = _kinds.scan(envoy_access.__file__, frame)
    kind = got.get_column("kind")
    text = (kind == _kinds.index(envoy_access.__file__, "text")).fill_null(False)
    js = (kind == _kinds.index(envoy_access.__file__, "json")).fill_null(False)
    matched = want.get_column("code").is_not_null()
    assert text.equals(matched, check_names=False)
    assert got.filter(text).select(want.columns).equals(want.filter(matched))
    assert js.equals(is_json & ~matched, check_names=False)
    return got


@functools.cache
def _real_lines() -> list[str]:
    files = sorted((DATA / "envoy").glob("*.log")) + sorted((DATA / "envoy").glob("*.json"))
    return [x.removesuffix("\r") for p in files for x in need(p).read_text(encoding="utf-8").split("\n")]


def test_envoy_kinds_read_real_lines_as_the_regexes_did():
    got = _equal(_real_lines())
    kinds = got.get_column("kind")
    # tests/data/envoy's 85 lines: the default text format and Istio's (54 lines, 28 with Istio's details, one
    # without its '[start time]', istio/istio#45802) and json_format (26)
    assert (kinds == 0).sum() == 54
    assert got.get_column("details").is_not_null().sum() == 28
    assert got.filter(kinds == 0).get_column("start").null_count() == 1
    assert (kinds == 1).sum() == 26


def test_envoy_kinds_read_the_samples():
    got = _equal(list(envoy_access.SAMPLES))
    assert got.get_column("kind").null_count() == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_envoy_kinds_read_mutated_lines_as_the_regexes_did(data):
    real = [x for x in _real_lines() if x]
    lines = []
    for _ in range(10):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 4))
        ins = data.draw(st.text(' "[]{}:.-+TZ0123456789\t\u00a0é', max_size=4))
        lines.append(line[:at] + ins + line[at + cut :])
    _equal(lines)
