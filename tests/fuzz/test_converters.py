"""Property tests of the parsers' field converters (dates, epochs, numbers): whatever text or number a
log holds, a converter never raises, gives one value per row, null for what it cannot read, and the
value Python computes for what it can.

Inputs the converters cannot take yet (absurd epochs, impossible dates: the robust branch of issue #30)
are left out of the domains below and pinned as xfail reproducers in test_reproducers.py."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logscope.parsers import _common, _openai_lines, _prom, _vllm_stats, client_jsonl, envoy_access

pytestmark = [
    pytest.mark.slow,  # fuzzing: generated inputs run through the converters
    pytest.mark.filterwarnings("ignore"),
]
SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# epoch seconds whose microseconds fit an Int64 and whose date Python can hold (years 1-9999)
SAFE_SECONDS = st.floats(min_value=-62_000_000_000, max_value=253_000_000_000, allow_nan=False)
DECIMAL = st.from_regex(r"\A-?[0-9]{1,15}(\.[0-9]{1,6})?\Z")
DECIMAL_RE = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,6})?")
ODD_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", " ", "NaN", "nan", "inf", "-inf", "1e400", "1,5", "0x1F", "--1", "1.2.3", "\x00", "\u202e1"]
    ),
)


def _col(values: list, expr: pl.Expr, dtype: pl.DataType | None = None) -> list:
    out = pl.DataFrame({"v": pl.Series(values, dtype=dtype)}).select(expr.alias("o"))["o"]
    assert out.len() == len(values)
    return out.to_list()


def _expected_epoch(x: float) -> datetime | None:
    return EPOCH + timedelta(microseconds=round(x * 1_000_000))


@SETTINGS
@given(st.lists(SAFE_SECONDS | st.none(), max_size=20))  # NaN, inf, 1e20: test_reproducers.py
def test_epoch_to_utc(xs):
    got = _col(xs, _common.epoch_to_utc(pl.col("v")), pl.Float64)
    for x, g in zip(xs, got, strict=True):
        assert g == (None if x is None else _expected_epoch(x)), x


@SETTINGS
@given(st.lists(SAFE_SECONDS | st.none(), max_size=20))
def test_prometheus_epoch_seconds(xs):
    got = _col(xs, _prom.epoch_s_to_ts(pl.col("v")), pl.Float64)
    for x, g in zip(xs, got, strict=True):
        assert g == (None if x is None else _expected_epoch(x))


@SETTINGS
@given(
    st.lists(
        st.integers(min_value=-62_000_000_000_000, max_value=253_000_000_000_000) | st.none(), max_size=20
    )
)
def test_prometheus_epoch_ms(xs):
    got = _col(xs, _prom.epoch_ms_to_ts(pl.col("v")), pl.Int64)
    for x, g in zip(xs, got, strict=True):
        assert g == (None if x is None else EPOCH + timedelta(milliseconds=x))


@SETTINGS
@given(st.lists(DECIMAL | ODD_TEXT | st.none(), max_size=20))
def test_numbers_from_text(xs):
    """Prometheus sample values and Envoy's numeric fields: a float, or null."""
    for expr in (_prom.value_expr(pl.col("v")), envoy_access._num(pl.col("v"))):
        got = _col(xs, expr, pl.String)
        for x, g in zip(xs, got, strict=True):
            assert g is None or isinstance(g, float)
            if x is not None and DECIMAL_RE.fullmatch(x):
                assert g == float(x), x
            if (
                x is None
                or not any(c.isdigit() for c in x)
                # the float spellings of infinity and NaN (Prometheus writes +Inf, -Inf and NaN)
                and x.strip().lower().lstrip("+-") not in ("nan", "inf", "infinity")
            ):
                assert g is None, x


@SETTINGS
@given(st.lists(st.from_regex(r"\ARunning: [0-9,.]{0,12} reqs\Z") | ODD_TEXT, max_size=20))
def test_vllm_stats_counts(xs):
    got = _col(xs, _vllm_stats._num("v", r"Running: ([\d,.]+) reqs"), pl.String)
    for x, g in zip(xs, got, strict=True):
        assert g is None or isinstance(g, float)
        digits = x[len("Running: ") : -len(" reqs")].replace(",", "") if x.startswith("Running: ") else None
        if digits is not None and DECIMAL_RE.fullmatch(digits):
            assert g == float(digits), x
        if "Running: " not in x:
            assert g is None, x


