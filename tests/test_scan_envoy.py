"""Envoy's access lines are read by the compiled scanner (parsers/envoy_access.toml, issue #42): its text kind gives
the fields the regex it replaced gave (kept here as the oracle, its \\d as ASCII's digits, as the core reads them),
and its json kind picks the lines the parser reads as json_format objects, on the real Envoy logs and on lines
mutated from them."""

from __future__ import annotations

import functools

import envoy_access_before as before
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import DATA, PUBLIC2, need
from logscope.parsers import _kinds, envoy_access
from logscope.parsers.base import ParseContext

_TEXT = envoy_access._TEXT.replace(r"\d", "[0-9]")  # the regex stays for detection


# the regex's groups as the text kind reads them (envoy_access.toml): '-' and '' null, the numbers typed; the groups
# the parser does not read are matched, not kept
_NULLS = ["method", "path", "flags", "details", "ufail", "ua", "rid", "uhost"]
_TYPED = {"code": pl.Int64, "tx": pl.Int64, "dur": pl.Float64, "ust": pl.Float64}
_UNREAD = ["proto", "rx", "xff", "auth"]


def _read(col: str) -> pl.Expr:
    c = pl.col(col)
    if col in _NULLS:
        return pl.when(c.is_in(["-", ""])).then(None).otherwise(c).alias(col)
    if col in _TYPED:
        return pl.when(c != "-").then(c).cast(_TYPED[col], strict=False).alias(col)
    return c


def _equal(lines: list[str]) -> pl.DataFrame:
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String})
    groups = frame.select(pl.col("line").str.extract_groups(_TEXT)).unnest("line").drop(_UNREAD)
    want = groups.select(_read(c) for c in groups.columns)
    is_json = frame.get_column("line").str.contains(envoy_access._JSON)
    got = _kinds.scan(envoy_access.__file__, frame)
    kind = got.get_column("kind")
    text = (kind == _kinds.index(envoy_access.__file__, "text")).fill_null(False)
    js = (kind == _kinds.index(envoy_access.__file__, "json")).fill_null(False)
    matched = groups.get_column("code").is_not_null()
    assert text.equals(matched, check_names=False)
    assert not set(_UNREAD) & set(got.columns)
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


def _envoy_logs() -> dict[str, list[str]]:
    """Every real Envoy access log the repository carries: tests/data/envoy's and public-2's excerpts (Arch
    Gateway's default format, Higress' json_format, one pretty-printed)."""
    paths = sorted((DATA / "envoy").glob("*.log")) + sorted((DATA / "envoy").glob("*.json"))
    paths += sorted(need(PUBLIC2).glob("g0[4-7]-*envoy*.log"))
    return {p.name: need(p).read_text(encoding="utf-8").split("\n") for p in paths}


def _parsed_as_before(lines: list[str], size: int) -> int:
    """The parser's rows of ``lines`` read in chunks of ``size`` lines equal the oracle's; how many there were."""
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String}).with_row_index("line_no", offset=1)
    frame = frame.with_columns(pl.col("line_no").cast(pl.Int64))
    ctx = ParseContext(source="envoy.log", replica="r")
    n = 0
    for at in range(0, frame.height, size):
        chunk = frame.slice(at, size)
        got = envoy_access.parse_chunk(chunk, ctx, {}).tables.get("gateway_attempts")
        want = before.gateway_attempts(chunk, "envoy.log")
        assert (got is None) == (want is None)
        if got is not None:
            assert got.equals(want, null_equal=True), (at, size)
            assert got.schema == want.schema
            n += got.height
    return n


def test_envoy_rows_as_before_on_every_real_log_in_several_chunkings():
    logs = _envoy_logs()
    assert len(logs) == 9
    counts = {
        name: [_parsed_as_before(lines, size) for size in (100_000, 7, 1)] for name, lines in logs.items()
    }
    assert all(len(set(c)) == 1 for c in counts.values())  # each chunking gives every row
    # tests/data/envoy: 54 text lines and 26 json_format ones; public-2: Arch Gateway's 3 and 6 text lines, Higress'
    # one json_format line (its pretty-printed object, g07, spans lines: none is an access line alone)
    assert {name: c[0] for name, c in counts.items()} == {
        "envoy-access.log": 26,
        "envoy-istio-access.log": 26,
        "istio-45802-default-format-without-start-time-503-UC.log": 1,
        "istio-51619-default-format-503-UC-after-120s.log": 1,
        "envoy-access.json": 26,
        "g04-envoy-archgw-503-UF-chat-completions-openai-python.log": 3,
        "g05-envoy-archgw-ingress-200s-baseline-chat-completions.log": 6,
        "g06-higress-envoy-json-accesslog-chat-completions-403-ext-auth.log": 1,
        "g07-higress-envoy-pretty-json-accesslog-503-UC-connection-termination.log": 0,
    }


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_envoy_rows_as_before_on_mutated_lines(data):
    real = [x for lines in _envoy_logs().values() for x in lines if x]
    lines = []
    for _ in range(8):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 4))
        ins = data.draw(st.sampled_from(["-", '"-"', " - ", "", "0", "99999999999999999999", '""', "\r"]))
        lines.append(line[:at] + ins + line[at + cut :])
    _parsed_as_before(lines, 3)
