"""The formats the compiled scanner reads (issue #42): each format file's kinds read its module's SAMPLES, and the
plans give the fields the regexes they replaced gave, on real lines and on lines mutated from them (the regexes
stay only where the parsers still use them: detection, a layout's identity)."""

from __future__ import annotations

import importlib
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import logscope.parsers as parsers
from conftest import DATA, LAB, need
from logscope import _scan
from logscope.parsers import _kinds, prometheus_text
from logscope.parsers import _nginx_format as nf
from logscope.parsers import _nginx_plan as nplan

DESCRIBED = [m for m in parsers.FORMATS if Path(m.__file__).with_suffix(".toml").exists()]


def test_the_hot_formats_are_described():
    assert {m.NAME for m in DESCRIBED} >= {"prometheus_text", "haproxy"}


@pytest.mark.parametrize("mod", DESCRIBED, ids=lambda m: m.NAME)
def test_every_sample_is_read_by_a_kind(mod):
    got = _kinds.scan(mod.__file__, pl.DataFrame({"line": mod.SAMPLES}))
    assert got.get_column("kind").null_count() == 0, mod.SAMPLES
    names = _kinds.plan(mod.__file__).kinds()
    assert len(set(names)) == len(names)


def test_prometheus_samples_fields():
    got = _kinds.scan(prometheus_text.__file__, pl.DataFrame({"line": prometheus_text.SAMPLES}))
    kinds = _kinds.plan(prometheus_text.__file__).kinds()
    assert [kinds[k] for k in got.get_column("kind")] == ["comment", "comment", "sample", "comment", "sample"]
    last = got.row(4, named=True)
    assert last["name"] == "vllm:num_preemptions_total"
    assert last["labels"] == 'engine="0",instance="127.0.0.1:19301",job="vllm",model_name="tiny"'
    assert (last["value"], last["ts"]) == ("91", "1795945886534")
    assert got.row(2, named=True)["ts"] is None


def _oracle_prom(lines: list[str]) -> pl.DataFrame:
    """What the regex the format used to be read by gives (the module keeps it for detection)."""
    line = pl.col("line").str.strip_suffix("\r")
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String})
    return frame.select(line.str.extract_groups(prometheus_text._SAMPLE)).unnest("line")


def _plan_prom(lines: list[str]) -> pl.DataFrame:
    got = _kinds.scan(prometheus_text.__file__, pl.DataFrame({"line": lines}, schema={"line": pl.String}))
    sample = got.get_column("kind") == _kinds.index(prometheus_text.__file__, "sample")
    return got.select(
        [pl.when(pl.lit(sample)).then(pl.col(c)).alias(c) for c in ("name", "labels", "value", "ts")]
    )


def _mutations(pieces: list[str], alphabet: str):
    """Lines made of real lines' pieces and characters that change how they read."""
    return st.lists(st.one_of(st.sampled_from(pieces), st.text(alphabet, max_size=3)), max_size=8).map(
        "".join
    )


_PROM_PIECES = [
    "vllm:num_requests_running",
    "a_b",
    "{",
    "}",
    '{engine="0",model_name="tiny"}',
    '"x\\"y}"',
    " ",
    "\t",
    " 8",
    " 0.0",
    " 1.5e-3",
    " .5",
    " 7.",
    " +Inf",
    " -inf",
    " NaN",
    " nan",
    " 1795945886534",
    " -12.5",
    ' # {trace_id="1"} 1',
    "#",
    "\r",
]


_PROM_LINE = st.tuples(
    st.sampled_from(["vllm:num_requests_running", "a_b", "_x:y", "9a", "", "a-b"]),
    st.sampled_from(
        ["", "{}", '{engine="0",model_name="tiny"}', '{a="x\\"}"}', "{", '{a="}', '{a="\\\\"}', " {}"]
    ),
    st.sampled_from([" ", "\t", "", "  "]),
    st.one_of(
        st.sampled_from(
            ["8", "0.0", "1.5e-3", ".5", "7.", "+Inf", "-inf", "NaN", "nan", "+NaN", "1e5", "1.e5"]
        ),
        st.text("0123456789.eE+-aNIinf", max_size=6),
    ),
    st.sampled_from(["", " 1795945886534", " -12.5", " 1.", "\t99", " x", " 1 2"]),
    st.sampled_from(["", ' # {trace_id="1"} 1', " #{", " # x", "  "]),
    st.sampled_from(["", "\r", " ", "\r\r", "\u00a0"]),
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(_PROM_LINE, _mutations(_PROM_PIECES, ' \t{}"\\#.eE+-0123456789aN\r\u00a0é')), max_size=30
    )
)
def test_prometheus_sample_kind_reads_as_its_regex_did(lines):
    assert _plan_prom(lines).equals(_oracle_prom(lines))