# a date and time as logs print them, each field over its digits' whole range (impossible ones included)
STAMP = st.tuples(
    st.integers(1970, 2100),
    st.integers(0, 99),
    st.integers(0, 99),
    st.integers(0, 99),
    st.integers(0, 99),
    st.integers(0, 99),
)


def _real(y, mo, d, h, mi, s) -> datetime | None:
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError:
        return None


@SETTINGS
@given(st.lists(STAMP, max_size=20), st.sampled_from(["Z", "+02:00", ""]))
def test_client_timestamps(stamps, zone):
    """client JSONL times: ISO 8601 with or without a zone; an impossible date or time is null."""
    texts = [f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{zone}" for y, mo, d, h, mi, s in stamps]
    got = pl.DataFrame({"t": pl.Series(texts, dtype=pl.String)}).select(client_jsonl.ts_expr("t", "UTC"))
    for st_, g in zip(stamps, got.to_series().to_list(), strict=True):
        real = _real(*st_)
        if real is None:
            assert g is None, st_
        else:
            assert g == real - (timedelta(hours=2) if zone == "+02:00" else timedelta()), st_


def _absurd_number(x: str) -> bool:
    """Text polars reads as a number no epoch can be (NaN, inf, past ~1e18): test_reproducers.py."""
    v = pl.Series([x], dtype=pl.String).str.strip_chars().cast(pl.Float64, strict=False)[0]
    return v is not None and (not math.isfinite(v) or abs(v) > 9e18)


@SETTINGS
@given(st.lists(ODD_TEXT.filter(lambda x: not _absurd_number(x)) | st.none(), max_size=20))
def test_client_timestamps_of_any_text(xs):
    got = (
        pl.DataFrame({"t": pl.Series(xs, dtype=pl.String)})
        .select(client_jsonl.ts_expr("t", "UTC"))
        .to_series()
    )
    for x, g in zip(xs, got.to_list(), strict=True):
        if x is None or not any(c.isdigit() for c in x):
            assert g is None, x


@SETTINGS
@given(
    st.lists(STAMP, max_size=20),
    st.sampled_from([None, "Z", "+0530", "-08:00"]),
    st.sampled_from(["UTC", "Europe/Paris"]),
)
def test_openai_client_timestamps(stamps, zone, tz):
    """The openai client log's time fields (date and time, fraction, zone): impossible ones are null."""
    rows = [
        {"stamp": f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}", "frac": "123", "tz": zone}
        for y, mo, d, h, mi, s in stamps
    ]
    schema = {"stamp": pl.String, "frac": pl.String, "tz": pl.String}
    got = pl.DataFrame(rows, schema=schema).select(
        _openai_lines._timestamp(pl.col("stamp"), pl.col("frac"), pl.col("tz"), tz).alias("g")
    )
    for st_, g in zip(stamps, got.to_series().to_list(), strict=True):
        real = _real(*st_)
        if real is None:
            assert g is None, st_
        elif zone == "Z" or (zone is None and tz == "UTC"):
            assert g == real + timedelta(microseconds=123_000), st_


@SETTINGS
@given(
    st.lists(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1)), max_size=20),
    st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"]),
)
def test_local_to_utc(naive, tz):
    """Local times to UTC: a time that does not exist (a DST gap) is null, an ambiguous one the earliest."""
    from zoneinfo import ZoneInfo

    got = _col(naive, _common.local_to_utc(pl.col("v"), tz), pl.Datetime("us"))
    z = ZoneInfo(tz)
    for n, g in zip(naive, got, strict=True):
        local = n.replace(tzinfo=z)
        back = local.astimezone(UTC).astimezone(z).replace(tzinfo=None)
        if back != n:  # in a gap: no such local time
            assert g is None, n
        else:
            assert g == local.replace(fold=0).astimezone(UTC), n
