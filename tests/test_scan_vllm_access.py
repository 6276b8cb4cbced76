"""uvicorn's access lines in a vLLM log are read by the compiled scanner (parsers/_vllm_events.toml, issue #42): the
same server_events rows as the polars regex they replaced (kept here as the oracle, with the code around it), on every
real vLLM log of the fixtures and on lines mutated from them."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import real_vllm_lines, vllm_rows
from logscope.numbers import to_int
from logscope.parsers import _vllm_events, vllm_server
from logscope.parsers.base import ParseContext

# _common.UVICORN_ACCESS as _vllm_events read it before #42 (from the message's start)
_ACCESS = r'^(?P<addr>\S+)(?: [0-9]+)? - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[0-9.]+" (?P<status>[0-9]{3})'
_CTX = ParseContext(source="x", replica="r", year=2026)


def _before(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """``_vllm_events._access`` before #42."""
    a = df.filter(
        pl.when(pl.col("uvr")).then(pl.col("msg").str.contains(' - "', literal=True)).otherwise(False)
    )
    groups = (
        pl.col("msg").str.extract_groups(_ACCESS)
        if a.height
        else pl.lit(None, dtype=pl.Struct({k: pl.String for k in ("addr", "method", "path", "status")}))
    )
    a = a.with_columns(groups.alias("a")).unnest("a").filter(pl.col("status").is_not_null())
    return a.select(
        "ts",
        "ts_inferred",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("http_access").alias("kind"),
        pl.col("uv").alias("level"),
        pl.col("proc").alias("process"),
        "pid",
        pl.col("msg").str.slice(0, 500).alias("message"),
        "line_no",
        pl.lit(1, dtype=pl.Int64).alias("line_count"),
        "seq",
        pl.col("method").alias("http_method"),
        pl.col("path").alias("http_path"),
        pl.col("status").pipe(to_int).alias("http_status"),
        pl.col("addr").alias("client_addr"),
    )


def _equal(lines: list[str]) -> pl.DataFrame:
    df = vllm_rows(lines)
    want, got = _before(df, _CTX), _vllm_events._access(df, _CTX)
    assert got.equals(want)
    return got


def _real_lines() -> list[str]:
    return list(real_vllm_lines())


def test_access_lines_read_real_lines_as_the_regex_did():
    got = _equal(_real_lines())
    # the lab's uvicorn lines and the public excerpts': 21,825 rows (21,815 x 200, 9 x 500, 1 x 404)
    assert got.height >= 21_000
    assert set(got["http_method"]) >= {"GET", "POST"}
    assert set(got["http_status"]) >= {200, 404, 500}
    assert got["client_addr"].str.contains(":", literal=True).all()


def test_access_lines_read_the_samples_as_the_regex_did():
    got = _equal(list(vllm_server.SAMPLES))
    assert got.select("client_addr", "http_method", "http_path", "http_status").rows() == [
        ("10.109.20.86:59146", "GET", "/metrics", 200)
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_access_lines_read_mutated_lines_as_the_regex_did(data):
    real = [x for x in _real_lines() if ' - "' in x]
    lines = []
    for _ in range(10):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 4))
        # KServe's process id after the client, white space of other scripts, a status of 2 or 4 digits
        ins = data.draw(
            st.sampled_from(["", " 1647689", " 12a", "\u00a0", "\u2003", '"', " 2000", "GET ", "é"])
        )
        ins += data.draw(st.text(' -"/.:0123456789HTP\t\u00a0é', max_size=4))
        lines.append(line[:at] + ins + line[at + cut :])
    _equal(lines)