def test_prometheus_sample_kind_on_real_scrapes():
    lines = []
    for p in [
        *sorted((DATA / "prometheus").glob("*.txt")),
        DATA / "prometheus" / "scrape-loop-metrics.prom.log",
    ]:
        lines += need(p).read_text().split("\n")
    assert len(lines) > 100
    assert _plan_prom(lines).equals(_oracle_prom(lines))


# --- nginx access: a log_format's field plan against the regex of the same layout ---


def _nginx_lines() -> list[str]:
    out = []
    for p in [
        DATA / "nginx" / "access.log",
        DATA / "nginx" / "access-kv.log",
        DATA / "nginx" / "access-json.log",
        DATA / "ingress-nginx" / "access.log",
        LAB / "retry-storm" / "nginx-access.log",
    ]:
        out += need(p).read_text().split("\n")[:300]
    return out


def _layouts() -> list[nf.Layout]:
    conf = need(LAB / "retry-storm" / "nginx.conf").read_text()
    lays = [nf.Layout(n, "conf", nf.tokenize(f), e) for n, e, f in nf.parse_conf(conf)]
    lays += [
        nf.Layout(n, "", nf.tokenize(f))
        for n, f in (("c", nf.COMBINED), ("m", nf.MAIN), ("u", nf.UPSTREAMINFO))
    ]
    for line in _nginx_lines():
        toks = nf.infer_json(line) if line.lstrip().startswith("{") else nf.infer_kv(line)
        if toks:
            lays.append(nf.Layout("i", "", toks, "json" if line.lstrip().startswith("{") else "default"))
    return list({lay.regex: lay for lay in lays}.values())


LAYOUTS = _layouts() if (LAB / "retry-storm").exists() else []


def _nginx_equal(lines: list[str]) -> None:
    frame = pl.DataFrame({"line": lines})
    for lay in LAYOUTS:
        keep = frozenset(lay.variables)
        got = pl.DataFrame(nplan.plan([lay], [keep]).scan(frame.get_column("line")))
        names = nplan.kept(lay, keep)
        hit = got.get_column("kind").is_not_null()
        want = frame.select(pl.col("line").str.extract_groups(lay.regex)).unnest("line")
        want_hit = frame.get_column("line").str.contains(lay.regex)
        assert hit.equals(want_hit, check_names=False), lay.format
        mine = got.select(names).filter(hit)
        theirs = want.select(names).filter(want_hit)
        assert mine.equals(theirs), lay.format


def test_nginx_plans_read_real_lines_as_the_regexes_did():
    assert len(LAYOUTS) >= 6
    _nginx_equal(_nginx_lines())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_nginx_plans_read_mutated_lines_as_the_regexes_did(data):
    real = _nginx_lines()
    lines = []
    for _ in range(10):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 4))
        ins = data.draw(st.text(' ,:"=-[]\\{}0123456789.\r\t\u00a0é', max_size=4))
        lines.append(line[:at] + ins + line[at + cut :])
    _nginx_equal(lines)


def test_every_described_module_is_importable_by_name():
    for m in DESCRIBED:
        assert importlib.import_module(m.__name__) is m


_LABEL_PIECES = [
    'a="b"',
    'instance="h:1"',
    'job="j"',
    '__name__="n"',
    ",",
    " ",
    '"',
    "\\",
    '\\"',
    "=",
    "x",
    "_",
    "1",
    "é",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(_LABEL_PIECES), max_size=10).map("".join), max_size=20))
def test_prometheus_labels_read_as_the_polars_expressions_did(raw):
    """labels_kept and labels_instance of the scan against _prom's expressions (which the other Prometheus formats use)."""
    from logscope.parsers import _prom

    lines = [f"m{{{r}}} 1" for r in raw]
    got = _kinds.scan(prometheus_text.__file__, pl.DataFrame({"line": lines}, schema={"line": pl.String}))
    sample = got.get_column("kind") == _kinds.index(prometheus_text.__file__, "sample")
    got = got.filter(sample)
    pairs = _prom.pairs_expr(pl.col("labels"))
    want = got.select(
        _prom.labels_expr(pairs).alias("labels_kept"),
        _prom.label_value_expr(pairs, "instance").alias("labels_instance"),
    )
    assert got.select("labels_kept", "labels_instance").equals(want)


# --- HAProxy: the regex its kind replaced, kept here as the oracle ---
_HTTPLOG = (
    r"(?:^|\s)(?P<ci>\S+):(?P<cp>\d+) \[(?P<tr>[0-9]{2}/[A-Za-z]{3}/[0-9]{4}:[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{3})?)\] "
    r"(?P<ft>\S+) (?P<be>[^/\s]+)/(?P<srv>\S+) "
    r"(?P<TR>-?[0-9]+)/(?P<Tw>-?[0-9]+)/(?P<Tc>-?[0-9]+)/(?P<Tr>-?[0-9]+)/\+?(?P<Ta>-?[0-9]+) "
    r"(?P<st>-?[0-9]+) \+?(?P<bytes>[0-9]+) \S+ \S+ (?P<tsc>[A-Za-z-]{2,4}) "
    r"[0-9]+/[0-9]+/[0-9]+/[0-9]+/(?P<plus>\+?)(?P<rc>[0-9]+) (?P<sq>[0-9]+)/(?P<bq>[0-9]+) "
    r'(?:\{(?P<hr>[^}]*)\} )?(?:\{[^}]*\} )?"(?P<req>[^"]*)"(?: (?P<uid>\S+))?\s*$'
)


def _haproxy_equal(lines: list[str]) -> None:
    from logscope.parsers import haproxy

    frame = pl.DataFrame({"line": lines}, schema={"line": pl.String})
    want = frame.select(pl.col("line").str.strip_suffix("\r").str.extract_groups(_HTTPLOG)).unnest("line")
    got = _kinds.scan(haproxy.__file__, frame)
    hit = got.get_column("kind").is_not_null()
    assert hit.equals(want.get_column("tr").is_not_null(), check_names=False)
    assert got.filter(hit).select(want.columns).equals(want.filter(hit))


def _haproxy_lines() -> list[str]:
    return [x for p in sorted((DATA / "haproxy").glob("*.log")) for x in need(p).read_text().split("\n")]


def test_haproxy_kind_reads_real_lines_as_its_regex_did():
    lines = _haproxy_lines()
    assert len(lines) > 50
    _haproxy_equal(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_haproxy_kind_reads_mutated_lines_as_its_regex_did(data):
    real = _haproxy_lines()
    lines = []
    for _ in range(10):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 4))
        ins = data.draw(st.text(' /:+-{}"[]0123456789.\r\t\u00a0é', max_size=4))
        lines.append(line[:at] + ins + line[at + cut :])
    _haproxy_equal(lines)


# --- a field's type: the core's reading of numbers against polars' casts, of JSON escapes against the regex ---
_TYPED = _scan.Plan(
    [
        {
            "name": "typed",
            "steps": [
                {"field": "i", "type": "int", "until": "|"},
                {"lit": "|"},
                {"field": "f", "type": "float", "until": "|"},
                {"lit": "|"},
                {"field": "s", "unescape": "json", "null": ["-", ""], "rest": True},
            ],
        }
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.text("0123456789+-.eEinfatyINFATY_x ", max_size=8),
                st.sampled_from(["9223372036854775808", "-9223372036854775808", "-nan", "Infinity", "1e309"]),
            ),
            st.text('\\"/-abn', max_size=6),
        ),
        max_size=30,
    )
)
def test_field_types_read_as_polars_casts(values):
    lines = [f"{v}|{v}|{s}" for v, s in values]
    got = pl.DataFrame(_TYPED.scan(pl.Series(lines, dtype=pl.String)))
    raw = pl.Series([v for v, _ in values], dtype=pl.String)
    text = pl.Series([s for _, s in values], dtype=pl.String)
    assert got.get_column("i").equals(raw.cast(pl.Int64, strict=False), check_names=False)
    assert (
        got.get_column("f")
        .cast(pl.String)
        .equals(raw.cast(pl.Float64, strict=False).cast(pl.String), check_names=False)
    )
    want = pl.when(text.is_in(["-", ""])).then(None).otherwise(text.str.replace_all(r'\\(["\\/])', "$1"))
    assert got.get_column("s").equals(pl.select(want).to_series(), check_names=False)
